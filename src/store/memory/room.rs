//! A room's state in the memory store ([`RoomData`]) and the steps every operation shares:
//! pruning sessions and silent waiters, placing a waiter, counting a join.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::super::liveness::{self, Liveness};
use super::super::marks::{Marks, Used};
use super::super::ranks::Ranks;
use super::super::*;
use super::{autopilot, event, revoked};
use crate::clock::{micros, Micros};

/// `last_seen` of a waiter registered during a pre-queue and not seen since: silent from the
/// opening (slot 0 in Redis), kept apart from the silence order ([`event`]).
pub(super) const REGISTERED: Micros = Micros::MAX;

/// A place's epoch: random, so that no ticket from an earlier line or a wiped store names a
/// place in this one.
pub(super) fn new_epoch() -> u64 {
    fastrand::u64(1..u64::MAX >> 12)
}

#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) seq: u64,
    pub(super) joined_at: Micros,
    /// On the liveness clock, not the store clock.
    pub(super) last_seen: Micros,
}

#[derive(Debug, Default)]
pub(super) struct RoomData {
    /// The `abandon-after` of the last join or admit (µs; 0: none yet): the other calls carry the
    /// room's configured value, where join and admit carry the one in force (a reload that
    /// lowered it holds the old one for a while: `crate::room::abandon_hold`). Those calls
    /// judge silence by the longer of the two (found by re-review: a stats or touch call swept
    /// by the lowered value at once).
    pub(super) abandon_in_force: Micros,
    /// Until when the last random draw's claims may be collected (monotonic µs), moved on by a
    /// gap as the claims are: `AdmitReport::random_recent` (admit.lua's 'rand_until').
    pub(super) random_until: Option<Micros>,
    /// The number of the last numbered admit step run ([`crate::store::AdmitStep`]), and the
    /// turns it gave when the caller had heard the step before it (admit.lua's 'step:<id>'
    /// and 'given:<id>'; the memory store has one caller).
    pub(super) step: Option<u64>,
    pub(super) given: Vec<VisitorId>,
    /// When an operator last changed the state (or the re-asserted state was), as in
    /// room_state.lua's 'st_at' (monotonic µs here; `None`: never).
    pub(super) st_at: Option<Micros>,
    /// While a hold a data loss put on the line stands: the `queue_all` it covers (admit.lua's
    /// 'loss_hold'), put back by a re-assertion that is not applied.
    pub(super) loss_hold: Option<bool>,
    /// The operators' changes, newest first.
    pub(super) history: VecDeque<crate::store::history::Change>,
    pub(super) next_seq: u64,
    pub(super) waiters: HashMap<VisitorId, Waiter>,
    /// seq → visitor: the line, front first.
    pub(super) order: BTreeMap<u64, VisitorId>,
    pub(super) ranks: Ranks,
    /// (last seen, seq): the longest-silent waiter first.
    pub(super) seen: BTreeSet<(Micros, u64)>,
    /// The liveness clock, and its reading for the operation in progress.
    pub(super) liveness: Liveness,
    /// When the last gap was forgiven ([`liveness::forgiven`]).
    pub(super) forgave_at: Option<Micros>,
    /// When the last admit step ran (a gap longer than the liveness clock's cap restarts the
    /// measured rate's window: admit.lua's `stalled`).
    pub(super) admitted_at: Option<Micros>,
    pub(super) live_now: Micros,
    /// Admitted sessions and their expiry: claim deadline or end of session.
    pub(super) active: HashMap<VisitorId, Micros>,
    pub(super) expiries: BTreeSet<(Micros, VisitorId)>,
    pub(super) tokens: f64,
    pub(super) refilled_at: Option<Micros>,
    /// Admissions of the last tick: (when, how many), oldest first.
    pub(super) recent: VecDeque<(Micros, u64)>,
    pub(super) state: RoomState,
    pub(super) measured_rate: f64,
    pub(super) measured_at: Option<Micros>,
    pub(super) measured_count: u64,
    pub(super) admitted_total: u64,
    pub(super) joined_total: u64,
    pub(super) abandoned_total: u64,
    /// Let in by `passthrough` where the line would have held them.
    pub(super) would_queue_total: u64,
    /// Per-client new-join counters: (count, end of the window).
    pub(super) joins_by_client: HashMap<String, (u32, Micros)>,
    /// When the counters past their window were last dropped: at most once a second (a full
    /// table of live counters was scanned on every join, under the store's lock: found by
    /// review).
    pub(super) joins_swept_at: Option<Micros>,
    /// Consumed markers: the last order of each admission (see [`super::order`]).
    pub(super) marks: Marks,
    /// Used admissions on the liveness clock (the `c` state of `marks`, kept through an outage).
    pub(super) used: Used,
    /// The sessions a pre-queue ended, on the liveness clock (`ended`'s, kept through an
    /// outage: the 'e' members of the Redis store's used set).
    pub(super) ended_live: Used,
    /// Orders in flight, on the liveness clock: the end of each one's grace period there (the
    /// 'p' members of the Redis store's used set, kept through an outage longer than `marks`).
    pub(super) pending_live: Used,
    /// Who ordered lately, for join-limit's count ([`super::ordered`]).
    pub(super) ordered: super::ordered::Ordered,
    /// The store generation (see [`AdmitReport::generation`]); made by the first `admit`.
    pub(super) generation: Option<String>,
    /// The latest admit's `hold_back`, which join's fast path honours too.
    pub(super) hold_back: u64,
    /// The configuration digest the (one) instance last told.
    pub(super) config: String,
    pub(super) autopilot: autopilot::Kept,
    /// Revoked admissions, for the instances' admit calls ([`crate::store::finish`]).
    pub(super) revoked: revoked::Log,
    /// What the sequence numbers of this room's data count from (a place's epoch): random, so
    /// that a ticket from before a wipe names no place after it.
    pub(super) epoch: u64,
    /// Events: the pre-queue, the opening, the draws, the runtime changes.
    pub(super) events: event::Kept,
    /// The sessions a pre-queue ended, by visitor: their deadlines
    /// ([`RoomData::end_sessions`], `end_sessions` in the prelude).
    pub(super) ended: HashMap<VisitorId, Micros>,
    /// The id of the operator's last clear of the line (`clear_id` in clear_waiting.lua).
    pub(super) clear_id: Option<String>,
}

