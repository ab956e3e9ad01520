//! A room's figures as the latest admission tick left them ([`Live`]), read on every request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::line::forecast::{self, HeldBy};
use crate::store::AdmitReport;

/// Figures from the latest admission tick.
#[derive(Debug)]
pub struct Live {
    enabled: AtomicBool,
    queue_all: AtomicBool,
    waiting: AtomicU64,
    active: AtomicU64,
    /// Slots of `max-active` the tick held back for sessions a store that lost its data forgot
    /// (the store enforces them beside `active`).
    held_back: AtomicU64,
    /// Measured admissions per second × 1000.
    rate_milli: AtomicU64,
    admitted_total: AtomicU64,
    /// The rate in force (config or override) × 1000, as of the last tick.
    rate_in_force_milli: AtomicU64,
    /// Live proxy instances as of the last tick (for the `local` policy's share).
    instances: AtomicU64,
    /// The max-active in force (config or override) as of the last tick.
    max_active_in_force: AtomicU64,
    /// An admission tick has answered since this process started: until then the figures
    /// above are defaults, not knowledge, and the `local` policy admits nobody.
    heard: AtomicBool,
    /// When the last tick answered (for the decay of `active` in the store-error policy).
    heard_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// The last tick that reached the store was refused for the room's key layout.
    refused: AtomicBool,
    /// The last tick said the live instances disagree on the room's events.
    events_mixed: AtomicBool,
    /// The last tick said the store lets nobody in until instances that admitted on their own
    /// while it was away have told it ([`crate::store::AdmitReport::untold_hold`]).
    untold_hold: AtomicBool,
    /// Counts the state changes made through this instance ([`Self::set_state`]): a tick sent
    /// before one tells the state from before it.
    state_changes: AtomicU64,
    /// Held while `enabled` and `queue_all` are written with `state_changes`.
    state_lock: std::sync::Mutex<()>,
    /// A call of the admission loop failed since the last tick answered: the next admit says so
    /// ([`crate::store::Outage::cut`]), and until it is answered nobody walks in through
    /// this instance.
    cut: AtomicBool,
}

impl Default for Live {
    fn default() -> Self {
        Self {
            enabled: AtomicBool::new(true),
            queue_all: AtomicBool::new(false),
            waiting: AtomicU64::new(0),
            active: AtomicU64::new(0),
            held_back: AtomicU64::new(0),
            rate_milli: AtomicU64::new(0),
            admitted_total: AtomicU64::new(0),
            rate_in_force_milli: AtomicU64::new(0),
            instances: AtomicU64::new(1),
            max_active_in_force: AtomicU64::new(0),
            heard: AtomicBool::new(false),
            heard_at: std::sync::Mutex::new(None),
            refused: AtomicBool::new(false),
            events_mixed: AtomicBool::new(false),
            untold_hold: AtomicBool::new(false),
            state_changes: AtomicU64::new(0),
            cut: AtomicBool::new(false),
            state_lock: std::sync::Mutex::new(()),
        }
    }
}

impl Live {
    /// `held_back`: the slots the tick's call held back (see the field); `changes`: what
    /// [`Self::state_changes`] was when the call was sent. A tick sent before a state change
    /// made through this instance does not undo it (found on CI: the room switched back on
    /// through the admin API, a tick sent before then said it was off, and a visitor walked
    /// past the held line to the shop until the next tick).
    pub fn update(
        &self,
        r: &AdmitReport,
        rate_in_force: f64,
        max_active_in_force: u64,
        held_back: u64,
        changes: u64,
    ) {
        self.max_active_in_force
            .store(max_active_in_force, Ordering::Relaxed);
        self.heard.store(true, Ordering::Release);
        self.cut.store(false, Ordering::Release);
        self.refused.store(false, Ordering::Relaxed);
        *self.heard_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
        self.rate_in_force_milli
            .store((rate_in_force * 1000.0).round() as u64, Ordering::Relaxed);
        self.instances.store(r.instances.max(1), Ordering::Relaxed);
        {
            let _held = self.state_lock.lock().unwrap_or_else(|e| e.into_inner());
            if self.state_changes.load(Ordering::Acquire) == changes {
                self.enabled.store(r.state.enabled, Ordering::Relaxed);
                self.queue_all.store(r.state.queue_all, Ordering::Relaxed);
            }
        }
        self.events_mixed.store(r.events_mixed, Ordering::Relaxed);
        self.untold_hold.store(r.untold_hold, Ordering::Relaxed);
        self.waiting.store(r.waiting, Ordering::Relaxed);
        self.active.store(r.active, Ordering::Relaxed);
        self.held_back.store(held_back, Ordering::Relaxed);
        self.rate_milli
            .store((r.measured_rate * 1000.0).round() as u64, Ordering::Relaxed);
        self.admitted_total.fetch_add(r.admitted, Ordering::Relaxed);
    }

