//! Prometheus metrics (the `prometheus` crate Pingora integrates with), served by the admin API.
//!
//! Label handles are resolved once at start, so recording on the request path is a few atomic
//! operations: no label hashing, no allocation. The ones every request touches are per-thread
//! shards folded when scraped ([`sharded`]): no atomic shared by all threads on the request path.

mod registry;
mod sharded;

use std::sync::Arc;

use sharded::{Count, Counters, Spread, Spreads};

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Registry, TextEncoder,
};

/// Buckets of `anteroom_request_duration_seconds`.
const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

use crate::proxy::Outcome;

/// Outcomes in label order; `Outcome as usize` indexes it.
pub const OUTCOMES: [&str; 10] = [
    "pass", "admit", "wait", "consume", "reject", "status", "bypass", "asset", "redirect",
    "receipt",
];
/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    Full = 0,
    Consumed = 1,
    Store = 2,
    BadRequest = 3,
    JoinLimit = 4,
    /// Waited `origin-queue-timeout` for a slot under `max-origin-inflight`.
    OriginBusy = 5,
    /// A search crawler, where a visitor would have waited (`crawlers = "refuse"`).
    Crawler = 6,
    /// A room that queues nobody (`queueing = "reject"`).
    Closed = 7,
    /// A newcomer after an event's closing.
    Ended = 8,
    /// A CORS preflight, which carries no admission and takes no place.
    Preflight = 9,
}
const REJECTS: [&str; 10] = [
    "full",
    "consumed",
    "store",
    "bad_request",
    "join_limit",
    "origin_busy",
    "crawler",
    "closed",
    "ended",
    "preflight",
];

/// The labels of `anteroom_join_challenges_total`, indexed by [`Challenge`].
pub const CHALLENGES: [&str; 4] = ["asked", "solved", "failed", "strict"];

/// What became of a join challenge (the discriminant indexes [`CHALLENGES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    Asked = 0,
    Solved = 1,
    Failed = 2,
    Strict = 3,
}

/// The labels of `anteroom_origin_commands_total`, indexed by [`OriginCommand`].
pub const ORIGIN_COMMANDS: [&str; 4] = ["complete", "revoke", "unknown", "unadmitted"];

/// What an origin's `Anteroom-Command` was (the discriminant indexes [`ORIGIN_COMMANDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginCommand {
    Complete = 0,
    Revoke = 1,
    Unknown = 2,
    Unadmitted = 3,
}

/// One room's handles.
pub struct RoomMetrics {
    pub waiting: IntGauge,
    pub active: IntGauge,
    pub admitted: IntCounter,
    pub joined: IntCounter,
    pub wait: Histogram,
    /// Admitted visitors' actual ÷ predicted wait (see [`crate::line::accuracy`]).
    pub eta_error: Histogram,
    /// Visitors in line told their place from this instance's snapshot, and by the store.
    pub polls_edge: Arc<Count>,
    pub polls_store: Arc<Count>,
    /// `max-origin-inflight`: requests holding a slot and waiting for one (set when scraped),
    /// and waits that ran out.
    pub origin_inflight: IntGauge,
    pub origin_queued: IntGauge,
    pub origin_timeouts: IntCounter,
    /// The rate in force (the autopilot's, an override, or the configured), and the origin's
    /// health the autopilot last saw (all instances' window).
    pub admit_rate: Gauge,
    pub origin_p90: Gauge,
    pub origin_error_share: Gauge,
    /// Requests let past the line, by `bypass` rule (in the room's order).
    pub bypassed: Vec<Arc<Count>>,
    /// The origin's `Anteroom-Command` answers, by [`ORIGIN_COMMANDS`].
    pub origin_commands: Vec<Arc<Count>>,
    /// The join challenge, by [`CHALLENGES`].
    pub challenges: Vec<Arc<Count>>,
    requests: Vec<Arc<Count>>,
    rejected: Vec<Arc<Count>>,
}

