//! Every metric registered, with its name and help text ([`Metrics::new`]).

use prometheus::{
    GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use super::*;

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
                     (max-origin-inflight reached), or for a place in their visitor's share \
                     of the slots before one.",
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
                "1 while the store circuit breaker of any room is open (or half open).",
            )?,
        )?;
        let room_breaker_open = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "anteroom_room_breaker_open",
                    "1 while the room's store circuit breaker is open (or half open).",
                ),
                &["room"],
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
            room_breaker_open,
            config_reloads,
            origin_server_up,
            registry: r,
        })
    }
}
