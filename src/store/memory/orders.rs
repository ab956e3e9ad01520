//! The memory store's side of an order: consume, settle and the renewal that must not bring a
//! used admission back — the same steps, in the same order, as `lua/consume.lua`,
//! `lua/settle.lua` and `lua/touch.lua` (see [`crate::store::order`]).

use std::time::Duration;

use super::RoomData;
use crate::clock::{micros, Micros};
use crate::store::liveness;
use crate::store::marks::Mark;
use crate::store::order::MARKER_MARGIN;
use crate::store::{Consumed, Order, RequestId, RoomParams, Settle, Settled, Touched, VisitorId};

/// The life of an admission from its order to its settlement; the same steps, in the same
/// order, as `lua/consume.lua`, `lua/settle.lua` and `lua/touch.lua`.
impl RoomData {
    fn marker_life(p: &RoomParams) -> Micros {
        micros(p.session_ttl.saturating_add(MARKER_MARGIN))
    }

    /// A pending consume that failed or was never settled: the same visitor holds the slot
    /// again, whatever max-active says (it never left the count) — unless a pre-queue ended
    /// that session meanwhile.
    fn give_back(
        &mut self,
        p: &RoomParams,
        vid: VisitorId,
        request: RequestId,
        held: Micros,
        now: Micros,
    ) {
        if !self.ended_by_prequeue(vid, now, self.live_peek(p, now)) {
            self.activate(vid, held.max(now + micros(p.session_ttl)));
        }
        self.pending_live.forget(&vid);
        self.marks
            .set(vid, Mark::GivenBack(request), now + Self::marker_life(p));
    }

    /// Whether a pre-queue ended `vid`'s session, by the ended set or on the liveness clock (an
    /// order of it given back or beating does not bring it back: as in `lua/markers.lua`'s
    /// give_back and settle.lua's extend).
    fn ended_by_prequeue(&self, vid: VisitorId, now: Micros, live: Micros) -> bool {
        self.session_ended(vid, now) || self.ended_live.holds(&vid, live)
    }

    /// The liveness clock now, read without a step (as `read_live` in `lua/markers.lua`): a
    /// pending order's grace period runs on it too.
    pub(super) fn live_peek(&self, p: &RoomParams, now: Micros) -> Micros {
        self.liveness.read(now, liveness::cap(p.tick), false).value
    }

    /// Records the admission used for `life` on the liveness clock from now, and the longest
    /// an instance keeps an admission running on its own (as `note_used` in
    /// `lua/markers.lua`).
    pub(super) fn note_used(&mut self, p: &RoomParams, vid: VisitorId, now: Micros, life: Micros) {
        let live = self.live_peek(p, now);
        let until = live
            .saturating_add(life)
            .saturating_add(micros(crate::room::KEEP_AT_MOST));
        self.used.note(vid, until, live);
    }

    /// The marker, after giving back a pending consume whose grace period is up.
    /// `live`: the liveness clock now ([`Self::live_peek`]); `wall`: the wall clock (s).
    fn settled_mark(
        &mut self,
        p: &RoomParams,
        vid: VisitorId,
        now: Micros,
        live: Micros,
        wall: u64,
    ) -> Option<Mark> {
        self.marks.prune(now, wall);
        let mark = self.marks.get(&vid).cloned();
        if let Some(Mark::Pending {
            request,
            held_until,
            ..
        }) = mark.as_ref().filter(|m| m.pending_left(now, live) == 0)
        {
            self.give_back(p, vid, request.clone(), *held_until, now);
            return self.marks.get(&vid).cloned();
        }
        mark
    }

