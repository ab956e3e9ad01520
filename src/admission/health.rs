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
//! And a window's failures count only when they come from at least [`MIN_FAILING_SOURCES`]
//! sources, or from every source that voted in it when fewer did ([`OriginHealth::sources`],
//! [`judged`]). A source is a visitor from a client network of their own (the address
//! `join-limit` counts by): the window keeps the (visitor, network) pairs of its votes and
//! counts a maximum matching of them, so one visitor from many networks, and many visitors from
//! one network, are one source each. Before (found by review), one admitted visitor whose own
//! requests the shop answered 500 (a bad cart, a made-up form) among a few dozen healthy ones
//! was an error share over `max-error-rate`, and halved the rate window after window; counted
//! by visitor, a client without cookies minted a new visitor with each request that walked in;
//! counted by network, one admission sent from three addresses in turn was three (re-reviews).
//! A shop failing for everyone fails for every source that votes.

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
/// (Visitor, network) pairs remembered, each with the second it last voted (or failed) in.
const RECENT: usize = 16;
/// The bits of an entry that hold its second (the rest: the network's).
const SECOND_BITS: u32 = 24;
const SECOND_MASK: u64 = (1 << SECOND_BITS) - 1;
/// Fewer sources than this failing in a window is their own doing, not the shop failing,
/// unless no other source voted in it.
pub const MIN_FAILING_SOURCES: u64 = 3;

/// Distinct keys seen lately, each with the second it was last seen in: a key seen again
/// refreshes its own entry and a new one takes the oldest, so one key never pushes others out.
#[derive(Debug, Default)]
struct Recent {
    /// The key's high bits and the second plus one (low [`SECOND_BITS`]); 0 is empty.
    slots: [AtomicU64; RECENT],
}

impl Recent {
    fn note(&self, key: u64, second: u64) {
        let tag = key & !SECOND_MASK;
        debug_assert_eq!(key & SECOND_MASK, 0);
        let stamp = second.wrapping_add(1) & SECOND_MASK;
        let now = stamp;
        let mut oldest = (0, 0);
        for (i, slot) in self.slots.iter().enumerate() {
            let e = slot.load(Ordering::Relaxed);
            if e != 0 && e & !SECOND_MASK == tag {
                slot.store(tag | stamp, Ordering::Relaxed);
                return;
            }
            let age = if e == 0 {
                u64::MAX
            } else {
                now.wrapping_sub(e & SECOND_MASK) & SECOND_MASK
            };
            if age >= oldest.1 {
                oldest = (i, age);
            }
        }
        self.slots[oldest.0].store(tag | stamp, Ordering::Relaxed);
    }

    /// The (visitor, network) pairs seen in the `within` seconds up to `second`.
    fn pairs(&self, second: u64, within: u64) -> Vec<(u64, u64)> {
        let now = second.wrapping_add(1) & SECOND_MASK;
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(RECENT);
        for slot in &self.slots {
            let e = slot.load(Ordering::Relaxed);
            let age = now.wrapping_sub(e & SECOND_MASK) & SECOND_MASK;
            let pair = (e >> PAIR_SHIFT, (e >> SECOND_BITS) & PAIR_MASK);
            if e == 0 || age >= within || out.contains(&pair) {
                continue;
            }
            out.push(pair);
        }
        out
    }

    /// How many of the visitors seen lately can each be given a network of their own (a
    /// maximum matching of the pairs seen): one visitor from many networks, or many visitors
    /// from one network, is one source.
    fn sources(&self, second: u64, within: u64) -> u64 {
        matching(&self.pairs(second, within))
    }
}

/// The bits of a visitor's and of a network's hash in an entry: a pair is the two, above the
/// second.
const PAIR_BITS: u32 = 20;
const PAIR_MASK: u64 = (1 << PAIR_BITS) - 1;
const PAIR_SHIFT: u32 = SECOND_BITS + PAIR_BITS;

/// An entry's key for visitor `vid` from network `network` (both hashes).
fn pair_key(vid: u64, network: u64) -> u64 {
    ((vid & PAIR_MASK) << PAIR_SHIFT) | ((network & PAIR_MASK) << SECOND_BITS)
}

/// The size of a maximum matching of `pairs` (visitor, network): augmenting paths, for the few
/// pairs a window keeps.
fn matching(pairs: &[(u64, u64)]) -> u64 {
    fn augment(
        v: u64,
        pairs: &[(u64, u64)],
        matched: &mut Vec<(u64, u64)>,
        seen: &mut Vec<u64>,
    ) -> bool {
        for &(_, n) in pairs.iter().filter(|(pv, _)| *pv == v) {
            if seen.contains(&n) {
                continue;
            }
            seen.push(n);
            match matched.iter().position(|(mn, _)| *mn == n) {
                None => {
                    matched.push((n, v));
                    return true;
                }
                Some(i) => {
                    let other = matched[i].1;
                    if augment(other, pairs, matched, seen) {
                        matched[i].1 = v;
                        return true;
                    }
                }
            }
        }
        false
    }
    let mut visitors: Vec<u64> = pairs.iter().map(|(v, _)| *v).collect();
    visitors.sort_unstable();
    visitors.dedup();
    let mut matched = Vec::new();
    let mut size = 0;
    for v in visitors {
        if augment(v, pairs, &mut matched, &mut Vec::new()) {
            size += 1;
        }
    }
    size
}

/// The sources of a window's votes (visitors each from a network of their own): how many
/// voted, how many failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources {
    pub voting: u64,
    pub failing: u64,
    /// Those whose votes took longer than the lowest `target-latency` of the upstream's rooms.
    pub slow: u64,
}

