//! The memory store's `passthrough` join (a dry run): the same steps, in the same order, as
//! the passthrough branch of `lua/join.lua`.

use super::*;

impl RoomData {
    /// Lets the visitor in (anyone found in line too), counting them when the line would have
    /// held them; only those who would have walked in spend the bucket and the tick's window.
    pub(super) fn pass_through(
        &mut self,
        p: &RoomParams,
        state: &RoomState,
        vid: VisitorId,
        gate: Option<&JoinGate>,
        now: Micros,
    ) -> Admission {
        let was_in_line = self.remove_waiter(vid).is_some();
        if !was_in_line {
            if gate.is_some_and(|g| g.known_only) {
                return Admission::Limited {
                    retry_after: std::time::Duration::from_secs(1),
                };
            }
            if let Some(retry_after) = gate.and_then(|g| self.count_join(g, vid, now)) {
                return Admission::Limited { retry_after };
            }
        }
        let rate = p.rate(state);
        let burst = p.burst(rate);
        self.refill(now, rate, burst);
        let walks_in = !state.queue_all
            && self.waiters.is_empty()
            && (self.active.len() as u64).saturating_add(self.hold_back) < p.max_active(state)
            && self.tokens >= 1.0
            && self.window_left(now, micros(p.tick), burst) >= 1;
        if walks_in {
            self.tokens -= 1.0;
            self.note_admitted(now, 1);
        } else {
            self.would_queue_total += 1;
        }
        self.activate(vid, now + micros(p.claim_ttl.min(p.session_ttl)));
        self.readmitted(vid);
        self.admitted_total += 1;
        if was_in_line {
            return Admission::EnteredFromLine;
        }
        self.joined_total += 1;
        Admission::Entered
    }
}
