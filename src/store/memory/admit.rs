//! The memory store's `admit`: one tick, the same steps in the same order as `lua/admit.lua`.

use super::*;

impl RoomData {
    /// One tick of the admission loop at monotonic `now` (wall clock `wall`, by which events
    /// are decided and revocations expire).
    pub(super) fn admit(
        &mut self,
        p: &RoomParams,
        ctx: &AdmitContext,
        now: Micros,
        wall: Micros,
    ) -> AdmitReport {
        let r = self;
        let (generation, new_generation) = r.generation_or_new();
        let stale = ctx
            .known_generation
            .as_deref()
            .is_some_and(|k| k != generation);
        if new_generation && ctx.known_generation.is_some() {
            // Lost data, noticed by a caller that knew the room: hold the line until it has
            // re-asserted the room's state (like admit.lua), keeping what the hold covers.
            r.loss_hold.get_or_insert(r.state.queue_all);
            r.state.queue_all = true;
        }
        // As in admit.lua: a call that finds the loss holds back what its caller will.
        r.hold_back = if stale {
            ctx.hold_back.max(ctx.hold_if_lost)
        } else {
            ctx.hold_back
        };
        r.config.clone_from(&ctx.config);
        // A gap before this call costs no claim its deadline, as in admit.lua (found by
        // re-review: the memory store's admit did not forgive it; only its other calls did).
        r.forgive_gap(now, p);
        // A step whose answer the caller never received gave turns it cannot tell: no turn
        // now, and those keep their claim from now, until it has heard one (admit.lua).
        let unheard = ctx.step.number > 0 && r.step.is_some_and(|last| last > ctx.step.heard);
        if unheard {
            let given = r.given.clone();
            r.keep_claims(&given, now, micros(p.claim_ttl));
        }
        let expired = r.prune_active(now);
        // No admit for longer than the clock's cap (the process was stopped): the rate's
        // window starts again, as admit.lua's `stalled`.
        // By the last admit's own time: a join steps the liveness clock too.
        let stalled = r
            .admitted_at
            .is_some_and(|at| now.saturating_sub(at) > crate::store::liveness::cap(p.tick));
        r.admitted_at = Some(now);
        let live = r.live(now, p.tick, true);
        let at = r.event_now(ctx.events.as_ref(), wall);
        let in_pre = at.in_pre();
        // Events older than the runtime changes kept here: no irreversible step, nobody admitted
        // (admit.lua's stale_events).
        let stale_events = ctx
            .events
            .as_ref()
            .and_then(|a| a.version)
            .is_some_and(|v| v != r.events_version());
        r.event_tick(&at, live, now, wall, stale_events);
        let line_draw = r.line_draw(ctx.events.as_ref(), stale_events);
        let event_state = r.state_in(&at);
        r.state.event_rate = event_state.event_rate;
        r.state.event_max_active = event_state.event_max_active;
        r.mark_seen_batch(&ctx.seen, in_pre, now, micros(p.claim_ttl));
        r.abandon_in_force = micros(p.abandon_after);
        let abandoned = r.prune_abandoned(live, micros(p.abandon_after));
        let autopilot = r.steer(ctx.autopilot.as_ref(), now);
        // With when an operator last changed it, as admit.lua's reply (review 45).
        let state = r.state_stamped();
        let rate = p.rate(&state);
        let burst = p.burst(rate);
        r.refill(now, rate, burst);
        let mut admitted = 0;
        let mut admitted_visitors = Vec::new();
        if state.enabled && !state.queue_all && !stale && !in_pre && !stale_events && !unheard {
            let room_left = p
                .max_active(&state)
                .saturating_sub(r.active.len() as u64)
                .saturating_sub(ctx.hold_back);
            let n = (r.tokens.floor() as u64)
                .min(room_left)
                .min(r.waiters.len() as u64)
                .min(r.window_left(now, micros(p.tick), burst));
            let until = now + micros(p.claim_ttl);
            // A draw's places in line go first, in its order, whatever the method; past them
            // the method holds again, within a tick too (admit.lua).
            let mut by_random = false;
            for _ in 0..n {
                let method = match p.queueing {
                    crate::store::Queueing::Random if r.drawn_in_line() => {
                        crate::store::Queueing::Fifo
                    }
                    q => q,
                };
                by_random |= method == crate::store::Queueing::Random;
                let Some(vid) = r.next_in(method) else {
                    break;
                };
                let seq = r.waiters.get(&vid).map(|w| w.seq);
                let joined_at = r.remove_waiter(vid).unwrap_or(now);
                let from = seq.map_or(joined_at, |seq| r.waited_from(seq, joined_at));
                r.activate(vid, until);
                r.readmitted(vid);
                admitted += 1;
                admitted_visitors.push(AdmittedVisitor {
                    vid,
                    waited: Duration::from_micros(now.saturating_sub(from)),
                });
            }
            if by_random && admitted > 0 {
                let until = now + micros(p.claim_ttl + p.tick * 2);
                r.random_until = Some(r.random_until.map_or(until, |u| u.max(until)));
            }
            r.tokens -= admitted as f64;
            r.note_admitted(now, admitted);
            r.admitted_total += admitted;
        }
        if ctx.step.number > 0 {
            r.step = Some(ctx.step.number);
            if !unheard {
                r.given = admitted_visitors.iter().map(|a| a.vid).collect();
            }
        }
        let idle = (admitted == 0 && r.waiters.is_empty())
            || !state.enabled
            || state.queue_all
            || stale
            || in_pre;
        let forget =
            admitted == 0 && r.waiters.is_empty() && (r.active.len() as u64) < p.max_active(&state);
        if stalled {
            r.restart_rate_window(now);
        }
        r.observe_rate(now, idle, forget);
        AdmitReport {
            admitted,
            admitted_visitors,
            abandoned,
            expired,
            waiting: r.waiters.len() as u64,
            active: r.active.len() as u64,
            measured_rate: r.measured_rate,
            state,
            instances: 1,
            generation,
            new_generation,
            admits: 0,
            line: r.sample(burst as u64),
            autopilot,
            revoked: r.revoked.after(ctx.revoked_after, stale, wall / 1_000_000),
            event: r.event_seen(&at, wall),
            events_version: r.events_version(),
            store_now: wall,
            random_recent: r.random_until.is_some_and(|until| now < until),
            events_mixed: false,
            draw_recommitted: false,
            held_back: r.hold_back,
            // One instance: its own.
            tick_hi: p.tick,
            // One instance: nobody else to wait for after a loss (memory loses nothing alone).
            heartbeat_hi: Duration::ZERO,
            untold_hold: false,
            line_draw,
        }
    }
}
