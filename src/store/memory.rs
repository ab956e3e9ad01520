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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use async_trait::async_trait;

use super::liveness;
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
mod ordered;
mod orders;
mod passthrough;
mod revoked;
mod room;

use room::{new_epoch, RoomData, REGISTERED};

/// The in-process store.
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    rooms: RwLock<HashMap<Arc<str>, Arc<Mutex<RoomData>>>>,
}

impl MemoryStore {
    /// One `touch` (`RoomData::renew_session`), at the store's clocks.
    fn renew_or_take_back(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        taking: crate::store::Taking,
        expires: u64,
    ) -> Touched {
        let wall = self.clock.now_secs();
        self.with(p, |r, now| {
            r.renew_session(p, vid, (now, wall), taking, expires)
        })
    }

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
        Ok(self
            .renew_or_take_back(p, vid, crate::store::Taking::Renewal, 0)
            .held())
    }

    /// A memory store cannot lose its data alone: `seen` changes nothing.
    async fn touch_seen(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        _seen: Option<&crate::store::SeenGeneration>,
        expires: u64,
    ) -> Result<Touched, StoreError> {
        Ok(self.renew_or_take_back(p, vid, crate::store::Taking::Renewal, expires))
    }

    async fn register_local(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        _seen: Option<&crate::store::SeenGeneration>,
        expires: u64,
    ) -> Result<Touched, StoreError> {
        Ok(self.renew_or_take_back(p, vid, crate::store::Taking::Kept, expires))
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
        let wall = self.clock.now_micros();
        Ok(self.with(p, |r, now| r.finish_admission(p, vid, ending, now, wall)))
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
            // The hold a loss put on the line ends with the first word on queue_all (as
            // room_state.lua): a re-assertion not applied puts back what it covered.
            if let Some(covered) = r.loss_hold {
                if patch.as_of.is_some() && !apply {
                    r.state.queue_all = covered;
                    r.loss_hold = None;
                } else if apply && patch.queue_all.is_some() {
                    r.loss_hold = None;
                }
            }
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
            if patch.queue_all.is_some() {
                r.loss_hold = None;
            }
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
