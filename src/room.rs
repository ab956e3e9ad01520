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
mod live;
mod local;
pub mod owed;
pub mod policy;
pub mod prelimit;
pub mod recovery;
pub mod revoked;
pub mod series;
pub mod share;

pub use live::Live;
pub use local::{kept_life, LocalAdmit, LocalBucket, KEEP_AT_MOST};

use crate::clock::Micros;
use crate::config::RoomConfig;
use crate::cookie::room_cookie_name;
use crate::metrics::RoomMetrics;

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
        self.live.inherit(&old.live);
        self.recovery.inherit(&old.recovery);
        self.prelimit.inherit(&old.prelimit);
        self.ticket_asks.inherit(&old.ticket_asks);
        // What is in force, under the new file: the overrides the store last told (an
        // operator's, an event's, the autopilot's) over the new file's values. Before (found
        // by review), a reload during an outage kept the old file's max-active and dropped a
        // rate override, and the `local` policy admitted by them.
        if let Some(k) = self.recovery.known() {
            let p = &self.cfg.params;
            self.live.in_force(p.max_active(&k.state), p.rate(&k.state));
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

    /// A touch's answer: a session the store took back is in its count from now, which the
    /// last tick's count did not hold, so a loss before the next tick forgets it too; it is
    /// held back then as a walk-in is (found by review r92a: a second loss on the first
    /// re-registration; r93a: a FLUSHALL just after the tick that registered `local`
    /// admissions held back none of them, and newcomers took their slots).
    pub fn note_taken_back(&self, touched: crate::store::Touched) {
        if touched == crate::store::Touched::TakenBack {
            self.recovery.note_entered();
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
        let since = self.live.since_heard();
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
