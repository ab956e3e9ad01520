//! The numbers of the report, as pure functions over what the run recorded: percentiles, FIFO
//! inversions, the largest admission burst in 100 ms, the steady admission rate while a queue
//! existed, and the 100 ms timeline. All times are microseconds since the run started.

use std::collections::VecDeque;

/// Width of one timeline bucket.
pub const BUCKET_US: u64 = 100_000;

/// The bucket a time falls in: bucket `i` covers `[i * 100 ms, (i + 1) * 100 ms)`.
pub fn bucket_of(t_us: u64) -> usize {
    (t_us / BUCKET_US) as usize
}

/// Buckets needed to cover `[0, end_us]`.
pub fn buckets_for(end_us: u64) -> usize {
    bucket_of(end_us) + 1
}

/// Nearest-rank percentile (`p` in 0..=100) of sorted values: the smallest value with at least
/// `p` percent of the values at or below it (the `ceil(p / 100 * n)`-th, at least the first).
/// `None` for no values.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Count, p50, p99 and max of a set of latencies (µs), in milliseconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatencySummary {
    pub count: usize,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

pub fn summarize(mut us: Vec<u64>) -> LatencySummary {
    us.sort_unstable();
    let ms = |v: Option<u64>| v.map(|v| v as f64 / 1000.0);
    LatencySummary {
        count: us.len(),
        p50: ms(percentile(&us, 50.0)),
        p99: ms(percentile(&us, 99.0)),
        max: ms(us.last().copied()),
    }
}

/// One browser that waited in line (it got the waiting page or a waiting status at least once).
#[derive(Debug, Clone, Copy)]
pub struct Waited {
    /// Send time of its first request answered by the waiting page or a waiting status.
    pub join_sent: u64,
    /// Arrival time of that answer.
    pub join_done: u64,
    /// When it was first seen admitted; `None` if never.
    pub admitted_done: Option<u64>,
    /// Send time of the last request of its that was still answered "waiting".
    pub last_waiting_sent: u64,
}

/// How many waiting browsers A were overtaken: some B joined strictly after A had joined
/// (`B.join_sent > A.join_done`) and was seen admitted before A sent a request that was still
/// answered waiting (`B.admitted_done < A.last_waiting_sent`). O(n log n): sort by join_sent,
/// suffix minimum of admitted_done, binary search for the first B that joined after A.
pub fn fifo_inversions(waited: &[Waited]) -> usize {
    let mut by_join: Vec<&Waited> = waited.iter().collect();
    by_join.sort_by_key(|w| w.join_sent);
    let mut suffix_min = vec![u64::MAX; by_join.len() + 1];
    for i in (0..by_join.len()).rev() {
        suffix_min[i] = suffix_min[i + 1].min(by_join[i].admitted_done.unwrap_or(u64::MAX));
    }
    waited
        .iter()
        .filter(|a| {
            let first_later = by_join.partition_point(|b| b.join_sent <= a.join_done);
            suffix_min[first_later] < a.last_waiting_sent
        })
        .count()
}

/// One reading of the admin API. `sent`/`done` bracket the moment the figures were read.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Sample {
    pub sent_us: u64,
    pub done_us: u64,
    pub waiting: Option<u64>,
    pub active: Option<u64>,
    pub admitted_total: Option<u64>,
}

impl Sample {
    /// The time the sample stands for: the middle of its request.
    pub fn mid_us(&self) -> u64 {
        self.sent_us + (self.done_us.saturating_sub(self.sent_us)) / 2
    }
}

/// The largest increase of `admitted_total` between two samples A (earlier) and B (later) with
/// `B.done - A.sent <= window_us`, so the pair certainly spans at most the window. Returns the
/// increase and B's mid time. `None` with fewer than two usable samples.
pub fn max_increase_within(samples: &[Sample], window_us: u64) -> Option<(u64, u64)> {
    let s: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.admitted_total.is_some())
        .collect();
    if s.len() < 2 {
        return None;
    }
    let v = |i: usize| s[i].admitted_total.unwrap_or(0);
    // For each B (index j), the minimum admitted_total over the A's with done_B - sent_A <= window.
    // Sampling is sequential, so sent times increase with the index: the valid A's form a window
    // [lo, j) that slides forward; a monotonic deque keeps its minimum.
    let mut best: Option<(u64, u64)> = None;
    let mut lo = 0usize;
    let mut deque: VecDeque<usize> = VecDeque::new();
    for j in 1..s.len() {
        // Admit A = j - 1 into the window.
        let a = j - 1;
        while deque.back().is_some_and(|&k| v(k) >= v(a)) {
            deque.pop_back();
        }
        deque.push_back(a);
        while lo < j && s[j].done_us.saturating_sub(s[lo].sent_us) > window_us {
            lo += 1;
        }
        while deque.front().is_some_and(|&k| k < lo) {
            deque.pop_front();
        }
        if let Some(&k) = deque.front() {
            let inc = v(j).saturating_sub(v(k));
            if best.is_none_or(|(b, _)| inc > b) {
                best = Some((inc, s[j].mid_us()));
            }
        }
    }
    best
}

