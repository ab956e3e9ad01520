//! Surviving a store that lost its data (a Redis restarted without persistence, a failover that
//! dropped writes).
//!
//! Every admit step reports the store generation (see [`crate::store::AdmitReport`]). An
//! instance that sees it change from one it knew:
//! - re-asserts the last runtime state it saw (`enabled`, `queue_all`, the overrides) through
//!   `update_room_state`, once, logged at warn, so that a held pre-sale line stays held; until
//!   that succeeded its admit calls admit nobody (the store refuses a stale generation);
//! - opens a re-registration window of one `session-ttl`: each admitted visitor's first request
//!   on this instance makes one `touch`, so the store counts their session again. A bounded set
//!   of visitor ids remembers who was done; no store call on any later request;
//! - meanwhile holds back slots of max-active in its admit calls (and so in join's fast path)
//!   for the sessions the store forgot and that have not come back yet (see [`hold_back`]).
//!
//! The gap between the store's return and the re-assert is closed from two sides: only the
//! admission step probes a half-open breaker (see [`crate::app::Core::store_call`]), so it is
//! the first call to reach a store that is back; and an admit that makes a new generation for a
//! caller that knew another holds the line until the caller has re-asserted the state.
//!
//! The trade-offs accepted (see `docs/operations.md`): a store that came back before the breaker
//! opened can see joins before the first admit tick, and then the join fast path works from the
//! empty store's defaults for about one tick; the hold-back is in force from the second tick and
//! is an estimate, so max-active can be passed by old sessions that come back late; and a
//! visitor who was in line loses the place (the line itself is gone).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::clock::{micros, Micros};
use crate::store::{AdmitContext, AdmitStep, RoomPatch, RoomState, VisitorId};

mod known;
pub use known::{Known, Longest, LONGEST_KEPT};

/// A generation reported by an admit step, against the one known.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// The first report this instance gets: nothing to compare with.
    First,
    Same,
    /// The store forgot the room: here is what was known before.
    Lost(Known),
}

/// Compares a reported generation with the one known.
pub fn compare(known: Option<&Known>, generation: &str) -> Seen {
    match known {
        None => Seen::First,
        Some(k) if k.generation == generation => Seen::Same,
        Some(k) => Seen::Lost(k.clone()),
    }
}

/// The patch that puts `state` back whole.
pub fn reassert(state: &RoomState) -> RoomPatch {
    RoomPatch {
        enabled: Some(state.enabled),
        queue_all: Some(state.queue_all),
        admit_per_second: Some(state.admit_per_second),
        max_active: Some(state.max_active),
        autopilot: Some(state.autopilot),
        as_of: Some(state.changed_at),
    }
}

/// Slots of max-active to keep free during the re-registration window: the sessions the store
/// forgot that are probably still browsing and not re-registered yet. `old_active` sessions were
/// known before the loss; `reregistered` have come back through this instance. Sessions that
/// never come back end within one session-ttl, their remaining lives spread over it, so the
/// estimate also decays linearly to 0 over the window. The smaller of the two: hold back no
/// more than must be.
pub fn hold_back(old_active: u64, reregistered: u64, remaining: Micros, window: Micros) -> u64 {
    if window == 0 || remaining == 0 {
        return 0;
    }
    let decayed = (old_active as u128 * remaining.min(window) as u128).div_ceil(window as u128);
    old_active.saturating_sub(reregistered).min(decayed as u64)
}

#[derive(Debug)]
struct Window {
    /// The generation whose sessions it holds back, and the one the loss made
    /// (`open_window`).
    from: String,
    loss: String,
    started: Micros,
    until: Micros,
    old_active: u64,
    /// Visitors already re-registered through this instance.
    done: HashSet<VisitorId>,
    /// Bound on `done`: past it, nobody more is re-registered (the store's load stays bounded;
    /// max-active is then honoured again only as cookies run out).
    cap: usize,
}

