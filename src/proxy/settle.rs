//! Settling an order's pending consume by the origin's answer (see [`crate::store::order`]): a
//! final answer below 500 confirms it, except 408 and 429 (the shop turned it away
//! unprocessed); a 5xx, a refused or timed-out connection, or another failure on the origin's
//! side gives it back; a failure on the visitor's side once the order was handed over uses it.
//! A give-back is tried before the visitor sees the error page; a settle whose store call fails
//! is retried in the background for the grace period, and a heartbeat keeps the pending order
//! alive while it is in flight.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pingora::{ErrorSource, ErrorType};

use super::Ctx;
use crate::app::Shared;
use crate::cookie;
use crate::store::{RequestId, Settle, Settled, VisitorId};

/// An admission this request took for an order, pending until the origin's answer settles it.
#[derive(Debug, Clone)]
pub(super) struct Taken {
    pub room: usize,
    pub vid: VisitorId,
    pub request: RequestId,
    /// The consume's grace period: how long settling it is worth retrying.
    pub grace: Duration,
    /// Until when the admission the order used ran (unix seconds, the store's clock); 0 for
    /// an order let through without one (the `open` policy). An order's receipt lives no longer.
    pub expires: u64,
}

/// How the origin's answer settles the order: a failure of the shop (5xx) or the shop turning
/// the request away unprocessed (408 Request Timeout, 429 Too Many Requests) gives the admission
/// back; any other final answer used it. An informational answer (1xx: `100 Continue`, `103
/// Early Hints`) is not the answer yet and settles nothing, but `101 Switching Protocols` is the
/// last HTTP answer the request gets: the origin took it, and what follows is a tunnel whose end
/// (a timeout, the visitor leaving) says nothing of the order (found by review: a WebSocket on a
/// consume route kept the order pending for the tunnel's life, then gave it back).
pub(super) fn settlement(status: u16) -> Option<Settle> {
    match status {
        101 => Some(Settle::Confirm),
        0..=199 => None,
        408 | 429 => Some(Settle::GiveBack),
        s if s >= 500 => Some(Settle::GiveBack),
        _ => Some(Settle::Confirm),
    }
}

/// How a failure to proxy settles the order. The origin's side (refused, timed out, closed on
/// us) failed the order: given back. The visitor's side (they closed the connection, stalled,
/// sent garbage) may well have come after the origin acted on the order, and walking away must
/// not hand the admission back for another order: used up, once the request was handed to the
/// origin (`sent`: its head is on its way; the body need not be whole — a shop may act on the
/// head alone, or stop reading at the end of its JSON: found by review, an order cut short in
/// its body was given back, and one admission placed six orders). Before that the shop never
/// had the order: given back (found by review: a request Pingora refused after the store took
/// its admission, for a `Connection` header naming `Host`, used the admission up with no order
/// made).
///
/// And a read on the shop's side that failed while the body was not whole is the visitor's
/// doing too: the shop had the head and waited for the rest (found by re-review: a body stalled
/// past the origin's `read-timeout`, which runs out before `client-timeout`, timed out on the
/// origin's side and was given back; one admission placed four orders). A write to the shop
/// that failed is the shop's: it did not read what the visitor sent (found by re-review: a
/// stuck shop that never read a large body used an honest buyer's admission up).
pub(super) fn failure_settlement(
    source: &ErrorSource,
    etype: &ErrorType,
    sent: bool,
    body_whole: bool,
) -> Settle {
    let waited_for_the_visitor = matches!(
        etype,
        ErrorType::ReadTimedout | ErrorType::ReadError | ErrorType::ConnectionClosed
    );
    match source {
        ErrorSource::Downstream if sent => Settle::Confirm,
        ErrorSource::Upstream if sent && !body_whole && waited_for_the_visitor => Settle::Confirm,
        _ => Settle::GiveBack,
    }
}

/// One settle call; `true` when the store answered (whatever it said).
async fn settle_once(shared: &Shared, t: &Taken, how: Settle) -> bool {
    let r = &shared.rooms[t.room];
    match shared
        .store_call(
            "settle",
            r.name(),
            shared.store.settle(&r.cfg.params, t.vid, &t.request, how),
        )
        .await
    {
        Ok(Settled::Done | Settled::Already) => {
            if how == Settle::Confirm {
                // The session is over: after a data loss, its slot is held back for it no
                // longer (found by review r89c: the slots of visitors who ordered through an
                // `open` outage stayed held back after an empty restart, and the line stood
                // still while the shop was empty).
                r.recovery.counted(t.vid, shared.clock.now_micros());
            }
            if how == Settle::GiveBack {
                tracing::info!(
                    room = r.name(),
                    "the origin failed an order: admission given back"
                );
            }
            true
        }
        Ok(s) => {
            tracing::warn!(room = r.name(), ?how, settled = ?s, "an order was settled late: its pending consume had been resolved already");
            true
        }
        Err(e) => {
            shared.warn_store_error(&e);
            false
        }
    }
}

