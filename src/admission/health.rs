//! The origin's health as the autopilot sees it: per upstream, every admitted request's time
//! to the origin's response header and whether it failed, counted in atomics (one relaxed add
//! per counter and request: no allocation, no lock); per room, a window of the last few
//! seconds folded from those counters once per tick.
//!
//! Rooms on one upstream read the same counters: they share the shop's health signal.
//!
//! Each admitted visitor counts once a second at most ([`OriginHealth::vote`]): before (found
//! by review), every request counted, so one admitted visitor sending many requests owned the
//! window — their own 5xx answers cut every room on the upstream to its `min-rate`, and their
//! cheap fast pages raised the rate while orders took five times the target.
//!
//! And a window's failures count only when at least [`MIN_FAILING_VISITORS`] visitors failed in
//! it ([`OriginHealth::failing_visitors`], [`judged`]): before (found by review), one admitted
//! visitor whose own requests the shop answered 500 (a bad cart, a made-up form) among a few
//! dozen healthy ones was an error share over `max-error-rate`, and halved the rate window
//! after window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::store::autopilot::Health;

/// Latency buckets: four per octave from 1 ms (bucket 0: under 1 ms) to about 50 s.
const BUCKETS: usize = 64;
const PER_OCTAVE: f64 = 4.0;

fn bucket_of(d: Duration) -> usize {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        0
    } else {
        ((ms.log2() * PER_OCTAVE).floor() as usize + 1).min(BUCKETS - 1)
    }
}

/// The upper end of bucket `i` (what a quantile in it is reported as: never under the truth
/// by more than a bucket).
fn bucket_top(i: usize) -> Duration {
    if i == 0 {
        Duration::from_millis(1)
    } else {
        Duration::from_secs_f64(2f64.powf(i as f64 / PER_OCTAVE) / 1000.0)
    }
}

/// Visitors' votes: slots by visitor id, each holding the second of its last vote.
const VOTE_SLOTS: usize = 4096;
/// The failing votes remembered, to tell how many visitors failed lately: a visitor votes once
/// a second at most, so one visitor cannot push the others out.
const FAILED_RING: usize = 64;
/// The bits of a failing vote's entry that hold its second (the rest: the visitor's).
const SECOND_BITS: u32 = 24;
const SECOND_MASK: u64 = (1 << SECOND_BITS) - 1;
/// Fewer visitors than this failing in a window is their own doing, not the shop failing.
pub const MIN_FAILING_VISITORS: u64 = 3;

/// Counts since the process started (never reset: each reader keeps its own last reading).
#[derive(Debug)]
pub struct OriginHealth {
    requests: AtomicU64,
    errors: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
    /// The second (on the monotonic clock, plus one: 0 is "never") each slot last voted in. Two
    /// visitors in one slot share its vote: a sample, not a count.
    votes: Box<[AtomicU64]>,
    /// The last failing votes: the visitor's slot key (high bits) and the second plus one
    /// (low [`SECOND_BITS`]); 0 is empty.
    failed: [AtomicU64; FAILED_RING],
    failed_next: AtomicU64,
}

impl Default for OriginHealth {
    fn default() -> Self {
        Self {
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            votes: (0..VOTE_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            failed: std::array::from_fn(|_| AtomicU64::new(0)),
            failed_next: AtomicU64::new(0),
        }
    }
}

/// A reading of [`OriginHealth`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    pub requests: u64,
    pub errors: u64,
    pub buckets: [u64; BUCKETS],
}

impl Default for Counts {
    fn default() -> Self {
        Self {
            requests: 0,
            errors: 0,
            buckets: [0; BUCKETS],
        }
    }
}

