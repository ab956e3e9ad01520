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
mod tests;
