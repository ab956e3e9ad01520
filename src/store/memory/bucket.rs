//! The memory store's token bucket, its one-tick window and the measured admission rate: the
//! same rules as the prelude's `refill`, `window_left` and admit.lua's meter.

use super::*;

/// Time constant of the measured admission rate.
const RATE_TAU_SECS: f64 = 10.0;

impl RoomData {
    pub(super) fn refill(&mut self, now: Micros, rate: f64, burst: f64) {
        let elapsed = match self.refilled_at {
            Some(at) => now.saturating_sub(at) as f64 / 1e6,
            // A new room starts with a full bucket, like a Redis bucket that has no key yet.
            None => f64::INFINITY,
        };
        self.tokens = (self.tokens + rate * elapsed).min(burst);
        self.refilled_at = Some(now);
    }

    /// How many more may be let in now without more than `burst` in any window of one tick (the
    /// bucket alone allows a full batch right after another when ticks come close together: a
    /// late tick and the next, or two instances).
    /// An entry stamped after `now` (the Redis clock stepped back; never with a monotonic clock,
    /// but the rule is the scripts') counts as made now, so it leaves the window a tick later.
    pub(super) fn window_left(&mut self, now: Micros, tick: Micros, burst: f64) -> u64 {
        for e in self.recent.iter_mut() {
            e.0 = e.0.min(now);
        }
        while self
            .recent
            .front()
            .is_some_and(|(t, _)| now.saturating_sub(*t) >= tick)
        {
            self.recent.pop_front();
        }
        let used: u64 = self.recent.iter().map(|(_, n)| n).sum();
        (burst as u64).saturating_sub(used)
    }

    pub(super) fn note_admitted(&mut self, now: Micros, n: u64) {
        if n > 0 {
            self.recent.push_back((now, n));
        }
    }

    /// Updates the measured admission rate. Only time in which visitors were waiting and the
    /// room admitted counts: with an empty line the admissions measure the demand, not what the
    /// room can admit, and would make the ETA of the next queue too pessimistic. So a tick that
    /// found nobody waiting, or the line held (`idle`), starts the window again: the time before
    /// a line formed would otherwise count in the first sample of a sale (a fraction of a
    /// second's admissions over a whole second), and ETAs stay low for ten seconds after. The
    /// first sample seeds the average. lua/admit.lua measures the same way.
    /// The measured rate's window starts at `now` (its rate kept).
    pub(super) fn restart_rate_window(&mut self, now: Micros) {
        self.measured_at = Some(now);
        self.measured_count = self.admitted_total;
    }

    pub(super) fn observe_rate(&mut self, now: Micros, idle: bool, forget: bool) {
        if idle {
            self.measured_at = Some(now);
            self.measured_count = self.admitted_total;
            // An empty line in a shop with room forgets its rate, as in admit.lua.
            if forget {
                self.measured_rate = 0.0;
            }
            return;
        }
        let Some(at) = self.measured_at.map(|at| at.min(now)) else {
            self.measured_at = Some(now);
            self.measured_count = self.admitted_total;
            return;
        };
        // A step back: measure from now on, as if no time had passed.
        self.measured_at = Some(at);
        let dt = now.saturating_sub(at) as f64 / 1e6;
        if dt < 1.0 {
            return;
        }
        if !self.waiters.is_empty() {
            let sample = (self.admitted_total - self.measured_count) as f64 / dt;
            if self.measured_rate == 0.0 {
                self.measured_rate = sample;
            } else {
                let alpha = 1.0 - (-dt / RATE_TAU_SECS).exp();
                self.measured_rate += alpha * (sample - self.measured_rate);
            }
        }
        self.measured_at = Some(now);
        self.measured_count = self.admitted_total;
    }
}
