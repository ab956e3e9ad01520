//! What the autopilot exchanges with the store at each tick (see `src/admission/autopilot.rs`
//! for the decision, `lua/admit.lua` and the memory store for where it is kept): an instance
//! reports the origin's health it saw over the last window and may propose the next rate; the
//! store keeps one rate for every instance, takes at most one proposal per step (the one
//! based on the step it knows), and answers with the rate and the health of all instances.

use std::time::Duration;

/// The origin's health over one window: one instance's, or all instances' together.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Health {
    pub requests: u64,
    /// 5xx answers, timeouts and refused or broken connections.
    pub errors: u64,
    /// The 90th percentile of the time to the origin's response header.
    pub p90: Duration,
}

impl Health {
    pub fn error_share(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.errors as f64 / self.requests as f64
        }
    }

    /// Several instances' windows as one: counts added, the p90 weighted by requests (the p90
    /// of the union lies between the instances'; traffic spread evenly makes them close).
    pub fn combine(parts: &[Health]) -> Health {
        let requests: u64 = parts.iter().map(|h| h.requests).sum();
        let errors = parts.iter().map(|h| h.errors).sum();
        let weighted: f64 = parts
            .iter()
            .map(|h| h.p90.as_secs_f64() * h.requests as f64)
            .sum();
        Health {
            requests,
            errors,
            p90: if requests == 0 {
                Duration::ZERO
            } else {
                Duration::from_secs_f64(weighted / requests as f64)
            },
        }
    }
}

/// A next rate an instance proposes, decided from the step `based_on` names: a hold proposes
/// the rate in force (the store then only notes the window judged).
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub rate: f64,
    pub reason: &'static str,
    /// [`AutopilotState::changed_at`] of the state the decision was made from: a proposal
    /// based on an older step (another instance's proposal won meanwhile) is dropped.
    pub based_on: String,
    /// The p90 of the window judged: the next decision compares its own with it.
    pub judged_p90: Duration,
}

/// The autopilot part of an admit call.
#[derive(Debug, Clone, PartialEq)]
pub struct AutopilotTick {
    /// Where the rate starts when the store has none.
    pub start: f64,
    /// This instance's window.
    pub report: Health,
    pub proposal: Option<Proposal>,
}

/// The autopilot as the store knows it, after an admit call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AutopilotState {
    /// Steering the rate now: configured, not switched off at run time, no operator's pin.
    pub running: bool,
    /// The autopilot's rate (kept while it is paused, resumed from when it runs again).
    pub rate: Option<f64>,
    /// When the last window was judged, by a change or a hold (the store's clock, µs, as an
    /// opaque token for proposals).
    pub changed_at: String,
    /// The store's clock now, µs.
    pub now: u64,
    /// Why the rate last changed, and the rate before that change.
    pub reason: String,
    pub from: Option<f64>,
    /// The p90 of the window judged last.
    pub judged_p90: Option<Duration>,
    /// The live instances' windows together.
    pub health: Health,
}

impl AutopilotState {
    /// Microseconds since the last step (0 when unknown).
    pub fn since_step(&self) -> Duration {
        let at: u64 = self.changed_at.parse().unwrap_or(self.now);
        Duration::from_micros(self.now.saturating_sub(at))
    }
}