pub struct Metrics {
    registry: Registry,
    waiting: IntGaugeVec,
    active: IntGaugeVec,
    admitted: IntCounterVec,
    joined: IntCounterVec,
    rejected: Counters,
    requests: Counters,
    wait: HistogramVec,
    eta_error: HistogramVec,
    polls: Counters,
    bypassed: Counters,
    origin_commands: Counters,
    challenges: Counters,
    origin_inflight: IntGaugeVec,
    origin_queued: IntGaugeVec,
    origin_timeouts: IntCounterVec,
    admit_rate: GaugeVec,
    origin_p90: GaugeVec,
    origin_error_share: GaugeVec,
    /// Requests outside every room (`room="-"`).
    unrouted: Vec<Arc<Count>>,
    unrouted_rejected: Vec<Arc<Count>>,
    duration: Vec<Arc<Spread>>,
    store_errors: IntCounterVec,
    pub breaker_open: IntGauge,
    /// Per room: see [`crate::breaker::Breakers`].
    pub room_breaker_open: IntGaugeVec,
    /// Reloads by outcome (`applied`, `refused`).
    pub config_reloads: IntCounterVec,
    /// Per upstream and server of an upstream with `addrs` or a health check: 1 while it is
    /// in rotation, 0 while its health check fails.
    pub origin_server_up: IntGaugeVec,
}

impl Metrics {
    /// A room's handles (resolved once per configuration load).
    /// One room's handles; `bypass_rules` are its rules' labels, in order.
    pub fn room(&self, name: &str, bypass_rules: &[String]) -> RoomMetrics {
        RoomMetrics {
            bypassed: bypass_rules
                .iter()
                .map(|rule| self.bypassed.with_labels(&[name, rule]))
                .collect(),
            origin_commands: ORIGIN_COMMANDS
                .iter()
                .map(|c| self.origin_commands.with_labels(&[name, c]))
                .collect(),
            challenges: CHALLENGES
                .iter()
                .map(|c| self.challenges.with_labels(&[name, c]))
                .collect(),
            waiting: self.waiting.with_label_values(&[name]),
            active: self.active.with_label_values(&[name]),
            admitted: self.admitted.with_label_values(&[name]),
            joined: self.joined.with_label_values(&[name]),
            wait: self.wait.with_label_values(&[name]),
            eta_error: self.eta_error.with_label_values(&[name]),
            polls_edge: self.polls.with_labels(&[name, "edge"]),
            polls_store: self.polls.with_labels(&[name, "store"]),
            origin_inflight: self.origin_inflight.with_label_values(&[name]),
            origin_queued: self.origin_queued.with_label_values(&[name]),
            origin_timeouts: self.origin_timeouts.with_label_values(&[name]),
            admit_rate: self.admit_rate.with_label_values(&[name]),
            origin_p90: self.origin_p90.with_label_values(&[name]),
            origin_error_share: self.origin_error_share.with_label_values(&[name]),
            requests: OUTCOMES
                .iter()
                .map(|o| self.requests.with_labels(&[name, o]))
                .collect(),
            rejected: REJECTS
                .iter()
                .map(|x| self.rejected.with_labels(&[name, x]))
                .collect(),
        }
    }

    /// Takes the gauges of rooms a reload removed out of the export: their last values stayed
    /// (found by review: a removed room's `anteroom_active` and `anteroom_admit_rate` were
    /// summed with the others' until a restart). Its counters stay, as counters do.
    pub fn forget_rooms(&self, names: &[String]) {
        for name in names {
            let label = [name.as_str()];
            let _ = self.waiting.remove_label_values(&label);
            let _ = self.active.remove_label_values(&label);
            let _ = self.origin_inflight.remove_label_values(&label);
            let _ = self.origin_queued.remove_label_values(&label);
            let _ = self.admit_rate.remove_label_values(&label);
            let _ = self.origin_p90.remove_label_values(&label);
            let _ = self.origin_error_share.remove_label_values(&label);
            let _ = self.room_breaker_open.remove_label_values(&label);
        }
    }

    /// One finished request.
    pub fn request(
        &self,
        room: Option<&RoomMetrics>,
        outcome: Outcome,
        reject: Option<Reject>,
        seconds: f64,
    ) {
        let (requests, rejected) = match room {
            Some(r) => (&r.requests, &r.rejected),
            None => (&self.unrouted, &self.unrouted_rejected),
        };
        if let Some(c) = requests.get(outcome as usize) {
            c.inc();
        }
        if let Some(c) = reject.and_then(|r| rejected.get(r as usize)) {
            c.inc();
        }
        if let Some(h) = self.duration.get(outcome as usize) {
            h.observe(seconds);
        }
    }

    pub fn store_error(&self, op: &str, kind: &str) {
        self.store_errors.with_label_values(&[op, kind]).inc();
    }

    /// The Prometheus text format.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}
