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

mod audit;
mod autopilot;
mod bucket;
mod event;
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
}

impl RoomData {
    fn new() -> Self {
        Self {
            state: RoomState::default(),
            epoch: new_epoch(),
            ..Default::default()
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

    fn activate(&mut self, vid: VisitorId, until: Micros) {
        if let Some(old) = self.active.insert(vid, until) {
            self.expiries.remove(&(old, vid));
        }
        self.expiries.insert((until, vid));
    }

    /// Counts a new join from a client (a fixed window from its first join, like Redis `INCR` +
    /// `PEXPIRE`); `Some(wait)` when over the limit.
    fn count_join(&mut self, g: &JoinGate, now: Micros) -> Option<Duration> {
        if self.joins_by_client.len() > 10_000 {
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
        guard.prune_active(now);
        let live = if steps {
            guard.live(now, p.tick, false)
        } else {
            let r = guard.liveness.read(now, liveness::cap(p.tick), false);
            guard.live_now = r.value;
            r.value
        };
        guard.prune_abandoned(live, micros(p.abandon_after));
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
        Ok(self.with_live(p, true, |r, now| {
            let at = r.event_now(ctx.events, wall);
            let in_pre = at.in_pre();
            r.note_prequeue(&at);
            let state = r.state_in(&at);
            if !state.enabled {
                return Admission::Open;
            }
            if r.active.contains_key(&vid) {
                r.activate(vid, now + micros(p.session_ttl));
                return Admission::Admitted;
            }
            if p.queueing == Queueing::Passthrough {
                return r.pass_through(p, &state, vid, ctx.gate, now);
            }
            let waiting = r.waiters.len() as u64;
            if let Some(seq) = r.waiters.get(&vid).map(|w| w.seq) {
                r.seen_now(vid, in_pre);
                return r.answer(p, &state, seq, waiting, false, in_pre);
            }
            if at.closed() {
                return Admission::Ended;
            }
            if let Some(g) = ctx.gate {
                if let Some(retry_after) = r.count_join(g, now) {
                    return Admission::Limited { retry_after };
                }
            }
            let rate = p.rate(&state);
            let burst = p.burst(rate);
            r.refill(now, rate, burst);
            if !state.queue_all
                && !in_pre
                && r.waiters.is_empty()
                && (r.active.len() as u64).saturating_add(r.hold_back) < p.max_active(&state)
                && r.tokens >= 1.0
                && r.window_left(now, micros(p.tick), burst) >= 1
            {
                r.tokens -= 1.0;
                r.note_admitted(now, 1);
                // Held for claim-ttl until the visitor comes back with the cookie: a client
                // without a cookie jar does not pin a session's worth of max-active.
                r.activate(vid, now + micros(p.claim_ttl.min(p.session_ttl)));
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
            let (seq, _) = r.place_for(&at, ctx.draws);
            r.enqueue_at(vid, seq, now, in_pre);
            r.joined_total += 1;
            r.answer(p, &state, seq, waiting + 1, true, in_pre)
        }))
    }

    async fn admit_with(
        &self,
        p: &RoomParams,
        ctx: &AdmitContext,
    ) -> Result<AdmitReport, StoreError> {
        let room = self.room(&p.name);
        let mut r = room.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.clock.mono_micros();
        let wall = self.clock.now_micros();
        let (generation, new_generation) = r.generation_or_new();
        let stale = ctx
            .known_generation
            .as_deref()
            .is_some_and(|k| k != generation);
        if new_generation && ctx.known_generation.is_some() {
            // Lost data, noticed by a caller that knew the room: hold the line until it has
            // re-asserted the room's state (like admit.lua).
            r.state.queue_all = true;
        }
        r.hold_back = ctx.hold_back;
        r.config.clone_from(&ctx.config);
        let expired = r.prune_active(now);
        let live = r.live(now, p.tick, true);
        let at = r.event_now(ctx.events.as_ref(), wall);
        let in_pre = at.in_pre();
        r.event_tick(&at, live, now, wall);
        let event_state = r.state_in(&at);
        r.state.event_rate = event_state.event_rate;
        r.state.event_max_active = event_state.event_max_active;
        r.mark_seen_batch(&ctx.seen, in_pre);
        let abandoned = r.prune_abandoned(live, micros(p.abandon_after));
        let autopilot = r.steer(ctx.autopilot.as_ref(), now);
        let state = r.state.clone();
        let rate = p.rate(&state);
        let burst = p.burst(rate);
        r.refill(now, rate, burst);
        let mut admitted = 0;
        let mut admitted_visitors = Vec::new();
        if state.enabled && !state.queue_all && !stale && !in_pre {
            let room_left = p
                .max_active(&state)
                .saturating_sub(r.active.len() as u64)
                .saturating_sub(ctx.hold_back);
            let n = (r.tokens.floor() as u64)
                .min(room_left)
                .min(r.waiters.len() as u64)
                .min(r.window_left(now, micros(p.tick), burst));
            let until = now + micros(p.claim_ttl);
            for _ in 0..n {
                let Some(vid) = r.next_in(p.queueing) else {
                    break;
                };
                let seq = r.waiters.get(&vid).map(|w| w.seq);
                let joined_at = r.remove_waiter(vid).unwrap_or(now);
                let from = seq.map_or(joined_at, |seq| r.waited_from(seq, joined_at));
                r.activate(vid, until);
                admitted += 1;
                admitted_visitors.push(AdmittedVisitor {
                    vid,
                    waited: Duration::from_micros(now.saturating_sub(from)),
                });
            }
            r.tokens -= admitted as f64;
            r.note_admitted(now, admitted);
            r.admitted_total += admitted;
        }
        let idle = (admitted == 0 && r.waiters.is_empty())
            || !state.enabled
            || state.queue_all
            || stale
            || in_pre;
        r.observe_rate(now, idle);
        Ok(AdmitReport {
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
            line: r.sample(burst as u64),
            autopilot,
            revoked: r.revoked.after(ctx.revoked_after, self.clock.now_secs()),
            event: r.event_seen(&at, wall),
            events_version: r.events_version(),
            store_now: wall,
        })
    }

    async fn touch(&self, p: &RoomParams, vid: VisitorId) -> Result<bool, StoreError> {
        Ok(self.with(p, |r, now| r.touch_session(p, vid, now)))
    }

    async fn consume(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        order: &Order,
    ) -> Result<Consumed, StoreError> {
        Ok(self.with(p, |r, now| r.consume_order(p, vid, order, now)))
    }

    async fn settle(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        request: &RequestId,
        how: Settle,
    ) -> Result<Settled, StoreError> {
        Ok(self.with(p, |r, now| r.settle_order(p, vid, request, how, now)))
    }

    async fn finish(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        ending: &Ending,
    ) -> Result<(), StoreError> {
        let wall = self.clock.now_secs();
        self.with(p, |r, now| r.finish_admission(vid, ending, now, wall));
        Ok(())
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
            r.state.apply(patch);
            r.autopilot_follows_state();
            r.state.clone()
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
        Ok(self.with(p, |r, _| {
            let before = r.state.clone();
            r.state.apply(patch);
            r.autopilot_follows_state();
            r.record(by, history::field_changes(patch, &before, &r.state));
            r.state.clone()
        }))
    }

    async fn clear_waiting_by(
        &self,
        p: &RoomParams,
        by: &history::Actor,
    ) -> Result<u64, StoreError> {
        let n = self.clear_waiting(p).await?;
        self.with(p, |r, _| r.record(by, history::cleared(n)));
        Ok(n)
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
