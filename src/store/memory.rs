//! The in-process store: one instance, no Redis, the same semantics as the Redis backend.
//!
//! Each room's state sits behind its own `std::sync::Mutex`: every operation is a short,
//! non-async critical section (no await while locked), which is cheaper than an async lock and
//! makes each operation atomic exactly like a Lua script in Redis.
//!
//! Time is the [`Clock`]'s monotonic clock throughout: every interval here (sessions, claims,
//! the bucket, the one-tick window, the measured rate, join-limit windows) is an elapsed
//! duration, so a step of the wall clock changes nothing. "Last seen" is stamped on the room's
//! liveness clock ([`super::liveness`]), as in the Redis scripts.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use async_trait::async_trait;

use super::liveness::{self, Liveness};
use super::marks::Marks;
use super::ranks::Ranks;
use super::*;
use crate::clock::{micros, Clock, Micros};

mod admit;
mod audit;
mod autopilot;
mod bucket;
mod event;
mod join;
mod line;
mod orders;
mod passthrough;
mod revoked;

/// `last_seen` of a waiter registered during a pre-queue and not seen since: silent from the
/// opening (slot 0 in Redis), kept apart from the silence order ([`event`]).
const REGISTERED: Micros = Micros::MAX;

/// A place's epoch: random, so that no ticket from an earlier line or a wiped store names a
/// place in this one.
fn new_epoch() -> u64 {
    fastrand::u64(1..u64::MAX >> 12)
}

#[derive(Debug)]
struct Waiter {
    seq: u64,
    joined_at: Micros,
    /// On the liveness clock, not the store clock.
    last_seen: Micros,
}

#[derive(Debug, Default)]
struct RoomData {
    /// The `abandon-after` of the last join or admit (µs; 0: none yet): the other calls carry the
    /// room's configured value, where join and admit carry the one in force (a reload that
    /// lowered it holds the old one for a while: `crate::room::abandon_hold`). Those calls
    /// judge silence by the longer of the two (found by re-review: a stats or touch call swept
    /// by the lowered value at once).
    abandon_in_force: Micros,
    /// Until when the last random draw's claims may be collected (monotonic µs), moved on by a
    /// gap as the claims are: `AdmitReport::random_recent` (admit.lua's 'rand_until').
    random_until: Option<Micros>,
    /// The number of the last numbered admit step run ([`crate::store::AdmitStep`]), and the
    /// turns it gave when the caller had heard the step before it (admit.lua's 'step:<id>'
    /// and 'given:<id>'; the memory store has one caller).
    step: Option<u64>,
    given: Vec<VisitorId>,
    /// When an operator last changed the state (or the re-asserted state was), as in
    /// room_state.lua's 'st_at' (monotonic µs here; `None`: never).
    st_at: Option<Micros>,
    /// The operators' changes, newest first.
    history: VecDeque<crate::store::history::Change>,
    next_seq: u64,
    waiters: HashMap<VisitorId, Waiter>,
    /// seq → visitor: the line, front first.
    order: BTreeMap<u64, VisitorId>,
    ranks: Ranks,
    /// (last seen, seq): the longest-silent waiter first.
    seen: BTreeSet<(Micros, u64)>,
    /// The liveness clock, and its reading for the operation in progress.
    liveness: Liveness,
    /// When the last gap was forgiven ([`liveness::forgiven`]).
    forgave_at: Option<Micros>,
    live_now: Micros,
    /// Admitted sessions and their expiry: claim deadline or end of session.
    active: HashMap<VisitorId, Micros>,
    expiries: BTreeSet<(Micros, VisitorId)>,
    tokens: f64,
    refilled_at: Option<Micros>,
    /// Admissions of the last tick: (when, how many), oldest first.
    recent: VecDeque<(Micros, u64)>,
    state: RoomState,
    measured_rate: f64,
    measured_at: Option<Micros>,
    measured_count: u64,
    admitted_total: u64,
    joined_total: u64,
    abandoned_total: u64,
    /// Let in by `passthrough` where the line would have held them.
    would_queue_total: u64,
    /// Per-client new-join counters: (count, end of the window).
    joins_by_client: HashMap<String, (u32, Micros)>,
    /// When the counters past their window were last dropped: at most once a second (a full
    /// table of live counters was scanned on every join, under the store's lock: found by
    /// review).
    joins_swept_at: Option<Micros>,
    /// Consumed markers: the last order of each admission (see [`super::order`]).
    marks: Marks,
    /// The store generation (see [`AdmitReport::generation`]); made by the first `admit`.
    generation: Option<String>,
    /// The latest admit's `hold_back`, which join's fast path honours too.
    hold_back: u64,
    /// The configuration digest the (one) instance last told.
    config: String,
    autopilot: autopilot::Kept,
    /// Revoked admissions, for the instances' admit calls ([`crate::store::finish`]).
    revoked: revoked::Log,
    /// What the sequence numbers of this room's data count from (a place's epoch): random, so
    /// that a ticket from before a wipe names no place after it.
    epoch: u64,
    /// Events: the pre-queue, the opening, the draws, the runtime changes.
    events: event::Kept,
    /// The sessions a pre-queue ended, by visitor: their deadlines
    /// ([`RoomData::end_sessions`], `end_sessions` in the prelude).
    ended: HashMap<VisitorId, Micros>,
    /// The id of the operator's last clear of the line (`clear_id` in clear_waiting.lua).
    clear_id: Option<String>,
}