/// `ceil(rate * tick) + 1`: the most admissions a 100 ms pair of samples may show.
pub fn burst_limit(rate_per_s: f64, tick_us: u64) -> u64 {
    let per_tick = rate_per_s * tick_us as f64 / 1e6;
    // Round away float noise (e.g. 0.1 * 3) before ceil.
    let per_tick = (per_tick * 1e6).round() / 1e6;
    per_tick.ceil().max(0.0) as u64 + 1
}

/// The admission rate over the steady window while a queue existed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SteadyRate {
    pub rate: f64,
    pub window_s: f64,
    pub start_s: f64,
    pub admitted: u64,
}

/// Admissions per second over `[t0, t0 + W]`: `t0` is `warmup_us` after the first sample with
/// `waiting > 0`, and `W = min(cap_us, time until waiting first drops to 0 after t0)`. The window
/// runs from the first sample at or after t0 to the last sample still showing a queue within W.
pub fn steady_rate(samples: &[Sample], warmup_us: u64, cap_us: u64) -> Option<SteadyRate> {
    let s: Vec<(u64, u64, u64)> = samples
        .iter()
        .filter_map(|x| Some((x.mid_us(), x.waiting?, x.admitted_total?)))
        .collect();
    let first_queue = s.iter().position(|&(_, w, _)| w > 0)?;
    let t0 = s[first_queue].0 + warmup_us;
    let start = first_queue + s[first_queue..].iter().position(|&(t, _, _)| t >= t0)?;
    if s[start].1 == 0 {
        return None;
    }
    let limit = s[start].0 + cap_us;
    let mut end = start;
    for (i, &(t, w, _)) in s.iter().enumerate().skip(start + 1) {
        if w == 0 || t > limit {
            break;
        }
        end = i;
    }
    if end == start {
        return None;
    }
    let dt = (s[end].0 - s[start].0) as f64 / 1e6;
    let admitted = s[end].2.saturating_sub(s[start].2);
    Some(SteadyRate {
        rate: admitted as f64 / dt,
        window_s: dt,
        start_s: s[start].0 as f64 / 1e6,
        admitted,
    })
}

/// Events per bucket.
pub fn count_per_bucket(times_us: impl IntoIterator<Item = u64>, n: usize) -> Vec<u64> {
    let mut out = vec![0u64; n];
    for t in times_us {
        let b = bucket_of(t);
        if b < n {
            out[b] += 1;
        }
    }
    out
}

/// How many intervals are open at the end of each bucket: an interval `(start, end)` counts in
/// bucket `i` when `start < (i + 1) * 100 ms <= end` (or it never ended).
pub fn open_at_bucket_end(intervals: &[(u64, Option<u64>)], n: usize) -> Vec<u64> {
    let mut diff = vec![0i64; n + 1];
    for &(start, end) in intervals {
        let b = bucket_of(start).min(n);
        diff[b] += 1;
        if let Some(e) = end {
            diff[bucket_of(e).min(n)] -= 1;
        }
    }
    let mut out = Vec::with_capacity(n);
    let mut open = 0i64;
    for d in diff.iter().take(n) {
        open += d;
        out.push(open.max(0) as u64);
    }
    out
}

/// Increase of a cumulative counter per bucket, from `(time, value)` readings sorted by time:
/// each reading's increase over the previous reading is put in the bucket of its time. A counter
/// that goes down (a store that restarted) adds nothing.
pub fn counter_deltas(readings: &[(u64, u64)], n: usize) -> Vec<u64> {
    let mut out = vec![0u64; n];
    for w in readings.windows(2) {
        let b = bucket_of(w[1].0);
        if b < n {
            out[b] += w[1].1.saturating_sub(w[0].1);
        }
    }
    out
}

/// The last reading in each bucket, `None` where a bucket has none.
pub fn last_per_bucket(readings: &[(u64, u64)], n: usize) -> Vec<Option<u64>> {
    let mut out = vec![None; n];
    for &(t, v) in readings {
        let b = bucket_of(t);
        if b < n {
            out[b] = Some(v);
        }
    }
    out
}