impl Window {
    fn hold_back(&self, now: Micros) -> u64 {
        hold_back(
            self.old_active,
            self.done.len() as u64,
            self.until.saturating_sub(now),
            self.until - self.started,
        )
    }
}

/// Numbers of admit calls, for every room of this process: each larger than any before
/// ([`crate::store::AdmitStep`]), across reloads too.
static STEPS: AtomicU64 = AtomicU64::new(0);

/// A room's recovery state, kept across reloads.
#[derive(Debug, Default)]
pub struct Recovery {
    /// The number of the last admit call for this room whose answer came back.
    heard: AtomicU64,
    /// The generation and the room's count of admit calls of the answers that came back (the
    /// highest in that generation).
    admits: Mutex<Option<(String, u64)>>,
    known: Mutex<Option<Known>>,
    window: Mutex<Option<Window>>,
    /// End of the re-registration window (µs), 0 when none: the one atomic the admitted path
    /// reads, so that outside a window it costs nothing.
    until: AtomicU64,
    /// Woken when a loss is seen: the heartbeats of this instance's orders in flight beat at
    /// once, writing their markers again before another instance can take a second order.
    /// Shared with the rooms of the configurations before and after a reload: the orders a
    /// reload left in flight wait on the one they started with (found by re-review: after a
    /// SIGHUP, a loss woke none of them, and another instance took a second order).
    pub lost: std::sync::Arc<tokio::sync::Notify>,
    /// The tick (µs) the last admit that reached the store carried, 0 before one did: what the
    /// store knows this instance runs the room with ([`crate::store::AdmitReport::tick_hi`]).
    landed_tick: AtomicU64,
    /// Newcomers the store let in at once through this instance's joins, ever
    /// ([`Self::note_entered`]); shared with the rooms of the configurations before and after
    /// a reload (a request of the old one may still be answered after it), as the counts below
    /// are carried over (found by re-review r83a: a reload between the walk-ins and the loss
    /// counted none of them).
    entered: std::sync::Arc<AtomicU64>,
    /// `entered` when the last admit call was made, and when the last one whose answer was
    /// remembered was made ([`Self::entered_since_known`]).
    entered_at_call: AtomicU64,
    entered_at_known: AtomicU64,
    /// Sessions the store counted by other means ([`Self::counted`]) while no window was
    /// open, numbered in turn: a loss found later holds back the count of the tick known,
    /// which held them, though they are over or counted again (found on a CI rehearsal: a
    /// confirm owed through an empty restart landed before the admission loop found the loss,
    /// and the window then held the ordered session's slot for a session-ttl: the line stood
    /// still). Those from before the last remembered call was sent are dropped: its count no
    /// longer holds them.
    ended: Mutex<(u64, std::collections::VecDeque<(u64, VisitorId)>)>,
    /// `ended`'s next number when the last admit call was made.
    ended_at_call: AtomicU64,
}

/// The most sessions [`Recovery::counted`] keeps while no window is open.
const ENDED_KEPT: usize = 4096;

impl Recovery {
    /// The store let a newcomer in at once through this instance (a walk-in): its session is
    /// one the last tick's count may not hold ([`Self::entered_since_known`]).
    pub fn note_entered(&self) {
        self.entered.fetch_add(1, Ordering::AcqRel);
    }

    /// Walk-ins through this instance since the admit call whose count of active sessions is
    /// known ([`Known::active`]): a loss within a tick of them lost sessions that count did not
    /// hold (found by review r79a: a FLUSHALL 100 ms after a walk-in held back no slot for it,
    /// and a newcomer was let in past `max-active`). Counted from before the call was sent, so
    /// a walk-in the call's count also holds may be counted twice (a slot held back a while
    /// longer), none missed. Another instance's walk-ins of that tick are not known here.
    pub fn entered_since_known(&self) -> u64 {
        self.entered
            .load(Ordering::Acquire)
            .saturating_sub(self.entered_at_known.load(Ordering::Acquire))
    }

