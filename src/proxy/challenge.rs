//! The join challenge on the request path (`join-challenge`, see [`crate::edge::challenge`]):
//! which limit a visitor without a queue ticket joins under, and the page that asks a newcomer
//! for the work. No store call: the puzzle and its check are HMACs under the cookie key.

use bytes::Bytes;
use pingora::proxy::Session;
use pingora::Result;

use super::respond::{Reply, HTML, JSON};
use super::{wants_json, Ctx, Outcome, Proxy};
use crate::app::Shared;
use crate::edge::challenge::{self, Step};
use crate::metrics::Challenge;
use crate::store::{JoinGate, VisitorId};

/// What a request without an admission brought: a visitor id (before one was made for it), a
/// queue ticket that verified, and the status poll's `pow` parameter.
pub(super) struct Presented<'a> {
    pub had_vid: bool,
    /// The queue ticket the request carried, verified for its visitor.
    pub ticket: Option<&'a crate::line::ticket::Ticket>,
    pub solution: Option<&'a str>,
}

/// Whether a verified queue ticket may still prove a place in line, which spares its holder
/// the work: given within `abandon-after` (past it the store may have let the place go) and,
/// in a pre-queue, since the pre-queue began. Before (found by review), any ticket that
/// verified did: one puzzle solved for a line long gone registered its identity for free in
/// every later pre-queue. A ticket of a line the store lost (another epoch) still does: its
/// holder was in line a moment ago, and asking the work of everyone at once after a data loss
/// would put them all under the stricter per-address limit (re-review).
pub(super) fn holds_place(shared: &Shared, room: usize, t: &crate::line::ticket::Ticket) -> bool {
    let r = &shared.rooms[room];
    let now = shared.clock.now_micros();
    let since = (now / 1_000_000).saturating_sub(t.seen);
    if since >= r.cfg.abandon_after.as_secs() {
        return false;
    }
    let prequeue_from = r
        .events
        .prequeue_view(now)
        .map(|v| v.event.prequeue_from / 1_000_000);
    prequeue_from.is_none_or(|from| t.seen >= from)
}

/// What a request without an admission does about the challenge.
pub(super) enum Gated {
    /// Answer the puzzle; place nobody.
    Ask,
    /// Join (or poll) under this limit.
    Join(Option<JoinGate>),
}

impl Proxy {
    /// `gate` is the room's own join limit.
    pub(super) fn challenge_gate(
        shared: &Shared,
        session: &Session,
        room: usize,
        vid: VisitorId,
        p: &Presented<'_>,
        gate: Option<JoinGate>,
    ) -> Gated {
        let r = &shared.rooms[room];
        let Some(c) = r.cfg.join_challenge.as_ref() else {
            return Gated::Join(gate);
        };
        // A ticket proves a place in line: polls of visitors already in line never need work.
        if p.ticket.is_some_and(|t| holds_place(shared, room, t)) {
            return Gated::Join(gate);
        }
        let count = |what: Challenge| {
            if let Some(m) = r.metrics.challenges.get(what as usize) {
                m.inc();
            }
        };
        let now = shared.cookie_secs(room);
        let solved = p.solution.is_some_and(|s| {
            let ok = challenge::verify(
                &shared.config.cookie.keys,
                r.name(),
                vid,
                c.difficulty,
                s,
                now,
            );
            count(if ok {
                Challenge::Solved
            } else {
                Challenge::Failed
            });
            ok
        });
        // A pre-queue holds every newcomer, whatever the last tick counted: before, the first
        // registrations of a pre-queue (until a tick had seen one) were asked no work (found
        // by review: 1,003 identities registered for free in 0.7 s).
        let line_forms =
            r.live.held_by().is_some() || r.events.in_prequeue(shared.clock.now_micros());
        let asked = p.had_vid
            && crate::cookie::find(super::cookie_values(session.req_header()), &r.asked_cookie)
                .is_some();
        match challenge::step(line_forms, asked, solved) {
            Step::Join => Gated::Join(gate),
            Step::Ask => Gated::Ask,
            Step::Strict => {
                count(Challenge::Strict);
                Gated::Join(super::client_key(shared, session).map(|client| JoinGate {
                    client: crate::room::prelimit::no_script_client(&client),
                    limit: c.no_script_per_ip,
                    per: c.no_script_per,
                    known_only: false,
                    vouched: false,
                }))
            }
        }
    }

    /// The puzzle: the challenge page (or, for a JSON client, `{"room","state":"challenge",
    /// "challenge","difficulty","retry_after_ms"}`), with the visitor-id cookie it is bound to.
    /// `always_json`: the status endpoint, which answers JSON whatever `Accept` says.
    pub(super) async fn send_challenge(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        always_json: bool,
    ) -> Result<()> {
        let r = &shared.rooms[room];
        let difficulty = r
            .cfg
            .join_challenge
            .as_ref()
            .map(|c| c.difficulty)
            .unwrap_or(challenge::DEFAULT_DIFFICULTY);
        let now = shared.cookie_secs(room);
        let puzzle =
            challenge::issue(&shared.config.cookie.keys, r.name(), vid, now).unwrap_or_default();
        if let Some(m) = r.metrics.challenges.get(Challenge::Asked as usize) {
            m.inc();
        }
        ctx.outcome = Outcome::Wait;
        // The marker that this visitor was asked: a reload without the work is then held to
        // the stricter limit (see `challenge::step`).
        ctx.set_cookies.push(crate::cookie::set_named(
            &r.asked_cookie,
            "1",
            challenge::ASKED_SECS,
            super::secure(shared, ctx),
        ));
        let refresh = crate::page::challenge::NO_SCRIPT_REFRESH_SECS;
        let (content_type, body) = if always_json || wants_json(session.req_header()) {
            let v = serde_json::json!({
                "room": r.name(),
                "state": "challenge",
                "challenge": puzzle,
                "difficulty": difficulty,
                "retry_after_ms": refresh * 1000,
            });
            (JSON, Bytes::from(v.to_string()))
        } else {
            let (lang, texts) = super::request::words(shared, session, room);
            let empty = crate::texts::TextSet::new();
            let html = shared.pages.challenge(
                r.name(),
                lang,
                texts.unwrap_or(&empty),
                &puzzle,
                difficulty,
                (
                    &super::request::page_url(session.req_header()),
                    super::method::is_form(session.req_header()),
                ),
            );
            (HTML, Bytes::from(html))
        };
        Reply {
            status: r.cfg.waiting_status,
            content_type,
            body,
            retry_after: Some(refresh),
            cookies: &ctx.set_cookies,
        }
        .send(session)
        .await
    }
}
