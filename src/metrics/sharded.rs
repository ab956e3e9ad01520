//! Per-thread shards for the metrics every request touches (requests by outcome, refusals,
//! request durations, poll answers): each thread adds to its own cache line and a scrape folds
//! the shards, so the request path shares no atomic between threads. Exposed through
//! `prometheus`' [`Collector`] beside the crate's own metrics, in the same text format.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, LabelPair, MetricFamily, MetricType};

/// Shards per series: past this many threads, threads share shards (still correct: the cells
/// are atomics, only no longer uncontended).
const SHARDS: usize = 16;

/// One cache line per cell, so that two threads' cells never share one.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Cell(AtomicU64);

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

fn shard() -> usize {
    SHARD.with(|s| *s)
}

fn cells<const N: usize>() -> [Cell; N] {
    std::array::from_fn(|_| Cell::default())
}

/// Label pairs sorted by name, as `prometheus` writes its own.
fn label_pairs(names: &[&str], values: &[&str]) -> Vec<LabelPair> {
    let mut pairs: Vec<LabelPair> = names
        .iter()
        .zip(values)
        .map(|(n, v)| {
            let mut p = LabelPair::default();
            p.set_name(n.to_string());
            p.set_value(v.to_string());
            p
        })
        .collect();
    pairs.sort_by(|a, b| a.name().cmp(b.name()));
    pairs
}

/// One counter series: `inc` touches this thread's shard only.
#[derive(Debug)]
pub struct Count {
    labels: Vec<LabelPair>,
    shards: [Cell; SHARDS],
}

impl Count {
    pub fn inc(&self) {
        self.shards[shard()].0.fetch_add(1, Ordering::Relaxed);
    }

    /// The sum over the shards.
    pub fn get(&self) -> u64 {
        self.shards
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum()
    }
}

/// One histogram series with fixed buckets.
#[derive(Debug)]
pub struct Spread {
    labels: Vec<LabelPair>,
    bounds: Arc<[f64]>,
    /// Per shard: a count per bucket (the last is +Inf), then the sum in nanoseconds-like
    /// fixed point (`SUM_SCALE` per unit), then the count.
    shards: Vec<Vec<Cell>>,
}

/// The sum is kept as an integer of this many parts per unit (1e-9 s for durations).
const SUM_SCALE: f64 = 1e9;

impl Spread {
    pub fn observe(&self, v: f64) {
        let cells = &self.shards[shard()];
        let b = self.bounds.partition_point(|&upper| upper < v);
        cells[b].0.fetch_add(1, Ordering::Relaxed);
        let n = self.bounds.len() + 1;
        let scaled = if v.is_finite() && v > 0.0 {
            (v * SUM_SCALE) as u64
        } else {
            0
        };
        cells[n].0.fetch_add(scaled, Ordering::Relaxed);
        cells[n + 1].0.fetch_add(1, Ordering::Relaxed);
    }

    fn fold(&self) -> (Vec<u64>, f64, u64) {
        let n = self.bounds.len() + 1;
        let mut buckets = vec![0u64; n];
        let (mut sum, mut count) = (0u64, 0u64);
        for cells in &self.shards {
            for (b, c) in buckets.iter_mut().zip(cells) {
                *b += c.0.load(Ordering::Relaxed);
            }
            sum = sum.wrapping_add(cells[n].0.load(Ordering::Relaxed));
            count += cells[n + 1].0.load(Ordering::Relaxed);
        }
        (buckets, sum as f64 / SUM_SCALE, count)
    }
}

/// Series by label values, shared by the clones of a family (registered once, handles taken
/// when a configuration is loaded — never on the request path).
struct Family<S> {
    desc: Arc<Desc>,
    names: Vec<&'static str>,
    series: Arc<Mutex<HashMap<Vec<String>, Arc<S>>>>,
}

impl<S> Clone for Family<S> {
    fn clone(&self) -> Self {
        Self {
            desc: self.desc.clone(),
            names: self.names.clone(),
            series: self.series.clone(),
        }
    }
}

