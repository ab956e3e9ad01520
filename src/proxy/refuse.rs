//! The refusals anteroom writes where a visitor would have queued: too many new visitors from
//! one client (`join-limit`), and a search crawler (`crawlers = "refuse"`); and `TRACE` to an
//! origin that anteroom proves itself to (`origin-secret`).

use pingora::proxy::Session;
use pingora::Result;

use super::respond::{json_error, Refusal, Reply, JSON};
use super::{Ctx, Outcome, Proxy};
use crate::app::Shared;
use crate::metrics::Reject;
use crate::route::Routing;

/// When a refused crawler is told to come back: a sale's line is usually gone within the hour.
const CRAWLER_RETRY_SECS: u64 = 1800;

impl Proxy {
    /// 429 for a client past its room's `join-limit`, as a page or JSON.
    pub(super) async fn send_limited(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        retry_after: std::time::Duration,
        polls: bool,
        always_json: bool,
    ) -> Result<()> {
        let refusal = Refusal {
            status: 429,
            state: "limited",
            title: "Please wait a moment",
            message: if polls {
                "This page has asked for your place too often in a short time. Your place is kept: please wait a moment."
            } else {
                "Too many new visitors have come from your network in a short time. Please wait a moment and try again."
            },
            retry_secs: Some(retry_after.as_secs_f64().ceil().max(1.0) as u64),
            reject: Reject::JoinLimit,
            lang: "en",
            always_json,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await
    }

    /// The request is a search crawler's, in a room that refuses them where they would wait.
    pub(super) fn refuses_crawler(shared: &Shared, session: &Session, room: usize) -> bool {
        let ua = session
            .req_header()
            .headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        shared.rooms[room].cfg.crawlers == crate::config::model::CrawlerPolicy::Refuse
            && crate::route::bypass::is_crawler(ua)
    }

    /// A search crawler where a visitor would wait (`crawlers = "refuse"`): a 503 it retries
    /// later, so the waiting page is never indexed in place of the shop's page.
    pub(super) async fn send_crawler(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
    ) -> Result<()> {
        let refusal = Refusal {
            status: 503,
            state: "busy",
            title: "Busy",
            message: "This page is busy with a sale. Please come back later.",
            retry_secs: Some(CRAWLER_RETRY_SECS),
            reject: Reject::Crawler,
            lang: "en",
            always_json: false,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await
    }

    /// A CORS preflight with no admission (browsers send none with it) and no bypass rule for
    /// it: no place is taken for it (found by review: each one took a place in line), and the
    /// browser, told no, does not send the request it asked for.
    pub(super) async fn send_preflight(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
    ) -> Result<()> {
        let refusal = Refusal {
            status: 503,
            state: "preflight",
            title: "Not queued",
            message: "A cross-origin check (CORS preflight) carries no cookies, so it cannot wait in line. The room lets it through to the shop only with the bypass rule { preflight = true }.",
            retry_secs: None,
            reject: Reject::Preflight,
            lang: "en",
            always_json: false,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await
    }

    /// A room that queues nobody (`queueing = "reject"`): its "closed" answer, in the
    /// visitor's language and the operator's words (`title_closed`, `lead_closed`), with
    /// `closed-status`; no place, no cookie, no store call.
    pub(super) async fn send_closed(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        always_json: bool,
    ) -> Result<()> {
        let words = ClosedWords {
            state: "closed",
            title: ("title_closed", "This sale is closed"),
            lead: ("lead_closed", "There is no line to join right now."),
            reject: Reject::Closed,
        };
        Self::send_closed_words(shared, session, ctx, room, always_json, &words).await
    }

    /// A "no line for you" answer with `closed-status`, in the visitor's language and the
    /// operator's words for it (the closed room's, an event's ending).
    pub(super) async fn send_closed_words(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        always_json: bool,
        w: &ClosedWords,
    ) -> Result<()> {
        let r = &shared.rooms[room];
        let (lang, texts) = super::request::words(shared, session, room);
        let word = |(key, fallback): (&str, &'static str)| {
            texts
                .and_then(|t| t.get(key))
                .map(String::as_str)
                .unwrap_or(fallback)
        };
        let refusal = Refusal {
            status: r.cfg.closed_status,
            state: w.state,
            title: word(w.title),
            message: word(w.lead),
            retry_secs: None,
            reject: w.reject,
            lang,
            always_json,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await
    }

    /// Whether the request would go to an upstream that gets anteroom's `origin-secret`.
    pub(super) fn guards_a_secret(shared: &Shared, ctx: &Ctx, routing: &Routing) -> bool {
        let upstream = match routing {
            Routing::Room(room) => shared.rooms.get(*room).map(|r| r.cfg.upstream),
            Routing::Outside => Some(ctx.upstream),
            Routing::Reserved(_) | Routing::Refuse(_) => None,
        };
        upstream
            .and_then(|u| shared.config.upstreams.get(u))
            .is_some_and(|u| u.origin_secret.is_some())
    }

    /// 405 for `TRACE`: an origin answers it by echoing the request's headers, ours among
    /// them, and the `origin-secret` must never reach a client.
    pub(super) async fn send_no_trace(session: &mut Session, ctx: &mut Ctx) -> Result<()> {
        ctx.outcome = Outcome::Reject;
        ctx.reject = Some(Reject::BadRequest);
        Reply {
            status: 405,
            content_type: JSON,
            body: json_error("TRACE is not served here"),
            retry_after: None,
            cookies: &[],
        }
        .send(session)
        .await
    }
}

/// The words of a closed answer: its JSON state, the text keys (with an English fallback) of its
/// title and lead, and what it is counted as.
pub(super) struct ClosedWords {
    pub state: &'static str,
    pub title: (&'static str, &'static str),
    pub lead: (&'static str, &'static str),
    pub reject: Reject,
}