/// When a visitor's turn came: told `position` at `told_at`, they were admitted when the
/// admission counter (`(time, total)` readings sorted by time) had grown by `position` past its
/// value then (the line is first come, first served). The answer is the last reading *before*
/// the counter got there, so a lag measured from it errs long by up to one reading interval,
/// never short. `None` when the counter never got there in the run.
pub fn turn_at(admitted: &[(u64, u64)], told_at: u64, position: u64) -> Option<u64> {
    let before = admitted.partition_point(|&(t, _)| t <= told_at);
    let base = admitted.get(before.checked_sub(1)?)?.1;
    let target = base + position;
    let reached = before + admitted[before..].partition_point(|&(_, v)| v < target);
    if reached >= admitted.len() {
        return None;
    }
    Some(admitted[reached - 1].0.max(told_at))
}

/// Discovery lags (µs, clamped at 0): for each `(told_at, position, discovered_at)`, the time
/// from the turn ([`turn_at`]) to the answer that said "admitted".
pub fn discovery_lags(admitted: &[(u64, u64)], visits: &[(u64, u64, u64)]) -> Vec<u64> {
    visits
        .iter()
        .filter_map(|&(told, position, found)| {
            Some(found.saturating_sub(turn_at(admitted, told, position)?))
        })
        .collect()
}

/// Sums of 10 buckets: per second.
pub fn per_second_sum(buckets: &[u64]) -> Vec<u64> {
    buckets.chunks(10).map(|c| c.iter().sum()).collect()
}

/// Maxima of 10 buckets (`None` buckets ignored).
pub fn per_second_max(buckets: &[Option<u64>]) -> Vec<Option<u64>> {
    buckets
        .chunks(10)
        .map(|c| c.iter().flatten().copied().max())
        .collect()
}

