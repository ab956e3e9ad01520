//! The Pingora `ProxyHttp` implementation: the waiting room in front of the origin.
//!
//! Phases, in the order Pingora calls them:
//! - `request_filter`: the `/.anteroom/` endpoints; room matching; the admission decision.
//!   Admitted visitors are decided locally from their signed cookie (no store call); everyone
//!   else makes exactly one store call (`join`), which both places them and reports their turn.
//! - `upstream_peer`: the room's upstream, or the default one outside every room.
//! - `upstream_request_filter`: our own cookies are taken out of what the origin sees.
//! - `response_filter`: cookies we decided to set ride on the origin's response.

mod origin;
mod respond;
mod status;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::Result;

use std::time::Instant;

use crate::app::{Current, Shared};
use crate::config::StorePolicy;
use crate::cookie;
use crate::metrics::Reject;
use crate::page::{self, MessageView, State, Status};
use crate::route::{host_without_port, normalize_path, path_covers};
use crate::store::{Admission, JoinGate, VisitorId};
use respond::{Reply, HTML, JSON};

/// How a request ended, for logs and metrics (the discriminant indexes
/// [`crate::metrics::OUTCOMES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Outside every room (or the room is switched off): straight to the origin.
    Pass = 0,
    /// Carried a valid admission, or was admitted by this request.
    Admit = 1,
    /// Got the waiting page or JSON.
    Wait = 2,
    /// A consume route that won the admission.
    Consume = 3,
    /// Refused: already consumed, line full, bad request under `/.anteroom/`.
    Reject = 4,
    /// Answered by `/.anteroom/status`.
    Status = 5,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        crate::metrics::OUTCOMES[self as usize]
    }
}

/// Per-request state.
pub struct Ctx {
    upstream: usize,
    room: Option<usize>,
    /// `Set-Cookie` values to add to whatever response the visitor gets.
    set_cookies: Vec<String>,
    pub outcome: Outcome,
    reject: Option<Reject>,
    started: Instant,
    /// A trusted proxy says the visitor came over HTTPS.
    https: bool,
    /// The admission this request consumed, to give back if the origin fails the order.
    consumed: Option<VisitorId>,
    /// Our error page, replacing the origin's own 5xx body.
    replace_body: Option<Bytes>,
    /// The configuration this request started under (a reload does not change it midway).
    shared: Arc<Shared>,
}

/// The proxy.
pub struct Proxy {
    current: Current,
}

impl Proxy {
    pub fn new(current: Current) -> Self {
        Self { current }
    }
}

/// What `join` means for the request.
enum Verdict {
    /// Go on to the origin (admitted now, or the room is off, or the store policy is `open`).
    Pass { admitted: bool },
    /// Show the waiting response.
    Wait(Status),
    /// Refuse: too many new visitors from this client (`join-limit`).
    Limited { retry_after: std::time::Duration },
}

fn request_host(req: &RequestHeader) -> &str {
    req.headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri.host())
        .map(host_without_port)
        .unwrap_or("")
}

fn cookie_values(req: &RequestHeader) -> impl Iterator<Item = &[u8]> {
    req.headers
        .get_all(http::header::COOKIE)
        .iter()
        .map(|v| v.as_bytes())
}

/// `Secure` on our cookies: the operator's `cookie.secure`, or else whether a trusted proxy
/// says the visitor came over HTTPS.
fn secure(shared: &Shared, ctx: &Ctx) -> bool {
    shared.config.cookie.secure.unwrap_or(ctx.https)
}

/// The peer's address, when it is an IP socket.
fn peer_ip(session: &Session) -> Option<std::net::IpAddr> {
    session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip())
}

/// The room's per-client join limit for this request, if the room has one.
fn gate(shared: &Shared, session: &Session, room: usize) -> Option<JoinGate> {
    let limit = shared.rooms[room].cfg.join_limit.as_ref()?;
    let peer = peer_ip(session)?;
    let ip = crate::client::client_ip(
        peer,
        &session.req_header().headers,
        &shared.config.listen.trusted_proxies,
    );
    Some(JoinGate {
        client: crate::client::limit_key(ip),
        limit: limit.per_ip,
        per: limit.per,
    })
}

