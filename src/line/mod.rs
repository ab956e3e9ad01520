//! Status polls answered at the edge: a waiting visitor with a valid queue ticket is told their
//! place from this instance's sample of the line, without a store call.
//!
//! - The **ticket** ([`ticket`]) is a signed cookie with the visitor's place (the key that
//!   orders the line, and its epoch), given on joining and renewed as polls go on.
//! - The **snapshot** ([`Snapshot`]) is what the admit call this instance makes every tick
//!   already returns: the place at sampled ranks of the line, the count, the state and the rate
//!   (no extra round trip).
//! - A poll with a ticket is answered from the snapshot ([`decide`]): the rank interpolated
//!   between sampled ranks ([`mod@estimate`]), never above what the visitor was last shown. When the
//!   ticket's place is within what may have been admitted since the snapshot
//!   ([`Snapshot::may_have_gone`]: a batch or a few at the front), in another epoch, or the
//!   visitor was away for half of `abandon-after`, the store decides as before (one real
//!   `join`, which claims an admission whose turn has come): so a waiting visitor costs the
//!   store a call when joining, in their last polls before admission (a tick or so of them),
//!   and in the batched liveness — not per poll.
//! - **Liveness in batches** ([`Seen`]): "last seen" is noted per instance at most once every
//!   `abandon-after`/4 per visitor and sent with the next admit call, for everyone at once; a
//!   failed call keeps the batch for the next one. A visitor is never abandoned for a late
//!   flush: three quarters of `abandon-after` are slack, and silence is measured on the
//!   liveness clock, which stands still while the store is away.
//! - A snapshot that is old while the store's breaker is open (store slow or down) still
//!   answers polls; by itself it never admits anyone and never drops a place: both stay the
//!   store's (and `on-store-error`'s) business. One that is old while the breaker is closed
//!   (this instance's admit answers late, the calls still run) bounds nothing: polls ask the
//!   store ([`stale_after`]).
//!
//! Admission not in place-key order (a drawn or random method, later) fits the same frame: the
//! snapshot would carry who was admitted lately (ids, or a compact filter) and a hit asks the
//! store; [`Estimate::AskStore`] is the one way out of the edge path.

pub mod accuracy;
pub mod estimate;
pub mod forecast;
pub mod ticket;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

pub use estimate::{estimate, shown_position, Estimate};
pub use ticket::Ticket;

use crate::clock::Micros;
use crate::store::line::{LineSample, Place};
use crate::store::{AdmitReport, VisitorId};

/// The line as this instance's last admit call saw it.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub sample: LineSample,
    pub waiting: u64,
    pub enabled: bool,
    pub queue_all: bool,
    /// Admissions per second an ETA should assume.
    pub eta_rate: f64,
    /// The rate in force and one tick's batch at it: how fast the front of the line may have
    /// moved since the snapshot was taken ([`Snapshot::may_have_gone`]).
    pub rate: f64,
    pub burst: u64,
    /// Free slots of `max-active` at the snapshot: when the shop is full, the line does not
    /// move however high the rate.
    pub room_left: u64,
    pub taken: Instant,
    /// [`crate::store::AdmitReport::random_recent`]: no answer from this snapshot.
    pub random_recent: bool,
    /// Past this age, while the store answers, the snapshot no longer bounds who was let in
    /// ([`stale_after`]).
    pub stale_after: Duration,
}

/// How old a snapshot may get, while the store answers calls, before polls ask the store
/// again: three ticks or a second, whichever is longer, but no more than a quarter of
/// `claim-ttl` (a turn a late call gave must be told well within it) or a tick and a half
/// (a snapshot is normally up to a tick old), whichever is longer.
///
/// The snapshot is refreshed only by an admit call answered in time. A call answered late
/// still ran in the store and may have let people in (found by re-review: with only the admit
/// calls' answers late, the breaker closed again and again, each late call gave turns, and
/// polls answered from the last snapshot heard told those visitors to wait until their turns
/// ran out after `claim-ttl`: 24 turns given for 16 visitors). So an old snapshot bounds
/// nothing while the store answers: every poll with a ticket asks it, as before edge answers
/// (a store call per poll, only while this instance's admit answers are missing). With the
/// breaker open the snapshot still answers, within [`Snapshot::may_have_gone`]: this instance
/// then sends no admit call, and a store that is away would only fail the polls.
pub fn stale_after(tick: Duration, claim_ttl: Duration) -> Duration {
    let wanted = (tick * GONE_TICKS as u32).max(Duration::from_secs(1));
    wanted.min((claim_ttl / 4).max(tick * 3 / 2))
}