    /// touch.lua's renewal; `taking`: a renewal, or a session an instance kept or admitted on
    /// its own, taken back past max-active too ([`crate::store::Store::register_local`]).
    /// `expires`: the cookie's expiry (unix s, by `wall`'s clock; 0: not known), as in
    /// touch.lua: a session taken back runs until then at least, and a cookie expired by
    /// `wall` takes nothing back.
    pub(super) fn renew_session(
        &mut self,
        p: &RoomParams,
        vid: VisitorId,
        (now, wall): (Micros, u64),
        taking: crate::store::Taking,
        expires: u64,
    ) -> Touched {
        let past_cap = taking.past_cap();
        let live = self.live_peek(p, now);
        let mark = self.settled_mark(p, vid, now, live, wall);
        let held = self.active.contains_key(&vid);
        let used = !held && self.used.holds(&vid, live);
        let marked = match &mark {
            Some(Mark::Pending { .. }) => true,
            Some(Mark::Confirmed(_)) => !held,
            Some(Mark::GivenBack(_)) => false,
            // An order in flight whose marker ran out during an outage (as in touch.lua).
            None => self.pending_live.holds(&vid, live),
        };
        if used || marked {
            // A cookie given a new life while the store was away outlives the marker by
            // the margin, as in touch.lua (found by review r97b), and so does the record of the
            // admission used (r98a).
            if expires > wall {
                let life = (expires - wall)
                    .saturating_mul(1_000_000)
                    .saturating_add(micros(MARKER_MARGIN));
                let want = now.saturating_add(life);
                if !held && (used || matches!(mark, Some(Mark::Confirmed(_)))) {
                    self.note_used(p, vid, now, life);
                }
                if let Some(m) = mark.filter(|_| self.marks.until(&vid) < want) {
                    self.marks.set(vid, m, want);
                }
            }
            return Touched::Refused;
        }
        if !held && expires > 0 && expires <= wall {
            return Touched::Refused;
        }
        let ended = !held && self.ended_by_prequeue(vid, now, live);
        if ended && expires > wall {
            // A kept copy of an ended session's cookie: the record outlives it (as in touch.lua).
            let life = (expires - wall)
                .saturating_mul(1_000_000)
                .saturating_add(micros(MARKER_MARGIN))
                .saturating_add(micros(crate::room::KEEP_AT_MOST));
            self.ended_live.note(vid, live.saturating_add(life), live);
        }
        if held || (!ended && (past_cap || (self.active.len() as u64) < p.max_active(&self.state)))
        {
            // Never shortened (as in touch.lua): every cookie of it was issued against it; one
            // taken back runs as long as the cookie that vouched for it.
            let cookie = if held {
                0
            } else {
                now.saturating_add(expires.saturating_sub(wall).saturating_mul(1_000_000))
            };
            self.renew(vid, (now + micros(p.session_ttl)).max(cookie));
            // A session is not also a place in line (as in touch.lua).
            self.remove_waiter(vid);
            if held {
                Touched::Held
            } else {
                Touched::TakenBack
            }
        } else {
            Touched::Refused
        }
    }

    pub(super) fn consume_order(
        &mut self,
        p: &RoomParams,
        vid: VisitorId,
        order: &Order,
        now: Micros,
        wall: u64,
    ) -> Consumed {
        self.marks.prune(now, wall);
        let live = self.live_peek(p, now);
        match self.marks.get(&vid) {
            Some(Mark::Pending { request, .. } | Mark::Confirmed(request))
                if *request == order.request =>
            {
                return Consumed::Won;
            }
            Some(m @ Mark::Pending { .. }) if m.pending_left(now, live) > 0 => {
                return Consumed::Busy {
                    retry_after: Duration::from_micros(m.pending_left(now, live)),
                };
            }
            _ => {}
        }
        if self.marks.get(&vid).is_none() {
            // The marker ran out while an order of this admission is in flight (as in
            // consume.lua).
            let left = self.pending_live.left(&vid, live);
            if left > 0 {
                return Consumed::Busy {
                    retry_after: Duration::from_micros(left),
                };
            }
        }
        let mark = self.settled_mark(p, vid, now, live, wall);
        let held = match self.active.get(&vid) {
            Some(&exp) => exp,
            // A verified cookie, no session and no marker: the store lost the admission, and
            // the cookie is the proof of it.
            // Not a cookie expired by the store's wall clock (as in consume.lua).
            None if order.vouched
                && (order.cookie_expires == 0 || order.cookie_expires > wall)
                && !matches!(mark, Some(Mark::Confirmed(_)))
                && !self.used.holds(&vid, live) =>
            {
                if self.ended_by_prequeue(vid, now, live) {
                    return Consumed::Ended;
                }
                now
            }
            None => return Consumed::Used,
        };
        // By events older than the runtime changes kept here nothing is taken: busy for a tick
        // (as in consume.lua; review r104a).
        if order
            .events_version
            .is_some_and(|v| v != self.events_version())
        {
            return Consumed::Busy {
                retry_after: p.tick.max(Duration::from_millis(1)),
            };
        }
        let deadline = now + micros(order.grace);
        self.activate(vid, held.max(deadline));
        let live_deadline = live + micros(order.grace) + liveness::cap(p.tick);
        self.pending_live.note(vid, live_deadline, live);
        self.marks.set(
            vid,
            Mark::Pending {
                request: order.request.clone(),
                deadline,
                held_until: held,
                live_deadline,
            },
            // Past every cookie of the admission: each was issued against the session's
            // deadline (as in consume.lua).
            deadline
                + micros(order.marker_life(p.session_ttl))
                    .max(held.saturating_sub(now) + micros(MARKER_MARGIN))
                    .max(
                        micros(Duration::from_secs(
                            order.cookie_expires.saturating_sub(wall),
                        )) + micros(MARKER_MARGIN),
                    ),
        );
        // And past the cookie's expiry by the wall clock it is read on, should that step back.
        if order.cookie_expires > 0 {
            self.marks.hold_until_wall(
                vid,
                order.cookie_expires.saturating_add(MARKER_MARGIN.as_secs()),
            );
        }
        // One place in line buys one admission: the one this order uses may be one the line
        // never gave (a local admission, a session the store lost), as in consume.lua.
        self.remove_waiter(vid);
        Consumed::Won
    }

