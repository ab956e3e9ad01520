//! A visitor's rank from a [`LineSample`]: exact at sampled ranks, interpolated between them.

use crate::store::line::{LineSample, Place};

/// What a sample says about a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimate {
    /// Still in line with about `ahead` visitors before it.
    Ahead(u64),
    /// Behind everyone in the sample: the visitor joined after it was taken, so it knows
    /// nothing of who joined between — at least `ahead` are before them, perhaps many more
    /// (a spike of arrivals within one tick). The place the store gave at joining is the
    /// better answer until a newer sample holds it.
    JoinedAfter(u64),
    /// At or past the head, in another epoch, or the line is empty: the visitor's turn may have
    /// come (or the place was lost). Only the store can tell.
    AskStore,
}

/// The rank of `place` in the line `sample` describes. For a place the sample holds, the
/// estimate misses the exact rank by less than the gap between the two sampled ranks around it
/// (see [`crate::store::line::next_rank`]); a key past the last point is a visitor who joined
/// after the sample was taken ([`Estimate::JoinedAfter`]). Monotone in the key.
pub fn estimate(sample: &LineSample, place: Place) -> Estimate {
    let Some(&(_, head)) = sample.points.first() else {
        return Estimate::AskStore;
    };
    if place.epoch != sample.epoch || place.key <= head {
        return Estimate::AskStore;
    }
    // The last point at or before the key (the head is, so there is one).
    let i = sample
        .points
        .partition_point(|&(_, k)| k <= place.key)
        .saturating_sub(1);
    let (r0, k0) = sample.points[i];
    let Some(&(r1, k1)) = sample.points.get(i + 1) else {
        return if place.key == k0 {
            Estimate::Ahead(r0)
        } else {
            Estimate::JoinedAfter(r0 + 1)
        };
    };
    if place.key == k0 {
        return Estimate::Ahead(r0);
    }
    // k0 < key < k1: between the two ranks, in proportion to the key.
    let span = u128::from(r1 - r0) * u128::from(place.key - k0) / u128::from(k1 - k0);
    Estimate::Ahead(r0 + span as u64)
}