/// The most ticks' worth [`Snapshot::may_have_gone`] counts.
const GONE_TICKS: f64 = 3.0;

impl Snapshot {
    /// `held_back`: the slots of `max-active` the call held back for sessions a store that
    /// lost its data forgot (not free: found by review).
    pub fn of(
        report: &AdmitReport,
        held_back: u64,
        eta_rate: f64,
        rate: f64,
        burst: f64,
        max_active: u64,
        stale_after: Duration,
    ) -> Self {
        Self {
            room_left: max_active.saturating_sub(report.active.saturating_add(held_back)),
            sample: report.line.clone(),
            waiting: report.waiting,
            enabled: report.state.enabled,
            // Nobody is let in during a pre-queue either: nobody at the front may have gone.
            queue_all: report.state.queue_all
                || report
                    .event
                    .as_ref()
                    .is_some_and(|e| e.phase == crate::event::Phase::Prequeue),
            eta_rate,
            rate,
            burst: burst.max(0.0) as u64,
            taken: Instant::now(),
            random_recent: report.random_recent,
            stale_after,
        }
    }

    /// How many at the front of this snapshot's line may have been admitted since it was taken,
    /// `age` ago, by any instance's tick: the store's own bound, rate × age plus one batch, but
    /// at most a few ticks' worth, and no more than the free slots of `max-active` plus a batch
    /// (sessions that end meanwhile free some). A visitor within it may be admitted already and
    /// asks the store (told "waiting" from the snapshot, they would learn of their turn a poll
    /// late, after others behind them). An old snapshot (the store slow or away) answers from
    /// what it knows beyond that: sending the whole line to a store that is away would only fail.
    pub fn may_have_gone(&self, age: Duration) -> u64 {
        if !self.enabled || self.queue_all {
            return 0;
        }
        let burst = self.burst as f64;
        let by_rate = (self.rate.max(0.0) * age.as_secs_f64()).floor() + burst;
        by_rate
            .min(GONE_TICKS * burst)
            .min(self.room_left as f64 + burst) as u64
    }
}

/// What to do with a poll that carries a valid ticket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Edge {
    /// Answer it here.
    Answer {
        position: u64,
        waiting: u64,
        paused: bool,
        eta_rate: f64,
        /// Note the visitor's liveness for the next flush (and renew the ticket's `seen`).
        refresh: bool,
    },
    /// Let the store decide (a real `join`).
    AskStore,
}

/// How far ahead of this instance's clock a ticket's `seen` may be before it counts as
/// unknown (instances' clocks differ a little; a ticket from far ahead is refreshed).
const SEEN_AHEAD: u64 = 5;

/// Decides a poll with a ticket (pure: the caller has verified the ticket and its visitor).
/// `store_answers`: the store's breaker is closed (calls are sent to it).
pub fn decide(
    snapshot: Option<&Snapshot>,
    t: &Ticket,
    now_secs: u64,
    abandon_after: Duration,
    store_answers: bool,
) -> Edge {
    let Some(s) = snapshot else {
        return Edge::AskStore;
    };
    // This instance's admit answers are missing while the store answers: late ones may have
    // let anyone in ([`stale_after`]).
    if store_answers && s.taken.elapsed() > s.stale_after {
        return Edge::AskStore;
    }
    let abandon = abandon_after.as_secs().max(4);
    let ahead_of_us = t.seen > now_secs + SEEN_AHEAD;
    let since = now_secs.saturating_sub(t.seen);
    // Away for half the abandon time: the store may have let the place go; it tells.
    if !s.enabled || since >= abandon / 2 {
        return Edge::AskStore;
    }
    let ahead = match estimate(&s.sample, t.place) {
        Estimate::AskStore => return Edge::AskStore,
        Estimate::Ahead(ahead) => Some(ahead),
        // Joined after this sample: the place the store gave stands until a sample holds it.
        Estimate::JoinedAfter(_) => None,
    };
    let shown = (t.shown < ticket::NOT_SHOWN).then_some(t.shown);
    match ahead.or_else(|| shown.and_then(|s| s.checked_sub(1))) {
        None => Edge::AskStore,
        Some(ahead) if ahead < s.may_have_gone(s.taken.elapsed()) => Edge::AskStore,
        Some(ahead) => {
            let position = shown_position(ahead, Some(t.shown));
            Edge::Answer {
                position,
                waiting: s.waiting.max(position),
                paused: s.queue_all,
                eta_rate: s.eta_rate,
                // Only where the note can reach the store: an instance whose breaker is open
                // sends no batch, and a ticket renewed there looked fresh to the instances
                // that could have told the store (found by review: with one instance cut off
                // from Redis, visitors polling both in turn were swept).
                refresh: store_answers && (ahead_of_us || since >= abandon / u64::from(NOTE_EVERY)),
            }
        }
    }
}

