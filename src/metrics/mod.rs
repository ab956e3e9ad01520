//! Prometheus metrics (the `prometheus` crate Pingora integrates with), served by the admin API.
//!
//! Label handles are resolved once at start, so recording on the request path is a few atomic
//! operations: no label hashing, no allocation. The ones every request touches are per-thread
//! shards folded when scraped ([`sharded`]): no atomic shared by all threads on the request path.

mod sharded;

use std::sync::Arc;

use sharded::{Count, Counters, Spread, Spreads};

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Buckets of `anteroom_request_duration_seconds`.
const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

use crate::proxy::Outcome;

/// Outcomes in label order; `Outcome as usize` indexes it.
pub const OUTCOMES: [&str; 9] = [
    "pass", "admit", "wait", "consume", "reject", "status", "bypass", "asset", "redirect",
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
}
const REJECTS: [&str; 9] = [
    "full",
    "consumed",
    "store",
    "bad_request",
    "join_limit",
    "origin_busy",
    "crawler",
    "closed",
    "ended",
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
    /// Reloads by outcome (`applied`, `refused`).
    pub config_reloads: IntCounterVec,
    /// Per upstream and server of an upstream with `addrs` or a health check: 1 while it is
    /// in rotation, 0 while its health check fails.
    pub origin_server_up: IntGaugeVec,
}

