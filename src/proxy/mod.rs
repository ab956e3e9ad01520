//! The Pingora `ProxyHttp` implementation: the waiting room in front of the origin.
//!
//! Phases, in the order Pingora calls them:
//! - `request_filter`: the `/.anteroom/` endpoints; room matching; the admission decision.
//!   Admitted visitors are decided locally from their signed cookie (no store call); everyone
//!   else makes exactly one store call (`join`), which both places them and reports their turn.
//! - `upstream_peer`: the room's upstream, or the default one outside every room.
//! - `upstream_request_filter`: our own cookies are taken out of what the origin sees.
//! - `response_filter`: cookies we decided to set ride on the origin's response, which is then
//!   kept out of shared caches ([`cache_safe`]).

mod access;
mod admitted;
mod asset;
mod cache_safe;
mod challenge;
mod command;
mod consume;
mod ctx;
mod edge;
mod event;
pub mod held;
mod identity;
mod joined;
mod method;
mod origin;
mod origin_slot;
mod peer;
mod prefetch;
mod published;
mod queue;
mod receipt;
mod refuse;
mod request;
mod reregister;
mod respond;
mod scheme;
mod settle;
mod slow;
mod status;
pub(crate) mod target;
mod visitor;
mod wait;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::Result;

use std::time::Instant;

use crate::app::Current;
use crate::cookie;
use crate::route::Routing;
pub use ctx::{Ctx, Outcome};
use queue::Verdict;
use request::{client_key, cookie_values, gate, peer_ip, secure, wants_json};

/// The proxy.
pub struct Proxy {
    current: Current,
}

impl Proxy {
    pub fn new(current: Current) -> Self {
        Self { current }
    }
}

