//! A circuit breaker around the store: after `threshold` consecutive failures (errors or
//! timeouts) it opens, and every call fails at once for `cooldown` — no request waits on a dead
//! Redis. Then one call is let through as a probe (half-open): success closes the breaker,
//! failure opens it for another cooldown.
//!
//! Lock-free: a few atomics, read on every store call.
//!
//! A probe's [`Permit`] is a guard: a probe call dropped before it records a result (the
//! admission loop's tasks are aborted on reload, a client disconnect drops its request future)
//! gives the probe slot back when the permit is dropped. Otherwise the breaker would stay
//! half-open with a probe "out" forever, and no store call would be made until a restart.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::{micros, Micros};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half-open",
        }
    }
}

/// A change of state worth logging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Opened,
    Reopened,
    Closed,
}

/// Permission to call the store; hand it back with [`Breaker::record`]. Not `Clone`: one
/// permit, one result. Dropped without a result, a probe permit frees the probe slot so the
/// next call may probe (a dropped call says nothing about the store, so it counts as nothing).
#[derive(Debug)]
pub struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
}

impl Permit<'_> {
    pub fn is_probe(&self) -> bool {
        self.probe
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.probe {
            // `record` clears `probe` before the permit drops, so this runs only for a probe
            // that never reported.
            self.breaker.probing.store(false, Ordering::Release);
        }
    }
}

#[derive(Debug)]
pub struct Breaker {
    threshold: u32,
    cooldown: Micros,
    failures: AtomicU32,
    /// 0 while closed; otherwise when the next probe may go.
    open_until: AtomicU64,
    probing: AtomicBool,
    /// Woken when the breaker closes: the store answers again. A confirm owed through the
    /// outage is tried at once then, not after its backoff (`settle_later`; found by review
    /// r97b: under `open`, a copy of the cookie ordered again through another instance in the
    /// second before the owed confirm landed).
    pub closed: tokio::sync::Notify,
}