/// Whether a pre-queue's snapshot, taken at wall time `taken` (µs), shows that the store no
/// longer holds the registration of ticket `t`: an empty line seen surely after the ticket was
/// given, or another line's epoch. `seen` is in whole seconds, so only a snapshot taken a
/// second past it was surely taken after the registration (found by a flaky test: the
/// snapshot's time, also counted in whole seconds, ran up to a second late, so a snapshot from
/// just before a registration counted as one after it, and through an outage the
/// registrant's place went blank).
pub fn registration_lost(s: &Snapshot, taken: crate::clock::Micros, t: &Ticket) -> bool {
    (s.waiting == 0 && taken > t.seen.saturating_add(1).saturating_mul(1_000_000))
        || (s.sample.epoch != 0 && s.sample.epoch != t.place.epoch)
}

/// How often a visitor answered from the line's snapshot is noted to the store: every this
/// part of `abandon-after` ([`decide`]'s `refresh`).
pub const NOTE_EVERY: u32 = 4;

/// How long the store lets a visitor be silent before it sweeps the place: `abandon-after`
/// and the part of it a note may be old when the visitor goes silent ([`NOTE_EVERY`]), so
/// that nobody who polled within `abandon-after` is swept (found by review: a visitor
/// answered at the edge was swept after three quarters of it).
pub fn sweep_after(abandon_after: Duration) -> Duration {
    abandon_after + abandon_after / NOTE_EVERY
}

/// How long a note may wait for an admit step that reaches the store before it is dropped
/// unsent. The store marks a visitor seen when the step comes, not when they polled, so a note
/// sent late keeps the place of one who stopped polling that much longer (found by review: a
/// note an instance cut off kept for most of `abandon-after` kept the place for about twice
/// it). Long enough for the next step after the breaker's cooldown (a poll that opened the
/// breaker is noted, and the step comes after the cooldown and a probe), a liveness cap at
/// least, never more than `abandon-after`. A visitor who keeps polling is noted again with
/// every poll, so their newest note is always young.
pub fn note_max_age(
    tick: Duration,
    breaker_cooldown: Duration,
    abandon_after: Duration,
) -> Duration {
    let cap = Duration::from_micros(crate::store::liveness::cap(tick));
    cap.max(breaker_cooldown + tick * 2).min(abandon_after)
}

/// Most visitors a batch holds (one admit call's worth); the rest wait for the next tick.
pub const FLUSH_MAX: usize = 20_000;
/// Most visitors noted and not yet sent; a note past it is refused (the ticket keeps its old
/// `seen`, so the next poll tries again).
const NOTED_MAX: usize = 2_000_000;

/// Visitors polled through this instance whose liveness the store is still to hear of, each
/// with the place its ticket names and when it was last noted (monotonic µs).
#[derive(Debug, Default)]
pub struct Seen {
    noted: Mutex<HashMap<VisitorId, (Place, Micros)>>,
}

impl Seen {
    /// Notes a visitor for the next flush, polled at `now` (monotonic µs); `false` when the
    /// batch is full.
    pub fn note(&self, vid: VisitorId, place: Place, now: Micros) -> bool {
        let mut m = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= NOTED_MAX && !m.contains_key(&vid) {
            return false;
        }
        m.insert(vid, (place, now));
        true
    }

    /// A poll answered from the snapshot: noted, and its ticket's `seen` renewed (`true`), when
    /// the note is due and can reach the store (`refresh`, see [`decide`]); noted without a
    /// renewal when the store does not hear this instance (`store_answers` false: another
    /// instance that reaches it notes the visitor as usual).
    pub fn note_poll(
        &self,
        vid: VisitorId,
        place: Place,
        now: Micros,
        refresh: bool,
        store_answers: bool,
    ) -> bool {
        if refresh {
            return self.note(vid, place, now);
        }
        if !store_answers {
            self.note(vid, place, now);
        }
        false
    }