fn register<T: prometheus::core::Collector + Clone + 'static>(
    r: &Registry,
    c: T,
) -> Result<T, prometheus::Error> {
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let r = Registry::new();
        let waiting = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "anteroom_waiting",
                    "Visitors in line (the store's figure at the last tick).",
                ),
                &["room"],
            )?,
        )?;
        let active = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "anteroom_active",
                    "Admitted sessions not yet expired (the store's figure at the last tick).",
                ),
                &["room"],
            )?,
        )?;
        let admitted = register(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "anteroom_admitted_total",
                    "Admissions made by this instance (fast path and admission loop).",
                ),
                &["room"],
            )?,
        )?;
        let joined = register(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "anteroom_joined_total",
                    "Visitors this instance put in line or let in at once.",
                ),
                &["room"],
            )?,
        )?;
        let rejected = register(
            &r,
            Counters::new(
                "anteroom_rejected_total",
                "Requests refused, by reason.",
                &["room", "reason"],
            )?,
        )?;
        let requests = register(
            &r,
            Counters::new(
                "anteroom_requests_total",
                "Requests by room and outcome.",
                &["room", "outcome"],
            )?,
        )?;
        let duration = register(
            &r,
            Spreads::new(
                "anteroom_request_duration_seconds",
                "Time from the request to the end of the response, by outcome.",
                &["outcome"],
                DURATION_BUCKETS.to_vec(),
            )?,
        )?;
        let wait = register(
            &r,
            HistogramVec::new(
                HistogramOpts::new(
                    "anteroom_wait_seconds",
                    "Time from joining the line to admission.",
                )
                .buckets(vec![
                    1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
                ]),
                &["room"],
            )?,
        )?;
        let eta_error = register(
            &r,
            HistogramVec::new(
                HistogramOpts::new(
                    "anteroom_eta_error",
                    "Admitted visitors' actual wait divided by the first wait they were told \
                     (1 is exact; above 1, longer than told), for those this instance admitted \
                     and who were told a wait of a second or more.",
                )
                .buckets(vec![
                    0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0,
                ]),
                &["room"],
            )?,
        )?;
        let bypassed = register(
            &r,
            Counters::new(
                "anteroom_bypassed_total",
                "Requests let past the line, by room and bypass rule.",
                &["room", "rule"],
            )?,
        )?;
        let origin_commands = register(
            &r,
            Counters::new(
                "anteroom_origin_commands_total",
                "Anteroom-Command headers the origin sent (origin-commands rooms), by room and \
                 command: \"complete\", \"revoke\", \"unknown\" (another word, ignored) or \
                 \"unadmitted\" (on a request that carried no admission, ignored).",
                &["room", "command"],
            )?,
        )?;
        let challenges = register(
            &r,
            Counters::new(
                "anteroom_join_challenges_total",
                "The join challenge (join-challenge rooms), by room and result: \"asked\" (a \
                 newcomer given the puzzle), \"solved\" (a solution that verified, joining), \
                 \"failed\" (a solution that did not), \"strict\" (joined without one, under \
                 the stricter limit).",
                &["room", "result"],
            )?,
        )?;
        let polls = register(
            &r,
            Counters::new(
                "anteroom_polls_total",
                "Answers to visitors in line (waiting pages and status polls) by this \
                 instance, by who answered: \"edge\" (from the line's snapshot, with a \
                 queue ticket; no store call) or \"store\" (a join call).",
                &["room", "answered"],
            )?,
        )?;
        let origin_inflight = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "anteroom_origin_inflight",
                    "Requests of a room with max-origin-inflight holding a slot to its origin on \
                     this instance.",
                ),
                &["room"],
            )?,
        )?;
        let origin_queued = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "anteroom_origin_queued",
                    "Requests waiting at this instance for a slot to the origin \
                     (max-origin-inflight reached).",
                ),
                &["room"],
            )?,
        )?;
        let origin_timeouts = register(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "anteroom_origin_queue_timeouts_total",
                    "Requests that waited origin-queue-timeout for a slot and got a 503 (nothing \
                     consumed).",
                ),
                &["room"],
            )?,
        )?;
        let gauge = |name: &str, help: &str| -> Result<GaugeVec, prometheus::Error> {
            register(&r, GaugeVec::new(Opts::new(name, help), &["room"])?)
        };
        let admit_rate = gauge(
            "anteroom_admit_rate",
            "Admissions per second in force: an operator's override, the autopilot's rate, or the configured one (as of the last tick).",
        )?;
        let origin_p90 = gauge(
            "anteroom_origin_latency_p90_seconds",
            "The origin's p90 time to a response header for admitted requests over the autopilot's last window, all instances (rooms with an autopilot).",
        )?;
        let origin_error_share = gauge(
            "anteroom_origin_error_share",
            "Share of admitted requests the origin failed (5xx, timeouts, refused) over the autopilot's last window, all instances (rooms with an autopilot).",
        )?;
        let store_errors = register(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "anteroom_store_errors_total",
                    "Store calls that failed, by operation and kind (error, timeout, breaker).",
                ),
                &["op", "kind"],
            )?,
        )?;
        let breaker_open = register(
            &r,
            IntGauge::new(
                "anteroom_breaker_open",
                "1 while the store circuit breaker is open.",
            )?,
        )?;

        let config_reloads = register(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "anteroom_config_reloads_total",
                    "Reloads (SIGHUP) by outcome: applied, or refused (the running configuration stays).",
                ),
                &["result"],
            )?,
        )?;
        for result in ["applied", "refused"] {
            config_reloads.with_label_values(&[result]);
        }

        let origin_server_up = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "anteroom_origin_server_up",
                    "1 while an origin server of an upstream with several servers or a health check is in rotation, 0 while its health check fails.",
                ),
                &["upstream", "server"],
            )?,
        )?;

        // Every series exists from the start, at zero, so dashboards and alerts see it.
        for op in [
            "join",
            "admit",
            "touch",
            "consume",
            "room_state",
            "clear_waiting",
            "stats",
            crate::app::PROBE_OP,
        ] {
            for kind in ["error", "timeout", "breaker"] {
                store_errors.with_label_values(&[op, kind]);
            }
        }
        let unrouted = OUTCOMES
            .iter()
            .map(|o| requests.with_labels(&["-", o]))
            .collect();
        let unrouted_rejected = REJECTS
            .iter()
            .map(|x| rejected.with_labels(&["-", x]))
            .collect();
        Ok(Self {
            unrouted,
            unrouted_rejected,
            duration: OUTCOMES
                .iter()
                .map(|o| duration.with_labels(&[o]))
                .collect(),
            waiting,
            active,
            admitted,
            joined,
            rejected,
            requests,
            wait,
            eta_error,
            polls,
            bypassed,
            origin_commands,
            challenges,
            origin_inflight,
            origin_queued,
            origin_timeouts,
            admit_rate,
            origin_p90,
            origin_error_share,
            store_errors,
            breaker_open,
            config_reloads,
            origin_server_up,
            registry: r,
        })
    }

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
