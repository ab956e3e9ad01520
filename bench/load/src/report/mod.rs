//! The run's report: what the browsers, the shop and the admin sampler saw, as JSON.

use serde::Serialize;

use crate::analysis::{
    self, buckets_for, count_per_bucket, counter_deltas, discovery_lags, fifo_inversions,
    last_per_bucket, max_increase_within, open_at_bucket_end, steady_rate, summarize,
    LatencySummary, Waited, BUCKET_US,
};
use crate::browser::{Class, Outcome, Record};
use crate::sampler::Samples;
use crate::shop::ShopStats;

/// Warm-up after the first queued sample before the steady window starts.
const STEADY_WARMUP_US: u64 = 2_000_000;
/// Longest steady window.
const STEADY_CAP_US: u64 = 60_000_000;

#[derive(Debug, Clone, Serialize)]
pub struct Parameters {
    pub shop_listen: String,
    pub targets: Vec<String>,
    pub admin: Option<String>,
    pub host: Option<String>,
    pub room: String,
    pub visitors: usize,
    pub arrive_over_s: f64,
    pub curve: crate::arrivals::Curve,
    pub workers: usize,
    pub order_ms: u64,
    pub shop_queue_timeout_s: f64,
    pub rate: f64,
    pub tick_ms: f64,
    pub deadline_s: f64,
    pub seed: u64,
}

