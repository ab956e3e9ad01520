//! A shop whose capacity drops in the middle of the sale and comes back (`--capacity-drop
//! AT:WORKERS:FOR`), and what a run made of it: orders per second against the shop's
//! capacity (utilization), origin errors against orders, and how long the admissions took to
//! follow the drop and the recovery (the autopilot's bench, issue 16).

use std::time::Duration;

use serde::Serialize;

use crate::report::Bucket;

/// `AT:WORKERS:FOR`: from `at` after the start, for `length`, the shop has `workers` workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drop {
    pub at: Duration,
    pub workers: usize,
    pub length: Duration,
}

impl std::str::FromStr for Drop {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let [at, workers, length] = parts.as_slice() else {
            return Err(format!("{s}: write AT:WORKERS:FOR, e.g. 30s:15:30s"));
        };
        let d = |v: &str| humantime::parse_duration(v).map_err(|e| format!("{v}: {e}"));
        Ok(Drop {
            at: d(at)?,
            workers: workers.parse().map_err(|e| format!("{workers}: {e}"))?,
            length: d(length)?,
        })
    }
}

impl Drop {
    /// Workers at `t` since the start.
    pub fn workers_at(&self, t: Duration, normal: usize) -> usize {
        if t >= self.at && t < self.at + self.length {
            self.workers.min(normal)
        } else {
            normal
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CapacityReport {
    pub drop_at_s: f64,
    pub drop_for_s: f64,
    pub capacity_before: f64,
    pub capacity_during: f64,
    /// The shop's capacity in orders per second, per second of the run.
    pub capacity_per_s: Vec<f64>,
    /// Orders ÷ the capacity over the sale (first arrival to last order).
    pub utilization: f64,
    /// Origin 5xx ÷ orders.
    pub error_share: f64,
    /// From the drop until admissions (one-second sums) are within 110 % of the lower capacity.
    pub react_s: Option<f64>,
    /// From the recovery until admissions reach 85 % of the full capacity again.
    pub recover_s: Option<f64>,
}

/// One-second sums of a per-bucket figure, at every bucket (the second ending there).
fn rolling(buckets: &[Bucket], per_s: usize, f: fn(&Bucket) -> u64) -> Vec<u64> {
    let v: Vec<u64> = buckets.iter().map(f).collect();
    (0..v.len())
        .map(|i| v[i.saturating_sub(per_s - 1)..=i].iter().sum())
        .collect()
}

pub fn analyse(
    drop: &Drop,
    workers: usize,
    order_ms: u64,
    bucket_ms: u64,
    buckets: &[Bucket],
) -> CapacityReport {
    let per_worker = 1000.0 / order_ms.max(1) as f64;
    let capacity_at = |t: Duration| drop.workers_at(t, workers) as f64 * per_worker;
    let bucket = Duration::from_millis(bucket_ms);
    let per_s = (1000 / bucket_ms.max(1)).max(1) as usize;
    let first = buckets.iter().position(|b| b.arrivals > 0).unwrap_or(0);
    let last = buckets.iter().rposition(|b| b.orders > 0).unwrap_or(first);
    let orders: u64 = buckets[first..=last].iter().map(|b| b.orders).sum();
    let errors: u64 = buckets.iter().map(|b| b.origin_errors).sum();
    let possible: f64 = (first..=last)
        .map(|i| capacity_at(bucket * i as u32) * bucket.as_secs_f64())
        .sum();
    let admissions = rolling(buckets, per_s, |b| b.admissions);
    let index = |t: Duration| (t.as_millis() as u64 / bucket_ms.max(1)) as usize;
    let during = drop.workers.min(workers) as f64 * per_worker;
    let before = workers as f64 * per_worker;
    let seconds = |i: usize, from: Duration| (bucket * i as u32).saturating_sub(from).as_secs_f64();
    let react_s = (index(drop.at)..admissions.len())
        .find(|&i| admissions[i] as f64 <= during * 1.1)
        .map(|i| seconds(i, drop.at));
    let end = drop.at + drop.length;
    let recover_s = (index(end)..admissions.len())
        .find(|&i| admissions[i] as f64 >= before * 0.85)
        .map(|i| seconds(i, end));
    CapacityReport {
        drop_at_s: drop.at.as_secs_f64(),
        drop_for_s: drop.length.as_secs_f64(),
        capacity_before: before,
        capacity_during: during,
        capacity_per_s: (0..buckets.len().div_ceil(per_s))
            .map(|s| capacity_at(Duration::from_secs(s as u64)))
            .collect(),
        utilization: if possible > 0.0 {
            orders as f64 / possible
        } else {
            0.0
        },
        error_share: if orders > 0 {
            errors as f64 / orders as f64
        } else {
            0.0
        },
        react_s,
        recover_s,
    }
}

/// The summary's line.
pub fn summary(c: &CapacityReport) -> String {
    let s = |v: Option<f64>| v.map_or("never".to_string(), |v| format!("{v:.1} s"));
    format!(
        "capacity: {:.0}/s, {:.0}/s from {:.0} s for {:.0} s; shop capacity used {:.1} %, origin errors {:.2} % of orders; admissions followed the drop in {}, the recovery in {}\n",
        c.capacity_before,
        c.capacity_during,
        c.drop_at_s,
        c.drop_for_s,
        c.utilization * 100.0,
        c.error_share * 100.0,
        s(c.react_s),
        s(c.recover_s)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(i: usize, arrivals: u64, admissions: u64, orders: u64, errors: u64) -> Bucket {
        Bucket {
            t_s: i as f64 / 10.0,
            arrivals,
            queue: 0,
            waiting_admin: None,
            admissions,
            admitted_client: 0,
            origin_requests: 0,
            origin_errors: errors,
            orders,
        }
    }

    #[test]
    fn a_drop_parses_and_applies_in_its_window() {
        let d: Drop = "3s:15:2s".parse().unwrap();
        assert_eq!(d.workers_at(Duration::from_secs(2), 40), 40);
        assert_eq!(d.workers_at(Duration::from_secs(3), 40), 15);
        assert_eq!(d.workers_at(Duration::from_millis(4999), 40), 15);
        assert_eq!(d.workers_at(Duration::from_secs(5), 40), 40);
        assert!("3s:15".parse::<Drop>().is_err());
    }

    /// A run that follows a 200/s shop down to 75/s at 3 s and back at 5 s, a second late
    /// each way (orders follow the capacity at once).
    #[test]
    fn utilization_errors_and_reaction_times() {
        let d: Drop = "3s:15:2s".parse().unwrap();
        let b: Vec<Bucket> = (0..80)
            .map(|i| {
                let rate = if (40..60).contains(&i) { 7 } else { 20 };
                let orders = if (30..50).contains(&i) { 7 } else { 20 };
                bucket(i, u64::from(i < 5), rate, orders, u64::from(i == 35))
            })
            .collect();
        let c = analyse(&d, 40, 200, 100, &b);
        assert_eq!((c.capacity_before, c.capacity_during), (200.0, 75.0));
        // 1340 orders against 60 buckets of 20 and 20 of 7.5 possible.
        assert!(
            (c.utilization - 1340.0 / 1350.0).abs() < 1e-9,
            "{}",
            c.utilization
        );
        assert!((c.error_share - 1.0 / 1340.0).abs() < 1e-9);
        // Admissions fell at 4 s (a second late): the rolling second is under 82.5 at 4.9 s;
        // they rose at 6 s: the rolling second passes 170 at 6.7 s.
        let round = |v: Option<f64>| v.map(|s| (s * 10.0).round() / 10.0);
        assert_eq!(round(c.react_s), Some(1.9));
        assert_eq!(round(c.recover_s), Some(1.7));
    }
}
