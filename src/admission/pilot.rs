//! The autopilot in the admission loop: at each tick, fold the upstream's health into the
//! room's window, decide from what the last tick learned, and hand both to the admit call;
//! after it, keep what the store answered, log a change, and set the metrics.

use std::sync::Mutex;

use super::autopilot::{self, Reason};
use super::health::{judged, HealthWindow};
use crate::app::Shared;
use crate::store::autopilot::{AutopilotState, AutopilotTick, Proposal};
use crate::store::AdmitReport;

/// A room's autopilot between ticks (only its admission task writes it; the admin API reads).
#[derive(Debug, Default)]
pub struct Pilot {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    window: HealthWindow,
    /// What the store said at the last tick, and whether the rate then held the line.
    last: Option<AutopilotState>,
    rate_holds_the_line: bool,
    /// The rate in force during the window the store judged last (the rate before that
    /// judgement): what sent the orders whose wait the window after it shows.
    rate_before: Option<f64>,
}

impl Pilot {
    /// The autopilot as last seen (for the admin API).
    pub fn last(&self) -> Option<AutopilotState> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last
            .clone()
    }
}

/// The autopilot part of this tick's admit call (`None`: the room has none).
pub fn prepare(shared: &Shared, room: usize) -> Option<AutopilotTick> {
    let r = &shared.rooms[room];
    let cfg = r.cfg.autopilot?;
    let p = &r.cfg.params;
    let ceiling = p.admit_per_second;
    let slots = (cfg.window.as_micros() / p.tick.as_micros().max(1)).max(1) as usize;
    let health = shared.origin_health.get(r.cfg.upstream)?.as_ref()?;
    let second = shared.clock.mono_micros() / 1_000_000;
    // The window in whole seconds, and the part of a second it starts in.
    let within = cfg.window.as_secs_f64().ceil() as u64 + 1;
    let sources = health.sources(second, within);
    let mut pilot = r.pilot.inner.lock().unwrap_or_else(|e| e.into_inner());
    let window = pilot.window.tick(health.read(), slots);
    let report = judged(window, sources, cfg.target_latency, health.slow_over());
    let proposal = pilot
        .last
        .as_ref()
        .filter(|s| s.running && s.since_step() >= cfg.window)
        .and_then(|s| {
            let current = s.rate?;
            // One decision per window: a hold is proposed too (the store keeps the rate and
            // notes the window judged), so the next decision compares with this window.
            let previous = s.judged_p90.map(|p90| autopilot::Previous {
                p90,
                rate: pilot.rate_before.unwrap_or(current),
            });
            let step = autopilot::decide(
                &cfg,
                ceiling,
                current,
                &s.health,
                previous,
                pilot.rate_holds_the_line,
            );
            Some(Proposal {
                rate: step.map_or(current, |st| st.rate),
                reason: step.map_or("hold", |st| st.reason.as_str()),
                based_on: s.changed_at.clone(),
                judged_p90: s.health.p90,
            })
        });
    Some(AutopilotTick {
        start: autopilot::start_rate(&cfg, ceiling),
        report,
        proposal,
    })
}

/// After the admit call: keep the store's answer; log and count a step the room took.
pub fn learn(shared: &Shared, room: usize, report: &AdmitReport) {
    let r = &shared.rooms[room];
    let Some(state) = report.autopilot.clone() else {
        return;
    };
    let p = &r.cfg.params;
    let mut pilot = r.pilot.inner.lock().unwrap_or_else(|e| e.into_inner());
    // A new judgement: the rate before it was in force during the window it judged.
    let judged = pilot
        .last
        .as_ref()
        .filter(|l| l.changed_at != state.changed_at)
        .map(|l| l.rate);
    if let Some(rate) = judged {
        pilot.rate_before = rate;
    }
    let stepped = judged.is_some_and(|rate| rate != state.rate);
    if stepped || pilot.last.is_none() {
        let reason = Reason::parse(&state.reason).map_or("?", Reason::as_str);
        tracing::info!(
            room = r.name(),
            // In force here (never above this instance's ceiling), and as the store keeps it.
            rate = state.rate.unwrap_or(0.0).min(p.admit_per_second),
            shared_rate = state.rate.unwrap_or(0.0),
            from = state.from,
            reason,
            p90_ms = crate::logwriter::millis(state.health.p90.as_secs_f64()),
            error_share = state.health.error_share(),
            requests = state.health.requests,
            ceiling = p.admit_per_second,
            "autopilot: admission rate set"
        );
    }
    pilot.rate_holds_the_line = report.waiting > 0
        && report.state.enabled
        && !report.state.queue_all
        && report.active < p.max_active(&report.state);
    let m = &r.metrics;
    m.origin_p90.set(state.health.p90.as_secs_f64());
    m.origin_error_share.set(state.health.error_share());
    pilot.last = Some(state);
}
