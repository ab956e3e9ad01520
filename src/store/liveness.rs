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

/// What a gap forgives: deadlines in `(from, to]` move on by `shift`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forgiven {
    pub from: Micros,
    pub to: Micros,
    pub shift: Micros,
}

/// A gap costs no admission its deadline either. Time past the cap in which no call reached
/// the room — an outage, a paused Redis, every instance stopped — is time in which a visitor
/// whose turn had come could not collect it: a claim (`claim-ttl`, the time to come back for
/// the admission) must not run out in it, or a pause longer than `claim-ttl` would send the
/// visitor at the head of the line to its back. So the deadlines from the gap's start (`at`,
/// the clock's last step, or `forgave_at`, the last gap forgiven) to `claim` after it move on
/// by the gap less the cap; a session near its end among them keeps its slot that much longer,
/// which is harmless. Once per gap (the caller keeps `now` as `forgave_at`). `lua/prelude.lua`
/// (`forgive_gap`) implements the same rule.
pub fn forgiven(
    at: Option<Micros>,
    forgave_at: Option<Micros>,
    now: Micros,
    cap: Micros,
    claim: Micros,
) -> Option<Forgiven> {
    let base = at?.max(forgave_at.unwrap_or(0));
    let gap = now.checked_sub(base)?;
    (gap > cap).then(|| Forgiven {
        from: base,
        to: base.saturating_add(claim),
        shift: gap - cap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    #[test]
    fn a_gap_forgives_the_deadlines_a_claim_long_from_its_start_once() {
        let cap = S;
        // No gap: calls a tick apart, or no clock yet, or a step back.
        assert_eq!(
            forgiven(Some(10 * S), None, 10 * S + cap, cap, 60 * S),
            None
        );
        assert_eq!(forgiven(None, None, 100 * S, cap, 60 * S), None);
        assert_eq!(forgiven(Some(10 * S), None, 5 * S, cap, 60 * S), None);
        // A 30 s pause after the last step at 10 s.
        let f = forgiven(Some(10 * S), None, 40 * S, cap, 60 * S).unwrap();
        assert_eq!(
            f,
            Forgiven {
                from: 10 * S,
                to: 70 * S,
                shift: 29 * S
            }
        );
        // Forgiven at 40 s: the next call, before the clock stepped, forgives nothing again.
        assert_eq!(
            forgiven(Some(10 * S), Some(40 * S), 40 * S + S / 2, cap, 60 * S),
            None
        );
    }

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