    /// A newcomer was placed in a line of `waiting` (the join's answer): until the next tick
    /// says otherwise, at least that many wait (see [`Self::held_by`]).
    pub fn note_line(&self, waiting: u64) {
        self.waiting.fetch_max(waiting, Ordering::Relaxed);
    }

    /// A newcomer was placed while every slot was taken (the join's answer): until the next
    /// tick says otherwise, the shop is full (see [`Self::held_by`]). The slots held back
    /// after a loss are among those taken already (`taken`, and the store-error policy, count
    /// them on top): the sessions are the rest (found by re-review: counted twice, an outage
    /// soon after a loss let the `local` policy admit nobody for a whole `session-ttl`).
    pub fn note_full(&self) {
        let held_back = self.held_back.load(Ordering::Relaxed);
        self.active.fetch_max(
            self.max_active_in_force().saturating_sub(held_back),
            Ordering::Relaxed,
        );
    }

    /// Applies a state change made through this instance at once (others follow at their tick).
    pub fn set_state(&self, s: &crate::store::RoomState) {
        let _held = self.state_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.state_changes.fetch_add(1, Ordering::AcqRel);
        self.enabled.store(s.enabled, Ordering::Relaxed);
        self.queue_all.store(s.queue_all, Ordering::Relaxed);
    }