/// A file name from a label: lower-case letters and digits, runs of anything else as one `-`.
pub fn slug(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str("run");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile::<u64>(&[], 50.0), None);
        // Ten values: p50 is the 5th, p99 the 10th.
        let v: Vec<u64> = (10..=100).step_by(10).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(100));
    }

    #[test]
    fn summarize_sorts_and_converts_to_ms() {
        let s = summarize(vec![3000, 1000, 2000, 250_000]);
        assert_eq!(s.count, 4);
        assert_eq!(s.p50, Some(2.0));
        assert_eq!(s.p99, Some(250.0));
        assert_eq!(s.max, Some(250.0));
        let e = summarize(vec![]);
        assert_eq!((e.count, e.p50, e.max), (0, None, None));
    }

    fn w(join_sent: u64, join_done: u64, admitted: Option<u64>, last_waiting_sent: u64) -> Waited {
        Waited {
            join_sent,
            join_done,
            admitted_done: admitted,
            last_waiting_sent,
        }
    }

    #[test]
    fn fifo_inversion_is_found() {
        // A joins at 0..10 and is still told "waiting" for a request sent at 500.
        // B joins at 20 (after A's join was answered) and is admitted at 300 < 500.
        let a = w(0, 10, Some(600), 500);
        let b = w(20, 30, Some(300), 250);
        assert_eq!(fifo_inversions(&[a, b]), 1);
        assert_eq!(fifo_inversions(&[b, a]), 1);
    }

    #[test]
    fn fifo_near_misses_are_not_inversions() {
        let a = w(0, 10, Some(600), 500);
        // Joined while A's join was still in flight (join_sent == A.join_done): not strictly after.
        let concurrent = w(10, 40, Some(300), 250);
        assert_eq!(fifo_inversions(&[a, concurrent]), 0);
        // Admitted exactly when A sent its last waiting request: not before it.
        let tie = w(20, 30, Some(500), 400);
        assert_eq!(fifo_inversions(&[a, tie]), 0);
        // Never admitted.
        let never = w(20, 30, None, 900);
        assert_eq!(fifo_inversions(&[a, never]), 0);
        // Admitted after A's last waiting answer: fine.
        let later = w(20, 30, Some(501), 450);
        assert_eq!(fifo_inversions(&[a, later]), 0);
        // B joined earlier than A and was admitted first: the right order.
        let earlier = w(0, 5, Some(100), 50);
        let a2 = w(6, 12, Some(600), 500);
        assert_eq!(fifo_inversions(&[earlier, a2]), 0);
    }

    #[test]
    fn fifo_counts_victims_not_pairs_and_uses_the_minimum_after_the_join() {
        // Two victims (A1, A2) overtaken by the same C; D, admitted first, joined before A2
        // finished joining and so cannot count against A2 on its own.
        let a1 = w(0, 10, Some(900), 800);
        let a2 = w(5, 50, Some(950), 700);
        let d = w(40, 45, Some(100), 90);
        let c = w(60, 70, Some(600), 500);
        assert_eq!(fifo_inversions(&[a1, a2, d, c]), 2);
        // Without C, A1 is still overtaken by D (40 > 10, 100 < 800); A2 is not (40 <= 50).
        assert_eq!(fifo_inversions(&[a1, a2, d]), 1);
        // A victim that was never admitted still counts.
        let lost = w(0, 10, None, 800);
        assert_eq!(fifo_inversions(&[lost, c]), 1);
    }

    #[test]
    fn fifo_matches_brute_force() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let n = rng.usize(1..30);
            let v: Vec<Waited> = (0..n)
                .map(|_| {
                    let js = rng.u64(0..1000);
                    let jd = js + rng.u64(0..50);
                    let lw = jd + rng.u64(0..500);
                    let ad = if rng.bool() {
                        Some(lw + rng.u64(0..100))
                    } else if rng.bool() {
                        Some(jd + rng.u64(0..100))
                    } else {
                        None
                    };
                    w(js, jd, ad, lw)
                })
                .collect();
            let brute = v
                .iter()
                .filter(|a| {
                    v.iter().any(|b| {
                        b.join_sent > a.join_done
                            && b.admitted_done.is_some_and(|t| t < a.last_waiting_sent)
                    })
                })
                .count();
            assert_eq!(fifo_inversions(&v), brute);
        }
    }

    fn sample(t_ms: u64, waiting: u64, admitted: u64) -> Sample {
        Sample {
            sent_us: t_ms * 1000,
            done_us: t_ms * 1000,
            waiting: Some(waiting),
            active: Some(0),
            admitted_total: Some(admitted),
        }
    }

    #[test]
    fn max_increase_only_counts_pairs_within_the_window() {
        // 20 ms samples; 10 admissions at each 100 ms tick (at 50, 150, 250 ...).
        let s: Vec<Sample> = (0..20)
            .map(|i| {
                let t = i * 20;
                sample(t, 5, 10 * ((t + 50) / 100))
            })
            .collect();
        let (max, _) = max_increase_within(&s, 100_000).unwrap();
        // A pair 100 ms apart straddles exactly one tick, except (40, 140) etc. which see one;
        // (40 -> 140): values 0 -> 10 at t=40? (40+50)/100 = 0, (140+50)/100 = 1: one tick.
        assert_eq!(max, 10);
        // With a 120 ms window, (40 -> 160) spans two ticks: 0 -> 20.
        assert_eq!(max_increase_within(&s, 120_000).unwrap().0, 20);
    }

    #[test]
    fn max_increase_uses_request_brackets_conservatively() {
        // The later sample's request ends 101 ms after the earlier one was sent: not a pair.
        let a = Sample {
            sent_us: 0,
            done_us: 2_000,
            waiting: Some(1),
            active: None,
            admitted_total: Some(0),
        };
        let b = Sample {
            sent_us: 90_000,
            done_us: 101_000,
            waiting: Some(1),
            active: None,
            admitted_total: Some(50),
        };
        let c = Sample {
            sent_us: 60_000,
            done_us: 61_000,
            waiting: Some(1),
            active: None,
            admitted_total: Some(7),
        };
        assert_eq!(max_increase_within(&[a, b], 100_000), None);
        // With c between them, (a, c) gives 7 and (c, b) gives 43.
        let (m, at) = max_increase_within(&[a, c, b], 100_000).unwrap();
        assert_eq!(m, 43);
        assert_eq!(at, 95_500);
        // Samples without admitted_total are skipped.
        let mut stale = c;
        stale.admitted_total = None;
        assert_eq!(max_increase_within(&[a, stale, b], 100_000), None);
    }

    #[test]
    fn burst_limit_is_ceil_plus_one() {
        assert_eq!(burst_limit(175.0, 100_000), 19);
        assert_eq!(burst_limit(200.0, 100_000), 21);
        assert_eq!(burst_limit(30.0, 100_000), 4);
        assert_eq!(burst_limit(1.0, 100_000), 2);
        assert_eq!(burst_limit(250.0, 50_000), 14);
    }

    #[test]
    fn steady_rate_starts_after_warmup_and_stops_when_the_queue_empties() {
        // Queue from t=1 s; 100/s admitted from 1 s to 10 s at 20 ms samples; queue empty at 10 s.
        let mut s = vec![sample(0, 0, 1000), sample(500, 0, 1000)];
        for i in 0..=450 {
            let t = 1000 + i * 20;
            let admitted = 1000 + (t - 1000) / 10; // 100 per second
            let waiting = if t < 10_000 { 50 } else { 0 };
            s.push(sample(t, waiting, admitted));
        }
        let r = steady_rate(&s, 2_000_000, 60_000_000).unwrap();
        assert!((r.rate - 100.0).abs() < 1e-9, "{r:?}");
        assert!((r.start_s - 3.0).abs() < 1e-9);
        // Last sample still queued is at 9.98 s.
        assert!((r.window_s - 6.98).abs() < 1e-9, "{r:?}");
        // The cap limits the window.
        let r = steady_rate(&s, 2_000_000, 1_000_000).unwrap();
        assert!((r.window_s - 1.0).abs() < 1e-9);
        assert_eq!(r.admitted, 100);
    }

    #[test]
    fn steady_rate_needs_a_queue_past_the_warmup() {
        let s = vec![
            sample(0, 0, 0),
            sample(100, 3, 0),
            sample(1000, 0, 10),
            sample(3000, 0, 10),
        ];
        assert_eq!(steady_rate(&s, 2_000_000, 60_000_000), None);
        let none: Vec<Sample> = (0..10).map(|i| sample(i * 20, 0, i)).collect();
        assert_eq!(steady_rate(&none, 2_000_000, 60_000_000), None);
    }

    #[test]
    fn timeline_bucketing() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(99_999), 0);
        assert_eq!(bucket_of(100_000), 1);
        assert_eq!(buckets_for(250_000), 3);
        assert_eq!(
            count_per_bucket([0, 50_000, 100_000, 250_000, 900_000], 3),
            vec![2, 1, 1]
        );
        // Joined in bucket 0 and admitted in bucket 2: open at the end of buckets 0 and 1.
        // Joined and admitted within bucket 1: never open at a bucket end.
        // Joined in bucket 1, never admitted: open from bucket 1 on.
        let q = open_at_bucket_end(
            &[
                (10_000, Some(250_000)),
                (120_000, Some(180_000)),
                (150_000, None),
            ],
            4,
        );
        assert_eq!(q, vec![1, 2, 1, 1]);
        // Counter readings: 100 before the run, +5 in bucket 0, +7 in bucket 2, a reset adds 0.
        let r = [
            (1_000, 100),
            (60_000, 105),
            (210_000, 112),
            (310_000, 3),
            (320_000, 4),
        ];
        assert_eq!(counter_deltas(&r, 4), vec![5, 0, 7, 1]);
        assert_eq!(
            last_per_bucket(&r, 4),
            vec![Some(105), None, Some(112), Some(4)]
        );
        let b: Vec<u64> = (0..25).collect();
        assert_eq!(per_second_sum(&b), vec![45, 145, 110]);
        let m = [Some(1), None, Some(3)];
        assert_eq!(per_second_max(&m), vec![Some(3)]);
        assert_eq!(per_second_max(&[None, None]), vec![None]);
    }

    #[test]
    fn a_turn_is_when_the_counter_has_grown_by_the_position() {
        // 10 admissions every 100 ms, read every 20 ms.
        let readings: Vec<(u64, u64)> = (0..50u64).map(|i| (i * 20_000, (i / 5) * 10)).collect();
        // Told position 25 at 110 ms (the counter then: 10): it first reads 35 or more at 400 ms
        // (40), so the turn is the reading before, at 380 ms.
        assert_eq!(turn_at(&readings, 110_000, 25), Some(380_000));
        // Never reached in the run.
        assert_eq!(turn_at(&readings, 110_000, 1_000), None);
        // Told before the first reading: no base to count from.
        assert_eq!(turn_at(&readings[1..], 0, 5), None);
        // Position 1, counter steps right after: the turn is at the told time at the earliest.
        assert_eq!(turn_at(&readings, 95_000, 1), Some(95_000));
        let lags = discovery_lags(&readings, &[(110_000, 25, 500_000), (110_000, 25, 300_000)]);
        assert_eq!(lags, vec![120_000, 0]);
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("no waiting room"), "no-waiting-room");
        assert_eq!(
            slug("Memory store, 2 instances!"),
            "memory-store-2-instances"
        );
        assert_eq!(slug("--"), "run");
    }
}
