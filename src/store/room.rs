//! What the store knows of a room: its parameters from the config ([`RoomParams`], with the
//! rate and cap in force and the burst), how it lets its line in ([`Queueing`]), and its runtime
//! state ([`RoomState`], changed by [`RoomPatch`]).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the store needs to know about a room, from the config.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomParams {
    pub name: Arc<str>,
    pub admit_per_second: f64,
    pub max_active: u64,
    pub max_waiting: u64,
    pub session_ttl: Duration,
    pub claim_ttl: Duration,
    pub abandon_after: Duration,
    pub tick: Duration,
    /// Who in line is let in next (`queueing`).
    pub queueing: Queueing,
}

/// How a room lets its line in (`queueing`; the events issue's methods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Queueing {
    /// First come, first served: the front of the line.
    #[default]
    Fifo,
    /// A uniformly random visitor of the line each time (each tick's batch drawn among all
    /// who wait): arriving first buys nothing.
    Random,
    /// A dry run: nobody queues, everyone is let in as a newcomer to an empty room would be,
    /// and each one the line would have held (no token, no slot of max-active, the line held)
    /// is counted ([`super::RoomStats::would_have_queued`]).
    Passthrough,
    /// Nobody queues and nobody in a line left from before is let in (newcomers get the room's
    /// "closed" answer from the proxy, before any store call); admitted sessions run on. Before
    /// (found by review), the store ran such a room as `fifo` and went on admitting the old line
    /// into claims that the "closed" answer never let anyone collect.
    Reject,
}

impl Queueing {
    pub fn as_str(self) -> &'static str {
        match self {
            Queueing::Fifo => "fifo",
            Queueing::Random => "random",
            Queueing::Passthrough => "passthrough",
            Queueing::Reject => "reject",
        }
    }
}

impl RoomParams {
    /// The rate in force, in this order: an operator's override (it pins the rate), the
    /// running event's, the autopilot's rate while it runs, the configured one.
    pub fn rate(&self, state: &RoomState) -> f64 {
        state
            .admit_per_second
            .or(state.event_rate)
            // The autopilot's, never above this instance's own ceiling (another instance's
            // file may allow more during a rolling reload).
            .or(state.autopilot_rate.map(|r| r.min(self.admit_per_second)))
            .unwrap_or(self.admit_per_second)
    }

    /// The cap in force: an operator's override, the running event's, the configured one.
    pub fn max_active(&self, state: &RoomState) -> u64 {
        state
            .max_active
            .or(state.event_max_active)
            .unwrap_or(self.max_active)
    }

    /// Bucket capacity: one tick's worth, at least one, so a burst never exceeds a tick's batch.
    pub fn burst(&self, rate: f64) -> f64 {
        // The epsilon keeps 20/s × 0.1 s at 2, whatever the float rounding.
        (rate * self.tick.as_secs_f64() - 1e-9).ceil().max(1.0)
    }

    /// How long the cookie of a fast-path entry is valid: as long as the store holds its slot,
    /// `claim-ttl` (a client without a cookie jar must not pin a session's worth), and never
    /// past a session. A return within it renews the cookie to a session (the sliding renewal,
    /// one store call); a return after it is a newcomer's, let in at once while nobody waits
    /// and a slot is free, else in line — as a claim nobody collected in time. (A cookie that
    /// outlived its slot let a reader back in past a full room, beside a visitor the slot went
    /// to: found by review.)
    pub fn fast_path_cookie_life(&self) -> Duration {
        self.claim_ttl.min(self.session_ttl)
    }

    /// The rate an ETA should assume: the measured one once there is a measurement, never more
    /// than the rate in force.
    pub fn eta_rate(&self, state: &RoomState, measured: f64) -> f64 {
        let configured = self.rate(state);
        if measured >= 0.05 {
            measured.min(configured)
        } else {
            configured
        }
    }
}