fn wants_json(req: &RequestHeader) -> bool {
    req.headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(page::prefers_json)
}

impl Proxy {
    /// The visitor's id from their cookie, or a new one (and its cookie).
    fn visitor(shared: &Shared, req: &RequestHeader, ctx: &mut Ctx) -> VisitorId {
        if let Some(vid) =
            cookie::find(cookie_values(req), cookie::VID_COOKIE).and_then(VisitorId::parse)
        {
            return vid;
        }
        let vid = VisitorId::random();
        ctx.set_cookies
            .push(cookie::set_vid(vid, secure(shared, ctx)));
        vid
    }

    /// Issues the admission cookie for a visitor who was just admitted.
    fn grant(shared: &Shared, ctx: &mut Ctx, room: usize, vid: VisitorId) {
        let r = &shared.rooms[room];
        let ttl = r.cfg.params.session_ttl.as_secs().max(1);
        let expires = shared.clock.now_secs() + ttl;
        if let Some(value) = cookie::sign(&shared.config.cookie.keys, r.name(), vid, expires) {
            ctx.set_cookies.push(cookie::set_admission(
                r.name(),
                &value,
                ttl,
                secure(shared, ctx),
            ));
        }
    }

    /// One store call: places the visitor or lets them in.
    async fn enter(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        gate: Option<JoinGate>,
    ) -> Verdict {
        let r = &shared.rooms[room];
        let joined = shared
            .store_call(
                "join",
                r.name(),
                shared.store.join_from(&r.cfg.params, vid, gate.as_ref()),
            )
            .await;
        let tiers = &r.cfg.poll;
        let name = r.name().to_string();
        {
            let m = &r.metrics;
            match &joined {
                Ok(Admission::Entered) => {
                    m.joined.inc();
                    m.admitted.inc();
                }
                Ok(
                    Admission::Waiting { joined: true, .. }
                    | Admission::Paused { joined: true, .. },
                ) => m.joined.inc(),
                _ => {}
            }
        }
        match joined {
            Ok(Admission::Admitted) | Ok(Admission::Entered) => {
                Self::grant(shared, ctx, room, vid);
                Verdict::Pass { admitted: true }
            }
            Ok(Admission::Open) => Verdict::Pass { admitted: false },
            Ok(Admission::Waiting {
                position,
                waiting,
                eta_rate,
                ..
            }) => Verdict::Wait(Status {
                room: name,
                state: State::Waiting,
                position: Some(position),
                waiting,
                eta_seconds: page::eta_seconds(position, eta_rate),
                retry_after_ms: page::poll_interval(tiers, position).as_millis() as u64,
            }),
            Ok(Admission::Paused {
                position, waiting, ..
            }) => Verdict::Wait(Status {
                room: name,
                state: State::Paused,
                position: Some(position),
                waiting,
                eta_seconds: None,
                retry_after_ms: page::poll_interval(tiers, position).as_millis() as u64,
            }),
            Ok(Admission::Limited { retry_after }) => Verdict::Limited { retry_after },
            Ok(Admission::Full { waiting }) => Verdict::Wait(Status {
                room: name,
                state: State::Full,
                position: None,
                waiting,
                eta_seconds: None,
                retry_after_ms: page::poll_interval(tiers, u64::MAX).as_millis() as u64,
            }),
            Err(e) => {
                shared.warn_store_error(&e);
                let p = &r.cfg.params;
                let local = r.cfg.on_store_error == StorePolicy::Local
                    && r.local.try_admit(
                        r.live.rate_in_force().unwrap_or(p.admit_per_second),
                        r.live.instances(),
                        p.tick,
                    );
                match r.cfg.on_store_error {
                    StorePolicy::Open => Verdict::Pass { admitted: false },
                    // This instance's share of the rate, from an in-process bucket: the line's
                    // order is suspended while the store is away, the shop's load is not.
                    StorePolicy::Local if local => {
                        r.metrics.admitted.inc();
                        Self::grant(shared, ctx, room, vid);
                        Verdict::Pass { admitted: true }
                    }
                    StorePolicy::Closed | StorePolicy::Local => Verdict::Wait(Status {
                        room: name,
                        state: State::Paused,
                        position: None,
                        waiting: r.live.waiting(),
                        eta_seconds: None,
                        retry_after_ms: page::poll_interval(tiers, u64::MAX).as_millis() as u64,
                    }),
                }
            }
        }
    }