impl RoomData {
    pub(super) fn new() -> Self {
        Self {
            state: RoomState::default(),
            epoch: new_epoch(),
            ..Default::default()
        }
    }

    /// Moves the deadlines a gap before `now` must not cost ([`liveness::forgiven`]), as
    /// `forgive_gap` in `lua/prelude.lua` does; before any expired session is removed.
    pub(super) fn forgive_gap(&mut self, now: Micros, p: &RoomParams) {
        let cap = liveness::cap(p.tick);
        let Some(f) = liveness::forgiven(
            self.liveness.at,
            self.forgave_at,
            now,
            cap,
            micros(p.claim_ttl),
        ) else {
            return;
        };
        self.forgave_at = Some(now);
        let hit: Vec<(Micros, VisitorId)> = self
            .expiries
            .range((f.from + 1, VisitorId(uuid::Uuid::nil()))..)
            .take_while(|(exp, _)| *exp <= f.to)
            .copied()
            .collect();
        for (exp, vid) in hit {
            self.activate(vid, exp + f.shift);
        }
        if let Some(until) = self.random_until.filter(|u| *u > f.from) {
            self.random_until = Some(until + f.shift);
        }
    }

    pub(super) fn prune_active(&mut self, now: Micros) -> u64 {
        let mut n = 0;
        while let Some(&(exp, vid)) = self.expiries.first() {
            if exp > now {
                break;
            }
            self.expiries.pop_first();
            self.active.remove(&vid);
            n += 1;
        }
        n
    }

    /// Reads the liveness clock for this operation (`always`: keep the step, as admit does).
    pub(super) fn live(&mut self, now: Micros, tick: Duration, always: bool) -> Micros {
        self.live_now = self.liveness.step(now, liveness::cap(tick), always);
        self.live_now
    }

