//! `max-origin-inflight` on the request path: a request of a room with a cap takes a slot of
//! the room's gate ([`crate::room::gate`]) before it goes to the origin — before a consume
//! route's store call, so a request that waits in vain has consumed nothing. Past
//! `origin-queue-timeout` the visitor gets a 503 with `Retry-After` and keeps their admission
//! (a cookie renewed on the way is still set).

use bytes::Bytes;
use pingora::proxy::Session;
use pingora::Result;

use super::respond::{Reply, HTML, JSON};
use super::{wants_json, Ctx, Outcome, Proxy};
use crate::app::Shared;
use crate::metrics::Reject;
use crate::page::MessageView;

/// What a visitor who waited in vain is asked to wait before trying again.
const RETRY_SECS: u64 = 2;

impl Proxy {
    /// Holds a slot to the origin for this request in `ctx` (released when the request ends).
    /// `true`: no slot came in time and the 503 was sent.
    pub(super) async fn wait_for_origin(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
    ) -> Result<bool> {
        let r = &shared.rooms[room];
        let (Some(gate), Some(cap)) = (&r.gate, r.cfg.origin_cap) else {
            return Ok(false);
        };
        // A WebSocket lives for minutes and is not an order: it would pin a slot for its life.
        if session.is_upgrade_req() {
            return Ok(false);
        }
        match gate.enter(cap.queue_timeout).await {
            Ok(slot) => {
                ctx.origin_slot = Some(slot);
                Ok(false)
            }
            Err(_) => {
                r.metrics.origin_timeouts.inc();
                Self::send_busy(shared, session, ctx, room).await?;
                Ok(true)
            }
        }
    }

    async fn send_busy(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
    ) -> Result<()> {
        let r = &shared.rooms[room];
        ctx.outcome = Outcome::Reject;
        ctx.reject = Some(Reject::OriginBusy);
        let message = "The shop is busy with the visitors just before you. Your turn is kept: please try again in a moment.";
        let json = wants_json(session.req_header());
        let body = if json {
            Bytes::from(
                serde_json::json!({
                    "room": r.name(),
                    "state": "busy",
                    "error": message,
                    "retry_after_ms": RETRY_SECS * 1000,
                })
                .to_string(),
            )
        } else {
            Bytes::from(shared.pages.message(&MessageView {
                status: 503,
                title: "One moment, please",
                message,
                retry_seconds: Some(RETRY_SECS),
                room: r.name(),
                lang: "en",
            }))
        };
        Reply {
            status: 503,
            content_type: if json { JSON } else { HTML },
            body,
            retry_after: Some(RETRY_SECS),
            cookies: &ctx.set_cookies,
        }
        .send(session)
        .await
    }
}