/// Settles in the background, retrying a failed store call with backoff. A give-back is tried
/// for the grace period (after it the store gives the admission back by itself). A confirm is
/// tried until it lands, however long the store is away: past the grace period the store would
/// give a used admission back, and a kept cookie could order again. Meanwhile the room's
/// [`crate::room::owed::Owed`] answers another order of it here.
pub(super) fn settle_later(shared: Arc<Shared>, t: Taken, how: Settle) {
    let owed = (how == Settle::Confirm).then(|| shared.rooms[t.room].owed.clone());
    if let Some(o) = &owed {
        o.owe(t.vid, t.request.clone());
    }
    tokio::spawn(async move {
        let until = Instant::now() + t.grace;
        let mut pause = Duration::from_millis(100);
        let mut told = false;
        let lost = &shared.rooms[t.room].recovery.lost;
        let breaker = shared.breaker(shared.rooms[t.room].name());
        loop {
            // Listening before the attempt: a loss seen while it runs wakes the next one, and
            // so does the store answering again.
            let woken = lost.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let back = breaker.closed.notified();
            tokio::pin!(back);
            back.as_mut().enable();
            if settle_once(&shared, &t, how).await {
                break;
            }
            if Instant::now() + pause > until && !told {
                told = true;
                if owed.is_none() {
                    tracing::warn!(
                        room = shared.rooms[t.room].name(),
                        ?how,
                        "could not settle an order; the store resolves it after the grace period"
                    );
                    return;
                }
                tracing::warn!(
                    room = shared.rooms[t.room].name(),
                    "could not confirm an order within its grace period; still trying, and refusing another order of that admission here"
                );
            }
            // Backoff between attempts, or at once when the store lost its data: a confirm
            // must land within the wait every instance gives a loss before a consume vouched by
            // a cookie alone may win (found by review: a confirm owed through an outage slept
            // its 2 s backoff past that wait after an empty restart, and another instance took
            // a second order of the admission).
            tokio::select! {
                _ = tokio::time::sleep(pause) => pause = (pause * 2).min(Duration::from_secs(2)),
                _ = woken => pause = Duration::from_millis(100),
                _ = back => pause = Duration::from_millis(100),
            }
        }
        if let Some(o) = owed {
            o.paid(t.vid, &t.request);
        }
    });
}

/// While an order is in flight, its pending consume's deadline is pushed ahead every third of
/// the grace period: a request body trickled in for longer than the grace period (the visitor
/// sets that pace, not the origin) must not see its admission given back under it and taken by
/// a second order. Should this instance die, the beats stop and the grace period runs out as
/// designed. Aborted when dropped: the request ended, or its order was settled.
///
/// It also marks the order in flight in the room's [`crate::room::owed::Owed`], so that this
/// instance answers another order of the admission itself while the store cannot be asked.
pub(super) struct Heartbeat {
    beats: tokio::task::AbortHandle,
    owed: Arc<crate::room::owed::Owed>,
    vid: VisitorId,
    request: RequestId,
    /// Its order was answered and settled (or given back): no longer in flight, whenever it
    /// is dropped.
    ended: bool,
}

impl Heartbeat {
    pub(super) fn start(shared: Arc<Shared>, t: &Taken) -> Self {
        let owed = shared.rooms[t.room].owed.clone();
        owed.sending(t.vid, t.request.clone());
        let (vid, request) = (t.vid, t.request.clone());
        let t = t.clone();
        let every = (t.grace / 3).max(Duration::from_secs(1));
        let task = tokio::spawn(async move {
            let r = &shared.rooms[t.room];
            let mut woken = Box::pin(r.recovery.lost.notified());
            woken.as_mut().enable();
            loop {
                // The beat's period, or at once when the store lost its data (the marker with
                // it: the beat writes it again).
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = &mut woken => {}
                }
                // Listening before the beat: a loss seen while it runs wakes the next one.
                woken = Box::pin(r.recovery.lost.notified());
                woken.as_mut().enable();
                let beat = shared
                    .store_call(
                        "settle",
                        r.name(),
                        shared.store.settle(
                            &r.cfg.params,
                            t.vid,
                            &t.request,
                            Settle::Extend(t.grace),
                        ),
                    )
                    .await;
                match beat {
                    Ok(Settled::Done) => {}
                    // Settled, or gone: nothing left to keep.
                    Ok(_) => return,
                    // The next beat tries again; the deadline still has two thirds to run.
                    Err(e) => shared.warn_store_error(&e),
                }
            }
        });
        Self {
            beats: task.abort_handle(),
            owed,
            vid,
            request,
            ended: false,
        }
    }

    /// The order's end is known here (settled, given back, or ended by the shop's command).
    pub(super) fn end(mut self) {
        self.ended = true;
    }
}

/// `ctx`'s heartbeat, if any, ended ([`Heartbeat::end`]).
pub(super) fn end_heartbeat(ctx: &mut Ctx) {
    if let Some(h) = ctx.heartbeat.take() {
        h.end();
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.beats.abort();
        // Dropped mid-flight while the process stops: cut off by the shutdown, still at the
        // shop as far as anyone knows (see `owed::STOPPING`).
        if self.ended || !crate::room::owed::stopping() {
            self.owed.sent(self.vid, &self.request);
        }
    }
}

/// Settles this request's pending consume, if it has one. A give-back is tried at once (the
/// visitor's retry must find the admission) and keeps the admission cookie; a confirm, and a
/// give-back whose call failed, go to the background.
pub(super) async fn settle(shared: &super::held::Held, ctx: &mut Ctx, how: Settle) {
    let Some(t) = ctx.consumed.take() else {
        return;
    };
    if how == Settle::Confirm {
        // The pages right after the order (`order-receipt`).
        super::Proxy::give_receipt(shared, ctx, t.room, t.vid, t.expires);
        // Owed before the heartbeat stops marking it in flight: no moment in between when
        // another order of it would be asked of the store.
        settle_later(shared.arc(), t, how);
        end_heartbeat(ctx);
        return;
    }
    end_heartbeat(ctx);
    let r = &shared.rooms[t.room];
    let clear = cookie::clear_admission(r.name(), false);
    let clear_secure = cookie::clear_admission(r.name(), true);
    ctx.set_cookies
        .retain(|c| *c != clear && *c != clear_secure);
    if !settle_once(shared, &t, how).await {
        settle_later(shared.arc(), t, how);
    }
}