    /// Drops waiters silent for `abandon_after` on the liveness clock at `live`.
    pub(super) fn prune_abandoned(&mut self, live: Micros, abandon_after: Micros) -> u64 {
        let mut n = 0;
        while let Some(&(last_seen, seq)) = self.seen.first() {
            if last_seen.saturating_add(abandon_after) > live {
                break;
            }
            if let Some(vid) = self.order.get(&seq).copied() {
                self.remove_waiter(vid);
            } else {
                self.seen.pop_first();
            }
            n += 1;
        }
        let n = n + self.prune_registered(live, abandon_after);
        self.abandoned_total += n;
        n
    }

    /// Takes a visitor out of the line; returns when they joined.
    pub(super) fn remove_waiter(&mut self, vid: VisitorId) -> Option<Micros> {
        let w = self.waiters.remove(&vid)?;
        self.order.remove(&w.seq);
        self.seen.remove(&(w.last_seen, w.seq));
        self.events.registered.remove(&w.seq);
        self.ranks.remove(w.seq);
        Some(w.joined_at)
    }

    /// Puts a visitor in line at `seq`; `registered` during a pre-queue.
    pub(super) fn enqueue_at(&mut self, vid: VisitorId, seq: u64, now: Micros, registered: bool) {
        self.order.insert(seq, vid);
        self.ranks.insert(seq);
        let last_seen = if registered {
            self.events.registered.insert(seq);
            REGISTERED
        } else {
            self.seen.insert((self.live_now, seq));
            self.live_now
        };
        self.waiters.insert(
            vid,
            Waiter {
                seq,
                joined_at: now,
                last_seen,
            },
        );
    }

    /// The state, with when an operator last changed it.
    pub(super) fn state_stamped(&self) -> RoomState {
        RoomState {
            changed_at: self.st_at.unwrap_or(0),
            ..self.state.clone()
        }
    }

    /// Renews a session to `until`, never below the deadline it has: every cookie of the
    /// admission was issued against that, and a consumed marker is sized from it (found by
    /// review r89b: a renewal under a lower session-ttl let an earlier cookie order again).
    pub(super) fn renew(&mut self, vid: VisitorId, until: Micros) {
        let held = self.active.get(&vid).copied().unwrap_or(0);
        self.activate(vid, until.max(held));
    }

    pub(super) fn activate(&mut self, vid: VisitorId, until: Micros) {
        if let Some(old) = self.active.insert(vid, until) {
            self.expiries.remove(&(old, vid));
        }
        self.expiries.insert((until, vid));
    }

    /// Counts a new join from a client (a fixed window from its first join, like Redis `INCR` +
    /// `PEXPIRE`); `Some(wait)` when over the limit.
    /// A newcomer `vid` whose queue ticket vouches for a place held lately (`g.vouched`) is not
    /// counted unless an order of theirs is on record ([`super::ordered`]); a newcomer counted
    /// within the limit spends the record, as in join.lua.
    pub(super) fn count_join(
        &mut self,
        g: &JoinGate,
        vid: VisitorId,
        now: Micros,
    ) -> Option<Duration> {
        if g.vouched && !self.ordered.holds(&vid, now) {
            return None;
        }
        if self.joins_by_client.len() > 10_000
            && self
                .joins_swept_at
                .is_none_or(|at| now.saturating_sub(at) >= 1_000_000)
        {
            self.joins_swept_at = Some(now);
            self.joins_by_client.retain(|_, (_, end)| *end > now);
        }
        let entry = self
            .joins_by_client
            .entry(g.client.clone())
            .or_insert((0, now + micros(g.per)));
        if entry.1 <= now {
            *entry = (0, now + micros(g.per));
        }
        entry.0 += 1;
        let refused = (entry.0 > g.limit)
            .then(|| Duration::from_micros(entry.1 - now).max(Duration::from_secs(1)));
        if refused.is_none() {
            // Counted: the way back after the visitor's last order is paid for (as in join.lua).
            self.ordered.forget(&vid);
        }
        refused
    }

    pub(super) fn position(&self, seq: u64) -> u64 {
        self.ranks.rank(seq)
    }

    /// The room's generation, made now if it has none (`true`): like `admit.lua`.
    pub(super) fn generation_or_new(&mut self) -> (String, bool) {
        match &self.generation {
            Some(g) => (g.clone(), false),
            None => {
                let g = format!("{:016x}", fastrand::u64(..));
                self.generation = Some(g.clone());
                (g, true)
            }
        }
    }
}
