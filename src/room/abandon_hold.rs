//! A reload that lowers `abandon-after` keeps the old value in force for as long as it was.
//!
//! A waiting visitor's "last seen" reaches the store at most once every `abandon-after`/4 of
//! the value they polled under (edge answers batch it, see [`crate::line`]), so a note may be
//! that old while they keep polling. Judged at once by a shorter value, visitors who kept
//! polling were swept (found by review: `abandon-after` 2 min → 20 s by SIGHUP, a visitor
//! polling every second lost their place to one who came 40 s after them, on the memory store
//! and on Redis with two instances). Until the old value has run once more, the room sweeps
//! by it, on this instance's joins and admission steps (the store keeps the longest value an
//! instance reports for a while, see `abandon_after` in `lua/prelude.lua`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::{micros, Micros};

/// The value held from before a reload, and until when (µs; 0: none).
#[derive(Debug, Default)]
pub struct AbandonHold {
    held: AtomicU64,
    until: AtomicU64,
}

impl AbandonHold {
    /// The `abandon-after` to judge silence by at `now`: the configured one, or the one held
    /// from before a reload while the hold lasts, whichever is longer.
    pub fn in_force(&self, configured: Duration, now: Micros) -> Duration {
        let until = self.until.load(Ordering::Acquire);
        if until == 0 || now >= until {
            return configured;
        }
        configured.max(Duration::from_micros(self.held.load(Ordering::Acquire)))
    }

    /// At a reload from a room configured with `old` (and `from`, its hold) to one configured
    /// with `new`: a shorter value waits for the old one to run once more; a hold already
    /// running is carried over as it was, not renewed (found by re-review: every later reload
    /// renewed it, and a lowered value never took effect).
    pub fn inherit(&self, from: &AbandonHold, old: Duration, new: Duration, now: Micros) {
        let (mut held, mut until) = (0, 0);
        let from_until = from.until.load(Ordering::Acquire);
        if from_until != 0 && now < from_until {
            held = from.held.load(Ordering::Acquire);
            until = from_until;
        }
        if new < old {
            held = held.max(micros(old));
            until = until.max(now.saturating_add(micros(old)));
        }
        if held > micros(new) {
            self.held.store(held, Ordering::Release);
            self.until.store(until, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    #[test]
    fn a_shorter_value_waits_for_the_old_one_to_run_once_more() {
        let (old, new) = (Duration::from_secs(120), Duration::from_secs(20));
        let h = AbandonHold::default();
        assert_eq!(h.in_force(new, 0), new, "nothing held");
        h.inherit(&AbandonHold::default(), old, new, 100 * S);
        assert_eq!(h.in_force(new, 100 * S), old);
        assert_eq!(h.in_force(new, 219 * S), old);
        assert_eq!(h.in_force(new, 220 * S), new, "the old value has run");
        // A longer value is in force at once, and holds nothing.
        let longer = AbandonHold::default();
        longer.inherit(&AbandonHold::default(), new, old, 100 * S);
        assert_eq!(longer.in_force(old, 100 * S), old);
        // Configured longer than what is held: the configured one.
        assert_eq!(
            h.in_force(Duration::from_secs(300), 150 * S),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn a_later_reload_carries_the_hold_over_without_renewing_it() {
        let (old, new) = (Duration::from_secs(120), Duration::from_secs(20));
        let first = AbandonHold::default();
        first.inherit(&AbandonHold::default(), old, new, 100 * S);
        // An unrelated reload at 200 s (20 s configured before and after).
        let second = AbandonHold::default();
        second.inherit(&first, new, new, 200 * S);
        assert_eq!(second.in_force(new, 219 * S), old);
        assert_eq!(second.in_force(new, 220 * S), new, "not renewed");
        // Lowered again during the hold: the longer of the two holds, each to its own end.
        let (sixty, ten) = (Duration::from_secs(60), Duration::from_secs(10));
        let third = AbandonHold::default();
        third.inherit(&first, sixty, ten, 150 * S);
        assert_eq!(third.in_force(ten, 209 * S), old);
        assert_eq!(third.in_force(ten, 219 * S), old);
        assert_eq!(third.in_force(ten, 220 * S), ten, "both ended");
    }
}