/// Runtime state of a room, kept in the store so every instance sees the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomState {
    /// `false` switches the room off: everyone passes, nobody queues.
    pub enabled: bool,
    /// Hold the line: nobody is admitted, newcomers queue even when there is room. Turning it
    /// off releases the queue in order.
    pub queue_all: bool,
    /// Override of `admit-per-second`.
    pub admit_per_second: Option<f64>,
    /// Override of `max-active`.
    pub max_active: Option<u64>,
    /// The autopilot switched at run time (`None`: as configured).
    #[serde(default)]
    pub autopilot: Option<bool>,
    /// The autopilot's rate while it steers the room (configured, not switched off, no
    /// override): read by [`RoomParams::rate`].
    #[serde(default)]
    pub autopilot_rate: Option<f64>,
    /// The running event's rate and cap (`[[room.event]]`), between an override and the
    /// autopilot: read by [`RoomParams::rate`] and [`RoomParams::max_active`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_max_active: Option<u64>,
    /// When (the store's clock, µs) an operator last changed this state, as a `room_state`
    /// call answered it (0: not known). An instance keeps the newest it has seen, and a
    /// re-assertion after a data loss carries it ([`RoomPatch::as_of`]).
    #[serde(default, skip_serializing)]
    pub changed_at: u64,
}

impl Default for RoomState {
    fn default() -> Self {
        Self {
            enabled: true,
            queue_all: false,
            admit_per_second: None,
            max_active: None,
            autopilot: None,
            autopilot_rate: None,
            event_rate: None,
            event_max_active: None,
            changed_at: 0,
        }
    }
}

/// A change to a room's runtime state; `None` leaves a field alone. For the overrides,
/// `Some(None)` goes back to the configured value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoomPatch {
    pub enabled: Option<bool>,
    pub queue_all: Option<bool>,
    pub admit_per_second: Option<Option<f64>>,
    pub max_active: Option<Option<u64>>,
    /// `Some(None)`: back to the config's.
    pub autopilot: Option<Option<bool>>,
    /// A re-assertion after a data loss of the state an operator changed at this time (the
    /// store's clock, µs; see [`RoomState::changed_at`]): applied only if the store holds no
    /// state changed as late or later (an operator's change since, or another instance's
    /// re-assertion of a newer one), whose state it then answers. Found by re-review: each
    /// instance re-asserted its own last state whole, so an instance that had not heard of a
    /// change made through another could undo it, whichever wrote last.
    pub as_of: Option<u64>,
}

impl RoomState {
    pub fn apply(&mut self, patch: &RoomPatch) {
        if let Some(v) = patch.enabled {
            self.enabled = v;
        }
        if let Some(v) = patch.queue_all {
            self.queue_all = v;
        }
        if let Some(v) = patch.admit_per_second {
            self.admit_per_second = v;
        }
        if let Some(v) = patch.max_active {
            self.max_active = v;
        }
        if let Some(v) = patch.autopilot {
            self.autopilot = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(session: u64, claim: u64) -> RoomParams {
        RoomParams {
            name: Arc::from("t"),
            admit_per_second: 1.0,
            max_active: 1,
            max_waiting: 1,
            session_ttl: Duration::from_secs(session),
            claim_ttl: Duration::from_secs(claim),
            abandon_after: Duration::from_secs(300),
            tick: Duration::from_millis(100),
            queueing: Queueing::Fifo,
        }
    }

    #[test]
    fn a_fast_path_cookie_lives_as_long_as_its_slot() {
        let p = params(600, 60);
        assert_eq!(
            p.fast_path_cookie_life(),
            p.claim_ttl,
            "no longer than the slot"
        );
        assert!(
            p.fast_path_cookie_life().as_secs() < p.session_ttl.as_secs() / 2,
            "the first return renews it"
        );
        assert_eq!(
            params(600, 400).fast_path_cookie_life(),
            Duration::from_secs(400)
        );
        assert_eq!(
            params(30, 60).fast_path_cookie_life(),
            Duration::from_secs(30),
            "never past a session"
        );
    }
}