impl Breaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold: threshold.max(1),
            cooldown: micros(cooldown),
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            closed: tokio::sync::Notify::new(),
        }
    }

    pub fn state(&self, now: Micros) -> BreakerState {
        match self.open_until.load(Ordering::Acquire) {
            0 => BreakerState::Closed,
            until if now < until => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }

    /// `None`: fail fast, the breaker is open (or a probe is already out).
    pub fn permit(&self, now: Micros) -> Option<Permit<'_>> {
        match self.state(now) {
            BreakerState::Closed => Some(Permit {
                breaker: self,
                probe: false,
            }),
            BreakerState::Open => None,
            BreakerState::HalfOpen => self
                .probing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .ok()
                .map(|_| Permit {
                    breaker: self,
                    probe: true,
                }),
        }
    }

    /// Records the outcome of a permitted call.
    pub fn record(&self, mut permit: Permit<'_>, now: Micros, ok: bool) -> Option<Transition> {
        // The probe slot is released below, in order with the new state; the guard must not
        // release it again after a new probe has taken it.
        let probe = std::mem::replace(&mut permit.probe, false);
        drop(permit);
        if ok {
            self.failures.store(0, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            let closed = self.open_until.swap(0, Ordering::AcqRel) != 0;
            if closed {
                self.closed.notify_waiters();
            }
            return closed.then_some(Transition::Closed);
        }
        if probe {
            self.open_until
                .store(now + self.cooldown, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            return Some(Transition::Reopened);
        }
        let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        if failures >= self.threshold
            && self
                .open_until
                .compare_exchange(0, now + self.cooldown, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Some(Transition::Opened);
        }
        None
    }
}

/// One breaker per room: a room's keys live in one slot, so on a Redis Cluster the outage of
/// one node is the outage of the rooms on it, not of every room (found by review: with one
/// breaker for the process, a frozen master put every room on its `on-store-error` policy,
/// and the other way round, a busy healthy room's answers kept the frozen room's breaker from
/// ever opening, so its requests each waited out the timeout). On one Redis every room's
/// breaker opens with it, each after its own `breaker-failures`. Made on first use and kept by
/// name: a reload keeps a room's.
#[derive(Debug)]
pub struct Breakers {
    threshold: u32,
    cooldown: Duration,
    rooms: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<Breaker>>>,
}

impl Breakers {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold,
            cooldown,
            rooms: Default::default(),
        }
    }

    /// The breaker of the room named `room`.
    pub fn of(&self, room: &str) -> std::sync::Arc<Breaker> {
        let mut rooms = self.rooms.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = rooms.get(room) {
            return b.clone();
        }
        let b = std::sync::Arc::new(Breaker::new(self.threshold, self.cooldown));
        rooms.insert(room.to_string(), b.clone());
        b
    }

    /// The least healthy state among the breakers of `rooms` (open, then half open, then
    /// closed; closed for none).
    pub fn worst<'a>(&self, rooms: impl IntoIterator<Item = &'a str>, now: Micros) -> BreakerState {
        let rank = |s: BreakerState| match s {
            BreakerState::Closed => 0,
            BreakerState::HalfOpen => 1,
            BreakerState::Open => 2,
        };
        rooms
            .into_iter()
            .map(|r| self.of(r).state(now))
            .max_by_key(|s| rank(*s))
            .unwrap_or(BreakerState::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    #[test]
    fn opens_after_consecutive_failures_probes_and_closes() {
        let b = Breaker::new(3, Duration::from_secs(1));
        let t = 10 * S;
        for i in 0..2 {
            let p = b.permit(t).unwrap();
            assert_eq!(b.record(p, t, false), None, "failure {i}");
        }
        // A success in between resets the count.
        let p = b.permit(t).unwrap();
        b.record(p, t, true);
        for _ in 0..2 {
            let p = b.permit(t).unwrap();
            b.record(p, t, false);
        }
        let p = b.permit(t).unwrap();
        assert_eq!(b.record(p, t, false), Some(Transition::Opened));
        assert_eq!(b.state(t), BreakerState::Open);
        assert!(b.permit(t + S / 2).is_none(), "fails fast while open");
        // Half-open: exactly one probe.
        let probe = b.permit(t + S).unwrap();
        assert!(b.permit(t + S).is_none());
        assert_eq!(b.record(probe, t + S, false), Some(Transition::Reopened));
        assert!(b.permit(t + S + S / 2).is_none());
        let probe = b.permit(t + 2 * S).unwrap();
        assert_eq!(b.record(probe, t + 2 * S, true), Some(Transition::Closed));
        assert_eq!(b.state(t + 2 * S), BreakerState::Closed);
        assert!(b.permit(t + 2 * S).is_some());
    }

    /// Whoever waits for the store to answer again is woken when the breaker closes, not by a
    /// success while it was closed (r97b: the confirm owed through an outage waited out its
    /// backoff).
    #[test]
    fn closing_wakes_the_waiters() {
        use std::future::Future;
        let t = 10 * S;
        let b = opened(t);
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let back = b.closed.notified();
        let mut back = std::pin::pin!(back);
        back.as_mut().enable();
        assert!(back.as_mut().poll(&mut cx).is_pending());
        let probe = b.permit(t + S).unwrap();
        assert_eq!(b.record(probe, t + S, true), Some(Transition::Closed));
        assert!(back.as_mut().poll(&mut cx).is_ready(), "woken");
        let later = b.closed.notified();
        let mut later = std::pin::pin!(later);
        later.as_mut().enable();
        let p = b.permit(t + S).unwrap();
        assert_eq!(b.record(p, t + S, true), None);
        assert!(
            later.as_mut().poll(&mut cx).is_pending(),
            "no closing, no wake"
        );
    }

    fn opened(t: Micros) -> Breaker {
        let b = Breaker::new(1, Duration::from_secs(1));
        let p = b.permit(t).unwrap();
        assert_eq!(b.record(p, t, false), Some(Transition::Opened));
        b
    }

    #[test]
    fn a_probe_dropped_without_a_result_lets_the_next_probe_through() {
        let t = 10 * S;
        let b = opened(t);
        let probe = b.permit(t + S).unwrap();
        assert!(probe.is_probe());
        assert!(b.permit(t + S).is_none(), "one probe at a time");
        drop(probe);
        let next = b
            .permit(t + S)
            .expect("the dropped probe gave its slot back");
        assert!(next.is_probe());
        assert_eq!(b.record(next, t + S, true), Some(Transition::Closed));
        assert_eq!(b.state(t + S), BreakerState::Closed);
    }

    #[test]
    fn a_recorded_probe_does_not_free_a_later_probe_slot() {
        let t = 10 * S;
        let b = opened(t);
        let probe = b.permit(t + S).unwrap();
        assert_eq!(b.record(probe, t + S, false), Some(Transition::Reopened));
        let second = b.permit(t + 2 * S).unwrap();
        assert!(second.is_probe());
        assert!(b.permit(t + 2 * S).is_none(), "the second probe is out");
        drop(second);
        assert!(b.permit(t + 2 * S).is_some());
    }

    #[test]
    fn a_dropped_ordinary_permit_changes_nothing() {
        let b = Breaker::new(1, Duration::from_secs(1));
        let p = b.permit(S).unwrap();
        assert!(!p.is_probe());
        drop(p);
        assert_eq!(b.state(S), BreakerState::Closed);
        assert_eq!(b.failures.load(Ordering::Acquire), 0);
    }
}
