//! A window's votes without the few networks that could sway it: votes are kept in [`PARTS`]
//! parts by a hash of the client network they came from, and a window is judged on the parts
//! left when those with the most votes one way, and then those with the most the other way,
//! are set aside — the way a judge's highest and lowest marks are.
//!
//! So the few networks with the most slow (or failed) votes cannot make a shop that answers
//! everyone else in time look slow, and the few with the most fast (or answered) votes cannot
//! hide a shop that is slow for everyone else — unless they are most of the window's votes:
//! at least half of them are always kept ([`trimmed`]). Before (found by review), the window was judged
//! on all of its votes once three sources had any slow one: an honest tail (2 % of requests a
//! little over the target, from many visitors) supplied the three, and one network's slow pages
//! drove the rate to `min-rate`; with rooms of different targets on one upstream, a vote was
//! slow over the lowest, and a slower room was not protected at all; and many fast identities
//! of one network held the p90 under the target while the shop was slow for everyone else.

use super::{Tally, BUCKETS};

/// The parts a window's votes are kept in, by a hash of their network.
pub const PARTS: usize = 16;

/// The part votes from client network `network` (a [`super::network_key`]) are kept in.
pub fn part_of(network: u64) -> usize {
    ((network ^ (network >> 29) ^ (network >> 47)) % PARTS as u64) as usize
}

/// The sum of `parts` without the (at most) `drop` parts with the most `high` votes, then the
/// (at most) `drop` parts with the most `low` votes among the rest. Only a part with such
/// votes is set aside, and never one that would leave half of the window's votes or less
/// kept: a few parts holding most of the votes are most of the visitors, not a few networks'
/// doing (found by re-review: with the honest votes in two parts, both were set aside as the
/// slowest, and three identities on three networks of an attacker's, the parts left, hid a
/// shop slow for everyone and cut one fast for everyone). That bound is the only one: a first
/// version also set aside at most `(n - 1) / 2` of `n` parts each way, and of four parts (two
/// honest networks, two of an attacker's) one of the attacker's stayed and cut (re-review).
pub fn trimmed(
    parts: &[Tally],
    drop: usize,
    high: impl Fn(&Tally) -> u64,
    low: impl Fn(&Tally) -> u64,
) -> Tally {
    let mut kept: Vec<&Tally> = parts.iter().filter(|t| t.requests > 0).collect();
    let all: u64 = kept.iter().map(|t| t.requests).sum();
    set_aside(&mut kept, drop, &high, all);
    set_aside(&mut kept, drop, &low, all);
    let mut sum = Tally::default();
    for t in kept {
        sum.add(t);
    }
    sum
}

/// Removes from `kept` the `drop` parts with the most `by` votes (those with some), as long as
/// what is kept holds more than half of `all` the window's votes (at exactly half, the part
/// with the most fast votes of two honest networks went, and a sixth of the votes cut: found
/// by re-review).
fn set_aside(kept: &mut Vec<&Tally>, drop: usize, by: &impl Fn(&Tally) -> u64, all: u64) {
    for _ in 0..drop {
        let most = kept
            .iter()
            .enumerate()
            .filter(|(_, t)| by(t) > 0)
            .max_by_key(|(i, t)| (by(t), std::cmp::Reverse(*i)))
            .map(|(i, _)| i);
        let left: u64 = kept.iter().map(|t| t.requests).sum();
        match most {
            Some(i) if (left - kept[i].requests) * 2 > all => {
                kept.remove(i);
            }
            _ => return,
        }
    }
}

/// The votes of `t` that took longer than `target` (by bucket: those whose bucket's top, what
/// a quantile in it is told as, is over it).
pub fn over(t: &Tally, target: std::time::Duration) -> u64 {
    (0..BUCKETS)
        .filter(|&i| super::bucket_top(i) > target)
        .map(|i| t.buckets[i])
        .sum()
}

/// The votes of `t` timed at most `target` (the rest of its timed votes).
pub fn within(t: &Tally, target: std::time::Duration) -> u64 {
    t.timed() - over(t, target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn part(fast: u64, slow: u64) -> Tally {
        let mut t = Tally {
            requests: fast + slow,
            ..Tally::default()
        };
        t.buckets[super::super::bucket_of(Duration::from_millis(10))] = fast;
        t.buckets[super::super::bucket_of(Duration::from_secs(2))] = slow;
        t
    }

    #[test]
    fn the_parts_with_the_most_either_way_are_set_aside() {
        let target = Duration::from_millis(300);
        let (hi, lo) = (|t: &Tally| over(t, target), |t: &Tally| within(t, target));
        let parts = [
            part(10, 0),
            part(0, 500),
            part(10, 1),
            part(900, 0),
            part(10, 0),
        ];
        let kept = trimmed(&parts, 2, hi, lo);
        // Five parts: two each way at most — but D holds most of the votes (900 of 1,431), and
        // set aside it would leave less than half of them: kept, with A and E.
        assert_eq!(kept.requests, 920, "{kept:?}");
        let kept = trimmed(&parts, 1, hi, lo);
        assert_eq!((kept.requests, over(&kept, target)), (931, 1));
        // Five parts of ten votes: the two with slow votes go, then none (set aside, one more
        // would leave less than half).
        let parts = [
            part(10, 0),
            part(0, 10),
            part(9, 1),
            part(10, 0),
            part(10, 0),
        ];
        let kept = trimmed(&parts, 2, hi, lo);
        assert_eq!((kept.requests, over(&kept, target)), (30, 0), "{kept:?}");
        // Of three parts the slowest goes, then none (10 of 30 would be left); of two, none.
        assert_eq!(trimmed(&parts[..3], 2, hi, lo).requests, 20);
        assert_eq!(trimmed(&parts[..2], 2, hi, lo).requests, 20);
        assert_eq!(trimmed(&parts[1..2], 2, hi, lo).requests, 10);
        // Never less than half of the votes kept: of three parts of 40, 30 and 30 votes, the
        // one with the most slow votes goes (60 left), then none (30 would be left).
        let even = [part(0, 40), part(30, 0), part(25, 5)];
        assert_eq!(trimmed(&even, 1, hi, lo).requests, 60);
        // A part without slow votes is not set aside as the slowest.
        let all_fast = [part(5, 0), part(6, 0), part(7, 0), part(8, 0), part(9, 0)];
        assert_eq!(trimmed(&all_fast, 2, hi, lo).requests, 5 + 6 + 7);
        // Parts without votes are not counted among those left.
        let sparse = [Tally::default(), part(1, 0), Tally::default(), part(0, 1)];
        assert_eq!(trimmed(&sparse, 2, hi, lo).requests, 2);
    }

    #[test]
    fn every_network_has_a_part() {
        let mut seen = [0u32; PARTS];
        for i in 0..4096 {
            seen[part_of(super::super::network_key(&format!(
                "10.{}.{}.0",
                i / 256,
                i % 256
            )))] += 1;
        }
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
    }
}