impl Counts {
    fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            requests: self.requests.saturating_sub(earlier.requests),
            errors: self.errors.saturating_sub(earlier.errors),
            buckets: std::array::from_fn(|i| self.buckets[i].saturating_sub(earlier.buckets[i])),
        }
    }

    fn add(&mut self, other: &Counts) {
        self.requests += other.requests;
        self.errors += other.errors;
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
    }

    /// The `q` quantile of the latencies counted (zero when none).
    pub fn quantile(&self, q: f64) -> Duration {
        let timed: u64 = self.buckets.iter().sum();
        if timed == 0 {
            return Duration::ZERO;
        }
        let want = ((timed as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return bucket_top(i);
            }
        }
        bucket_top(BUCKETS - 1)
    }
}

impl OriginHealth {
    /// Whether a request of visitor `vid` at monotonic second `second` counts: the first of
    /// that visitor's (slot's) in each second does. One relaxed load, and a compare-exchange
    /// once a second per visitor.
    pub fn vote(&self, vid: &crate::store::VisitorId, second: u64) -> bool {
        let key = vote_key(vid);
        let slot = &self.votes[(key % VOTE_SLOTS as u64) as usize];
        let stamp = second.saturating_add(1);
        let last = slot.load(Ordering::Relaxed);
        last != stamp
            && slot
                .compare_exchange(last, stamp, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// One request of admitted traffic: `latency` to the response header (`None` when there
    /// was none: refused, timed out), and whether it failed (5xx, timeout, connection).
    pub fn record(&self, latency: Option<Duration>, failed: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(d) = latency {
            self.buckets[bucket_of(d)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A vote of visitor `vid` at second `second` that failed (after [`Self::record`]).
    pub fn failed_by(&self, vid: &crate::store::VisitorId, second: u64) {
        let entry = (vote_key(vid) & !SECOND_MASK) | (second.wrapping_add(1) & SECOND_MASK);
        let i = self.failed_next.fetch_add(1, Ordering::Relaxed) as usize % FAILED_RING;
        self.failed[i].store(entry, Ordering::Relaxed);
    }

    /// How many visitors had a failing vote in the `within` seconds up to `second` (at most
    /// [`FAILED_RING`]).
    pub fn failing_visitors(&self, second: u64, within: u64) -> u64 {
        let now = second.wrapping_add(1) & SECOND_MASK;
        let mut seen = [0u64; FAILED_RING];
        let mut n = 0;
        for slot in &self.failed {
            let entry = slot.load(Ordering::Relaxed);
            let age = now.wrapping_sub(entry & SECOND_MASK) & SECOND_MASK;
            let key = entry & !SECOND_MASK;
            if entry == 0 || age >= within || seen[..n].contains(&key) {
                continue;
            }
            seen[n] = key;
            n += 1;
        }
        n as u64
    }

    pub fn read(&self) -> Counts {
        Counts {
            requests: self.requests.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
        }
    }
}

fn vote_key(vid: &crate::store::VisitorId) -> u64 {
    let b = vid.as_bytes();
    u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
}

/// A window's health as the autopilot judges it: its failures count only when at least
/// [`MIN_FAILING_VISITORS`] visitors failed in it.
pub fn judged(mut health: Health, failing_visitors: u64) -> Health {
    if failing_visitors < MIN_FAILING_VISITORS {
        health.errors = 0;
    }
    health
}

/// A room's view of its upstream's health over the last window: one slot per tick.
#[derive(Debug, Default)]
pub struct HealthWindow {
    last: Option<Counts>,
    ticks: std::collections::VecDeque<Counts>,
}

impl HealthWindow {
    /// Folds the counters in at a tick and returns the health of the last `slots` ticks.
    pub fn tick(&mut self, now: Counts, slots: usize) -> Health {
        let delta = match &self.last {
            Some(last) => now.since(last),
            None => Counts::default(),
        };
        self.last = Some(now);
        self.ticks.push_back(delta);
        while self.ticks.len() > slots.max(1) {
            self.ticks.pop_front();
        }
        let mut sum = Counts::default();
        for t in &self.ticks {
            sum.add(t);
        }
        Health {
            requests: sum.requests,
            errors: sum.errors,
            p90: sum.quantile(0.9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_visitor_votes_once_a_second() {
        let h = OriginHealth::default();
        let (a, b) = (
            crate::store::VisitorId::random(),
            crate::store::VisitorId::random(),
        );
        assert!(h.vote(&a, 7));
        assert!(!h.vote(&a, 7), "a second request in the same second");
        assert!(h.vote(&b, 7) || b.as_bytes()[8..] == a.as_bytes()[8..]);
        assert!(h.vote(&a, 8), "the next second");
        assert!(
            h.vote(&a, 0) && !h.vote(&a, 0),
            "second 0 is a second like any"
        );
    }

    #[test]
    fn failing_visitors_are_told_apart_within_their_window() {
        let h = OriginHealth::default();
        let vids: Vec<_> = (0..4).map(|_| crate::store::VisitorId::random()).collect();
        assert_eq!(h.failing_visitors(100, 2), 0);
        // One visitor failing every second is one visitor, however long it goes on.
        for s in 90..=100 {
            h.failed_by(&vids[0], s);
        }
        assert_eq!(h.failing_visitors(100, 2), 1);
        h.failed_by(&vids[1], 99);
        h.failed_by(&vids[2], 97);
        assert_eq!(h.failing_visitors(100, 2), 2, "the third failed 3 s ago");
        assert_eq!(h.failing_visitors(100, 4), 3);
        assert_eq!(h.failing_visitors(103, 2), 0, "all of them long ago");
        // The second wraps in the entry: ages stay right across it.
        let wrap = SECOND_MASK - 1;
        h.failed_by(&vids[3], wrap);
        assert_eq!(h.failing_visitors(wrap + 1, 2), 1);
        // A ring full of one visitor's votes still holds another's after it.
        for s in 200..200 + FAILED_RING as u64 {
            h.failed_by(&vids[0], s);
        }
        h.failed_by(&vids[1], 263);
        assert_eq!(h.failing_visitors(263, 2), 2);
    }

    #[test]
    fn failures_count_from_the_third_visitor() {
        let health = Health {
            requests: 40,
            errors: 8,
            p90: Duration::from_millis(5),
        };
        assert_eq!(judged(health, 2).errors, 0);
        assert_eq!(judged(health, MIN_FAILING_VISITORS).errors, 8);
        assert_eq!(judged(health, 2).requests, 40, "the requests still count");
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn buckets_cover_the_range_in_order() {
        assert_eq!(bucket_of(Duration::from_micros(300)), 0);
        let mut last = 0;
        for n in [
            1, 2, 3, 5, 10, 50, 100, 200, 800, 1000, 5000, 60_000, 600_000,
        ] {
            let b = bucket_of(ms(n));
            assert!(b >= last, "{n}");
            assert!(bucket_top(b) >= ms(n) || b == BUCKETS - 1, "{n}");
            assert!(
                b == 0 || bucket_top(b) <= ms(n).mul_f64(1.19) + ms(1),
                "{n}"
            );
            last = b;
        }
    }

    #[test]
    fn the_p90_is_of_the_last_window_only() {
        let h = OriginHealth::default();
        let mut w = HealthWindow::default();
        w.tick(h.read(), 3);
        for _ in 0..90 {
            h.record(Some(ms(100)), false);
        }
        for _ in 0..10 {
            h.record(Some(ms(2000)), true);
        }
        let got = w.tick(h.read(), 3);
        assert_eq!((got.requests, got.errors), (100, 10));
        assert!(got.p90 >= ms(100) && got.p90 < ms(120), "{:?}", got.p90);
        h.record(None, true);
        let got = w.tick(h.read(), 3);
        assert_eq!((got.requests, got.errors), (101, 11));
        // Two more quiet ticks: the busy one has left the window of three.
        w.tick(h.read(), 3);
        let got = w.tick(h.read(), 3);
        assert_eq!((got.requests, got.errors, got.p90), (1, 1, Duration::ZERO));
    }
}
