//! `max-origin-inflight` on the request path: a request of a room with a cap takes a slot of
//! the room's gate ([`crate::room::gate`]) before it goes to the origin — before a consume
//! route's store call, so a request that waits in vain has consumed nothing. Past
//! `origin-queue-timeout` the visitor gets a 503 with `Retry-After` and keeps their admission
//! (a cookie renewed on the way is still set). Every forwarded request of a capped room takes a
//! slot, the room switched off or not; one whose connection switches protocols (101) gives it
//! back with the answer.

use pingora::proxy::Session;
use pingora::Result;

use super::respond::Refusal;
use super::{Ctx, Proxy};
use crate::app::Shared;
use crate::metrics::Reject;

/// What a visitor who waited in vain is asked to wait before trying again: 1–3 s at random,
/// so that a crowd turned away together does not come back together.
fn retry_secs() -> u64 {
    fastrand::u64(1..=3)
}

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
        // Every request waits its turn, an `Upgrade` too (the header alone proves nothing: an
        // origin that ignores it answers an ordinary request). A connection that really switches
        // protocols gives its slot back with the 101 ([`Proxy::origin_answered`]): a WebSocket
        // would otherwise pin a slot for its whole life.
        match gate.enter(cap.queue_timeout).await {
            Ok(slot) => {
                ctx.origin_slot = Some(slot);
                Ok(false)
            }
            Err(_) => {
                // Not a failure in the shop's health window: the cap is this room's on this
                // instance, and one admitted visitor may hold all its slots (slow uploads), so
                // counted there it let one visitor cut every room on the shop to `min-rate`
                // (re-review of a first version that counted it).
                r.metrics.origin_timeouts.inc();
                Self::send_busy(shared, session, ctx, room).await?;
                Ok(true)
            }
        }
    }

    /// The origin's answer has come: a connection that switches protocols (101, a WebSocket)
    /// leaves the gate, as it is no longer a request in flight but a channel.
    pub(super) fn origin_answered(ctx: &mut Ctx, status: u16) {
        if status == 101 {
            ctx.origin_slot = None;
        }
    }

    async fn send_busy(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
    ) -> Result<()> {
        let refusal = Refusal {
            status: 503,
            state: "busy",
            title: "One moment, please",
            message: "The shop is busy with the visitors just before you. Your turn is kept: please try again in a moment.",
            retry_secs: Some(retry_secs()),
            reject: Reject::OriginBusy,
            lang: "en",
            always_json: false,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await
    }
}
