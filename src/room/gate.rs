//! `max-origin-inflight`: the second line of defence at the proxy. A room's requests to the
//! origin hold a slot of this instance's gate while in flight; past the cap, a request waits
//! here, first come first served, for up to `origin-queue-timeout` (the caller then answers 503
//! with `Retry-After`, before anything was consumed). Like HAProxy's `maxconn` with its queue.
//!
//! The cap is per instance: with several instances, the shop sees up to their sum (size it as
//! the shop's workers ÷ instances). A reload keeps the gate of a room that keeps its name, so
//! requests in flight across a reload still count; a changed cap applies at once to new
//! requests, and a lowered one is reached as requests in flight finish.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A room's gate to its origin.
#[derive(Debug)]
pub struct OriginGate {
    /// Fair: permits go to waiters in the order they asked (tokio's semaphore is FIFO).
    slots: Arc<Semaphore>,
    limit: AtomicUsize,
    /// Slots still to take out of circulation after the cap was lowered: the next releases
    /// retire their permits instead of giving them back.
    owed: AtomicUsize,
    queued: AtomicI64,
    timed_out: AtomicU64,
    /// Each visitor's share of the slots while their request bodies come.
    pub shares: Arc<super::share::Shares>,
}

/// A slot held: released (or retired, after the cap was lowered) when dropped.
#[derive(Debug)]
pub struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    gate: Arc<OriginGate>,
    /// The slot came after a wait in line.
    waited: bool,
}

impl Slot {
    /// Whether the slot came after a wait in line (not at once).
    pub fn waited(&self) -> bool {
        self.waited
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let retire = self
            .gate
            .owed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if retire {
            permit.forget();
        }
    }
}

/// Why no slot was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Waited the whole `origin-queue-timeout`.
    TimedOut,
    /// The cap is gone ([`OriginGate::lift`]): the request goes on without a slot; `waited`:
    /// after a wait in line.
    Lifted { waited: bool },
}

impl OriginGate {
    pub fn new(limit: usize) -> Arc<Self> {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(Self {
            slots: Arc::new(Semaphore::new(limit)),
            limit: AtomicUsize::new(limit),
            owed: AtomicUsize::new(0),
            queued: AtomicI64::new(0),
            timed_out: AtomicU64::new(0),
            shares: Arc::default(),
        })
    }

    /// Takes a slot at once if one is free and nobody waits; else waits in line for up to
    /// `timeout`. Cancel-safe: a request dropped while waiting leaves the line.
    pub async fn enter(self: &Arc<Self>, timeout: Duration) -> Result<Slot, Refused> {
        match self.slots.clone().try_acquire_owned() {
            Ok(permit) => return Ok(self.slot(permit, false)),
            Err(tokio::sync::TryAcquireError::Closed) => {
                return Err(Refused::Lifted { waited: false })
            }
            Err(tokio::sync::TryAcquireError::NoPermits) => {}
        }
        let waiting = Queued::new(self);
        let got = tokio::time::timeout(timeout, self.slots.clone().acquire_owned()).await;
        drop(waiting);
        match got {
            Ok(Ok(permit)) => Ok(self.slot(permit, true)),
            // Closed only by `lift`.
            Ok(Err(_)) => Err(Refused::Lifted { waited: true }),
            Err(_) => {
                self.timed_out.fetch_add(1, Ordering::Relaxed);
                Err(Refused::TimedOut)
            }
        }
    }

    /// The cap is gone: a reload took it away from the room, or the room itself. Every request
    /// waiting for a slot goes on at once without one, as do those that still come to this
    /// gate (found by review: the requests already waiting when a reload removed the cap got
    /// 503 after their wait, while newer ones went straight through).
    pub fn lift(&self) {
        self.slots.close();
        self.shares.lift();
    }

    /// Requests waiting for a slot, or for a place in their visitor's share before one.
    pub fn waiting(&self) -> u64 {
        self.queued() + self.shares.waiting() as u64
    }

    fn slot(self: &Arc<Self>, permit: OwnedSemaphorePermit, waited: bool) -> Slot {
        Slot {
            permit: Some(permit),
            gate: self.clone(),
            waited,
        }
    }

    /// Changes the cap (a reload). Raising it frees slots at once; lowering it retires free
    /// slots now and the rest as requests in flight finish.
    pub fn resize(&self, limit: usize) {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        let old = self.limit.swap(limit, Ordering::AcqRel);
        self.shares.resized();
        if limit > old {
            let mut more = limit - old;
            // First cancel retirements still owed.
            while more > 0 {
                match self
                    .owed
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                {
                    Ok(_) => more -= 1,
                    Err(_) => break,
                }
            }
            self.slots.add_permits(more);
        } else if limit < old {
            let fewer = old - limit;
            let now = self.slots.forget_permits(fewer);
            self.owed.fetch_add(fewer - now, Ordering::AcqRel);
        }
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Acquire)
    }

    /// Requests holding a slot now.
    pub fn in_flight(&self) -> usize {
        let limit = self.limit() + self.owed.load(Ordering::Acquire);
        limit.saturating_sub(self.slots.available_permits())
    }

    /// Requests waiting for a slot now.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed).max(0) as u64
    }

    /// Requests that waited the whole timeout, since start.
    pub fn timed_out(&self) -> u64 {
        self.timed_out.load(Ordering::Relaxed)
    }
}

