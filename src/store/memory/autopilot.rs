//! The memory store's autopilot: the same keeping as `lua/admit.lua` (one rate, a proposal
//! taken only when decided from the last step), for the one instance there is.

use super::*;
use crate::store::autopilot::{AutopilotState, AutopilotTick};

/// What the memory store keeps of a room's autopilot.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// The last admit call had an autopilot (the config has one).
    configured: bool,
    rate: Option<f64>,
    at: Micros,
    reason: String,
    from: Option<f64>,
    judged_p90: Option<Duration>,
}

impl RoomData {
    fn autopilot_running(&self) -> bool {
        self.autopilot.configured
            && self.state.autopilot != Some(false)
            && self.state.admit_per_second.is_none()
            && self.state.event_rate.is_none()
    }

    /// After a change of the room's state: the rate in force follows (a pin or a switch-off
    /// stops the autopilot's rate applying; clearing them resumes it).
    pub(super) fn autopilot_follows_state(&mut self) {
        self.state.autopilot_rate = if self.autopilot_running() {
            self.autopilot.rate
        } else {
            None
        };
    }

    /// One admit call's autopilot part, at `now`.
    pub(super) fn steer(
        &mut self,
        tick: Option<&AutopilotTick>,
        now: Micros,
    ) -> Option<AutopilotState> {
        self.autopilot.configured = tick.is_some();
        let Some(tick) = tick else {
            self.autopilot_follows_state();
            return None;
        };
        let running = self.autopilot_running();
        let k = &mut self.autopilot;
        if running {
            if k.rate.is_none() {
                *k = Kept {
                    configured: true,
                    rate: Some(tick.start),
                    at: now,
                    reason: "start".into(),
                    from: None,
                    judged_p90: None,
                };
            } else if let Some(p) = tick
                .proposal
                .as_ref()
                .filter(|p| p.based_on == k.at.to_string())
            {
                // A hold notes the window judged; a change also the rate and why.
                if k.rate != Some(p.rate) {
                    k.from = k.rate;
                    k.rate = Some(p.rate);
                    k.reason = p.reason.to_string();
                }
                k.at = now;
                k.judged_p90 = Some(p.judged_p90);
            }
        }
        let state = AutopilotState {
            running,
            rate: k.rate,
            changed_at: if k.rate.is_some() {
                k.at.to_string()
            } else {
                String::new()
            },
            now,
            reason: k.reason.clone(),
            from: k.from,
            judged_p90: k.judged_p90,
            health: tick.report,
        };
        self.autopilot_follows_state();
        Some(state)
    }
}