#[async_trait]
impl ProxyHttp for Proxy {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx::new(held::hold(&self.current))
    }

    /// Bounds for slow and oversized clients, before anything else looks at the request.
    async fn early_request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<()> {
        Self::bound_client(session, ctx)
    }

    /// A request body is bounded in total by `client-timeout`, not only per read.
    async fn request_body_filter(
        &self,
        session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut Ctx,
    ) -> Result<()> {
        if let Some(b) = body {
            let client_timeout = ctx.shared.config.server.client_timeout;
            let elapsed = ctx.body_from.elapsed();
            ctx.body_due = slow::body_due(ctx.body_due, elapsed, b.len() as u64, client_timeout);
            Self::body_moved(ctx);
        }
        // The origin's latency runs from the end of the request's body: before (found by
        // review), a body uploaded slowly counted as the shop's slowness and cut the rate.
        if Self::slot_lapsed(ctx) {
            return Err(Self::body_too_late(ctx));
        }
        if end_of_stream {
            if !Self::body_whole(ctx) {
                return Err(Self::body_too_late(ctx));
            }
            ctx.body_complete = true;
            if ctx.answer_whole {
                Self::origin_done(ctx);
            }
            if ctx.upstream_at.is_some() {
                ctx.upstream_at = Some(Instant::now());
            }
        }
        Self::bound_body(session, end_of_stream, ctx)
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        let snapshot = ctx.shared.clone();
        let shared = &*snapshot;
        Self::note_arrival(shared, session, ctx);
        if Self::redirect_to_https(shared, session, ctx).await? {
            return Ok(true);
        }
        // A body the origin might not read is never left where it could be read as a request
        // of its own: refused where the method takes none, else the last thing on its origin
        // connection (see `method::takes_no_body`). Over HTTP/2 a request may end with an
        // empty DATA frame, which is not known yet here: one that declares no length goes to
        // the origin chunked, which no server reads as a request, and ends its connection too.
        let body_empty = session.is_body_empty();
        if !body_empty {
            let req = session.req_header();
            if !method::one_length(req) {
                Self::send_bad_request(shared, session, ctx, method::LENGTH_REFUSED).await?;
                return Ok(true);
            }
            let declared = req.headers.contains_key(http::header::CONTENT_LENGTH)
                || req.headers.contains_key(http::header::TRANSFER_ENCODING);
            if method::takes_no_body(req) && (declared || !session.is_http2()) {
                Self::send_bad_request(shared, session, ctx, method::BODY_REFUSED).await?;
                return Ok(true);
            }
            ctx.last_on_connection = true;
        }
        let req = session.req_header();
        // Over HTTP/2 a body comes without a length header (found by review: a "preflight"
        // with one reached the shop through the preflight rule): only an ended stream counts.
        let preflight = body_empty && method::is_preflight(req);
        let target = target::target(&shared.router, req, ctx.trusted_peer);
        if method::echoes(req) && Self::guards_a_secret(shared, ctx, &target.routing) {
            Self::send_no_trace(session, ctx).await?;
            return Ok(true);
        }
        let room = match target.routing {
            Routing::Outside => return Ok(false),
            Routing::Room(room) => room,
            Routing::Reserved(endpoint)
                if crate::page::assets::Assets::is_asset_path(&endpoint) =>
            {
                asset::serve(shared, session, ctx, &endpoint).await?;
                return Ok(true);
            }
            Routing::Reserved(endpoint) => {
                status::serve(shared, session, ctx, &endpoint).await?;
                return Ok(true);
            }
            Routing::Refuse(why) => {
                Self::send_bad_request(shared, session, ctx, why).await?;
                return Ok(true);
            }
        };
        let r = &shared.rooms[room];
        ctx.upstream = r.cfg.upstream;
        ctx.room = Some(room);
        // A consume route under any reading of the path: `POST /orders;x` is still the order.
        // Known before any way through (the room off, a bypass, the store's `open` policy):
        // an order is never sent twice, whatever let it through.
        let is_consume = r.cfg.consume.iter().any(|c| {
            method::may_be_method(req, &c.method) && target.readings.any_covered_by(&c.path)
        });
        ctx.order = is_consume;
        if !r.live.enabled() {
            // Everyone passes; an order that carries an admission takes it (pending, so that no
            // other instance takes it meanwhile) and uses it up by the origin's answer: left
            // unused, the admission ordered again once the room was switched back on (found by
            // re-review r90c: one admission, three orders; and r91b: taken only by the answer,
            // a second order went through another instance while the first was in flight).
            if is_consume {
                let cookie_now = r.events.store_now(shared.clock.now_micros()) / 1_000_000;
                if let Some(v) = Self::admission(shared, req, room, cookie_now, true) {
                    if Self::wait_for_origin(shared, session, ctx, room).await? {
                        return Ok(true);
                    }
                    Self::order_while_off(shared, ctx, room, v.vid, v.expires).await;
                    return Ok(false);
                }
                // Without one, by a visitor the request names (a queue ticket, an id): the
                // order takes their place in line (found by review r95b: the place was kept,
                // and its turn bought a second order once the room was back on).
                let who = Self::visitor(shared, req, ctx, room);
                if who.had_vid || who.ticket.is_some() {
                    if Self::wait_for_origin(shared, session, ctx, room).await? {
                        return Ok(true);
                    }
                    Self::order_from_line(shared, ctx, room, who.vid);
                    return Ok(false);
                }
            }
            return Self::wait_for_origin(shared, session, ctx, room).await;
        }
        // Health checks, staff, partners: past the line before anything else is decided, and
        // never counted as active or held by the origin cap.
        if !r.cfg.bypass.is_empty() {
            let client = peer_ip(session).map(|peer| {
                let listen = &shared.config.listen;
                crate::client::client_ip(
                    peer,
                    &req.headers,
                    &listen.trusted_proxies,
                    listen.client_header,
                )
            });
            if let Some(i) = crate::route::bypass::matching(
                &r.cfg.bypass,
                &target.readings,
                client,
                &req.headers,
                preflight && !is_consume,
            ) {
                ctx.outcome = Outcome::Bypass;
                ctx.open_bypass = matches!(
                    r.cfg.bypass.get(i),
                    Some(crate::config::model::BypassRule::Path(_))
                );
                if let Some(c) = r.metrics.bypassed.get(i) {
                    c.inc();
                }
                return Ok(false);
            }
        }
        // One reading of the wall clock serves the cookie's check and its renewal; the cookie
        // is read on the store's clock (`Shared::cookie_micros`).
        let now = shared.clock.now_micros();
        let cookie_now = r.events.store_now(now) / 1_000_000;
        if let Some(v) = Self::admission(shared, req, room, cookie_now, ctx.order) {
            ctx.hold_admission = Self::several_admissions(shared, req, room, cookie_now, v.vid);
            ctx.outcome = Outcome::Admit;
            ctx.holder = Some(command::Holder {
                vid: v.vid,
                expires: v.expires,
                receipt: false,
            });
            if is_consume {
                // The slot first: a consume that waits in vain has consumed nothing.
                if Self::wait_for_origin(shared, session, ctx, room).await? {
                    return Ok(true);
                }
                // The cookie's own expiry, which the store judges on its clock when the consume
                // is made (after the body's read and the slot's wait), not stretched by them: a
                // stretched cookie outlived the consumed marker of an order made meanwhile, and
                // the revocation (found by re-review r87a: one admission, two orders; an order
                // after a revoke).
                let cookie = (v.expires, cookie_now);
                return Self::consume(shared, session, ctx, room, v.vid, cookie, Vec::new()).await;
            }
            Self::keep_session(shared, ctx, room, v.vid, v.expires, now, cookie_now).await;
            return Self::wait_for_origin(shared, session, ctx, room).await;
        }
        // An order's receipt: the pages right after it (`order-receipt`).
        if let Some(v) = Self::receipt(shared, req, room, cookie_now, is_consume) {
            ctx.outcome = Outcome::Receipt;
            // Its visitor, whom the shop may end with a command here (found by review: a
            // `revoke` on the confirmation page was counted `unadmitted`, the receipt kept).
            ctx.holder = Some(command::Holder {
                vid: v.vid,
                expires: v.expires,
                receipt: true,
            });
            return Self::wait_for_origin(shared, session, ctx, room).await;
        }
        if r.cfg.queueing == crate::config::QueueMethod::Reject {
            // Nobody queues; the admitted (above) run on to the end of their sessions.
            Self::send_closed(shared, session, ctx, room, false).await?;
            return Ok(true);
        }
        if preflight {
            Self::send_preflight(shared, session, ctx, room).await?;
            return Ok(true);
        }
        Self::to_the_line(shared, session, ctx, room, is_consume, cookie_now).await
    }

    async fn upstream_peer(&self, session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        Ok(Box::new(peer::choose(session, ctx)))
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        peer: &HttpPeer,
        ctx: &mut Ctx,
        e: Box<pingora::Error>,
    ) -> Box<pingora::Error> {
        peer::retry_elsewhere(ctx, peer, e)
    }

    /// An order is sent to the origin once: Pingora's default retries an idempotent method on
    /// a reused connection that broke, and a consume route may well be `PUT` or `GET` (found by
    /// review: the origin got one `PUT /orders` twice; by re-review, also one let through with
    /// no admission taken, by a bypass or the store's `open` policy). Its failure settles it
    /// instead.
    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<pingora::Error>,
        ctx: &mut Ctx,
        client_reused: bool,
    ) -> Box<pingora::Error> {
        let mut e = e.more_context(format!("Peer: {peer}"));
        if ctx.order
            || ctx.consumed.is_some()
            || !session.req_header().method.is_idempotent()
            || session.as_ref().retry_buffer_truncated()
        {
            e.set_retry(false);
        } else {
            e.retry.decide_reuse(client_reused);
        }
        e
    }

    async fn upstream_response_filter(
        &self,
        session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        command::on_response(session.req_header(), upstream_response, ctx).await;
        // Only the admin listener answers as it (see `ADMIN_MARK`). Looked for among the names
        // first: a removal by a name given as text parses and hashes it on every answer.
        let mark = crate::route::headers::ADMIN_MARK;
        if upstream_response.headers.keys().any(|k| k.as_str() == mark) {
            upstream_response.remove_header(mark);
        }
        // An answer its head ends (no body follows) is whole here: Pingora calls no body
        // filter for it (found by re-review: an early 204 to a stalled HTTP/2 upload never
        // gave its slot back).
        if origin_slot::head_ends_answer(session.req_header(), upstream_response) {
            let body_done = ctx.body_complete || session.is_body_empty();
            Self::origin_answered_whole(ctx, body_done);
        }
        origin::on_response(session, upstream_response, ctx).await
    }

    /// The origin's answer is whole: with the request's body, its part is over (see
    /// `origin_done`).
    fn upstream_response_body_filter(
        &self,
        session: &mut Session,
        _body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut Ctx,
    ) -> Result<Option<std::time::Duration>> {
        if end_of_stream {
            let body_done = ctx.body_complete || session.is_body_empty();
            Self::origin_answered_whole(ctx, body_done);
        }
        Ok(None)
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
        ctx.failure_told = true;
        origin::on_failure(session, e, ctx).await
    }

    fn suppress_error_log(&self, _session: &Session, ctx: &Ctx, _error: &pingora::Error) -> bool {
        ctx.failure_told
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        ctx.handed_over = true;
        command::await_answer(session, ctx);
        cache_safe::ask_in_full(
            upstream_request,
            !ctx.set_cookies.is_empty() || ctx.guarded(),
        );
        // The origin's proof that the request came through the line (replacing any copy a
        // client sent: a guess must not reach the origin as if we had sent it).
        if let Some(s) = ctx
            .shared
            .config
            .upstreams
            .get(ctx.upstream)
            .and_then(|u| u.origin_secret.as_ref())
        {
            upstream_request.insert_header(s.name.clone(), s.value.clone())?;
        }
        if target::has_spoofable(upstream_request) {
            target::strip_spoofable(upstream_request, ctx.trusted_peer);
        }
        if ctx.last_on_connection {
            upstream_request.insert_header(http::header::CONNECTION, "close")?;
        }
        // A body read whole first goes with the head: nothing to wait for.
        if ctx.body_buffered {
            upstream_request.remove_header(&http::header::EXPECT);
        }
        // Most requests outside every room carry none of our cookies and one `Cookie` line at
        // most: look before allocating anything. Several lines (HTTP/2 sends each cookie as
        // its own field) become one, joined with "; " as RFC 9113 §8.2.3 asks: a shop that
        // joined the lines with "," read the first cookie as the rest of the header (found by
        // review).
        let mut lines = 0;
        let mut ours = false;
        for v in cookie_values(upstream_request) {
            lines += 1;
            ours = ours || cookie::has_ours(v);
        }
        if !ours && lines < 2 {
            return Ok(());
        }
        let kept = cookie::all_without_ours(cookie_values(upstream_request));
        if kept.is_empty() {
            upstream_request.remove_header(&http::header::COOKIE);
        } else {
            // Replaces every `Cookie` line with the one kept.
            upstream_request.insert_header(http::header::COOKIE, kept)?;
        }
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        // A 1xx is not the answer: the cookies ride on the final one.
        if upstream_response.status.is_informational() {
            return Ok(());
        }
        // What a line guards is never stored by a shared cache (see cache_safe); what a path
        // bypass rule lets past it is open to all anyway (the shop's assets keep their
        // caching). A partner's or a staff network's page (a `header` or `client` rule) is a
        // guarded page all the same: a shared cache that stored it served it to newcomers
        // (found by review). An answer that is to carry our cookies is made safe by `prepare`,
        // unless it is a 304.
        let guarded = ctx.guarded();
        if ctx.set_cookies.is_empty() || !cache_safe::prepare(upstream_response)? {
            if guarded {
                cache_safe::keep_private(upstream_response)?;
            }
            return Ok(());
        }
        for c in &ctx.set_cookies {
            upstream_response.append_header(http::header::SET_COOKIE, c.as_str())?;
        }
        Ok(())
    }

    async fn logging(&self, session: &mut Session, _e: Option<&pingora::Error>, ctx: &mut Ctx) {
        access::log(session, ctx);
    }
}
