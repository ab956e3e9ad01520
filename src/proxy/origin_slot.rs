//! `max-origin-inflight` on the request path: a request of a room with a cap takes a slot of
//! the room's gate ([`crate::room::gate`]) before it goes to the origin — before a consume
//! route's store call, so a request that waits in vain has consumed nothing. Past
//! `origin-queue-timeout` the visitor gets a 503 with `Retry-After` and keeps their admission
//! (a cookie renewed on the way is still set). Every forwarded request of a capped room takes a
//! slot, the room switched off or not; one whose connection switches protocols (101) gives it
//! back with the answer.
//!
//! Over HTTP/2 Pingora has no read timeout on a request body (`set_read_timeout` does nothing
//! there), so a stalled body is not cut at `client-timeout` as it is over HTTP/1.1: it runs
//! until the origin's `read-timeout`. Its slot is watched instead ([`Held::Watched`]): given
//! back when the body is not whole within `client-timeout` of the slot's coming (found by
//! review: one admitted visitor stalling a body on each of a connection's streams shut a capped
//! room with 503s for everyone).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
                ctx.body_from = Instant::now();
                let h2_body = session.is_http2() && !session.is_body_empty();
                ctx.origin_slot = Some(if h2_body {
                    let limit = shared.config.server.client_timeout;
                    Held::Watched(Watch::start(
                        slot,
                        ctx.body_from,
                        limit,
                        r.name().to_string(),
                    ))
                } else {
                    Held::Plain(slot)
                });
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

    /// Whether this request's watched slot was given back (its body not whole in time): the
    /// request must not go on to the origin, whose cap it no longer counts in (re-review: a
    /// body finished after that reached the origin beside the slot's next holder).
    pub(super) fn slot_lapsed(ctx: &Ctx) -> bool {
        matches!(&ctx.origin_slot, Some(Held::Watched(w)) if w.lapsed.load(Ordering::Acquire))
    }

    /// More of the body came: a watched slot's deadline moves with what it earned
    /// ([`super::slow::body_limit`]).
    pub(super) fn body_moved(ctx: &Ctx) {
        if let Some(Held::Watched(w)) = &ctx.origin_slot {
            w.received.store(ctx.body_bytes, Ordering::Release);
        }
    }

    /// The request's body is whole: a watched slot stays with the request until it ends.
    pub(super) fn body_whole(ctx: &mut Ctx) {
        if let Some(Held::Watched(w)) = &mut ctx.origin_slot {
            if let Some(done) = w.done.take() {
                let _ = done.send(());
            }
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

/// A slot of the room's gate this request holds; given back when dropped.
pub(super) enum Held {
    Plain(#[allow(dead_code)] crate::room::gate::Slot),
    /// An HTTP/2 request whose body is still coming: the slot is in a watch.
    Watched(Watch),
}

/// Holds a slot for a request whose body is still coming, and gives it back at `deadline`
/// unless told first that the body is whole (then it keeps it until dropped). Dropping it
/// (the request ended, or a 101) gives the slot back at once.
pub(super) struct Watch {
    task: tokio::task::JoinHandle<()>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
    /// Set when the slot was given back.
    lapsed: Arc<AtomicBool>,
    /// The body's bytes read so far, which move the deadline.
    received: Arc<AtomicU64>,
}

impl Watch {
    fn start(slot: crate::room::gate::Slot, from: Instant, limit: Duration, room: String) -> Self {
        let (done, mut whole) = tokio::sync::oneshot::channel::<()>();
        let lapsed = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let (flag, moved) = (lapsed.clone(), received.clone());
        let task = tokio::spawn(async move {
            let late = loop {
                let deadline = from + super::slow::body_limit(limit, moved.load(Ordering::Acquire));
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline.into()) => {
                        // The body may have earned more time meanwhile.
                        let now_due =
                            from + super::slow::body_limit(limit, moved.load(Ordering::Acquire));
                        if Instant::now() >= now_due {
                            break true;
                        }
                    }
                    said = &mut whole => break said.is_err(),
                }
            };
            if late {
                flag.store(true, Ordering::Release);
                drop(slot);
                tracing::debug!(
                    room,
                    "an HTTP/2 request body not whole within client-timeout: its origin slot is given back"
                );
                return;
            }
            let _kept = slot;
            std::future::pending::<()>().await;
        });
        Self {
            task,
            done: Some(done),
            lapsed,
            received,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