/// Counts since the process started (never reset: each reader keeps its own last reading).
#[derive(Debug)]
pub struct OriginHealth {
    requests: AtomicU64,
    errors: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
    /// The second (on the monotonic clock, plus one: 0 is "never") each slot last voted in. Two
    /// visitors in one slot share its vote: a sample, not a count.
    votes: Box<[AtomicU64]>,
    /// The client networks that voted lately, those whose votes failed, and those whose votes
    /// took longer than `slow_over_us`.
    voters: Recent,
    failing: Recent,
    slow: Recent,
    /// The lowest `target-latency` of the autopilots watching this upstream, in µs (a reload
    /// sets it; `u64::MAX`: none).
    slow_over_us: AtomicU64,
}

impl Default for OriginHealth {
    fn default() -> Self {
        Self {
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            votes: (0..VOTE_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            voters: Recent::default(),
            failing: Recent::default(),
            slow: Recent::default(),
            slow_over_us: AtomicU64::new(u64::MAX),
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
        quantile_of(q, &self.buckets)
    }

    /// The `q` quantile of the latencies counted up to `most` (their bucket's), zero when none.
    pub fn quantile_up_to(&self, q: f64, most: Duration) -> Duration {
        let last = bucket_of(most);
        let mut kept = self.buckets;
        kept.iter_mut().skip(last + 1).for_each(|n| *n = 0);
        quantile_of(q, &kept)
    }
}

/// The `q` quantile of the latencies in `buckets` (zero when none).
fn quantile_of(q: f64, buckets: &[u64; BUCKETS]) -> Duration {
    let timed: u64 = buckets.iter().sum();
    if timed == 0 {
        return Duration::ZERO;
    }
    let want = ((timed as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in buckets.iter().enumerate() {
        seen += n;
        if seen >= want {
            return bucket_top(i);
        }
    }
    bucket_top(BUCKETS - 1)
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

    /// A vote of visitor `vid` from client network `network` (a hash of the address
    /// `join-limit` counts by) at second `second` (after [`Self::record`]), and whether it
    /// failed.
    /// `latency` as for [`Self::record`].
    pub fn voted_from(
        &self,
        vid: &crate::store::VisitorId,
        network: u64,
        second: u64,
        (failed, latency): (bool, Option<Duration>),
    ) {
        let key = pair_key(vote_key(vid), network);
        self.voters.note(key, second);
        if failed {
            self.failing.note(key, second);
        }
        let over = self.slow_over_us.load(Ordering::Relaxed);
        if latency.is_some_and(|d| d.as_micros() > u128::from(over)) {
            self.slow.note(key, second);
        }
    }

    /// The latency over which a vote is slow ([`Self::set_slow_over`]).
    pub fn slow_over(&self) -> Duration {
        Duration::from_micros(self.slow_over_us.load(Ordering::Relaxed))
    }

    /// The latency over which a vote is slow: the lowest `target-latency` of the rooms whose
    /// autopilots watch this upstream.
    pub fn set_slow_over(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.slow_over_us.store(us, Ordering::Relaxed);
    }

    /// The sources that voted, and failed, in the `within` seconds up to `second`: visitors
    /// each from a network of their own (at most [`RECENT`]).
    pub fn sources(&self, second: u64, within: u64) -> Sources {
        Sources {
            voting: self.voters.sources(second, within),
            failing: self.failing.sources(second, within),
            slow: self.slow.sources(second, within),
        }
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

/// A window's health as the autopilot judges it: its failures count only when they come from
/// at least [`MIN_FAILING_SOURCES`] sources, or from every source that voted when fewer did;
/// and so does a p90 over `target` (the room's `target-latency`): slowness fewer sources saw
/// is theirs, not the shop's, and the window is judged by the rest of its votes (`rest_p90`:
/// the p90 of the votes that were not slow, see [`HealthWindow::p90_not_slow`]). Before
/// (found by review), five admitted visitors of one network asking for a page that took a
/// second, among thirty fast ones, drove the rate from 50 to `min-rate` in 28 s; and taken as
/// at the target, such a window held the rate where it stood (re-review).
pub fn judged(
    mut health: Health,
    sources: Sources,
    target: Duration,
    rest_p90: Duration,
) -> Health {
    let least = MIN_FAILING_SOURCES.min(sources.voting.max(1));
    if sources.failing < least {
        health.errors = 0;
    }
    if health.p90 > target && sources.slow < least {
        health.p90 = rest_p90.min(target);
    }
    health
}

/// The key a client network is told apart by: a hash of `join-limit`'s key for it.
pub fn network_key(client: &str) -> u64 {
    // FNV-1a: stable, and the key is no secret (only told apart from others).
    client.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A room's view of its upstream's health over the last window: one slot per tick.
#[derive(Debug, Default)]
pub struct HealthWindow {
    last: Option<Counts>,
    ticks: std::collections::VecDeque<Counts>,
    /// The ticks added up, as the last [`Self::tick`] left them.
    sum: Counts,
}

impl HealthWindow {
    /// The p90 of the window's votes that were not slow (up to `slow_over`): what the window
    /// says of the shop when its slow votes came from too few sources ([`judged`]).
    pub fn p90_not_slow(&self, slow_over: Duration) -> Duration {
        self.sum.quantile_up_to(0.9, slow_over)
    }

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
        let health = Health {
            requests: sum.requests,
            errors: sum.errors,
            p90: sum.quantile(0.9),
        };
        self.sum = sum;
        health
    }
}

#[cfg(test)]
mod tests;