#[derive(Debug, Serialize)]
pub struct Visitors {
    pub total: usize,
    pub arrived: usize,
    pub ordered: usize,
    /// Arrived but not ordered when the run ended (`gave_up + unfinished`).
    pub lost: usize,
    pub gave_up: usize,
    pub unfinished: usize,
    /// Got the waiting page or a waiting status at least once.
    pub waited: usize,
    pub admitted: usize,
    pub rejected_responses: u64,
    pub origin_errors_seen_by_clients: u64,
    pub anteroom_errors: u64,
    pub consumed_conflicts: u64,
    pub transport_errors: u64,
    pub unexpected_responses: u64,
    pub sent_back_to_line: u64,
    pub status_polls: u64,
    pub order_attempts: u64,
    /// Join answered → admitted, for those who waited and were admitted.
    pub wait_ms: LatencySummary,
    /// First `position` reported by a waiting status.
    pub first_position_max: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct ShopReport {
    pub requests: u64,
    pub orders: u64,
    pub errors_5xx: u64,
    pub max_in_flight: u64,
    pub order_latency_ms: LatencySummary,
}

#[derive(Debug, Serialize)]
pub struct Latencies {
    pub waiting_page: LatencySummary,
    pub status_poll: LatencySummary,
    pub admitted_request: LatencySummary,
    pub direct_request: LatencySummary,
}

#[derive(Debug, Serialize)]
pub struct Admission {
    pub configured_rate: f64,
    pub tick_ms: f64,
    pub measured_rate: Option<f64>,
    pub rate_error_percent: Option<f64>,
    pub window_s: Option<f64>,
    pub window_start_s: Option<f64>,
    pub window_admitted: Option<u64>,
    pub max_in_100ms: Option<u64>,
    pub max_in_100ms_at_s: Option<f64>,
    pub max_in_100ms_limit: u64,
    pub max_in_100ms_within_limit: Option<bool>,
    pub samples: usize,
    pub sample_failures: u64,
    pub last_sample_error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Bucket {
    pub t_s: f64,
    pub arrivals: u64,
    /// Browsers in the waiting state at the end of the bucket (client side).
    pub queue: u64,
    /// `waiting` of the last admin sample in the bucket.
    pub waiting_admin: Option<u64>,
    pub admissions: u64,
    /// Browsers first seen admitted (or served directly) in the bucket.
    pub admitted_client: u64,
    pub origin_requests: u64,
    pub origin_errors: u64,
    pub orders: u64,
}

#[derive(Debug, Serialize)]
pub struct Timeline {
    pub bucket_ms: u64,
    /// `admin` (Δadmitted_total) or `client` (first admitted responses seen by browsers).
    pub admissions_source: &'static str,
    pub buckets: Vec<Bucket>,
}

/// Whether the load tool itself kept time: a 50 ms timer's lateness, measured all run long. A
/// stalled tool (an overloaded or paused machine) makes every latency and rate suspect.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ToolHealth {
    pub max_timer_lag_ms: f64,
    pub lags_over_100ms: u64,
    pub lagged_s: f64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub label: String,
    pub parameters: Parameters,
    pub duration_s: f64,
    pub visitors: Visitors,
    pub shop: ShopReport,
    pub latency_ms: Latencies,
    pub admission: Option<Admission>,
    pub fifo_inversions: usize,
    /// Browsers the FIFO check looked at (those that waited).
    pub fifo_checked: usize,
    /// From a visitor's turn (the admission counter grown by the last position they were told)
    /// to the answer that told them they were in. Needs the admin sampler; visitors sent back
    /// to the line are left out. Errs long by up to one sampler interval (20 ms); a position
    /// told from a snapshot a tick old can make it short by up to a tick.
    pub discovery_lag_ms: Option<LatencySummary>,
    /// How the ETA first shown to each visitor who waited compared with their wait (`eta.rs`).
    pub eta: crate::eta::EtaReport,
    /// Filled in by the caller after the run.
    pub load_tool: ToolHealth,
    /// With `--capacity-drop`: the shop's capacity against what it did (filled in after).
    pub capacity: Option<crate::capacity::CapacityReport>,
    pub timeline: Timeline,
}

fn padded(v: &[u64], n: usize) -> Vec<u64> {
    let mut v = v.to_vec();
    v.resize(n, 0);
    v
}

pub fn build(
    label: &str,
    parameters: Parameters,
    duration_us: u64,
    records: &[Record],
    shop: &ShopStats,
    samples: Option<&Samples>,
) -> Report {
    let sum = |f: fn(&Record) -> u32| records.iter().map(|r| f(r) as u64).sum::<u64>();
    let count = |f: fn(&Record) -> bool| records.iter().filter(|r| f(r)).count();
    let arrived = count(|r| r.arrival.is_some());
    let ordered = count(|r| r.outcome == Outcome::Ordered);
    let waited: Vec<Waited> = records
        .iter()
        .filter_map(|r| {
            Some(Waited {
                join_sent: r.join_sent?,
                join_done: r.join_done?,
                admitted_done: r.admitted_done,
                last_waiting_sent: r.last_waiting_sent?,
            })
        })
        .collect();
    let visitors = Visitors {
        total: records.len(),
        arrived,
        ordered,
        lost: arrived - ordered,
        gave_up: count(|r| r.outcome == Outcome::GaveUp),
        unfinished: count(|r| r.outcome == Outcome::Unfinished),
        waited: waited.len(),
        admitted: count(|r| r.admitted_done.is_some()),
        rejected_responses: sum(|r| r.rejected),
        origin_errors_seen_by_clients: sum(|r| r.origin_errors),
        anteroom_errors: sum(|r| r.anteroom_errors),
        consumed_conflicts: sum(|r| r.consumed_conflicts),
        transport_errors: sum(|r| r.transport_errors),
        unexpected_responses: sum(|r| r.unexpected),
        sent_back_to_line: sum(|r| r.sent_back_to_line),
        status_polls: sum(|r| r.polls),
        order_attempts: sum(|r| r.order_attempts),
        wait_ms: summarize(
            records
                .iter()
                .filter_map(|r| Some(r.admitted_done?.saturating_sub(r.join_done?)))
                .collect(),
        ),
        first_position_max: records.iter().filter_map(|r| r.first_position).max(),
    };

    let class = |c: Class| {
        summarize(
            records
                .iter()
                .flat_map(|r| r.latencies.iter())
                .filter(|(k, _)| *k == c)
                .map(|&(_, us)| us as u64)
                .collect(),
        )
    };
    let latency_ms = Latencies {
        waiting_page: class(Class::WaitingPage),
        status_poll: class(Class::StatusPoll),
        admitted_request: class(Class::AdmittedRequest),
        direct_request: class(Class::DirectRequest),
    };

    let shop_report = ShopReport {
        requests: shop.requests.iter().sum(),
        orders: shop.orders.iter().sum(),
        errors_5xx: shop.errors.iter().sum(),
        max_in_flight: shop.max_in_flight,
        order_latency_ms: summarize(shop.order_latency_us.clone()),
    };

    let tick_us = (parameters.tick_ms * 1000.0).round() as u64;
    let admission = samples.map(|s| {
        let steady = steady_rate(&s.samples, STEADY_WARMUP_US, STEADY_CAP_US);
        let max = max_increase_within(&s.samples, BUCKET_US);
        let limit = analysis::burst_limit(parameters.rate, tick_us);
        Admission {
            configured_rate: parameters.rate,
            tick_ms: parameters.tick_ms,
            measured_rate: steady.as_ref().map(|r| r.rate),
            rate_error_percent: steady
                .as_ref()
                .filter(|_| parameters.rate > 0.0)
                .map(|r| (r.rate - parameters.rate) / parameters.rate * 100.0),
            window_s: steady.as_ref().map(|r| r.window_s),
            window_start_s: steady.as_ref().map(|r| r.start_s),
            window_admitted: steady.as_ref().map(|r| r.admitted),
            max_in_100ms: max.map(|m| m.0),
            max_in_100ms_at_s: max.map(|m| m.1 as f64 / 1e6),
            max_in_100ms_limit: limit,
            max_in_100ms_within_limit: max.map(|m| m.0 <= limit),
            samples: s.samples.len(),
            sample_failures: s.failures,
            last_sample_error: s.last_error.clone(),
        }
    });

    let timeline = timeline(duration_us, records, shop, samples);
    let discovery_lag_ms = samples.map(|s| {
        let admitted: Vec<(u64, u64)> = s
            .samples
            .iter()
            .filter_map(|x| Some((x.mid_us(), x.admitted_total?)))
            .collect();
        let visits: Vec<(u64, u64, u64)> = records
            .iter()
            .filter(|r| r.sent_back_to_line == 0)
            .filter_map(|r| {
                let (told, position) = r.last_told?;
                Some((told, position, r.admitted_done?))
            })
            .collect();
        summarize(discovery_lags(&admitted, &visits))
    });

    Report {
        label: label.to_string(),
        parameters,
        duration_s: duration_us as f64 / 1e6,
        visitors,
        shop: shop_report,
        latency_ms,
        admission,
        fifo_inversions: fifo_inversions(&waited),
        fifo_checked: waited.len(),
        discovery_lag_ms,
        eta: crate::eta::report(records),
        load_tool: ToolHealth::default(),
        capacity: None,
        timeline,
    }
}

fn timeline(
    duration_us: u64,
    records: &[Record],
    shop: &ShopStats,
    samples: Option<&Samples>,
) -> Timeline {
    let n = buckets_for(duration_us);
    let arrivals = count_per_bucket(records.iter().filter_map(|r| r.arrival), n);
    let admitted_client = count_per_bucket(records.iter().filter_map(|r| r.admitted_done), n);
    let intervals: Vec<(u64, Option<u64>)> = records
        .iter()
        .filter_map(|r| Some((r.join_done?, r.admitted_done)))
        .collect();
    let queue = open_at_bucket_end(&intervals, n);
    let (admissions, waiting_admin, source) = match samples {
        Some(s) => {
            let adm: Vec<(u64, u64)> = s
                .samples
                .iter()
                .filter_map(|x| Some((x.mid_us(), x.admitted_total?)))
                .collect();
            let wait: Vec<(u64, u64)> = s
                .samples
                .iter()
                .filter_map(|x| Some((x.mid_us(), x.waiting?)))
                .collect();
            (counter_deltas(&adm, n), last_per_bucket(&wait, n), "admin")
        }
        None => (admitted_client.clone(), vec![None; n], "client"),
    };
    let requests = padded(&shop.requests, n);
    let errors = padded(&shop.errors, n);
    let orders = padded(&shop.orders, n);
    let buckets = (0..n)
        .map(|i| Bucket {
            t_s: (i as u64 * BUCKET_US) as f64 / 1e6,
            arrivals: arrivals[i],
            queue: queue[i],
            waiting_admin: waiting_admin[i],
            admissions: admissions[i],
            admitted_client: admitted_client[i],
            origin_requests: requests[i],
            origin_errors: errors[i],
            orders: orders[i],
        })
        .collect();
    Timeline {
        bucket_ms: BUCKET_US / 1000,
        admissions_source: source,
        buckets,
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.1}"))
}

/// A few lines for a person.
pub fn summary(r: &Report) -> String {
    let v = &r.visitors;
    let s = &r.shop;
    let mut out = format!(
        "{label}: {d:.1} s\n\
         visitors: {arr} arrived, {ord} ordered, {lost} lost ({gu} gave up, {un} unfinished); {w} waited, \
         {rej} rejected responses, {oe} origin errors, {ae} anteroom errors, {cc} 409s, {te} transport errors\n\
         shop: {req} requests, {orders} orders, {e5} 5xx, max {mif} in flight, order p50 {op50} ms p99 {op99} ms\n",
        label = r.label,
        d = r.duration_s,
        arr = v.arrived,
        ord = v.ordered,
        lost = v.lost,
        gu = v.gave_up,
        un = v.unfinished,
        w = v.waited,
        rej = v.rejected_responses,
        oe = v.origin_errors_seen_by_clients,
        ae = v.anteroom_errors,
        cc = v.consumed_conflicts,
        te = v.transport_errors,
        req = s.requests,
        orders = s.orders,
        e5 = s.errors_5xx,
        mif = s.max_in_flight,
        op50 = ms(s.order_latency_ms.p50),
        op99 = ms(s.order_latency_ms.p99),
    );
    for (name, l) in [
        ("waiting page", &r.latency_ms.waiting_page),
        ("status poll", &r.latency_ms.status_poll),
        ("admitted request", &r.latency_ms.admitted_request),
        ("direct request", &r.latency_ms.direct_request),
    ] {
        if l.count > 0 {
            out.push_str(&format!(
                "latency {name}: n={} p50 {} ms p99 {} ms max {} ms\n",
                l.count,
                ms(l.p50),
                ms(l.p99),
                ms(l.max)
            ));
        }
    }
    if let Some(a) = &r.admission {
        out.push_str(&format!(
            "admission: configured {}/s, measured {} over {} s ({}%), max in 100 ms {} (limit {}), {} samples ({} failed)\n",
            a.configured_rate,
            a.measured_rate.map_or("-".into(), |x| format!("{x:.1}/s")),
            a.window_s.map_or("-".into(), |x| format!("{x:.1}")),
            a.rate_error_percent.map_or("-".into(), |x| format!("{x:+.1}")),
            a.max_in_100ms.map_or("-".into(), |x| x.to_string()),
            a.max_in_100ms_limit,
            a.samples,
            a.sample_failures,
        ));
    }
    let most = |f: fn(&Bucket) -> u64| r.timeline.buckets.iter().map(f).max().unwrap_or(0);
    // Admissions: the admin sampler's rigorous figure (pairs of samples within 100 ms) when
    // there is one; a bucket's delta can hold two ticks after a late sample.
    let admitted = r.admission.as_ref().and_then(|a| a.max_in_100ms);
    out.push_str(&format!(
        "most in one 100 ms: {} admitted ({}), {} told they are in, {} origin requests\n",
        admitted.unwrap_or_else(|| most(|b| b.admissions)),
        if admitted.is_some() {
            "admin"
        } else {
            "client"
        },
        most(|b| b.admitted_client),
        most(|b| b.origin_requests),
    ));
    if let Some(l) = r.discovery_lag_ms.as_ref().filter(|l| l.count > 0) {
        out.push_str(&format!(
            "discovery lag (turn to being told): n={} p50 {} ms p99 {} ms max {} ms\n",
            l.count,
            ms(l.p50),
            ms(l.p99),
            ms(l.max)
        ));
    }
    out.extend(crate::eta::summary_line(&r.eta));
    out.push_str(&format!(
        "fifo inversions: {} of {} that waited\n",
        r.fifo_inversions, r.fifo_checked
    ));
    let h = &r.load_tool;
    if h.lags_over_100ms > 0 {
        out.push_str(&format!(
            "WARNING: the load tool itself stalled {} times (max {:.0} ms, {:.1} s in all): latencies and rates around then are the machine's, not the system's\n",
            h.lags_over_100ms, h.max_timer_lag_ms, h.lagged_s
        ));
    }
    out
}

#[cfg(test)]
mod tests;