    pub(super) fn settle_order(
        &mut self,
        p: &RoomParams,
        vid: VisitorId,
        request: &RequestId,
        how: Settle,
        now: Micros,
        wall: u64,
    ) -> Settled {
        self.marks.prune(now, wall);
        let mark = self.marks.get(&vid).cloned();
        let unseen = match &mark {
            None => true,
            Some(m @ (Mark::Confirmed(_) | Mark::GivenBack(_))) => m.request() != request,
            Some(Mark::Pending { .. }) => false,
        };
        if how == Settle::Confirm && unseen {
            // An order the store never saw went through (as in settle.lua): used up all the
            // same, the marker past the session's deadline by the margin.
            let held = self.active.remove(&vid);
            if let Some(exp) = held {
                self.expiries.remove(&(exp, vid));
            }
            // Not also in line (as in settle.lua).
            self.remove_waiter(vid);
            let until = (now + Self::marker_life(p))
                .max(held.unwrap_or(0).saturating_add(micros(MARKER_MARGIN)));
            self.marks.set(vid, Mark::Confirmed(request.clone()), until);
            self.pending_live.forget(&vid);
            self.note_used(p, vid, now, until - now);
            self.ordered.note(vid, now, p.abandon_after);
            return Settled::Done;
        }
        let Some(mark) = mark else {
            if let Settle::Extend(grace) = how {
                // A marker the store lost under an order in flight: written again, pending (as
                // in settle.lua). In memory only a test can lose it; Redis restarted empty can.
                let deadline = now + micros(grace);
                let live = self.live_peek(p, now);
                let live_deadline = live + micros(grace) + liveness::cap(p.tick);
                self.pending_live.note(vid, live_deadline, live);
                if !self.ended_by_prequeue(vid, now, self.live_peek(p, now)) {
                    let exp = self.active.get(&vid).copied().unwrap_or(0);
                    self.activate(vid, exp.max(deadline));
                }
                let pending = Mark::Pending {
                    request: request.clone(),
                    deadline,
                    held_until: 0,
                    live_deadline,
                };
                self.marks
                    .set(vid, pending, deadline + Self::marker_life(p));
                return Settled::Done;
            }
            if how == Settle::GiveBack {
                // A failed order whose marker ran out (as in settle.lua).
                self.pending_live.forget(&vid);
            }
            return Settled::Gone;
        };
        if mark.request() != request {
            return Settled::Gone;
        }
        match (how, mark) {
            (
                Settle::Extend(grace),
                Mark::Pending {
                    request,
                    held_until,
                    ..
                },
            ) => {
                let deadline = now + micros(grace);
                let live = self.live_peek(p, now);
                let live_deadline = live + micros(grace) + liveness::cap(p.tick);
                self.pending_live.note(vid, live_deadline, live);
                if !self.ended_by_prequeue(vid, now, self.live_peek(p, now)) {
                    let exp = self.active.get(&vid).copied().unwrap_or(0);
                    self.activate(vid, exp.max(deadline));
                }
                self.marks.set(
                    vid,
                    Mark::Pending {
                        request,
                        deadline,
                        held_until,
                        live_deadline,
                    },
                    // Never shorter than the consume made it (as in settle.lua).
                    self.marks.until(&vid).max(deadline + Self::marker_life(p)),
                );
                Settled::Done
            }
            (Settle::Extend(_), Mark::Confirmed(_) | Mark::GivenBack(_)) => Settled::Reversed,
            (Settle::Confirm, Mark::Confirmed(_)) | (Settle::GiveBack, Mark::GivenBack(_)) => {
                Settled::Already
            }
            (Settle::GiveBack, Mark::Confirmed(_)) => Settled::Reversed,
            // Given back already (its deadline passed) and not taken again: the order went
            // through after all, so the admission is used up.
            (Settle::Confirm, Mark::Pending { .. } | Mark::GivenBack(_)) => {
                if let Some(exp) = self.active.remove(&vid) {
                    self.expiries.remove(&(exp, vid));
                }
                self.remove_waiter(vid);
                // The marker keeps the life the consume gave it (past the cookie), if longer.
                let until = self.marks.until(&vid).max(now + Self::marker_life(p));
                self.marks.set(vid, Mark::Confirmed(request.clone()), until);
                self.pending_live.forget(&vid);
                self.note_used(p, vid, now, until - now);
                self.ordered.note(vid, now, p.abandon_after);
                Settled::Done
            }
            (Settle::GiveBack, Mark::Pending { held_until, .. }) => {
                self.give_back(p, vid, request.clone(), held_until, now);
                Settled::Done
            }
        }
    }
}