    async fn send_wait(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        status: &Status,
    ) -> Result<()> {
        let r = &shared.rooms[room];
        let json = wants_json(session.req_header());
        let code = if status.state == State::Full {
            503
        } else {
            r.cfg.waiting_status
        };
        let (content_type, body) = if json {
            (
                JSON,
                Bytes::from(serde_json::to_vec(status).unwrap_or_default()),
            )
        } else {
            let lang = crate::texts::negotiate(
                session
                    .req_header()
                    .headers
                    .get(http::header::ACCEPT_LANGUAGE)
                    .and_then(|v| v.to_str().ok()),
            );
            let texts = r
                .cfg
                .texts
                .get(lang)
                .or_else(|| r.cfg.texts.values().next());
            let empty = crate::texts::TextSet::new();
            (
                HTML,
                Bytes::from(
                    shared
                        .pages
                        .waiting(room, status, lang, texts.unwrap_or(&empty)),
                ),
            )
        };
        if status.state == State::Full {
            ctx.outcome = Outcome::Reject;
            ctx.reject = Some(Reject::Full);
        } else {
            ctx.outcome = Outcome::Wait;
        }
        Reply {
            status: code,
            content_type,
            body,
            retry_after: Some(status.retry_after_secs()),
            cookies: &ctx.set_cookies,
        }
        .send(session)
        .await
    }

    /// 429 for a client past its room's `join-limit`, as a page or JSON.
    async fn send_limited(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        retry_after: std::time::Duration,
    ) -> Result<()> {
        let r = &shared.rooms[room];
        let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
        ctx.outcome = Outcome::Reject;
        ctx.reject = Some(Reject::JoinLimit);
        let message = "Too many new visitors have come from your network in a short time. Please wait a moment and try again.";
        let json = wants_json(session.req_header());
        let body = if json {
            Bytes::from(
                serde_json::json!({ "room": r.name(), "state": "limited", "error": message, "retry_after_ms": secs * 1000 })
                    .to_string(),
            )
        } else {
            Bytes::from(shared.pages.message(&MessageView {
                status: 429,
                title: "Please wait a moment",
                message,
                retry_seconds: Some(secs),
                room: r.name(),
                lang: "en",
            }))
        };
        Reply {
            status: 429,
            content_type: if json { JSON } else { HTML },
            body,
            retry_after: Some(secs),
            cookies: &ctx.set_cookies,
        }
        .send(session)
        .await
    }

    /// A consume route: exactly one request per admission reaches the origin.
    async fn consume(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
    ) -> Result<bool> {
        let r = &shared.rooms[room];
        let won = shared
            .store_call(
                "consume",
                r.name(),
                shared.store.consume(&r.cfg.params, vid),
            )
            .await;
        let (status, title, message, retry) = match won {
            Ok(true) => {
                // The admission is used up: the cookie goes with the origin's response.
                ctx.set_cookies.retain(|c| !c.starts_with(&r.cookie_name));
                ctx.set_cookies.push(cookie::clear_admission(r.name(), secure(shared, ctx)));
                ctx.outcome = Outcome::Consume;
                ctx.consumed = Some(vid);
                return Ok(false);
            }
            Ok(false) => (
                409,
                "Already used",
                "This admission has already been used, for example in another tab. Join the line again to continue.",
                None,
            ),
            Err(e) => {
                shared.warn_store_error(&e);
                if r.cfg.on_store_error == StorePolicy::Open {
                    ctx.outcome = Outcome::Consume;
                    return Ok(false);
                }
                (
                    503,
                    "Please try again",
                    "We could not confirm your place just now. Nothing was lost: try again in a few seconds.",
                    Some(5),
                )
            }
        };
        ctx.outcome = Outcome::Reject;
        ctx.reject = Some(if status == 409 {
            Reject::Consumed
        } else {
            Reject::Store
        });
        let body = if wants_json(session.req_header()) {
            let state = if status == 409 { "consumed" } else { "retry" };
            Bytes::from(
                serde_json::json!({ "room": r.name(), "state": state, "error": message })
                    .to_string(),
            )
        } else {
            Bytes::from(shared.pages.message(&MessageView {
                status,
                title,
                message,
                retry_seconds: retry,
                room: r.name(),
                lang: "en",
            }))
        };
        let content_type = if wants_json(session.req_header()) {
            JSON
        } else {
            HTML
        };
        Reply {
            status,
            content_type,
            body,
            retry_after: retry,
            cookies: &ctx.set_cookies,
        }
        .send(session)
        .await?;
        Ok(true)
    }

