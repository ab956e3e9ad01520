//! A room's events on this instance: the schedule in force (the file's events with the store's
//! runtime changes), what the last admit call said of the event in force, and the store's clock
//! as seen from here. The proxy reads it on every request of a room with events; the admission
//! loop writes it once a tick (no store call of its own).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, ArcSwapOption};

use super::schedule::{Runtime, Schedule};
use super::{current, Event, Phase};
use crate::clock::Micros;
use crate::store::{
    Draw, EventSeen, EventsArg, JoinContext, JoinGate, LineDraw, RuntimeEvents, VisitorId,
};

mod draws;
pub use draws::{CancelledDraw, DrawList};

/// What a join carries of a room's events ([`RoomEvents::for_join`]).
#[derive(Debug, Default)]
pub struct JoinEvents {
    window: Option<Arc<EventsArg>>,
    draws: Vec<Option<Draw>>,
    version: Option<u64>,
}

impl JoinEvents {
    /// The join's context: these events, and `gate`.
    pub fn context<'a>(&'a self, gate: Option<&'a JoinGate>) -> JoinContext<'a> {
        JoinContext {
            gate,
            events: self.window.as_deref(),
            draws: &self.draws,
            events_version: self.version,
            unsettled: false,
        }
    }
}

/// Most draws' lists an instance keeps (the latest read stay).
const LISTS_KEPT: usize = 4;

/// One room's events on this instance.
#[derive(Debug)]
pub struct RoomEvents {
    room: Arc<str>,
    /// The config file's events.
    config: Vec<Event>,
    schedule: ArcSwap<Schedule>,
    /// The schedule has events: read on every admitted request, so kept apart from it.
    any: AtomicBool,
    /// The runtime changes the schedule was built from.
    runtime: ArcSwap<RuntimeEvents>,
    /// The events near now, as the last tick passed them to the store (and joins pass them).
    window: ArcSwap<EventsArg>,
    /// The event in force at the last tick, as the store decided it.
    seen: ArcSwapOption<EventSeen>,
    /// The draw whose places the line held at the last tick (its event perhaps cancelled
    /// since), and whether its order is out.
    line_draw: ArcSwapOption<LineDraw>,
    /// The store's clock minus this instance's wall clock (µs), at the last tick.
    skew: AtomicI64,
    /// `[draw] secret`.
    secret: Option<Arc<[u8]>>,
    /// The draws' lists read (oldest first), and the events whose list a request asked for.
    lists: Mutex<Vec<DrawList>>,
    wanted: Mutex<Vec<String>>,
    /// The store generation the last tick reported (empty before the first).
    generation: Mutex<String>,
    /// The last tick found this instance's commitment to the draw in force another than the
    /// one its pre-queue began with ([`crate::store::AdmitReport::draw_recommitted`]): none is
    /// published here meanwhile.
    recommitted: AtomicBool,
    /// Since when (this instance's µs, 0: not) the store has runtime changes newer than this
    /// instance's that it could not read: see [`RoomEvents::unread_for`].
    unread_since: AtomicU64,
}

/// What a request sees of the room's event.
#[derive(Debug, Clone)]
pub struct View {
    pub event: Event,
    pub phase: Phase,
    /// The store has seen the event open: its draw's seed may be shown.
    pub revealed: bool,
    pub registrations: u64,
    /// The store's clock now, as estimated here.
    pub now: Micros,
}

/// How long after an opening an instance that has not heard from the store since it started
/// takes the opening to be unrecorded (µs): ten minutes.
pub const UNHEARD_OPENING: Micros = 600_000_000;

/// Whether `event`, open by the store's clock at `now`, was not recorded as opened by the store
/// when it last answered (`seen`); see [`RoomEvents::opening_unconfirmed`] for `heard`.
fn unrecorded(seen: &Option<Arc<EventSeen>>, event: &Event, heard: bool, now: Micros) -> bool {
    match seen.as_ref().filter(|e| event.is(&e.id)) {
        Some(e) => e.opened_at.is_none(),
        None if heard => true,
        None => now < event.opens_at.saturating_add(UNHEARD_OPENING),
    }
}

/// Whether `now`, read by an instance that has not `heard` from the store (on a clock never
/// checked against the store's), may fall between an event's pre-queue and its opening: within
/// [`UNHEARD_OPENING`] of them either way.
fn near_unheard(events: &[Event], heard: bool, now: Micros) -> bool {
    !heard
        && events.iter().any(|e| {
            let from = e.prequeue_from.min(e.opens_at);
            from.saturating_sub(UNHEARD_OPENING) <= now
                && now < e.opens_at.saturating_add(UNHEARD_OPENING)
        })
}

/// The id of the event the store said it has seen open, if any.
fn opened_id(seen: &Option<Arc<EventSeen>>) -> Option<&str> {
    seen.as_ref()
        .filter(|e| e.opened_at.is_some())
        .map(|e| e.id.as_str())
}