impl<S> Family<S> {
    fn new(name: &str, help: &str, labels: &[&'static str]) -> prometheus::Result<Self> {
        Ok(Self {
            desc: Arc::new(Desc::new(
                name.into(),
                help.into(),
                labels.iter().map(|l| l.to_string()).collect(),
                HashMap::new(),
            )?),
            names: labels.to_vec(),
            series: Arc::default(),
        })
    }

    /// The series of these label values, made by `make` (from its label pairs) if new.
    fn series(&self, values: &[&str], make: impl FnOnce(Vec<LabelPair>) -> S) -> Arc<S> {
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        let mut m = self.series.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(key)
            .or_insert_with(|| Arc::new(make(label_pairs(&self.names, values))))
            .clone()
    }

    /// Every series as one metric family, in label order.
    fn collect(&self, kind: MetricType, metric: impl Fn(&S) -> proto::Metric) -> MetricFamily {
        let m = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let mut metrics: Vec<proto::Metric> = m.values().map(|s| metric(s)).collect();
        metrics.sort_by_key(label_key);
        let mut f = MetricFamily::default();
        f.set_name(self.desc.fq_name.clone());
        f.set_help(self.desc.help.clone());
        f.set_field_type(kind);
        f.set_metric(metrics);
        f
    }
}

/// A family of counters with labels.
#[derive(Clone)]
pub struct Counters(Family<Count>);

impl Counters {
    pub fn new(name: &str, help: &str, labels: &[&'static str]) -> prometheus::Result<Self> {
        Family::new(name, help, labels).map(Self)
    }

    pub fn with_labels(&self, values: &[&str]) -> Arc<Count> {
        self.0.series(values, |labels| Count {
            labels,
            shards: cells(),
        })
    }
}

impl Collector for Counters {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.0.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        vec![self.0.collect(MetricType::COUNTER, |s| {
            let mut c = proto::Counter::default();
            c.set_value(s.get() as f64);
            let mut metric = proto::Metric::from_label(s.labels.clone());
            metric.set_counter(c);
            metric
        })]
    }
}

/// A family of histograms with labels and fixed buckets.
#[derive(Clone)]
pub struct Spreads {
    family: Family<Spread>,
    bounds: Arc<[f64]>,
}

impl Spreads {
    pub fn new(
        name: &str,
        help: &str,
        labels: &[&'static str],
        bounds: Vec<f64>,
    ) -> prometheus::Result<Self> {
        Ok(Self {
            family: Family::new(name, help, labels)?,
            bounds: bounds.into(),
        })
    }

    pub fn with_labels(&self, values: &[&str]) -> Arc<Spread> {
        let n = self.bounds.len() + 3;
        self.family.series(values, |labels| Spread {
            labels,
            bounds: self.bounds.clone(),
            shards: (0..SHARDS)
                .map(|_| (0..n).map(|_| Cell::default()).collect())
                .collect(),
        })
    }
}

impl Collector for Spreads {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.family.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        vec![self.family.collect(MetricType::HISTOGRAM, |s| {
            let (buckets, sum, count) = s.fold();
            let mut h = proto::Histogram::default();
            let mut cumulative = 0;
            let mut out = Vec::with_capacity(s.bounds.len());
            for (upper, n) in s.bounds.iter().zip(&buckets) {
                cumulative += n;
                let mut b = proto::Bucket::default();
                b.set_upper_bound(*upper);
                b.set_cumulative_count(cumulative);
                out.push(b);
            }
            h.set_bucket(out);
            h.set_sample_sum(sum);
            h.set_sample_count(count);
            let mut metric = proto::Metric::from_label(s.labels.clone());
            metric.set_histogram(h);
            metric
        })]
    }
}

fn label_key(m: &proto::Metric) -> Vec<(String, String)> {
    m.get_label()
        .iter()
        .map(|p| (p.name().to_string(), p.value().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, Registry, TextEncoder};

    fn text(r: &Registry) -> String {
        let mut out = Vec::new();
        TextEncoder::new().encode(&r.gather(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn counts_from_many_threads_fold_into_one_series_in_prometheus_text() {
        let c = Counters::new("t_requests_total", "Requests.", &["room", "outcome"]).unwrap();
        let a = c.with_labels(&["sale", "admit"]);
        assert!(
            Arc::ptr_eq(&a, &c.with_labels(&["sale", "admit"])),
            "found again"
        );
        std::thread::scope(|s| {
            for _ in 0..8 {
                let a = a.clone();
                s.spawn(move || (0..1000).for_each(|_| a.inc()));
            }
        });
        c.with_labels(&["sale", "wait"]).inc();
        assert_eq!(a.get(), 8000);
        let r = Registry::new();
        r.register(Box::new(c)).unwrap();
        let t = text(&r);
        assert!(t.contains("# TYPE t_requests_total counter"), "{t}");
        assert!(
            t.contains("t_requests_total{outcome=\"admit\",room=\"sale\"} 8000"),
            "{t}"
        );
        assert!(
            t.contains("t_requests_total{outcome=\"wait\",room=\"sale\"} 1"),
            "{t}"
        );
    }

    #[test]
    fn a_spread_matches_prometheus_own_histogram() {
        let bounds = vec![0.001, 0.01, 0.1, 1.0];
        let ours = Spreads::new("t_ours_seconds", "Ours.", &["outcome"], bounds.clone()).unwrap();
        let theirs = prometheus::HistogramVec::new(
            prometheus::HistogramOpts::new("t_theirs_seconds", "Theirs.").buckets(bounds),
            &["outcome"],
        )
        .unwrap();
        let o = ours.with_labels(&["pass"]);
        let t = theirs.with_label_values(&["pass"]);
        for v in [0.0005, 0.001, 0.002, 0.05, 0.5, 3.0, 0.0] {
            o.observe(v);
            t.observe(v);
        }
        let r = Registry::new();
        r.register(Box::new(ours)).unwrap();
        r.register(Box::new(theirs)).unwrap();
        let text = text(&r);
        // Buckets and count alike; the sum to float precision (ours is kept in fixed point).
        let lines = |name: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.starts_with(name) && !l.contains("_sum"))
                .map(|l| l.replacen(name, "", 1))
                .collect()
        };
        assert_eq!(lines("t_ours_seconds"), lines("t_theirs_seconds"), "{text}");
        let sum = |name: &str| -> f64 {
            let line = text.lines().find(|l| l.starts_with(&format!("{name}_sum")));
            line.and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN)
        };
        assert!(
            (sum("t_ours_seconds") - sum("t_theirs_seconds")).abs() < 1e-6,
            "{text}"
        );
    }
}