/// The position to show: the estimate's, never more than what this visitor was last shown
/// (their ticket's), so that a position never goes up — also when consecutive polls land on
/// instances whose samples are of different ages.
pub fn shown_position(ahead: u64, last_shown: Option<u64>) -> u64 {
    let position = ahead.saturating_add(1);
    last_shown.map_or(position, |s| s.clamp(1, u64::MAX).min(position))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::line::{sampled_ranks, EXACT_HEAD};
    use proptest::prelude::*;

    fn sample_of(keys: &[u64], step: u64, epoch: u64) -> LineSample {
        LineSample {
            epoch,
            points: sampled_ranks(keys.len() as u64, step)
                .map(|r| (r, keys[r as usize]))
                .collect(),
        }
    }

    fn place(key: u64) -> Place {
        Place { epoch: 7, key }
    }

    #[test]
    fn the_head_and_other_epochs_ask_the_store() {
        let s = sample_of(&[10, 20, 30, 40], 1, 7);
        assert_eq!(estimate(&s, place(10)), Estimate::AskStore, "at the head");
        assert_eq!(estimate(&s, place(5)), Estimate::AskStore, "admitted");
        assert_eq!(
            estimate(&s, Place { epoch: 8, key: 30 }),
            Estimate::AskStore
        );
        assert_eq!(
            estimate(&LineSample::default(), place(30)),
            Estimate::AskStore
        );
        assert_eq!(estimate(&s, place(30)), Estimate::Ahead(2));
        assert_eq!(
            estimate(&s, place(41)),
            Estimate::JoinedAfter(4),
            "joined after"
        );
    }

    #[test]
    fn between_points_the_rank_is_interpolated() {
        // Past the exact head, points at ranks 64, 74, 84, 89 of keys 0, 10, 20, ...
        let keys: Vec<u64> = (0..90).map(|i| i * 10).collect();
        let s = sample_of(&keys, 10, 7);
        assert_eq!(
            s.points[63..],
            [(63, 630), (64, 640), (74, 740), (84, 840), (89, 890)]
        );
        assert_eq!(estimate(&s, place(690)), Estimate::Ahead(69));
        assert_eq!(estimate(&s, place(860)), Estimate::Ahead(86));
        // Keys bunched on one side: the estimate stays between the two sampled ranks.
        let mut bunched: Vec<u64> = (0..80).collect();
        bunched.extend((0..10).map(|i| 1000 + i));
        let s = sample_of(&bunched, 10, 7);
        assert!(matches!(estimate(&s, place(70)), Estimate::Ahead(a) if (64..=74).contains(&a)));
    }

    #[test]
    fn a_position_never_goes_above_the_last_shown() {
        assert_eq!(shown_position(9, None), 10);
        assert_eq!(shown_position(9, Some(4)), 4);
        assert_eq!(shown_position(2, Some(40)), 3);
        assert_eq!(shown_position(2, Some(0)), 1);
    }

    fn line() -> impl Strategy<Value = (Vec<u64>, u64)> {
        // Strictly increasing keys with gaps of any size (clusters and holes), and a step.
        (
            proptest::collection::vec(prop_oneof![1u64..3, 1u64..1000, 1u64..1_000_000], 1..3000),
            1u64..40,
        )
            .prop_map(|(gaps, step)| {
                let mut k = 0u64;
                let keys = gaps
                    .into_iter()
                    .map(|g| {
                        k += g;
                        k
                    })
                    .collect();
                (keys, step)
            })
    }

    proptest! {
        /// Against the exact rank (what ZRANK answers): exact at the head, further back off by
        /// at most max(1 % of it, a step).
        #[test]
        fn the_estimate_is_within_a_step_or_one_percent((keys, step) in line()) {
            let s = sample_of(&keys, step, 7);
            for (rank, &key) in keys.iter().enumerate().skip(1) {
                let rank = rank as u64;
                let Estimate::Ahead(est) = estimate(&s, place(key)) else {
                    panic!("rank {rank}: no estimate");
                };
                let allowed = if rank < EXACT_HEAD { 0 } else { step.max(rank / 100) };
                prop_assert!(est.abs_diff(rank) <= allowed, "rank {rank}: {est} (allowed {allowed})");
            }
        }

        /// A line that moves (the head admitted in batches, some abandon, newcomers behind),
        /// samples taken at each step, and a visitor whose polls land on samples of any age up
        /// to a few steps: the position shown never goes up, and on the newest sample it stays
        /// within the bound of the exact rank.
        #[test]
        fn positions_never_go_up_across_samples_of_any_age(
            (keys, step) in line(),
            moves in proptest::collection::vec((0usize..30, 0usize..5, 0usize..20, 0usize..4), 1..40),
            me in 0usize..3000,
        ) {
            let mut line = keys.clone();
            let me = keys[me % keys.len()];
            let mut next = *keys.last().unwrap_or(&0) + 1;
            let mut samples = vec![sample_of(&line, step, 7)];
            let mut shown: Option<u64> = None;
            // The widest bound this visitor's estimates can have: at their first rank.
            let first = step.max(keys.iter().take_while(|&&k| k < me).count() as u64 / 100);
            for (admit, abandon, join, age) in moves {
                let admit = admit.min(line.len());
                line.drain(..admit);
                for _ in 0..abandon {
                    if line.len() > 1 {
                        let i = (next as usize * 7919) % line.len();
                        if line[i] != me {
                            line.remove(i);
                        }
                    }
                }
                for _ in 0..join {
                    line.push(next);
                    next += 1 + next % 5;
                }
                samples.push(sample_of(&line, step, 7));
                let used = samples.len() - 1 - age.min(samples.len() - 1);
                match estimate(&samples[used], place(me)) {
                    Estimate::AskStore => break,
                    Estimate::JoinedAfter(_) => prop_assert!(false, "a visitor of every sample"),
                    Estimate::Ahead(ahead) => {
                        let position = shown_position(ahead, shown);
                        if let Some(before) = shown {
                            prop_assert!(position <= before, "went up: {before} → {position}");
                        }
                        let exact = line.iter().take_while(|&&k| k < me).count() as u64;
                        if age == 0 {
                            // Never more than the newest sample's bound above the exact rank,
                            // never less than the widest bound below it.
                            prop_assert!(position - 1 <= exact + step.max(exact / 100));
                            prop_assert!(position - 1 + first >= exact, "{position} vs {exact}");
                        }
                        shown = Some(position);
                    }
                }
            }
        }
    }
}
