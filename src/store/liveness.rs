//! The room's liveness clock: the time in which "last seen" is stamped and silence is measured.
//!
//! Silence is abandonment only if the visitor could have polled. While the store cannot be
//! reached (an outage, a paused Redis, a stalled process) nobody can, so that time must not
//! count: after an outage longer than `abandon-after` every waiting visitor would otherwise look
//! silent and the line would be emptied. The clock therefore advances only when a store call
//! reaches the room, and by at most [`cap`] per step, however long the gap before it: a gap
//! longer than the cap is time in which the room could not be polled (or not admitted from).
//! A step of the wall clock back (Redis `TIME` after a failover) counts as zero, and the base is
//! moved to the new time, so the clock never goes back either.
//!
//! Who advances it: every `admit` (each instance's tick, so it tracks real time while the loop
//! runs), and a `join` whose step is capped, the clock's first step, or a step back — so that a
//! status poll writes nothing in normal operation, yet a room whose visitors keep polling while
//! no admit runs still sees time pass. The Redis scripts implement the same rule in
//! `lua/prelude.lua` (`liveness`); the conformance suite holds the two to it.

use std::time::Duration;

use crate::clock::{micros, Micros};

/// The most one step may add: a few ticks, at least a second. Small against `abandon-after`
/// (so an outage costs at most this much of a visitor's allowance) and above the spacing of
/// healthy admit calls (so a late tick loses no time).
pub fn cap(tick: Duration) -> Micros {
    micros(tick).saturating_mul(4).max(1_000_000)
}

/// The stored clock: its value and the store time (wall for Redis, monotonic for memory) of
/// its last step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Liveness {
    pub value: Micros,
    pub at: Option<Micros>,
}

/// One reading of the clock at store time `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The clock's value now: what "last seen" is stamped with and compared against.
    pub value: Micros,
    /// Whether the caller must store `(value, now)`; an admit always does.
    pub store: bool,
}

impl Liveness {
    /// Reads the clock at `now`. `always`: store the step whatever its size (admit).
    pub fn read(&self, now: Micros, cap: Micros, always: bool) -> Reading {
        let Some(at) = self.at else {
            // A new room (or one from before this clock): start at the store time, which is
            // also what the slots of any visitor already in line were stamped with.
            return Reading {
                value: now,
                store: true,
            };
        };
        if now < at {
            return Reading {
                value: self.value,
                store: true,
            };
        }
        let elapsed = now - at;
        if elapsed >= cap {
            return Reading {
                value: self.value.saturating_add(cap),
                store: true,
            };
        }
        Reading {
            value: self.value.saturating_add(elapsed),
            store: always,
        }
    }

    /// Reads the clock and keeps the step when the reading says so.
    pub fn step(&mut self, now: Micros, cap: Micros, always: bool) -> Micros {
        let r = self.read(now, cap, always);
        if r.store {
            *self = Liveness {
                value: r.value,
                at: Some(now),
            };
        }
        r.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    #[test]
    fn the_cap_is_a_few_ticks_and_at_least_a_second() {
        assert_eq!(cap(Duration::from_millis(100)), S);
        assert_eq!(cap(Duration::from_secs(2)), 8 * S);
    }

    #[test]
    fn it_follows_time_while_calls_come_and_stalls_across_a_gap() {
        let mut c = Liveness::default();
        assert_eq!(
            c.step(100 * S, S, true),
            100 * S,
            "starts at the store time"
        );
        for i in 1..=10 {
            assert_eq!(c.step(100 * S + i * S / 10, S, true), 100 * S + i * S / 10);
        }
        // Sixty seconds without a call: one capped step.
        assert_eq!(c.step(161 * S, S, true), 102 * S);
        assert_eq!(c.step(161 * S + S / 2, S, true), 102 * S + S / 2);
    }

    #[test]
    fn a_poll_stores_only_capped_steps_and_step_backs() {
        let c = Liveness {
            value: 50 * S,
            at: Some(200 * S),
        };
        let r = c.read(200 * S + S / 2, S, false);
        assert_eq!((r.value, r.store), (50 * S + S / 2, false));
        let r = c.read(230 * S, S, false);
        assert_eq!((r.value, r.store), (51 * S, true));
        let r = c.read(170 * S, S, false);
        assert_eq!(
            (r.value, r.store),
            (50 * S, true),
            "a step back is zero elapsed"
        );
        assert!(c.read(200 * S, S, true).store, "admit always stores");
    }

    #[test]
    fn a_step_back_rebases_and_time_counts_again_from_there() {
        let mut c = Liveness::default();
        c.step(1000 * S, S, true);
        assert_eq!(c.step(970 * S, S, true), 1000 * S);
        assert_eq!(c.step(970 * S + S / 2, S, true), 1000 * S + S / 2);
    }
}
