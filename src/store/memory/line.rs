//! The memory store's side of the edge answers: places, the liveness batch and the sample.

use super::*;
use crate::store::line::{sampled_ranks, LineSample, Place};

impl RoomData {
    /// A visitor in line is seen now (on the liveness clock of this operation).
    pub(super) fn mark_seen(&mut self, vid: VisitorId) {
        let live = self.live_now;
        if let Some(w) = self.waiters.get_mut(&vid) {
            let (old, seq) = (w.last_seen, w.seq);
            w.last_seen = live;
            if old == REGISTERED {
                self.events.registered.remove(&seq);
            } else {
                self.seen.remove(&(old, seq));
            }
            self.seen.insert((live, seq));
        }
    }

    /// The liveness batch of an admit: only a visitor still at the ticket's place is seen
    /// (during a pre-queue: registered). One whose turn came keeps its claim `claim` from
    /// `now` (admit.lua): the visitor polled and the store did not hear it.
    pub(super) fn mark_seen_batch(
        &mut self,
        batch: &[(VisitorId, Place)],
        in_pre: bool,
        now: Micros,
        claim: Micros,
    ) {
        let mut turns = Vec::new();
        for (vid, place) in batch {
            let here = place.epoch == self.epoch
                && self.waiters.get(vid).is_some_and(|w| w.seq == place.key);
            if here {
                self.seen_now(*vid, in_pre);
            } else {
                turns.push(*vid);
            }
        }
        self.keep_claims(&turns, now, claim);
    }

    /// The admissions of `vids` still held and running out within `claim` of `now` hold until
    /// then (never shortened, never revived), and a random draw's claims may be collected as
    /// long (admit.lua's `keep_claims`).
    pub(super) fn keep_claims(&mut self, vids: &[VisitorId], now: Micros, claim: Micros) {
        let keep = now + claim;
        let mut kept = false;
        for &vid in vids {
            if let Some(&held) = self.active.get(&vid) {
                if held > now && held < keep {
                    self.activate(vid, keep);
                    kept = true;
                }
            }
        }
        if kept {
            self.random_until = self.random_until.map(|u| u.max(keep));
        }
    }

    pub(super) fn place(&self, seq: u64) -> Place {
        Place {
            epoch: self.epoch,
            key: seq,
        }
    }

    /// The answer for a visitor in line at `seq`.
    pub(super) fn in_line(
        &self,
        p: &RoomParams,
        state: &RoomState,
        seq: u64,
        waiting: u64,
        joined: bool,
    ) -> Admission {
        let position = self.position(seq);
        let place = self.place(seq);
        if state.queue_all {
            Admission::Paused {
                position,
                waiting,
                joined,
                place,
            }
        } else {
            Admission::Waiting {
                position,
                waiting,
                eta_rate: p.eta_rate(state, self.measured_rate),
                joined,
                place,
                full: false,
            }
        }
    }

    /// The answer for a visitor in line at `seq`, during a pre-queue or not: a registration
    /// while in one, or at a draw's place whose order is not out yet.
    pub(super) fn answer(
        &self,
        p: &RoomParams,
        state: &RoomState,
        seq: u64,
        waiting: u64,
        joined: bool,
        in_pre: bool,
    ) -> Admission {
        let drawn = self.drawn(seq);
        // A draw's place stays sealed until its order is out (as in join.lua).
        let sealed = drawn && !self.draw_out();
        if !in_pre && !sealed {
            return self.in_line(p, state, seq, waiting, joined);
        }
        Admission::Registered {
            position: (!drawn).then(|| self.position(seq)),
            waiting,
            joined,
            place: self.place(seq),
            drawn,
        }
    }

    /// Who `admit` lets in next: the front of the line, or (`random`) any visitor of it with
    /// the same chance (`ZRANDMEMBER` in `admit.lua`).
    pub(super) fn next_in(&self, q: Queueing) -> Option<VisitorId> {
        let seq = match q {
            // A passthrough room has a line only from before it was switched: front first.
            Queueing::Fifo | Queueing::Passthrough => *self.order.first_key_value()?.0,
            Queueing::Reject => return None,
            Queueing::Random => {
                let n = self.waiters.len() as u64;
                if n == 0 {
                    return None;
                }
                self.ranks.select(fastrand::u64(0..n))?
            }
        };
        self.order.get(&seq).copied()
    }

    /// The line sampled at the same ranks as `admit.lua` samples it.
    pub(super) fn sample(&self, step: u64) -> LineSample {
        let points: Vec<(u64, u64)> = sampled_ranks(self.waiters.len() as u64, step)
            .filter_map(|r| self.ranks.select(r).map(|seq| (r, seq)))
            .collect();
        LineSample {
            epoch: if points.is_empty() { 0 } else { self.epoch },
            points,
        }
    }
}