    /// Sliding expiry: past half its life the admission is renewed, if the store agrees. A store
    /// that cannot answer postpones the renewal; the current cookie stays valid until it expires.
    async fn refresh(shared: &Shared, ctx: &mut Ctx, room: usize, vid: VisitorId, expires: u64) {
        let r = &shared.rooms[room];
        let ttl = r.cfg.params.session_ttl.as_secs().max(1);
        if expires.saturating_sub(shared.clock.now_secs()) >= ttl / 2 {
            return;
        }
        match shared
            .store_call("touch", r.name(), shared.store.touch(&r.cfg.params, vid))
            .await
        {
            Ok(true) => Self::grant(shared, ctx, room, vid),
            Ok(false) => {}
            Err(e) => shared.warn_store_error(&e),
        }
    }
}

#[async_trait]
impl ProxyHttp for Proxy {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        let shared = self.current.load_full();
        Ctx {
            upstream: shared.config.default_upstream,
            room: None,
            set_cookies: Vec::new(),
            outcome: Outcome::Pass,
            reject: None,
            started: Instant::now(),
            https: false,
            consumed: None,
            replace_body: None,
            shared,
        }
    }

    /// Bounds for slow and oversized clients, before anything else looks at the request.
    async fn early_request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<()> {
        let s = &ctx.shared.config.server;
        let secs = s.client_timeout.as_secs().max(1);
        session.set_keepalive(Some(secs));
        session.set_read_timeout(Some(s.client_timeout));
        session.set_write_timeout(Some(s.client_timeout));
        let req = session.req_header();
        let size: usize = req
            .headers
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum::<usize>()
            + req
                .uri
                .path_and_query()
                .map(|p| p.as_str().len())
                .unwrap_or(0);
        if size > s.max_header_bytes {
            return pingora::Error::e_explain(
                pingora::ErrorType::HTTPStatus(431),
                format!(
                    "request header of {size} bytes; the limit is {}",
                    s.max_header_bytes
                ),
            );
        }
        Ok(())
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        let snapshot = ctx.shared.clone();
        let shared = &*snapshot;
        let trusted = &shared.config.listen.trusted_proxies;
        if !trusted.is_empty() {
            if let Some(peer) = peer_ip(session) {
                ctx.https =
                    crate::client::forwarded_https(peer, &session.req_header().headers, trusted);
            }
        }
        let req = session.req_header();
        let path = normalize_path(req.uri.path());
        if path == "/.anteroom" || path.starts_with("/.anteroom/") {
            let endpoint = path.into_owned();
            status::serve(shared, session, ctx, &endpoint).await?;
            return Ok(true);
        }
        let Some(room) = shared.router.route(request_host(req), &path) else {
            return Ok(false);
        };
        let r = &shared.rooms[room];
        ctx.upstream = r.cfg.upstream;
        ctx.room = Some(room);
        if !r.live.enabled() {
            return Ok(false);
        }
        let is_consume = r
            .cfg
            .consume
            .iter()
            .any(|c| c.method == req.method && path_covers(&c.path, &path));
        let verified = cookie::find(cookie_values(req), &r.cookie_name).and_then(|v| {
            cookie::verify(
                &shared.config.cookie.keys,
                r.name(),
                v,
                shared.clock.now_secs(),
            )
        });
        if let Some(v) = verified {
            ctx.outcome = Outcome::Admit;
            if is_consume {
                return Self::consume(shared, session, ctx, room, v.vid).await;
            }
            Self::refresh(shared, ctx, room, v.vid, v.expires).await;
            return Ok(false);
        }
        let vid = Self::visitor(shared, session.req_header(), ctx);
        let gate = gate(shared, session, room);
        match Self::enter(shared, ctx, room, vid, gate).await {
            Verdict::Pass { admitted } => {
                // Let through without an admission (room off, or the `open` store policy).
                ctx.outcome = if admitted {
                    Outcome::Admit
                } else {
                    Outcome::Pass
                };
                if admitted && is_consume {
                    return Self::consume(shared, session, ctx, room, vid).await;
                }
                Ok(false)
            }
            Verdict::Wait(status) => {
                Self::send_wait(shared, session, ctx, room, &status).await?;
                Ok(true)
            }
            Verdict::Limited { retry_after } => {
                Self::send_limited(shared, session, ctx, room, retry_after).await?;
                Ok(true)
            }
        }
    }

    async fn upstream_peer(&self, _session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        let up = &ctx.shared.config.upstreams[ctx.upstream];
        let mut peer = HttpPeer::new(up.addr, up.tls, up.sni.clone());
        peer.options.connection_timeout = Some(up.connect_timeout);
        peer.options.total_connection_timeout = Some(up.connect_timeout);
        peer.options.read_timeout = Some(up.read_timeout);
        peer.options.write_timeout = Some(up.write_timeout);
        Ok(Box::new(peer))
    }

    async fn upstream_response_filter(
        &self,
        session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        origin::on_response(session, upstream_response, ctx).await
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut Ctx,
    ) -> Result<Option<std::time::Duration>> {
        if let Some(page) = &ctx.replace_body {
            *body = end_of_stream.then(|| page.clone());
        }
        Ok(None)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &pingora::Error,
        ctx: &mut Ctx,
    ) -> FailToProxy {
        origin::on_failure(session, e, ctx).await
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut RequestHeader,
        _ctx: &mut Ctx,
    ) -> Result<()> {
        let values: Vec<&[u8]> = cookie_values(upstream_request).collect();
        if !values.iter().any(|v| {
            v.windows(cookie::COOKIE_PREFIX.len())
                .any(|w| w == cookie::COOKIE_PREFIX.as_bytes())
        }) {
            return Ok(());
        }
        let kept: Vec<String> = values
            .iter()
            .map(|v| {
                cookie::without_ours(v).unwrap_or_else(|| String::from_utf8_lossy(v).into_owned())
            })
            .filter(|s| !s.is_empty())
            .collect();
        upstream_request.remove_header(&http::header::COOKIE);
        if !kept.is_empty() {
            upstream_request.insert_header(http::header::COOKIE, kept.join("; "))?;
        }
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        for c in &ctx.set_cookies {
            upstream_response.append_header(http::header::SET_COOKIE, c.as_str())?;
        }
        Ok(())
    }

    async fn logging(&self, session: &mut Session, _e: Option<&pingora::Error>, ctx: &mut Ctx) {
        let seconds = ctx.started.elapsed().as_secs_f64();
        let shared = &*ctx.shared;
        let room_metrics = ctx
            .room
            .and_then(|i| shared.rooms.get(i))
            .map(|r| &r.metrics);
        shared
            .metrics
            .request(room_metrics, ctx.outcome, ctx.reject, seconds);
        if tracing::enabled!(target: "anteroom::access", tracing::Level::INFO) {
            let req = session.req_header();
            let status = session
                .response_written()
                .map(|r| r.status.as_u16())
                .unwrap_or(0);
            let room = ctx.room.map(|i| shared.rooms[i].name()).unwrap_or("-");
            // The path without its query: queries can carry tokens of the shop's own.
            tracing::info!(
                target: "anteroom::access",
                room,
                outcome = ctx.outcome.as_str(),
                status,
                method = req.method.as_str(),
                path = req.uri.path(),
                duration_ms = seconds * 1000.0,
            );
        }
    }
}