impl RoomData {
    fn new() -> Self {
        Self {
            state: RoomState::default(),
            epoch: new_epoch(),
            ..Default::default()
        }
    }

    /// Moves the deadlines a gap before `now` must not cost ([`liveness::forgiven`]), as
    /// `forgive_gap` in `lua/prelude.lua` does; before any expired session is removed.
    fn forgive_gap(&mut self, now: Micros, p: &RoomParams) {
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

    fn prune_active(&mut self, now: Micros) -> u64 {
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
    fn live(&mut self, now: Micros, tick: Duration, always: bool) -> Micros {
        self.live_now = self.liveness.step(now, liveness::cap(tick), always);
        self.live_now
    }

    /// Drops waiters silent for `abandon_after` on the liveness clock at `live`.
    fn prune_abandoned(&mut self, live: Micros, abandon_after: Micros) -> u64 {
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
    fn remove_waiter(&mut self, vid: VisitorId) -> Option<Micros> {
        let w = self.waiters.remove(&vid)?;
        self.order.remove(&w.seq);
        self.seen.remove(&(w.last_seen, w.seq));
        self.events.registered.remove(&w.seq);
        self.ranks.remove(w.seq);
        Some(w.joined_at)
    }

    /// Puts a visitor in line at `seq`; `registered` during a pre-queue.
    fn enqueue_at(&mut self, vid: VisitorId, seq: u64, now: Micros, registered: bool) {
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
    fn state_stamped(&self) -> RoomState {
        RoomState {
            changed_at: self.st_at.unwrap_or(0),
            ..self.state.clone()
        }
    }

    fn activate(&mut self, vid: VisitorId, until: Micros) {
        if let Some(old) = self.active.insert(vid, until) {
            self.expiries.remove(&(old, vid));
        }
        self.expiries.insert((until, vid));
    }

    /// Counts a new join from a client (a fixed window from its first join, like Redis `INCR` +
    /// `PEXPIRE`); `Some(wait)` when over the limit.
    fn count_join(&mut self, g: &JoinGate, now: Micros) -> Option<Duration> {
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
        (entry.0 > g.limit)
            .then(|| Duration::from_micros(entry.1 - now).max(Duration::from_secs(1)))
    }

    fn position(&self, seq: u64) -> u64 {
        self.ranks.rank(seq)
    }

    /// The room's generation, made now if it has none (`true`): like `admit.lua`.
    fn generation_or_new(&mut self) -> (String, bool) {
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

/// The in-process store.
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    rooms: RwLock<HashMap<Arc<str>, Arc<Mutex<RoomData>>>>,
}

impl MemoryStore {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            rooms: RwLock::new(HashMap::new()),
        }
    }

    /// Test hook: loses every room's data, as a Redis restart without persistence does.
    pub fn wipe(&self) {
        self.rooms
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn room(&self, name: &Arc<str>) -> Arc<Mutex<RoomData>> {
        if let Some(r) = self
            .rooms
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return r.clone();
        }
        self.rooms
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.clone())
            .or_insert_with(|| Arc::new(Mutex::new(RoomData::new())))
            .clone()
    }

    /// Runs one operation on a room at the monotonic time. Only `join` may step the liveness
    /// clock (`steps`), as only join and admit do in Redis; the others read it.
    fn with_live<T>(
        &self,
        p: &RoomParams,
        steps: bool,
        f: impl FnOnce(&mut RoomData, Micros) -> T,
    ) -> T {
        let room = self.room(&p.name);
        let mut guard: MutexGuard<'_, RoomData> = room.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.clock.mono_micros();
        guard.forgive_gap(now, p);
        guard.prune_active(now);
        let live = if steps {
            guard.live(now, p.tick, false)
        } else {
            let r = guard.liveness.read(now, liveness::cap(p.tick), false);
            guard.live_now = r.value;
            r.value
        };
        let abandon = if steps {
            guard.abandon_in_force = micros(p.abandon_after);
            guard.abandon_in_force
        } else {
            micros(p.abandon_after).max(guard.abandon_in_force)
        };
        guard.prune_abandoned(live, abandon);
        f(&mut guard, now)
    }

    fn with<T>(&self, p: &RoomParams, f: impl FnOnce(&mut RoomData, Micros) -> T) -> T {
        self.with_live(p, false, f)
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn join_with(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        ctx: &JoinContext<'_>,
    ) -> Result<Admission, StoreError> {
        let wall = self.clock.now_micros();
        Ok(self.with_live(p, true, |r, now| r.join(p, vid, ctx, now, wall)))
    }

    async fn admit_with(
        &self,
        p: &RoomParams,
        ctx: &AdmitContext,
    ) -> Result<AdmitReport, StoreError> {
        let room = self.room(&p.name);
        let mut r = room.lock().unwrap_or_else(|e| e.into_inner());
        let (now, wall) = (self.clock.mono_micros(), self.clock.now_micros());
        Ok(r.admit(p, ctx, now, wall))
    }

    async fn touch(&self, p: &RoomParams, vid: VisitorId) -> Result<bool, StoreError> {
        let wall = self.clock.now_secs();
        Ok(self.with(p, |r, now| r.touch_session(p, vid, now, wall)))
    }

    async fn consume(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        order: &Order,
    ) -> Result<Consumed, StoreError> {
        let wall = self.clock.now_secs();
        Ok(self.with(p, |r, now| r.consume_order(p, vid, order, now, wall)))
    }

    async fn settle(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        request: &RequestId,
        how: Settle,
    ) -> Result<Settled, StoreError> {
        let wall = self.clock.now_secs();
        Ok(self.with(p, |r, now| r.settle_order(p, vid, request, how, now, wall)))
    }

    async fn finish(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        ending: &Ending,
    ) -> Result<u64, StoreError> {
        let wall = self.clock.now_secs();
        Ok(self.with(p, |r, now| r.finish_admission(vid, ending, now, wall)))
    }

    async fn room_state(&self, p: &RoomParams) -> Result<RoomState, StoreError> {
        Ok(self.with(p, |r, _| r.state.clone()))
    }

    async fn update_room_state(
        &self,
        p: &RoomParams,
        patch: &RoomPatch,
    ) -> Result<RoomState, StoreError> {
        Ok(self.with(p, |r, _| {
            // A re-assertion applies only over no state changed as late or later.
            let apply = patch
                .as_of
                .is_none_or(|as_of| r.st_at.is_none_or(|held| held < as_of));
            if apply {
                r.state.apply(patch);
                if patch.as_of.is_some() {
                    r.st_at = patch.as_of;
                }
                r.autopilot_follows_state();
            }
            r.state_stamped()
        }))
    }

    async fn clear_waiting(&self, p: &RoomParams) -> Result<u64, StoreError> {
        Ok(self.with(p, |r, _| {
            let n = r.waiters.len() as u64;
            r.clear_line();
            n
        }))
    }

    async fn change_room_state(
        &self,
        p: &RoomParams,
        patch: &RoomPatch,
        by: &history::Actor,
    ) -> Result<RoomState, StoreError> {
        Ok(self.with(p, |r, now| {
            let before = r.state.clone();
            r.state.apply(patch);
            r.autopilot_follows_state();
            r.record(by, history::field_changes(patch, &before, &r.state));
            r.st_at = Some(now);
            r.state_stamped()
        }))
    }

    async fn clear_waiting_by(
        &self,
        p: &RoomParams,
        by: &history::Actor,
    ) -> Result<u64, StoreError> {
        // A clear of this id ran already (a retried call): the line is not cleared again, as
        // in clear_waiting.lua.
        Ok(self.with(p, |r, _| {
            if r.clear_id.as_deref() == Some(by.id.as_str()) {
                return 0;
            }
            let n = r.waiters.len() as u64;
            r.clear_line();
            r.clear_id = Some(by.id.clone());
            r.record(by, history::cleared(n));
            n
        }))
    }

    async fn changes(
        &self,
        p: &RoomParams,
        limit: usize,
    ) -> Result<Vec<history::Change>, StoreError> {
        Ok(self.with(p, |r, _| r.history.iter().take(limit).cloned().collect()))
    }

    async fn stats(&self, p: &RoomParams) -> Result<RoomStats, StoreError> {
        Ok(self.with(p, |r, _| RoomStats {
            waiting: r.waiters.len() as u64,
            active: r.active.len() as u64,
            admitted_total: r.admitted_total,
            joined_total: r.joined_total,
            abandoned_total: r.abandoned_total,
            would_have_queued: r.would_queue_total,
            measured_rate: r.measured_rate,
            state: r.state.clone(),
            configs: (!r.config.is_empty())
                .then(|| (r.config.clone(), 1))
                .into_iter()
                .collect(),
        }))
    }

    async fn runtime_events(&self, p: &RoomParams) -> Result<RuntimeEvents, StoreError> {
        Ok(self.with(p, |r, _| r.runtime_events()))
    }

    async fn change_event(
        &self,
        p: &RoomParams,
        name: &str,
        change: &crate::event::schedule::Runtime,
        version: u64,
        before: &serde_json::Value,
        by: &history::Actor,
    ) -> Result<EventChange, StoreError> {
        Ok(self.with(p, |r, _| r.change_event(name, change, version, before, by)))
    }

    async fn draw_list(
        &self,
        p: &RoomParams,
        event: &str,
        from: u64,
        count: u64,
    ) -> Result<Vec<crate::event::draw::RegTicket>, StoreError> {
        Ok(self.with(p, |r, _| r.draw_list(event, from, count)))
    }
}