/// Counts a request in the gate's queue for as long as it waits (also when dropped midway).
struct Queued<'a>(&'a OriginGate);

impl<'a> Queued<'a> {
    fn new(g: &'a OriginGate) -> Self {
        g.queued.fetch_add(1, Ordering::Relaxed);
        Self(g)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn a_lifted_gate_lets_its_waiters_and_newcomers_go_on() {
        let g = OriginGate::new(1);
        let held = g.enter(LONG).await.unwrap();
        let waiter = tokio::spawn({
            let g = g.clone();
            async move { g.enter(LONG).await.map(|_| ()) }
        });
        while g.queued() < 1 {
            tokio::task::yield_now().await;
        }
        g.lift();
        assert_eq!(waiter.await.unwrap(), Err(Refused::Lifted { waited: true }));
        assert_eq!(
            g.enter(LONG).await.map(|_| ()),
            Err(Refused::Lifted { waited: false })
        );
        assert_eq!(g.queued(), 0);
        drop(held);
    }

    #[tokio::test]
    async fn never_more_than_the_cap_and_waiters_go_first_come_first_served() {
        let g = OriginGate::new(2);
        let a = g.enter(LONG).await.unwrap();
        let _b = g.enter(LONG).await.unwrap();
        assert_eq!(g.in_flight(), 2);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut waiters = Vec::new();
        for i in 0..5 {
            let gate = g.clone();
            let tx = tx.clone();
            waiters.push(tokio::spawn(async move {
                let slot = gate.enter(LONG).await.unwrap();
                tx.send(i).unwrap();
                slot
            }));
            // Each waiter in line before the next asks.
            while g.queued() < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(g.queued(), 5);
        drop(a);
        let mut order = vec![rx.recv().await.unwrap()];
        assert_eq!(g.in_flight(), 2, "a released slot goes to the first waiter");
        let mut held = vec![waiters.remove(0).await.unwrap()];
        for _ in 0..4 {
            held.remove(0);
            order.push(rx.recv().await.unwrap());
            held.push(waiters.remove(0).await.unwrap());
            assert!(g.in_flight() <= 2);
        }
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert_eq!(g.queued(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_past_the_timeout_is_refused_and_leaves_the_line() {
        let g = OriginGate::new(1);
        let held = g.enter(LONG).await.unwrap();
        let refused = g.enter(Duration::from_millis(300)).await;
        assert_eq!(refused.unwrap_err(), Refused::TimedOut);
        assert_eq!((g.queued(), g.timed_out()), (0, 1));
        drop(held);
        assert_eq!(g.in_flight(), 0);
        let _again = g.enter(Duration::from_millis(1)).await.unwrap();
    }

    #[tokio::test]
    async fn a_waiter_that_goes_away_keeps_no_slot() {
        let g = OriginGate::new(1);
        let held = g.enter(LONG).await.unwrap();
        let gone = {
            let g = g.clone();
            tokio::spawn(async move { g.enter(LONG).await.map(drop) })
        };
        while g.queued() < 1 {
            tokio::task::yield_now().await;
        }
        gone.abort();
        let _ = gone.await;
        assert_eq!(g.queued(), 0);
        drop(held);
        assert_eq!(g.in_flight(), 0);
        let _next = g.enter(Duration::from_millis(1)).await.unwrap();
    }

    #[tokio::test]
    async fn resizing_raises_at_once_and_lowers_as_requests_finish() {
        let g = OriginGate::new(3);
        let s: Vec<Slot> = futures_enter(&g, 3).await;
        g.resize(1);
        assert_eq!(g.limit(), 1);
        assert_eq!(g.in_flight(), 3, "the ones in flight still count");
        let mut s = s;
        s.pop();
        s.pop();
        assert_eq!(g.in_flight(), 1);
        assert!(
            g.enter(Duration::from_millis(20)).await.is_err(),
            "at the new cap"
        );
        g.resize(4);
        let more = futures_enter(&g, 3).await;
        assert_eq!(g.in_flight(), 4);
        drop(more);
        drop(s);
        assert_eq!(g.in_flight(), 0);
        assert_eq!(futures_enter(&g, 4).await.len(), 4);
    }

    async fn futures_enter(g: &Arc<OriginGate>, n: usize) -> Vec<Slot> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(g.enter(Duration::from_millis(50)).await.unwrap());
        }
        v
    }
}