    /// An admit carrying `tick` reached the store.
    pub fn tick_landed(&self, tick: std::time::Duration) {
        let us = u64::try_from(tick.as_micros()).unwrap_or(u64::MAX);
        self.landed_tick.store(us, Ordering::Release);
    }

    /// The tick the last admit that reached the store carried, if one did.
    pub fn landed_tick(&self) -> Option<std::time::Duration> {
        match self.landed_tick.load(Ordering::Acquire) {
            0 => None,
            us => Some(std::time::Duration::from_micros(us)),
        }
    }

    pub fn known(&self) -> Option<Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Remembers what a tick reported, with the newest operator change this instance has
    /// seen: a tick whose state is older than the one noted ([`Self::note_state`], by
    /// [`RoomState::changed_at`]) was sent before that change, and its state is not kept
    /// (found by review r94a: a tick sent before a change answered 200 replaced the noted
    /// state with the one before it, stamped with the change's time, and a loss within the
    /// next tick re-asserted that: the held line opened to everyone).
    pub fn remember(&self, mut k: Known) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        self.entered_at_known.store(
            self.entered_at_call.load(Ordering::Acquire),
            Ordering::Release,
        );
        {
            let at_call = self.ended_at_call.load(Ordering::Acquire);
            let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
            while ended.1.front().is_some_and(|&(n, _)| n < at_call) {
                ended.1.pop_front();
            }
        }
        if let Some(old) = known.as_ref() {
            if old.state.changed_at > k.state.changed_at {
                k.state = old.state.clone();
            }
        }
        *known = Some(k);
    }

    /// Notes a state the store answered an operator's change with: the one to re-assert should
    /// the store lose its data before the next tick reports it. Not noted, a change answered
    /// 200 (a line held for a pre-sale, say) was undone by a loss within that tick, the state
    /// of the tick before it re-asserted instead. Before this instance's first tick nothing is
    /// noted: there is no generation to tell a loss by, and re-asserting a whole state then
    /// could undo a change made since through another instance.
    pub fn note_state(&self, state: &RoomState) {
        if let Some(k) = self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            let seen = k.state.changed_at;
            k.state = state.clone();
            k.state.changed_at = k.state.changed_at.max(seen);
        }
    }

    /// The slots held back now for sessions the store forgot ([`hold_back`]); 0 outside a
    /// window. Every estimate of the slots taken counts them: the admit calls' and the
    /// `local` policy's (found by review: during an outage soon after a loss, `local` admitted
    /// into the slots held back, past `max-active`).
    pub fn held_back(&self, now: Micros) -> u64 {
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        match window.as_ref() {
            Some(w) if now < w.until => w.hold_back(now),
            Some(_) => {
                *window = None;
                self.until.store(0, Ordering::Release);
                0
            }
            None => 0,
        }
    }

    /// With a window open of the sessions counted in `generation`: what it would hold back
    /// were a loss found again with `counted` of them (`open_window` keeps it), as if none had
    /// come back, since the loss found may be another one.
    fn hold_if_found_again(
        &self,
        generation: Option<&str>,
        counted: u64,
        now: Micros,
    ) -> Option<u64> {
        let window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let w = window
            .as_ref()
            .filter(|w| now < w.until && Some(w.from.as_str()) == generation)?;
        Some(w.old_active.max(counted))
    }

    /// What the next admit call is told.
    /// The room's count of admit calls heard in `generation` (0: none, or another).
    fn admits_heard(&self, generation: Option<&str>) -> u64 {
        match (
            self.admits
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref(),
            generation,
        ) {
            (Some((g, n)), Some(known)) if g == known => *n,
            _ => 0,
        }
    }

    /// An answer of `generation` told the room's count of admit calls `admits`.
    pub fn admits_heard_in(&self, generation: &str, admits: u64) {
        let mut heard = self.admits.lock().unwrap_or_else(|e| e.into_inner());
        match heard.as_mut() {
            Some((g, n)) if g == generation => *n = (*n).max(admits),
            _ => *heard = Some((generation.to_string(), admits)),
        }
    }

    pub fn context(&self, now: Micros) -> AdmitContext {
        self.entered_at_call
            .store(self.entered.load(Ordering::Acquire), Ordering::Release);
        let next = self.ended.lock().unwrap_or_else(|e| e.into_inner()).0;
        self.ended_at_call.store(next, Ordering::Release);
        let (known_generation, known_active) = self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or((None, 0), |k| (Some(k.generation.clone()), k.active));
        let hold = self.held_back(now);
        // What `open_window` would hold back, were the loss found by this call: on top of a
        // window of an earlier loss, or, when the window is of the tick known (a loss found
        // again before its re-assertion landed), those same sessions once.
        let counted = known_active.saturating_add(self.entered_since_known());
        let hold_if_lost = self
            .hold_if_found_again(known_generation.as_deref(), counted, now)
            .unwrap_or(counted.saturating_add(hold));
        let admits = self.admits_heard(known_generation.as_deref());
        AdmitContext {
            known_generation,
            hold_back: hold,
            seen: Vec::new(),
            config: String::new(),
            events_config: String::new(),
            autopilot: None,
            revoked_after: None,
            events: None,
            draw_commitments: String::new(),
            hold_if_lost,
            step: AdmitStep {
                number: STEPS.fetch_add(1, Ordering::Relaxed) + 1,
                heard: self.heard.load(Ordering::Acquire),
                admits,
            },
            outage: Default::default(),
        }
    }

    /// Opens the re-registration window for one session-ttl from `now`, for `old_active`
    /// sessions the store counted before it lost them. A loss within an open window carries
    /// that window's hold-back over (found by review: a second loss soon after the first threw
    /// away the sessions still held back from the first, which the store had not counted
    /// again, and `max-active` was passed by them); everyone re-registers again.
    ///
    /// `from`: the generation whose count `old_active` is (the last one this instance knew
    /// before the loss); `loss`: the generation the loss made. The window opens when the loss
    /// is found, before the room's state is re-asserted (found on CI: a store that went away
    /// again before the re-assertion left no window, and `local` admitted into the forgotten
    /// sessions' slots). Until a re-assertion lands, every loss found is of the sessions
    /// counted in `from`, so they are not held back twice: the same loss found again (the
    /// retry) keeps the window whole; another one (the store lost its data again meanwhile)
    /// opens it again from now for those same sessions, everyone re-registering again (found
    /// by review r92a: kept whole, the sessions that came back in between counted as back,
    /// and the line took their slots).
    pub fn open_window(
        &self,
        now: Micros,
        session_ttl: Duration,
        old_active: u64,
        cap: usize,
        (from, loss): (&str, &str),
    ) {
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let open = window.as_mut().filter(|w| now < w.until && w.from == from);
        if let Some(w) = open {
            w.old_active = w.old_active.max(old_active);
            if w.loss != loss {
                let until = now.saturating_add(micros(session_ttl));
                w.loss = loss.to_string();
                w.started = now;
                w.until = until;
                w.done.clear();
                self.until.store(until, Ordering::Release);
            }
            self.lost.notify_waiters();
            return;
        }
        let carried = window
            .as_ref()
            .filter(|w| now < w.until)
            .map_or(0, |w| w.hold_back(now));
        self.lost.notify_waiters();
        let until = now.saturating_add(micros(session_ttl));
        // The sessions counted since the tick known, before this window: not held back.
        let done: HashSet<VisitorId> = self
            .ended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .drain(..)
            .map(|(_, vid)| vid)
            .take(cap)
            .collect();
        *window = Some(Window {
            from: from.to_string(),
            loss: loss.to_string(),
            started: now,
            until,
            old_active: old_active.saturating_add(carried),
            done,
            cap,
        });
        self.until.store(until, Ordering::Release);
    }

    /// Whether a loss this instance saw began less than `quiet` before `now`: the store takes
    /// back no session it does not hold meanwhile ([`crate::store::Store::touch_seen`]).
    pub fn loss_younger_than(&self, now: Micros, quiet: Duration) -> bool {
        self.window
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|w| now < w.started.saturating_add(micros(quiet)))
    }

    /// `true` once per visitor during a window, from `quiet` after its start: this request
    /// should re-register the session. Not before: an order of this admission may be in flight
    /// on an instance that has not seen the loss yet, and a session taken back meanwhile let a
    /// second order win (found by re-review).
    pub fn claim(&self, vid: VisitorId, now: Micros, quiet: Duration) -> bool {
        if now >= self.until.load(Ordering::Acquire) {
            return false;
        }
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        match window.as_mut() {
            Some(w) if now < w.started.saturating_add(micros(quiet)) => false,
            Some(w) if now < w.until && w.done.len() < w.cap => w.done.insert(vid),
            _ => false,
        }
    }

    /// The store counted `vid`'s session again by other means than this instance's touch: an
    /// order vouched by its cookie (consume.lua takes a session it does not know back), or the
    /// confirm of its order landed (the session is over). Its slot is held back no longer (found by review: two forgotten sessions whose first request
    /// after the loss was their order stayed held back after the orders ended, and the line
    /// stood still for minutes).
    pub fn counted(&self, vid: VisitorId, now: Micros) {
        if now >= self.until.load(Ordering::Acquire) {
            // No window yet: one opened by a loss found later leaves it out ([`Self::ended`]).
            let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
            let n = ended.0;
            ended.0 = n.wrapping_add(1);
            if ended.1.len() >= ENDED_KEPT {
                ended.1.pop_front();
            }
            ended.1.push_back((n, vid));
            return;
        }
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = window.as_mut() {
            if now < w.until && w.done.len() < w.cap {
                w.done.insert(vid);
            }
        }
    }

    /// The re-registration failed (the store did not answer): a later request tries again.
    pub fn release(&self, vid: VisitorId) {
        if let Some(w) = self
            .window
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            w.done.remove(&vid);
        }
    }

    /// The answer of the admit call numbered `number` came back.
    pub fn heard(&self, number: u64) {
        self.heard.fetch_max(number, Ordering::AcqRel);
    }

    /// Carries everything over a reload.
    pub fn inherit(&mut self, old: &Recovery) {
        self.lost = old.lost.clone();
        self.entered = old.entered.clone();
        for (mine, theirs) in [
            (&self.entered_at_call, &old.entered_at_call),
            (&self.entered_at_known, &old.entered_at_known),
        ] {
            mine.store(theirs.load(Ordering::Acquire), Ordering::Release);
        }
        self.landed_tick
            .store(old.landed_tick.load(Ordering::Acquire), Ordering::Release);
        self.heard
            .store(old.heard.load(Ordering::Acquire), Ordering::Release);
        *self.admits.lock().unwrap_or_else(|e| e.into_inner()) =
            old.admits.lock().unwrap_or_else(|e| e.into_inner()).clone();
        *self.known.lock().unwrap_or_else(|e| e.into_inner()) = old.known();
        *self.ended.lock().unwrap_or_else(|e| e.into_inner()) =
            std::mem::take(&mut *old.ended.lock().unwrap_or_else(|e| e.into_inner()));
        self.ended_at_call
            .store(old.ended_at_call.load(Ordering::Acquire), Ordering::Release);
        let taken = old.window.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.until
            .store(old.until.load(Ordering::Acquire), Ordering::Release);
        *self.window.lock().unwrap_or_else(|e| e.into_inner()) = taken;
    }
}

#[cfg(test)]
mod tests;
