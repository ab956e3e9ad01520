//! The line as an admit step saw it, in a few hundred numbers whatever its length: what lets
//! an instance answer a status poll without a store call (see [`crate::line`]).
//!
//! A visitor's *place* is the key that orders the line (FIFO: the offset of the join from the
//! line's epoch; the memory store: its join sequence number) together with the epoch it counts
//! from. A [`LineSample`] holds the place at a set of ranks: every `step`-th one near the head
//! (one tick's batch), then every 1 % — so that interpolating between two neighbours misses the
//! exact rank of any visitor by at most max(step, 1 % of the rank). Both backends sample the same
//! ranks ([`sampled_ranks`]; `lua/admit.lua` repeats the rule).

/// Where a visitor stands in the order of the line: what their ticket carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Place {
    /// What the keys count from; a line that emptied starts a new epoch.
    pub epoch: u64,
    /// Orders the line: lower is nearer the head.
    pub key: u64,
}

/// The line at one admit step: the place at sampled ranks, head first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineSample {
    /// The epoch of every key below (0 with no points).
    pub epoch: u64,
    /// (rank, key): rank 0 is the head (next to be admitted), the last is rank waiting − 1;
    /// both strictly ascending. Empty when nobody waits.
    pub points: Vec<(u64, u64)>,
}

/// Points a sample holds at most, whatever the line's length (a bound for the reply parser).
pub const MAX_POINTS: usize = 4096;

/// Ranks sampled one by one at the head: there, positions are exact.
pub const EXACT_HEAD: u64 = 64;

/// The rank sampled after `rank`: every one of the first [`EXACT_HEAD`], then `step` apart,
/// then 1 % apart further back.
pub fn next_rank(rank: u64, step: u64) -> u64 {
    if rank < EXACT_HEAD {
        return rank + 1;
    }
    rank + step.max(rank / 100).max(1)
}

/// The ranks a sample of a line of `n` holds: 0, then [`next_rank`] onwards, and always n − 1.
pub fn sampled_ranks(n: u64, step: u64) -> impl Iterator<Item = u64> {
    let mut next = (n > 0).then_some(0u64);
    std::iter::from_fn(move || {
        let r = next?;
        next = (r + 1 < n).then(|| next_rank(r, step).min(n - 1));
        Some(r)
    })
    .take(MAX_POINTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_dense_at_the_head_and_few_for_a_million() {
        assert_eq!(sampled_ranks(0, 18).count(), 0);
        assert_eq!(sampled_ranks(1, 18).collect::<Vec<_>>(), vec![0]);
        assert_eq!(sampled_ranks(5, 2).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        let r: Vec<u64> = sampled_ranks(70, 4).collect();
        assert_eq!(r[60..], [60, 61, 62, 63, 64, 68, 69]);
        let million: Vec<u64> = sampled_ranks(1_000_000, 18).collect();
        assert_eq!(million.last(), Some(&999_999));
        assert!(million.len() < 850, "{} points", million.len());
        assert!(sampled_ranks(1_000_000, 1).count() < 1100);
        assert!(sampled_ranks(u64::MAX / 2, 1).count() <= MAX_POINTS);
    }
}
