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
//!
//! And the votes are kept in parts by a hash of their network, so that a window is judged
//! without the few parts with the most votes either way ([`trim`]): counting sources that had
//! any slow or failed vote let an honest tail supply the three, one network's pages then
//! deciding the window (found by review).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::store::autopilot::Health;

mod sources;
pub mod trim;

pub use sources::Sources;
use sources::{pair_key, Recent};
use trim::{part_of, PARTS};

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
/// Fewer sources than this failing in a window is their own doing, not the shop failing,
/// unless no other source voted in it.
pub const MIN_FAILING_SOURCES: u64 = 3;

/// One part's counters ([`trim::PARTS`]: by a hash of the voter's network).
#[derive(Debug)]
struct Part {
    requests: AtomicU64,
    errors: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl Default for Part {
    fn default() -> Self {
        Self {
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Counts since the process started (never reset: each reader keeps its own last reading).
#[derive(Debug)]
pub struct OriginHealth {
    /// The votes, by a hash of the network they came from ([`trim::part_of`]).
    parts: Box<[Part]>,
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
            parts: (0..PARTS).map(|_| Part::default()).collect(),
            votes: (0..VOTE_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            voters: Recent::default(),
            failing: Recent::default(),
            slow: Recent::default(),
            slow_over_us: AtomicU64::new(u64::MAX),
        }
    }
}

/// Votes counted: how many, how many failed, and how long the timed ones took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub requests: u64,
    pub errors: u64,
    pub buckets: [u64; BUCKETS],
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            requests: 0,
            errors: 0,
            buckets: [0; BUCKETS],
        }
    }
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.errors += other.errors;
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
    }

    /// The votes timed (those that had an answer).
    pub fn timed(&self) -> u64 {
        self.buckets.iter().sum()
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

/// A reading of [`OriginHealth`]: a [`Tally`] per part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    pub parts: Vec<Tally>,
}

impl Default for Counts {
    fn default() -> Self {
        Self {
            parts: vec![Tally::default(); PARTS],
        }
    }
}