    /// Takes up to [`FLUSH_MAX`] noted visitors for one call, the oldest notes first, dropping
    /// the notes older than `max_age` at `now` ([`note_max_age`]): a note that could not be
    /// sent for that long (the store away from this instance) no longer says the visitor is
    /// there. Oldest first, a note waits only for those noted before it, and a visitor noted
    /// again moves behind the rest: taken in the map's order, the same visitors came last at
    /// every tick of a flood of more than a batch of notes (replayed tickets), were dropped
    /// for their age unsent while their tickets said they had been seen, and the store swept
    /// their places (found by review r105b).
    pub fn take(&self, now: Micros, max_age: Duration) -> Vec<(VisitorId, Place, Micros)> {
        let mut m = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = now.saturating_sub(crate::clock::micros(max_age));
        m.retain(|_, (_, at)| *at >= oldest);
        if m.len() <= FLUSH_MAX {
            return m.drain().map(|(v, (p, at))| (v, p, at)).collect();
        }
        let mut by_age: Vec<(Micros, VisitorId)> = m.iter().map(|(v, (_, at))| (*at, *v)).collect();
        by_age.select_nth_unstable_by_key(FLUSH_MAX - 1, |(at, _)| *at);
        by_age.truncate(FLUSH_MAX);
        by_age
            .into_iter()
            .filter_map(|(_, k)| m.remove(&k).map(|(p, at)| (k, p, at)))
            .collect()
    }

    /// Puts back a batch whose call failed (a newer note of the same visitor wins).
    pub fn restore(&self, batch: Vec<(VisitorId, Place, Micros)>) {
        let mut m = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        for (vid, place, at) in batch {
            m.entry(vid).or_insert((place, at));
        }
    }

    fn take_all(&self) -> Vec<(VisitorId, Place, Micros)> {
        self.noted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(v, (p, at))| (v, p, at))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.noted.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A room's edge state: the latest snapshot and the liveness batch.
#[derive(Debug, Default)]
pub struct RoomLine {
    snapshot: ArcSwapOption<Snapshot>,
    pub seen: Seen,
    /// The recent admitted visitors' actual ÷ predicted waits on this instance, and the range
    /// they (with the line's state) make of an estimate until the next tick.
    pub accuracy: accuracy::Accuracy,
    pub band: accuracy::Band,
    pub pace: accuracy::SlowPace,
    /// The second (this instance's wall clock) it last learned that the store lost the room's
    /// data (0: never), and the second this process started: see
    /// [`RoomLine::given_before_loss`].
    lost_at: std::sync::atomic::AtomicU64,
    started_at: std::sync::atomic::AtomicU64,
}

impl RoomLine {
    /// The store lost the room's data (a new generation seen at `now`, in seconds).
    pub fn note_loss(&self, now: u64) {
        self.lost_at
            .fetch_max(now, std::sync::atomic::Ordering::AcqRel);
    }

    /// This process started at `now` (seconds): see [`RoomLine::given_before_loss`].
    pub fn note_start(&self, now: u64) {
        self.started_at
            .fetch_max(now, std::sync::atomic::Ordering::AcqRel);
    }

    /// Whether a ticket the store last vouched for at `seen` (seconds, by the clock of the
    /// instance that gave it) may name a place the store no longer holds: given before the
    /// store lost the room's data, as far as this instance can tell. The line may have come
    /// back from an older copy (a restart from an older dump, a failover that dropped writes)
    /// with the same epoch and without the newest places: such a ticket is the store's to
    /// answer once, which places the visitor again (found by review: it was answered from the
    /// snapshot, later arrivals went ahead, and the place shown went up when it neared the
    /// head). Within [`SEEN_AHEAD`] of the loss too, for an instance whose clock is ahead (found
    /// by re-review); and every ticket from before this process started, which may have missed
    /// a loss the others saw (found by re-review: a restarted instance answered the lost
    /// places, and its renewals of the tickets made the others answer them too).
    pub fn given_before_loss(&self, seen: u64) -> bool {
        use std::sync::atomic::Ordering::Acquire;
        let lost = self.lost_at.load(Acquire);
        (lost > 0 && seen <= lost.saturating_add(SEEN_AHEAD))
            || seen < self.started_at.load(Acquire)
    }

    pub fn snapshot(&self) -> Option<Arc<Snapshot>> {
        self.snapshot.load_full()
    }

    pub fn update(&self, s: Snapshot) {
        self.snapshot.store(Some(Arc::new(s)));
    }

    /// Over a reload: the same line, the same visitors still to flush.
    pub fn inherit(&self, old: &RoomLine) {
        self.snapshot.store(old.snapshot());
        self.seen.restore(old.seen.take_all());
        self.accuracy.inherit(&old.accuracy);
        self.band.set(old.band.get());
        self.note_loss(old.lost_at.load(std::sync::atomic::Ordering::Acquire));
        self.note_start(old.started_at.load(std::sync::atomic::Ordering::Acquire));
    }
}

#[cfg(test)]
mod tests;
