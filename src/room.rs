//! A room at run time: its validated config plus what the admission loop last learned.
//!
//! The proxy reads [`Live`] on every protected request without touching the store, so the
//! figures are atomics written by the admission loop each tick ("seen by every instance
//! within a second" comes from the tick, not from a store call per request).
//!
//! What a request gets when the store cannot answer is decided in [`policy`], from [`Live`] and
//! the [`LocalBucket`] of the `local` policy; what an instance does when the store lost the
//! room's data is in [`recovery`].

pub mod abandon_hold;
pub mod gate;
mod local;
pub mod owed;
pub mod policy;
pub mod prelimit;
pub mod recovery;
pub mod revoked;
pub mod series;
pub mod share;

pub use local::{LocalAdmit, LocalBucket};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::clock::Micros;
use crate::config::RoomConfig;
use crate::cookie::room_cookie_name;
use crate::line::forecast::{self, HeldBy};
use crate::metrics::RoomMetrics;
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
        }
    }
}

impl Live {
    /// `held_back`: the slots the tick's call held back (see the field).
    pub fn update(
        &self,
        r: &AdmitReport,
        rate_in_force: f64,
        max_active_in_force: u64,
        held_back: u64,
    ) {
        self.max_active_in_force
            .store(max_active_in_force, Ordering::Relaxed);
        self.heard.store(true, Ordering::Release);
        self.refused.store(false, Ordering::Relaxed);
        *self.heard_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
        self.rate_in_force_milli
            .store((rate_in_force * 1000.0).round() as u64, Ordering::Relaxed);
        self.instances.store(r.instances.max(1), Ordering::Relaxed);
        self.enabled.store(r.state.enabled, Ordering::Relaxed);
        self.queue_all.store(r.state.queue_all, Ordering::Relaxed);
        self.events_mixed.store(r.events_mixed, Ordering::Relaxed);
        self.waiting.store(r.waiting, Ordering::Relaxed);
        self.active.store(r.active, Ordering::Relaxed);
        self.held_back.store(held_back, Ordering::Relaxed);
        self.rate_milli
            .store((r.measured_rate * 1000.0).round() as u64, Ordering::Relaxed);
        self.admitted_total.fetch_add(r.admitted, Ordering::Relaxed);
    }

    /// Applies a state change made through this instance at once (others follow at their tick).
    pub fn set_state(&self, s: &crate::store::RoomState) {
        self.enabled.store(s.enabled, Ordering::Relaxed);
        self.queue_all.store(s.queue_all, Ordering::Relaxed);
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
        if e.is_layout_refusal() {
            self.refused.store(true, Ordering::Relaxed);
        }
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
        })
    }
}

/// One room: config, its cookie name, the live figures and its metric handles.
pub struct Room {
    pub cfg: RoomConfig,
    pub cookie_name: String,
    /// The queue ticket's cookie name ([`crate::line::ticket::cookie_name`]).
    pub ticket_cookie: String,
    /// The join challenge's asked marker ([`crate::edge::challenge::asked_cookie_name`]).
    pub asked_cookie: String,
    /// The order receipt's cookie name ([`crate::cookie::receipt_cookie_name`]).
    pub receipt_cookie: String,
    pub live: Live,
    pub metrics: RoomMetrics,
    pub local: LocalBucket,
    pub recovery: recovery::Recovery,
    /// An `abandon-after` a reload lowered, still in force for a while ([`abandon_hold`]).
    pub abandon_hold: abandon_hold::AbandonHold,
    /// The line as the last tick saw it, and the liveness batch: status polls at the edge.
    pub line: crate::line::RoomLine,
    /// `join-limit` checked on this instance before the store's counter.
    pub prelimit: prelimit::JoinPreLimit,
    /// The store asks of each queue ticket on this instance (kept over reloads).
    pub ticket_asks: prelimit::TicketAsks,
    /// `max-origin-inflight`: this instance's slots to the origin (kept over reloads).
    pub gate: Option<std::sync::Arc<gate::OriginGate>>,
    /// [`config_digest`] of `cfg`, told to the store with each tick.
    pub digest: String,
    /// The `[draw] secret`, for [`events_digest`].
    pub events_secret: Option<std::sync::Arc<[u8]>>,
    /// The autopilot's window and what the store last said of it.
    pub pilot: crate::admission::pilot::Pilot,
    /// The last 15 minutes as this instance saw them (the dashboard's charts).
    pub series: series::Series,
    /// Admissions the origin revoked (`origin-commands`), refused here until they expire.
    pub revoked: std::sync::Arc<revoked::Revoked>,
    /// Orders that went through whose confirm has not reached the store yet.
    pub owed: std::sync::Arc<owed::Owed>,
    /// The room's events (`[[room.event]]` and runtime changes) on this instance.
    pub events: crate::event::live::RoomEvents,
    /// The room's store circuit breaker ([`crate::breaker::Breakers`]), read on its edge path.
    pub breaker: std::sync::Arc<crate::breaker::Breaker>,
}