impl RoomEvents {
    pub fn new(room: &str, config: Vec<Event>, secret: Option<Arc<[u8]>>) -> Self {
        let (schedule, _) = Schedule::build(&config, &Default::default(), 0);
        // Before the first tick has read the store's runtime changes, at version 0: where the
        // store has some, nobody new is placed by this window (see `for_join`).
        let window = EventsArg::at(&schedule.events, 0);
        let any = AtomicBool::new(!schedule.events.is_empty());
        Self {
            any,
            room: Arc::from(room),
            config,
            schedule: ArcSwap::from_pointee(schedule),
            runtime: ArcSwap::from_pointee(RuntimeEvents::default()),
            window: ArcSwap::from_pointee(window),
            seen: ArcSwapOption::empty(),
            line_draw: ArcSwapOption::empty(),
            skew: AtomicI64::new(0),
            secret,
            lists: Mutex::new(Vec::new()),
            wanted: Mutex::new(Vec::new()),
            generation: Mutex::new(String::new()),
            recommitted: AtomicBool::new(false),
            unread_since: AtomicU64::new(0),
        }
    }

    /// Notes at `now` (µs) whether this instance holds the store's runtime changes (`read`),
    /// or could not read newer ones.
    pub fn note_read(&self, read: bool, now: Micros) {
        if read {
            self.unread_since.store(0, Ordering::Relaxed);
        } else {
            let _ = self.unread_since.compare_exchange(
                0,
                now.max(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// How long at `now` the store's runtime changes have been newer here than what this
    /// instance could read (`None`: it holds them). Meanwhile every order and newcomer through
    /// it is held (its events are stale), so it is not ready for as long as that lasts (found
    /// by re-review r107a: an instance whose reads of them failed answered every order "not
    /// just yet" for good while it looked healthy).
    pub fn unread_for(&self, now: Micros) -> Option<Micros> {
        let since = self.unread_since.load(Ordering::Relaxed);
        (since != 0).then(|| now.saturating_sub(since))
    }

    /// Over a reload: the runtime changes, the store's word and clock, the list, with the new
    /// file's events.
    pub fn inherit(&self, old: &RoomEvents, local: Micros) {
        self.rebuild(&old.runtime.load());
        self.seen.store(old.seen.load_full());
        self.line_draw.store(old.line_draw.load_full());
        self.skew
            .store(old.skew.load(Ordering::Relaxed), Ordering::Relaxed);
        let lists = old.lists.lock().unwrap_or_else(|e| e.into_inner()).clone();
        *self.lists.lock().unwrap_or_else(|e| e.into_inner()) = lists;
        let generation = old
            .generation
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        *self.generation.lock().unwrap_or_else(|e| e.into_inner()) = generation;
        self.recommitted
            .store(old.recommitted.load(Ordering::Relaxed), Ordering::Relaxed);
        // Still unread since then: a reload does not make the instance ready (found by
        // re-review r108a: `/readyz` said ready for five seconds after each SIGHUP).
        self.unread_since
            .store(old.unread_since.load(Ordering::Relaxed), Ordering::Relaxed);
        // The joins until the next tick carry the new schedule's events, with its version.
        self.tick_args(local);
    }

    /// Whether the room has any event (else nothing here costs a request anything).
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    pub fn schedule(&self) -> Arc<Schedule> {
        self.schedule.load_full()
    }

    /// The events of the room's section of the file (the schedule adds the runtime changes).
    pub fn file_events(&self) -> &[Event] {
        &self.config
    }

    pub fn runtime(&self) -> Arc<RuntimeEvents> {
        self.runtime.load_full()
    }

    /// Builds the schedule from the file's events and `runtime`; returns what was left out.
    pub fn rebuild(&self, runtime: &RuntimeEvents) -> Vec<String> {
        let (s, warnings) = Schedule::build(&self.config, &runtime.events, runtime.version);
        self.any.store(!s.events.is_empty(), Ordering::Relaxed);
        self.schedule.store(Arc::new(s));
        self.runtime.store(Arc::new(runtime.clone()));
        warnings
    }

    /// The store's clock at this instance's wall time `local`.
    pub fn store_now(&self, local: Micros) -> Micros {
        local.saturating_add_signed(self.skew.load(Ordering::Relaxed))
    }

    /// The events a tick passes to the store, kept for the joins until the next tick; `None`
    /// for a room without events.
    pub fn tick_args(&self, local: Micros) -> Option<EventsArg> {
        let s = self.schedule.load();
        if s.events.is_empty() {
            // No events, at this version of the runtime changes (what joins are checked by).
            self.window.store(Arc::new(EventsArg::at(&[], s.version)));
            return None;
        }
        let arg = EventsArg::at(s.window(self.store_now(local)), s.version);
        self.window.store(Arc::new(arg.clone()));
        Some(arg)
    }

    /// Notes the store generation a tick reported; whether it differs from one noted before
    /// (the store lost the room's data meanwhile: see `admission::events::learn`). Before the
    /// first tick there is none to compare with, yet runtime changes may already be known here
    /// (made through this instance's admin API while its first ticks failed or had not run):
    /// the store may have lost them since, so they count as a loss to check (the check writes
    /// back only what the store has none of). Not counted, a change answered 201 was gone for
    /// good when the store lost its data before this instance's first tick (CI saw it once).
    pub fn note_generation(&self, generation: &str) -> bool {
        let mut g = self.generation.lock().unwrap_or_else(|e| e.into_inner());
        let lost = if g.is_empty() {
            !self.runtime.load().events.is_empty()
        } else {
            *g != generation
        };
        generation.clone_into(&mut g);
        lost
    }

    /// Marks the loss noted as not handled: the next tick's generation counts as a change
    /// again, whatever it is.
    pub fn forget_generation(&self) {
        let mut g = self.generation.lock().unwrap_or_else(|e| e.into_inner());
        "(a loss not handled yet)".clone_into(&mut g);
    }

    /// The events a join passes (the last tick's window).
    pub fn window(&self) -> Arc<EventsArg> {
        self.window.load_full()
    }

    /// What a join of `vid` passes: the last tick's window when the room has events, the
    /// visitor's draws in it, and always the version of the runtime changes the window comes
    /// from (a room without events may just have been given one: a join by a window from
    /// before places nobody new, see [`JoinContext::events_version`]).
    pub fn for_join(&self, vid: VisitorId, local: Micros) -> JoinEvents {
        let window = self.window();
        let version = window.version;
        let window = self.any().then_some(window);
        let draws = window
            .as_deref()
            .map_or_else(Vec::new, |w| self.draws(w, vid, local));
        JoinEvents {
            window,
            draws,
            version,
        }
    }

    /// The store's clock as an admit call reported it (`store_now`, 0: not reported) at this
    /// instance's wall time `local`: what [`RoomEvents::store_now`] reads by. The tick notes it
    /// before anything else of the reply is judged by it (the revocations: found by re-review,
    /// an instance ahead of the store dropped at its first tick the revocations it took for
    /// expired, and accepted the revoked cookies).
    pub fn note_store_now(&self, store_now: Micros, local: Micros) {
        if store_now > 0 {
            let skew = i64::try_from(store_now).unwrap_or(i64::MAX)
                - i64::try_from(local).unwrap_or(i64::MAX);
            self.skew.store(skew, Ordering::Relaxed);
        }
    }

    /// What the tick's admit call said: the event in force, the draw whose places the line
    /// holds, and the store's clock. Returns whether the runtime changes moved on (read them
    /// again).
    pub fn learn(
        &self,
        seen: Option<&EventSeen>,
        line_draw: Option<&LineDraw>,
        store_now: Micros,
        version: u64,
        local: Micros,
    ) -> bool {
        self.note_store_now(store_now, local);
        self.seen.store(seen.cloned().map(Arc::new));
        if self.line_draw.load().as_deref() != line_draw {
            self.line_draw.store(line_draw.cloned().map(Arc::new));
        }
        version != self.runtime.load().version
    }

    /// Notes what the last tick said of this instance's draw commitment; `true` when that
    /// changed (the caller says so in the log).
    pub fn note_recommitted(&self, recommitted: bool) -> bool {
        self.recommitted.swap(recommitted, Ordering::Relaxed) != recommitted
    }

    /// Whether the last tick found this instance's draw commitment another than the one the
    /// pre-queue began with.
    pub fn recommitted(&self) -> bool {
        self.recommitted.load(Ordering::Relaxed)
    }

    pub fn seen(&self) -> Option<Arc<EventSeen>> {
        self.seen.load_full()
    }

    /// Whether the store, when it last answered, had recorded `event` as opened.
    pub fn recorded_open(&self, event: &Event) -> bool {
        self.seen
            .load()
            .as_ref()
            .is_some_and(|x| event.is(&x.id) && x.opened_at.is_some())
    }

    /// The event in force for a request at this instance's wall time `local`: by the store's
    /// clock as estimated here, and the store's word on the opening.
    pub fn view(&self, local: Micros) -> Option<View> {
        let s = self.schedule.load();
        if s.events.is_empty() {
            return None;
        }
        let now = self.store_now(local);
        let seen = self.seen.load();
        let (_, event, phase) = current(&s.events, now, opened_id(&seen))?;
        let seen = seen.as_ref().filter(|e| event.is(&e.id));
        let revealed = self.revealed(event);
        Some(View {
            revealed,
            registrations: seen.map_or(0, |e| e.registrations),
            event: event.clone(),
            phase,
            now,
        })
    }

    /// The phase of the event in force at `local`, as [`Self::view`] tells it, without copying
    /// the event: the admitted path asks it on every request of a room with events.
    pub fn phase(&self, local: Micros) -> Option<Phase> {
        let s = self.schedule.load();
        let seen = self.seen.load();
        current(&s.events, self.store_now(local), opened_id(&seen)).map(|(_, _, p)| p)
    }

    /// Whether the event in force at `local` is open by this instance's estimate of the
    /// store's clock while the store, when it last answered, had not recorded its opening:
    /// until it has, the registrants of its pre-queue are not let in and nobody goes ahead of
    /// them (`room::policy`), and no admission from before it is honoured here.
    ///
    /// `heard`: whether this instance has heard from the store since it started. One that has
    /// not knows nothing of the store's record, and guesses the opening unrecorded only for
    /// [`UNHEARD_OPENING`] after it (re-review: an instance started during an outage held a
    /// sale opened an hour before for as long as the outage lasted).
    ///
    /// One that has not heard also reads its own clock, not the store's: from [`UNHEARD_OPENING`]
    /// before an event's pre-queue to as long after its opening, its room is taken as not yet
    /// open (found by review r103b: an instance five minutes behind, started while Redis was
    /// down, put a pre-queue five minutes later and let everyone in under `open` meanwhile).
    pub fn opening_unconfirmed(&self, local: Micros, heard: bool) -> bool {
        let s = self.schedule.load();
        let seen = self.seen.load();
        let now = self.store_now(local);
        if near_unheard(&s.events, heard, now) {
            return true;
        }
        match current(&s.events, now, opened_id(&seen)) {
            Some((_, event, Phase::Open)) => unrecorded(&seen, event, heard, now),
            _ => false,
        }
    }

    /// Whether an admission cookie of this room is refused at `local`: in a pre-queue (it
    /// admits nobody), and for an order (`order`) at an opening the store had not recorded
    /// when this instance last heard from it (every session from before the event ends there:
    /// the order asks the store, which ends such a session if no call has yet, and lets a
    /// session from after the opening order). Pages stay open to such a cookie, as after any
    /// opening: refusing them too held visitors admitted at the opening on an instance whose
    /// tick had not yet seen it, for as long as an outage that began then lasted (re-review).
    ///
    /// An order on an instance that has not heard from the store asks it near any event, by
    /// [`Self::opening_unconfirmed`]'s window: its own clock may put a pre-queue that has begun
    /// still to come (review r103b).
    pub fn refuses_cookies(&self, local: Micros, heard: bool, order: bool) -> bool {
        let s = self.schedule.load();
        let seen = self.seen.load();
        let now = self.store_now(local);
        if order && near_unheard(&s.events, heard, now) {
            return true;
        }
        match current(&s.events, now, opened_id(&seen)) {
            Some((_, _, Phase::Prequeue)) => true,
            Some((_, event, Phase::Open)) => order && unrecorded(&seen, event, heard, now),
            _ => false,
        }
    }

    /// Whole seconds from `local` until the next pre-queue begins by this instance's clock (the
    /// store's as estimated here), if one is scheduled: a session kept running on this
    /// instance alone is not kept past it (`crate::room::kept_life`), for the store cannot end a
    /// session it no longer holds when the pre-queue begins (found by review r100b).
    pub fn secs_to_next_prequeue(&self, local: Micros) -> Option<u64> {
        let now = self.store_now(local);
        self.schedule
            .load()
            .events
            .iter()
            .filter(|e| e.prequeue_from > now)
            .map(|e| (e.prequeue_from - now) / 1_000_000)
            .min()
    }

    /// The event whose pre-queue runs now by this instance's clock, if one does.
    pub fn prequeue_view(&self, local: Micros) -> Option<View> {
        self.any()
            .then(|| self.view(local))
            .flatten()
            .filter(|v| v.phase == Phase::Prequeue)
    }

    /// Whether the room is in a pre-queue now, by this instance's clock or by the store's last
    /// word: every newcomer waits then, however many the last tick counted.
    pub fn in_prequeue(&self, local: Micros) -> bool {
        self.any()
            && self
                .view(local)
                .is_some_and(|v| v.phase == Phase::Prequeue || self.store_says_prequeue(&v.event))
    }

    /// Whether the store said this event is in its pre-queue at the last tick.
    pub fn store_says_prequeue(&self, event: &Event) -> bool {
        self.seen
            .load()
            .as_ref()
            .is_some_and(|e| event.is(&e.id) && e.phase == Phase::Prequeue)
    }

    /// A runtime definition for `name` as the store would keep it.
    pub fn runtime_of(&self, name: &str) -> Option<Runtime> {
        self.runtime.load().events.get(name).cloned()
    }
}

#[cfg(test)]
mod tests;