impl Counts {
    /// Every part's votes together.
    pub fn total(&self) -> Tally {
        let mut sum = Tally::default();
        for t in &self.parts {
            sum.add(t);
        }
        sum
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

    /// One vote of admitted traffic from client network `network` (a [`network_key`]):
    /// `latency` to the response header (`None` when there was none: refused, timed out), and
    /// whether it failed (5xx, timeout, connection).
    pub fn record(&self, network: u64, latency: Option<Duration>, failed: bool) {
        let part = &self.parts[part_of(network)];
        part.requests.fetch_add(1, Ordering::Relaxed);
        if failed {
            part.errors.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(d) = latency {
            part.buckets[bucket_of(d)].fetch_add(1, Ordering::Relaxed);
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
    /// each from a network of their own (at most the 16 pairs seen last).
    pub fn sources(&self, second: u64, within: u64) -> Sources {
        Sources {
            voting: self.voters.sources(second, within),
            failing: self.failing.sources(second, within),
            slow: self.slow.sources(second, within),
        }
    }

    pub fn read(&self) -> Counts {
        Counts {
            parts: self
                .parts
                .iter()
                .map(|p| Tally {
                    requests: p.requests.load(Ordering::Relaxed),
                    errors: p.errors.load(Ordering::Relaxed),
                    buckets: std::array::from_fn(|i| p.buckets[i].load(Ordering::Relaxed)),
                })
                .collect(),
        }
    }
}

fn vote_key(vid: &crate::store::VisitorId) -> u64 {
    let b = vid.as_bytes();
    u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
}

/// A window's health as the autopilot judges it, for a room whose `target-latency` is
/// `target` (`slow_over`: the lowest target on the upstream, over which a vote is noted slow
/// by source).
///
/// Its error share and p90 are those of the window's votes without the two parts with the
/// most failed (slow) votes and the two with the most answered (fast) ones ([`trim`]): a few
/// networks cannot sway them either way. And failures from fewer than [`MIN_FAILING_SOURCES`]
/// sources (or than every source that voted) that are also under half of the sources that
/// voted are discounted; so is a p90 over `target`, the window then judged by its votes that
/// were not slow (one visitor sending from many networks reaches many parts) — or held at the
/// target when the discounted votes are most of those judged. Before (found by review), five
/// admitted visitors of one network asking for a page that took a second, among thirty fast
/// ones, drove the rate from 50 to `min-rate` in 28 s; taken as at the target, such a window
/// held the rate where it stood (re-review); and see [`trim`] for what counting sources alone
/// let through.
pub fn judged(window: &Counts, sources: Sources, target: Duration, slow_over: Duration) -> Health {
    let least = MIN_FAILING_SOURCES.min(sources.voting.max(1));
    let drop = (least - 1) as usize;
    let requests = window.parts.iter().map(|t| t.requests).sum();
    let answered = |t: &Tally| t.requests - t.errors;
    let e = trim::trimmed(&window.parts, drop, |t| t.errors, answered);
    // Fewer than `least` sources are a few only among many: under half of those that voted.
    // Found by re-review: with the honest visitors in two networks, one more network sending
    // fast pages made the two too few, and a shop failing or slow for everyone read as
    // healthy; and counting failures or slowness of most of the votes whatever the sources
    // let one network's identities, asking every second where honest visitors read a page
    // every few, be most of the votes and cut a healthy shop (re-review).
    let few = |n: u64| n < least && (n == 0 || n * 2 < sources.voting);
    let errors = if few(sources.failing) || e.requests == 0 {
        0
    } else {
        // The trimmed share, over every request of the window (how many were judged).
        let share = u128::from(e.errors) * u128::from(requests);
        u64::try_from((share + u128::from(e.requests) / 2) / u128::from(e.requests))
            .unwrap_or(requests)
    };
    let l = trim::trimmed(
        &window.parts,
        drop,
        |t| trim::over(t, target),
        |t| trim::within(t, target),
    );
    let mut p90 = l.quantile(0.9);
    let slow_discounted = p90 > target && few(sources.slow);
    if slow_discounted {
        p90 = l.quantile_up_to(0.9, slow_over).min(target);
    }
    // Discounted votes that are most of those judged leave nothing to judge the shop by: the
    // window is held (at the target: neither a cut nor a raise). Found by re-review: beside
    // one honest network the shop was slow (or failed) for, two identities on two more
    // networks asking for fast pages made its slowness a few sources', the rest of the votes
    // was none, and the window read as fast — the rate rose to its ceiling.
    let most = |part: u64, of: u64| part > 0 && part * 2 >= of;
    if (slow_discounted && most(trim::over(&l, slow_over), l.timed()))
        || (few(sources.failing) && most(e.errors, e.requests))
    {
        p90 = p90.max(target);
    }
    Health {
        requests,
        errors,
        p90,
    }
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
    /// Each tick's counters that moved, as (counter, by how much; eight bytes): a tick's votes
    /// move a few of the parts' counters, and a window may hold thousands of ticks (5m of
    /// 100ms: 3,000).
    ticks: std::collections::VecDeque<Vec<(u16, u32)>>,
    /// The ticks added up.
    sum: Counts,
}

/// The counters of a part: requests, errors, then the buckets.
const PER_PART: usize = BUCKETS + 2;

/// Counter `i` of `counts` ([`PER_PART`] per part).
fn counter(counts: &mut Counts, i: usize) -> &mut u64 {
    let t = &mut counts.parts[i / PER_PART];
    match i % PER_PART {
        0 => &mut t.requests,
        1 => &mut t.errors,
        b => &mut t.buckets[b - 2],
    }
}

impl HealthWindow {
    /// Folds the counters in at a tick and returns the votes of the last `slots` ticks.
    pub fn tick(&mut self, mut now: Counts, slots: usize) -> &Counts {
        let mut moved = Vec::new();
        if let Some(last) = &mut self.last {
            for i in 0..PARTS * PER_PART {
                let (was, is) = (*counter(last, i), *counter(&mut now, i));
                if is > was {
                    moved.push((i as u16, u32::try_from(is - was).unwrap_or(u32::MAX)));
                }
            }
        }
        for &(i, n) in &moved {
            *counter(&mut self.sum, usize::from(i)) += u64::from(n);
        }
        self.last = Some(now);
        self.ticks.push_back(moved);
        while self.ticks.len() > slots.max(1) {
            for (i, n) in self.ticks.pop_front().unwrap_or_default() {
                let c = counter(&mut self.sum, usize::from(i));
                *c = c.saturating_sub(u64::from(n));
            }
        }
        &self.sum
    }
}

#[cfg(test)]
mod tests;