/// A short digest of a room's settings as this instance runs them: instances whose digests
/// differ run the room differently (a SIGHUP that reached some of them, a rolling change).
/// Every part of [`RoomConfig`] is ordered (no hash maps), so equal settings give equal
/// digests in every process. The `[draw] secret` counts too: instances with different secrets
/// would publish different commitments and place registrants by different seeds (found by
/// review: two instances showed one digest and two draws). So do the cookie keys' ids, in
/// order (the first signs): an instance that signs with a key another cannot verify sends
/// that one's visitors to the store on every poll and turns them away while the store is
/// down, so a rotation half done shows (found by review: it showed one digest).
pub fn config_digest(cfg: &RoomConfig, draw_secret: Option<&[u8]>, key_ids: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(format!("{cfg:?}").as_bytes());
    if let Some(secret) = draw_secret {
        h.update(b"\0draw secret\0");
        h.update(secret);
    }
    h.update(b"\0cookie keys\0");
    for id in key_ids {
        h.update(id.as_bytes());
        h.update(b"\0");
    }
    let sum = h.finalize();
    sum[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// A short digest of the events a tick steps a room by (`events`: those near now, as the store
/// reads them, with the `[draw] secret` when one of them draws); no events near now has one
/// too, so that an instance without the room's next event disagrees with one that has it. The
/// store holds the room while live instances disagree on it: each would take the room's event
/// steps by its own events (found by review: an instance still without a new event ended its
/// pre-queue and admitted the registrants before the opening; one with an opening moved later
/// by the file recorded it at the old time, for good). Only what the store steps by counts (a
/// first version digested every event of the file, so an edit of next month's event, or the
/// same instants written in another UTC offset, held a sale for the rollout: re-review).
pub fn events_digest(
    events: Option<&crate::store::EventsArg>,
    draw_secret: Option<&[u8]>,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    if let Some(e) = events.filter(|e| !e.is_empty()) {
        h.update(e.lua.as_bytes());
        if let Some(secret) = draw_secret.filter(|_| e.events.iter().any(|ev| ev.draw)) {
            h.update(b"\0draw secret\0");
            h.update(secret);
        }
    }
    let sum = h.finalize();
    sum[..4].iter().map(|b| format!("{b:02x}")).collect()
}

impl Room {
    pub fn new(
        cfg: RoomConfig,
        metrics: RoomMetrics,
        draw_secret: Option<std::sync::Arc<[u8]>>,
        key_ids: &[&str],
        breaker: std::sync::Arc<crate::breaker::Breaker>,
        owed: std::sync::Arc<owed::Owed>,
    ) -> Self {
        let cookie_name = room_cookie_name(cfg.name());
        let ticket_cookie = crate::line::ticket::cookie_name(cfg.name());
        let asked_cookie = crate::edge::challenge::asked_cookie_name(cfg.name());
        let receipt_cookie = crate::cookie::receipt_cookie_name(cfg.name());
        let no_script = cfg
            .join_challenge
            .as_ref()
            .map(|c| crate::config::JoinLimit {
                per_ip: c.no_script_per_ip,
                per: c.no_script_per,
            });
        let prelimit = prelimit::JoinPreLimit::new(cfg.join_limit.as_ref(), no_script.as_ref());
        // The head of the line polls at the floor: the most often a visitor is told to.
        let floor = crate::page::poll_floor(cfg.params.tick);
        let shortest_poll = cfg.poll.iter().map(|t| t.every).fold(floor, std::cmp::min);
        let ticket_asks = prelimit::TicketAsks::new(shortest_poll);
        let gate = cfg
            .origin_cap
            .map(|c| gate::OriginGate::new(c.max_inflight));
        let digest = config_digest(&cfg, draw_secret.as_deref(), key_ids);
        let events_secret = draw_secret.clone();
        let events =
            crate::event::live::RoomEvents::new(cfg.name(), cfg.events.clone(), draw_secret);
        Self {
            events,
            digest,
            events_secret,
            pilot: Default::default(),
            series: Default::default(),
            cfg,
            cookie_name,
            ticket_cookie,
            asked_cookie,
            receipt_cookie,
            live: Live::default(),
            metrics,
            local: LocalBucket::default(),
            recovery: recovery::Recovery::default(),
            abandon_hold: abandon_hold::AbandonHold::default(),
            line: crate::line::RoomLine::default(),
            prelimit,
            ticket_asks,
            gate,
            revoked: Default::default(),
            owed,
            breaker,
        }
    }

    /// Carries the last known runtime state over a reload, so that a room switched off stays
    /// off until the next tick confirms it. The origin gate is taken over (resized to the new
    /// cap), so requests in flight across the reload still count against it.
    pub fn inherit(&mut self, old: &Room) {
        if let (Some(cap), Some(g)) = (self.cfg.origin_cap, &old.gate) {
            g.resize(cap.max_inflight);
            self.gate = Some(g.clone());
        }
        self.live
            .enabled
            .store(old.live.enabled(), Ordering::Relaxed);
        self.live
            .queue_all
            .store(old.live.queue_all(), Ordering::Relaxed);
        // And that the instances disagreed on the events: a reload during an outage let the
        // policy admit as if they agreed (found by re-review: newcomers reached the shop).
        self.live
            .events_mixed
            .store(old.live.events_mixed(), Ordering::Relaxed);
        self.live
            .waiting
            .store(old.live.waiting(), Ordering::Relaxed);
        self.live.active.store(old.live.active(), Ordering::Relaxed);
        self.live.held_back.store(
            old.live.held_back.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        self.live
            .instances
            .store(old.live.instances(), Ordering::Relaxed);
        self.live
            .max_active_in_force
            .store(old.live.max_active_in_force(), Ordering::Relaxed);
        self.live.heard.store(old.live.heard(), Ordering::Release);
        // When the store last answered, too: without it the store's sessions counted as
        // running for good, and a reload during an outage left the `local` policy no share to
        // admit with until the store was back (found by review).
        let heard_at = *old.live.heard_at.lock().unwrap_or_else(|e| e.into_inner());
        *self.live.heard_at.lock().unwrap_or_else(|e| e.into_inner()) = heard_at;
        // A refusal of the key layout holds the room over a reload too (found by review: the
        // room opened until its next tick reached the store).
        self.live
            .refused
            .store(old.live.refused(), Ordering::Relaxed);
        self.recovery.inherit(&old.recovery);
        self.prelimit.inherit(&old.prelimit);
        self.ticket_asks.inherit(&old.ticket_asks);
        // What is in force, under the new file: the overrides the store last told (an
        // operator's, an event's, the autopilot's) over the new file's values. Before (found
        // by review), a reload during an outage kept the old file's max-active and dropped a
        // rate override, and the `local` policy admitted by them.
        if let Some(k) = self.recovery.known() {
            let p = &self.cfg.params;
            self.live
                .max_active_in_force
                .store(p.max_active(&k.state), Ordering::Relaxed);
            self.live.rate_in_force_milli.store(
                (p.rate(&k.state) * 1000.0).round() as u64,
                Ordering::Relaxed,
            );
        }
        let now = crate::clock::Clock::now_micros(&crate::clock::SystemClock);
        self.abandon_hold.inherit(
            &old.abandon_hold,
            old.cfg.params.abandon_after,
            self.cfg.params.abandon_after,
            now,
        );
        self.revoked = old.revoked.clone();
        self.events.inherit(
            &old.events,
            crate::clock::Clock::now_micros(&crate::clock::SystemClock),
        );
        self.line.inherit(&old.line);
        // Sessions admitted locally during an outage still count after a reload.
        self.local.inherit(&old.local);
        self.series.inherit(&old.series);
    }

    pub fn name(&self) -> &str {
        self.cfg.name()
    }

    /// The store answered the registration of `vid`'s local session with `held`: it is told
    /// for good, unless the store refused it only because a loss is young (within twice
    /// `quiet` of this instance seeing it: the store takes back no session it does not hold
    /// meanwhile), when a later tick or request tells it again (found by re-review: after
    /// Redis came back empty, the first tick's refusal was taken for a full room, and
    /// max-active more were let in beside the local sessions).
    pub fn local_told(
        &self,
        vid: crate::store::VisitorId,
        held: bool,
        now: Micros,
        quiet: std::time::Duration,
    ) {
        if held || !self.recovery.loss_younger_than(now, quiet * 2) {
            self.local.registered(vid);
        }
    }

    /// The room's parameters for a store call at `now`: as configured, but with an
    /// `abandon-after` a reload lowered still held ([`abandon_hold`]).
    pub fn params_at(&self, now: Micros) -> std::borrow::Cow<'_, crate::store::RoomParams> {
        let p = &self.cfg.params;
        let abandon = self.abandon_hold.in_force(p.abandon_after, now);
        if abandon == p.abandon_after {
            return std::borrow::Cow::Borrowed(p);
        }
        std::borrow::Cow::Owned(crate::store::RoomParams {
            abandon_after: abandon,
            ..p.clone()
        })
    }

    /// What the store-error policy decides on: the last tick's knowledge and the local sessions.
    pub fn last_known(&self, now: Micros) -> policy::LastKnown {
        let since = self
            .live
            .heard_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|t| t.elapsed());
        policy::LastKnown {
            // With the sessions a store that lost its data has not counted again.
            store_active: policy::still_active(
                self.live.active(),
                since,
                self.cfg.params.session_ttl,
            )
            .saturating_add(self.recovery.held_back(now)),
            heard: self.live.heard(),
            refused: self.live.refused(),
            enabled: self.live.enabled(),
            queue_all: self.live.queue_all(),
            events_mixed: self.live.events_mixed(),
            unopened: self.events.any() && self.events.opening_unconfirmed(now, self.live.heard()),
            max_active: self.live.max_active_in_force(),
            instances: self.live.instances(),
            local_active: self.local.active(now),
        }
    }
}
