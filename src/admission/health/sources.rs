//! Who voted lately: a few (visitor, network) pairs in atomics, and how many sources they
//! are — visitors each from a client network of their own (a maximum matching of the pairs),
//! so one visitor from many networks, and many visitors from one network, are one source each.

use std::sync::atomic::{AtomicU64, Ordering};

/// (Visitor, network) pairs remembered, each with the second it last voted (or failed) in.
pub(super) const RECENT: usize = 16;
/// The bits of an entry that hold its second (the rest: the pair's).
pub(super) const SECOND_BITS: u32 = 24;
pub(super) const SECOND_MASK: u64 = (1 << SECOND_BITS) - 1;
/// How much older than its age an entry sharing its visitor or its network with another is
/// taken to be when a new pair needs a place: such pairs go first (they add no source while
/// their twin stays), unless an entry is this much older than them.
const TWIN_AGE: u64 = 60;

/// Distinct pairs seen lately, each with the second it was last seen in: a pair seen again
/// refreshes its own entry, and a new one takes the place of an entry that shares its visitor
/// or its network with another (the oldest such), else of the oldest. So one pair never pushes
/// others out, and neither do many pairs of one network or of one visitor: before (found by
/// review), the new took the oldest, and forty failing identities of one network sent at once
/// filled the table and pushed every other source out of it.
#[derive(Debug, Default)]
pub(super) struct Recent {
    /// The pair (high bits) and the second plus one (low [`SECOND_BITS`]); 0 is empty.
    slots: [AtomicU64; RECENT],
}

impl Recent {
    pub(super) fn note(&self, key: u64, second: u64) {
        let tag = key & !SECOND_MASK;
        debug_assert_eq!(key & SECOND_MASK, 0);
        let now = second.wrapping_add(1) & SECOND_MASK;
        let entries: [u64; RECENT] = std::array::from_fn(|i| self.slots[i].load(Ordering::Relaxed));
        if let Some(i) = entries
            .iter()
            .position(|&e| e != 0 && e & !SECOND_MASK == tag)
        {
            self.slots[i].store(tag | now, Ordering::Relaxed);
            return;
        }
        let score = |i: usize| {
            let e = entries[i];
            if e == 0 {
                return u64::MAX;
            }
            let age = now.wrapping_sub(e & SECOND_MASK) & SECOND_MASK;
            let (v, n) = split(e);
            let twin = entries.iter().enumerate().any(|(j, &o)| {
                let (ov, on) = split(o);
                j != i && o != 0 && (ov == v || on == n)
            });
            age + if twin { TWIN_AGE } else { 0 }
        };
        let take = (0..RECENT).max_by_key(|&i| score(i)).unwrap_or(0);
        self.slots[take].store(tag | now, Ordering::Relaxed);
    }

    /// The (visitor, network) pairs seen in the `within` seconds up to `second`.
    pub(super) fn pairs(&self, second: u64, within: u64) -> Vec<(u64, u64)> {
        let now = second.wrapping_add(1) & SECOND_MASK;
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(RECENT);
        for slot in &self.slots {
            let e = slot.load(Ordering::Relaxed);
            let age = now.wrapping_sub(e & SECOND_MASK) & SECOND_MASK;
            let pair = split(e);
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
    pub(super) fn sources(&self, second: u64, within: u64) -> u64 {
        matching(&self.pairs(second, within))
    }
}

/// The bits of a visitor's and of a network's hash in an entry: a pair is the two, above the
/// second.
const PAIR_BITS: u32 = 20;
const PAIR_MASK: u64 = (1 << PAIR_BITS) - 1;
const PAIR_SHIFT: u32 = SECOND_BITS + PAIR_BITS;

/// An entry's key for visitor `vid` from network `network` (both hashes).
pub(super) fn pair_key(vid: u64, network: u64) -> u64 {
    ((vid & PAIR_MASK) << PAIR_SHIFT) | ((network & PAIR_MASK) << SECOND_BITS)
}

/// An entry's (visitor, network).
fn split(e: u64) -> (u64, u64) {
    (e >> PAIR_SHIFT, (e >> SECOND_BITS) & PAIR_MASK)
}

/// The size of a maximum matching of `pairs` (visitor, network): augmenting paths, for the few
/// pairs a window keeps.
pub(super) fn matching(pairs: &[(u64, u64)]) -> u64 {
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
