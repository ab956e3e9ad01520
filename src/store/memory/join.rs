//! The memory store's `join`: the same steps, in the same order, as `lua/join.lua`.

use super::*;

impl RoomData {
    /// Enters the line or looks up the place in it (the status poll); claims an admission whose
    /// turn has come; admits a newcomer at once when nobody waits and the rate and max-active
    /// allow. `now` is the monotonic clock, `wall` the store's clock events are decided by.
    pub(super) fn join(
        &mut self,
        p: &RoomParams,
        vid: VisitorId,
        ctx: &JoinContext<'_>,
        now: Micros,
        wall: Micros,
    ) -> Admission {
        let r = self;
        let at = r.event_now(ctx.events, wall);
        let in_pre = at.in_pre();
        let state = r.state_in(&at);
        if !state.enabled {
            return Admission::Open;
        }
        // Events older than the runtime changes kept here: no event step by them, and a
        // newcomer is not placed (as in join.lua).
        let stale = ctx.events_version.is_some_and(|v| v != r.events_version());
        if !stale {
            r.note_prequeue(&at, now);
        }
        if let Some(exp) = r.active.get(&vid).copied() {
            // A pre-queue admits nobody: a session there (an order's, given back) ends, and
            // its holder registers (as in join.lua).
            if !in_pre || stale {
                // An order of this session in flight: no admission until it is settled (as in
                // join.lua; review r102b).
                let live = r.live_peek(p, now);
                let left = r.pending_live.left(&vid, live);
                if left > 0 {
                    // Kept as long as the record and a step of the clock (as in join.lua;
                    // re-review r104a).
                    let keep = now + left + crate::store::liveness::cap(p.tick);
                    if exp < keep {
                        r.activate(vid, keep);
                    }
                    return Admission::Settling {
                        waiting: r.waiters.len() as u64,
                    };
                }
                r.renew(vid, now + micros(p.session_ttl));
                // Kept, but not let in by events older than the store's (as in join.lua;
                // review r103b).
                if stale {
                    return Admission::Unplaced {
                        waiting: r.waiters.len() as u64,
                    };
                }
                return Admission::Admitted;
            }
            r.active.remove(&vid);
            r.expiries.remove(&(exp, vid));
        }
        // Not past a hold or through an event (as in join.lua).
        if p.queueing == Queueing::Passthrough && !state.queue_all && at.event.is_none() {
            return r.pass_through(p, &state, vid, ctx.gate, now);
        }
        let waiting = r.waiters.len() as u64;
        if let Some(seq) = r.waiters.get(&vid).map(|w| w.seq) {
            r.seen_now(vid, in_pre);
            return r.answer(p, &state, seq, waiting, false, in_pre);
        }
        if stale {
            return Admission::Unplaced { waiting };
        }
        if at.closed() {
            return Admission::Ended;
        }
        if let Some(g) = ctx.gate {
            // Past the limit on the caller already: a newcomer is refused, uncounted (as in
            // join.lua).
            if g.known_only {
                return Admission::Limited {
                    retry_after: Duration::from_secs(1),
                };
            }
            if let Some(retry_after) = r.count_join(g, vid, now) {
                return Admission::Limited { retry_after };
            }
        }
        let rate = p.rate(&state);
        let burst = p.burst(rate);
        r.refill(now, rate, burst);
        let full = (r.active.len() as u64).saturating_add(r.hold_back) >= p.max_active(&state);
        if !state.queue_all
            && !in_pre
            && r.waiters.is_empty()
            && !full
            && r.tokens >= 1.0
            && r.window_left(now, micros(p.tick), burst) >= 1
        {
            r.tokens -= 1.0;
            r.note_admitted(now, 1);
            // Held for claim-ttl until the visitor comes back with the cookie: a client
            // without a cookie jar does not pin a session's worth of max-active.
            r.activate(vid, now + micros(p.claim_ttl.min(p.session_ttl)));
            r.readmitted(vid);
            r.admitted_total += 1;
            r.joined_total += 1;
            return Admission::Entered;
        }
        if waiting >= p.max_waiting {
            return Admission::Full { waiting };
        }
        if r.waiters.is_empty() {
            // An empty line starts a new epoch (as in Redis): no old ticket names a place.
            r.new_line();
        }
        let (seq, _) = r.place_for(&at, ctx.draws, vid);
        r.enqueue_at(vid, seq, now, in_pre);
        r.joined_total += 1;
        let mut placed = r.answer(p, &state, seq, waiting + 1, true, in_pre);
        if let Admission::Waiting { full: f, .. } = &mut placed {
            *f = full;
        }
        placed
    }
}