    /// How many state changes were made through this instance (see [`Self::update`]).
    pub fn state_changes(&self) -> u64 {
        self.state_changes.load(Ordering::Acquire)
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn queue_all(&self) -> bool {
        self.queue_all.load(Ordering::Relaxed)
    }

    pub fn events_mixed(&self) -> bool {
        self.events_mixed.load(Ordering::Relaxed)
    }

    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    pub fn active(&self) -> u64 {
        self.active.load(Ordering::Relaxed)
    }

    /// The slots of `max-active` taken as of the last tick: the sessions and the slots held
    /// back for those a store that lost its data forgot.
    pub fn taken(&self) -> u64 {
        self.active()
            .saturating_add(self.held_back.load(Ordering::Relaxed))
    }

    /// The rate in force at the last tick; `None` before the first one.
    pub fn rate_in_force(&self) -> Option<f64> {
        match self.rate_in_force_milli.load(Ordering::Relaxed) {
            0 => None,
            m => Some(m as f64 / 1000.0),
        }
    }

    pub fn instances(&self) -> u64 {
        self.instances.load(Ordering::Relaxed)
    }

    /// A tick failed: a refusal of the key layout holds the room until a tick answers (a
    /// timeout in between says nothing about the layout).
    pub fn tick_failed(&self, e: &crate::store::StoreError) {
        self.cut.store(true, Ordering::Release);
        if e.is_layout_refusal() {
            self.refused.store(true, Ordering::Relaxed);
        }
    }

    /// A call of the admission loop failed since the last tick answered.
    pub fn cut(&self) -> bool {
        self.cut.load(Ordering::Acquire)
    }

    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    pub fn heard(&self) -> bool {
        self.heard.load(Ordering::Acquire)
    }

    pub fn max_active_in_force(&self) -> u64 {
        self.max_active_in_force.load(Ordering::Relaxed)
    }

    pub fn measured_rate(&self) -> f64 {
        self.rate_milli.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// What holds the line as of the last tick (`None` before the first, and when nothing
    /// does).
    pub fn held_by(&self) -> Option<HeldBy> {
        if !self.heard() {
            return None;
        }
        forecast::held_by(&forecast::Figures {
            enabled: self.enabled(),
            queue_all: self.queue_all(),
            waiting: self.waiting(),
            // The slots held back are not free (found by review: after a loss with the shop
            // full, the line was said to move at the rate while it stood still).
            active: self.taken(),
            max_active: self.max_active_in_force(),
            store_hold: self.untold_hold(),
        })
    }

    /// The last tick said the store lets nobody in until instances that admitted on their own
    /// while it was away have told it.
    pub fn untold_hold(&self) -> bool {
        self.untold_hold.load(Ordering::Relaxed)
    }

    /// Carries `old`'s last known figures over a reload (see `Room::inherit`).
    pub fn inherit(&self, old: &Live) {
        self.enabled.store(old.enabled(), Ordering::Relaxed);
        self.queue_all.store(old.queue_all(), Ordering::Relaxed);
        // And that the instances disagreed on the events: a reload during an outage let the
        // policy admit as if they agreed (found by re-review: newcomers reached the shop).
        self.events_mixed
            .store(old.events_mixed(), Ordering::Relaxed);
        self.untold_hold.store(old.untold_hold(), Ordering::Relaxed);
        self.waiting.store(old.waiting(), Ordering::Relaxed);
        self.active.store(old.active(), Ordering::Relaxed);
        self.held_back
            .store(old.held_back.load(Ordering::Relaxed), Ordering::Relaxed);
        self.instances.store(old.instances(), Ordering::Relaxed);
        self.max_active_in_force
            .store(old.max_active_in_force(), Ordering::Relaxed);
        self.heard.store(old.heard(), Ordering::Release);
        // When the store last answered, too: without it the store's sessions counted as
        // running for good, and a reload during an outage left the `local` policy no share to
        // admit with until the store was back (found by review).
        let heard_at = *old.heard_at.lock().unwrap_or_else(|e| e.into_inner());
        *self.heard_at.lock().unwrap_or_else(|e| e.into_inner()) = heard_at;
        // A refusal of the key layout holds the room over a reload too (found by review: the
        // room opened until its next tick reached the store).
        self.refused.store(old.refused(), Ordering::Relaxed);
        // And that a call failed since: the next admit after the reload says so.
        self.cut.store(old.cut(), Ordering::Release);
    }

    /// When the store last answered a tick (`None`: never, in this process).
    pub fn heard_at(&self) -> Option<std::time::Instant> {
        *self.heard_at.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long ago the store last answered a tick (`None`: never, in this process).
    pub fn since_heard(&self) -> Option<std::time::Duration> {
        self.heard_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|t| t.elapsed())
    }

    /// What is in force under a new file, by the state the store last told.
    pub fn in_force(&self, max_active: u64, rate: f64) {
        self.max_active_in_force
            .store(max_active, Ordering::Relaxed);
        self.rate_in_force_milli
            .store((rate * 1000.0).round() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a join's answer tells the figures until the next tick: the line at least as long,
    /// and a full shop full with the held-back slots counted once (found by re-review).
    #[test]
    fn a_join_fills_the_figures_in_without_counting_a_slot_twice() {
        let l = Live::default();
        l.heard.store(true, Ordering::Release);
        l.enabled.store(true, Ordering::Relaxed);
        l.max_active_in_force.store(5, Ordering::Relaxed);
        l.held_back.store(2, Ordering::Relaxed);
        l.active.store(1, Ordering::Relaxed);
        assert_eq!(l.held_by(), None, "a slot free, nobody waiting");
        l.note_line(3);
        assert_eq!((l.waiting(), l.held_by()), (3, Some(HeldBy::Rate)));
        l.note_line(1);
        assert_eq!(l.waiting(), 3, "never shorter than the tick or a join said");
        l.note_full();
        assert_eq!(l.taken(), 5, "the held-back slots once");
        assert_eq!(l.active(), 3);
        assert_eq!(l.held_by(), Some(HeldBy::MaxActive));
        // More sessions than the cap leaves (a lowered max-active): kept as they are.
        l.active.store(7, Ordering::Relaxed);
        l.note_full();
        assert_eq!(l.active(), 7);
    }

    /// A tick sent before a state change made through this instance tells the state from
    /// before it: it does not undo the change; a later tick's word holds again (found on CI:
    /// the room switched back on let a visitor through to the shop until the next tick).
    #[test]
    fn a_tick_sent_before_a_change_does_not_undo_it() {
        let l = Live::default();
        let off = AdmitReport {
            state: crate::store::RoomState {
                enabled: false,
                ..Default::default()
            },
            ..Default::default()
        };
        l.update(&off, 1.0, 10, 0, l.state_changes());
        assert!(!l.enabled());
        let sent = l.state_changes();
        l.set_state(&crate::store::RoomState {
            enabled: true,
            queue_all: true,
            ..Default::default()
        });
        l.update(&off, 1.0, 10, 0, sent);
        assert!(l.enabled() && l.queue_all(), "the change holds");
        l.update(&off, 1.0, 10, 0, l.state_changes());
        assert!(!l.enabled(), "a tick sent after it tells the store's state");
    }

    /// A failed call of the admission loop is told by the next admit, over a reload too, and
    /// the answered admit ends it (see [`crate::store::Outage`]).
    #[test]
    fn a_failed_tick_is_told_until_an_admit_is_answered() {
        let l = Live::default();
        assert!(!l.cut());
        l.tick_failed(&crate::store::StoreError::Unavailable {
            op: "admit",
            room: "sale".into(),
            reason: "down".into(),
        });
        assert!(l.cut());
        let reloaded = Live::default();
        reloaded.inherit(&l);
        assert!(reloaded.cut(), "carried over a reload");
        reloaded.update(&AdmitReport::default(), 1.0, 10, 0, 0);
        assert!(!reloaded.cut(), "answered");
    }
}
