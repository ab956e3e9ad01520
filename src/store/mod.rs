//! The shared queue state, behind one trait with two backends of identical semantics.
//!
//! [`memory::MemoryStore`] keeps everything in-process (one instance, `anteroom demo`); the Redis
//! backend keeps it in Redis so that any number of proxy instances share one queue and one rate.
//! Outcomes are values ([`Admission`]); a [`StoreError`] only ever means "the store could not
//! answer", and the room's `on-store-error` policy decides what visitors see then.
//!
//! Semantics every backend provides (the conformance suite in `tests/` checks each):
//! - `join` is idempotent and FIFO by the time a visitor first joined; polling keeps the place.
//! - A fresh visitor is admitted at once when nobody waits and both the rate budget and
//!   `max-active` allow it.
//! - `admit` (every tick) refills a token bucket at the room's rate with a burst of one tick's
//!   worth, and moves that many visitors from waiting to active, never past `max-active`.
//! - An admitted visitor who does not come back within `claim-ttl` frees the slot; a waiting
//!   visitor who stops polling for `abandon-after` loses the place and costs no admission.
//!   Silence is measured on the room's liveness clock ([`liveness`]), which stands still while
//!   no call reaches the store: an outage is nobody's silence.
//! - A step back of the store's clock counts as zero elapsed everywhere (bucket, window,
//!   liveness, measured rate): it neither sweeps the line nor stalls admission.
//! - Active sessions are kept by expiry, so the count is exact and cannot drift.
//! - `passthrough` (a dry run) lets every newcomer in (and anyone found in line), counting
//!   those the line would have held; the bucket and the tick window are spent only by those
//!   who would have walked in.
//! - `consume` takes an admission atomically: of concurrent calls exactly one wins. It stays
//!   pending (its slot still counted) until `settle` confirms or gives it back, or its grace
//!   period passes (then it comes back); a used admission is never renewed (see [`order`]).
//! - A fast-path entry holds its slot for `claim-ttl` only, until the visitor comes back.
//! - `admit` marks seen the visitors of its liveness batch who are still at the place their
//!   ticket names (nobody else), and reports the line sampled at [`line::sampled_ranks`].
//! - `admit` keeps a generation id in the room's data (a new one when there is none) and reports
//!   it; an `admit` told of another generation admits nobody, and `hold_back` slots of
//!   max-active stay free (in join's fast path too, until the next `admit`).
//! - `finish` ends an admission at the origin's word: out of `active`, never renewed; a revoked
//!   one is numbered in the room's revocation log, which `admit` hands back after the number
//!   the caller last saw, until every cookie of it has expired (see [`finish`]).

mod admit;
pub mod autopilot;
pub mod event;
pub mod finish;
pub mod history;
pub mod line;
pub mod liveness;
mod marks;
pub mod memory;
pub mod order;
mod ranks;
pub mod redis;
mod room;
pub mod sentinel;

pub use admit::{AdmitContext, AdmitReport, AdmitStep, AdmittedVisitor, Outage};
pub use event::{Draw, EventSeen, EventsArg, JoinContext, LineDraw};
pub use finish::{Command, Ending, Revocation, Revocations};
pub use line::{LineSample, Place};
pub use order::{Consumed, Order, RequestId, SeenGeneration, Settle, Settled, Taking, Touched};
pub use room::{Queueing, RoomParams, RoomPatch, RoomState};

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use uuid::Uuid;

/// A visitor, identified by the random id in the `anteroom_vid` cookie.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VisitorId(Uuid);

impl VisitorId {
    pub fn random() -> Self {
        Self(Uuid::new_v4())
    }

    /// Parses the cookie form: exactly 32 lowercase hex digits, decoded in one pass (this
    /// runs on every request in a room; what `Uuid::try_parse` gives, by a property test).
    pub fn parse(s: &str) -> Option<Self> {
        fn nibble(b: u8) -> Option<u8> {
            match b {
                b'0'..=b'9' => Some(b - b'0'),
                b'a'..=b'f' => Some(b - b'a' + 10),
                _ => None,
            }
        }
        let s = s.as_bytes();
        if s.len() != 32 {
            return None;
        }
        let mut id = [0u8; 16];
        for (byte, pair) in id.iter_mut().zip(s.chunks_exact(2)) {
            *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
        }
        Some(Self(Uuid::from_bytes(id)))
    }

    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }

    pub fn from_bytes(b: [u8; 16]) -> Self {
        Self(Uuid::from_bytes(b))
    }
}

impl fmt::Display for VisitorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.simple())
    }
}

impl fmt::Debug for VisitorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VisitorId({})", self.0.simple())
    }
}

/// Where a visitor stands after `join`.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// A newcomer let in at once: nobody was waiting and the rate and `max-active` allowed it.
    Entered,
    /// A visitor in line let in at once as [`Admission::Entered`] is, by a room switched to
    /// `queueing = "passthrough"`: no new visitor (found by review: counted as joined again).
    EnteredFromLine,
    /// In: an admission whose turn had come (claimed now), or a session the visitor holds.
    Admitted,
    /// In line at `position` (1 = next) of `waiting`; `eta_rate` is admissions per second to
    /// base an ETA on; `joined` is true when this call put the visitor in line; `place` is the
    /// visitor's place in the line's order, for their queue ticket. `full`: a newcomer placed
    /// while every slot of `max-active` was taken (what the last tick's figures may not show
    /// yet); `false` for a visitor already in line.
    Waiting {
        position: u64,
        waiting: u64,
        eta_rate: f64,
        joined: bool,
        place: Place,
        full: bool,
    },
    /// In line, but the room holds the line (`queue_all`): nobody is admitted for now.
    Paused {
        position: u64,
        waiting: u64,
        joined: bool,
        place: Place,
    },
    /// The line is at `max-waiting`; the visitor was not added.
    Full { waiting: u64 },
    /// Too many new visitors from this client's address lately (`join-limit`); not added.
    Limited { retry_after: Duration },
    /// The room is switched off: pass without an admission.
    Open,
    /// In line during an event's pre-queue: nobody is admitted before the opening. `position`
    /// is `None` for a draw's place (not known to anyone before the opening); `drawn` says the
    /// place is one.
    Registered {
        position: Option<u64>,
        waiting: u64,
        joined: bool,
        place: Place,
        drawn: bool,
    },
    /// The event closed: a newcomer is not added.
    Ended,
    /// A newcomer not added: the caller's events are older than the store's runtime changes
    /// (an operator changed them a moment ago), and where they would place the visitor is not
    /// known to it. Told to poll again: the instance reads the changes at its next tick. So is
    /// a visitor holding a session, asked about by such events (or in a pre-queue while
    /// instances disagree on the events): kept, not let in.
    Unplaced { waiting: u64 },
    /// A session whose order is in flight (taken, not yet settled): no admission is given on
    /// it until the order is settled, since its confirm ends the session (a cookie given now
    /// would be refused at every order). Told to poll again.
    Settling { waiting: u64 },
}

/// A per-client limit on new joins: at most `limit` new visitors per `per` from `client`.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinGate {
    /// The client's address key (an IPv4 address or an IPv6 /64).
    pub client: String,
    pub limit: u32,
    pub per: Duration,
    /// Past the limit on the calling instance already: a visitor the store knows (in line, or
    /// admitted) is answered as ever, a newcomer refused without being counted.
    pub known_only: bool,
    /// A queue ticket vouches for a place the visitor held lately (`challenge::holds_place`):
    /// placed anew, they are not counted — the store lost the place (a loss of its data), or
    /// their turn lapsed — unless the store records an order of theirs that no counted join
    /// has paid for since (let in, they ordered, or an origin command ended the admission:
    /// `note_ordered` in `lua/prelude.lua`). Such a visitor left the line with a turn they
    /// used, and a ticket kept is no way back into it past the limit; a place they took after
    /// the order was counted (the record then spent), and its lapsed turn is not counted again.
    /// Before (found by review), any such ticket was spared the count: one kept after an order
    /// rejoined the line as often as its holder liked; a first fix that counted a ticket of the
    /// line's own epoch counted people placed again after Redis came back from an older
    /// snapshot, and spared a ticket of the line before it emptied; the order read from its
    /// consumed marker was gone `session-ttl` and a minute on, while the ticket vouched for
    /// `abandon-after`; a record of the order alone counted a place taken after it, whose turn
    /// lapsed, a second time; and telling tickets from before the order by their age read the
    /// clocks of two instances, and with one 30 s behind the other a kept ticket came back
    /// uncounted after each of nine orders (re-reviews).
    pub vouched: bool,
}

/// A room's figures, for the admin API and metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomStats {
    pub waiting: u64,
    pub active: u64,
    pub admitted_total: u64,
    pub joined_total: u64,
    pub abandoned_total: u64,
    /// Visitors a `passthrough` room let in that the line would have held.
    pub would_have_queued: u64,
    pub measured_rate: f64,
    pub state: RoomState,
    /// The configuration digests of the live instances and how many run each (one entry when
    /// they agree; empty before any admit call told one).
    pub configs: std::collections::BTreeMap<String, u64>,
}

/// The store could not answer. Never a verdict about a visitor.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("store call {op} for room {room:?} timed out after {after:?}")]
    Timeout {
        op: &'static str,
        room: String,
        after: Duration,
    },
    #[error("store call {op} for room {room:?} failed: {reason}")]
    Unavailable {
        op: &'static str,
        room: String,
        reason: String,
    },
    #[error("store call {op} for room {room:?} not made: the circuit breaker is open")]
    BreakerOpen { op: &'static str, room: String },
}

impl StoreError {
    /// The store refused the room's keys: they are in another key layout (the scripts'
    /// `ANTEROOM_LAYOUT` error, see `check_layout` in `lua/prelude.lua`).
    pub fn is_layout_refusal(&self) -> bool {
        matches!(self, StoreError::Unavailable { reason, .. } if reason.contains("ANTEROOM_LAYOUT"))
    }
}

/// The queue operations. Each is one atomic step in the backend (one Lua script in Redis).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Short backend name for logs and the admin API.
    fn backend(&self) -> &'static str;

    /// Enter the line, or look up the place in it (this is also the status poll); claims the
    /// admission when the visitor's turn has come.
    async fn join(&self, room: &RoomParams, vid: VisitorId) -> Result<Admission, StoreError> {
        self.join_from(room, vid, None).await
    }

    /// [`Store::join`], counting a new visitor against a per-client limit when `gate` is set.
    /// Only new identities count; polls of visitors already in line or admitted never do.
    async fn join_from(
        &self,
        room: &RoomParams,
        vid: VisitorId,
        gate: Option<&JoinGate>,
    ) -> Result<Admission, StoreError> {
        self.join_with(
            room,
            vid,
            &JoinContext {
                gate,
                ..Default::default()
            },
        )
        .await
    }

    /// [`Store::join_from`], decided also by the room's events ([`event`]).
    async fn join_with(
        &self,
        room: &RoomParams,
        vid: VisitorId,
        ctx: &JoinContext<'_>,
    ) -> Result<Admission, StoreError>;

    /// One tick of the admission loop.
    async fn admit(&self, room: &RoomParams) -> Result<AdmitReport, StoreError> {
        self.admit_with(room, &AdmitContext::default()).await
    }

    /// [`Store::admit`], told what this instance knew (see [`AdmitContext`]).
    async fn admit_with(
        &self,
        room: &RoomParams,
        ctx: &AdmitContext,
    ) -> Result<AdmitReport, StoreError>;

    /// Extends an admitted session by `session-ttl` (sliding expiry). `false` when the store no
    /// longer holds the session and has no room to take it back, and when the admission was
    /// used (a consumed marker) or an order of it is pending: renewal never brings back an
    /// admission that bought an order. A pending consume past its deadline is given back first.
    async fn touch(&self, room: &RoomParams, vid: VisitorId) -> Result<bool, StoreError>;

    /// [`Store::touch`] by an instance that last saw the store's generation `seen`, for a
    /// cookie valid until `expires` (unix s, the store's clock as the proxy reads it; 0: not
    /// known). A session the store does not hold is not taken back while the store's
    /// generation is another, or younger than `seen.quiet` (the wait of [`Store::consume`]
    /// after a data loss: found by re-review, a GET's renewal brought the session back and a
    /// second order won at once): [`Touched::TooSoon`]. One taken back runs until the cookie's
    /// expiry at least (found by review r92a: after a reload lowered `session-ttl`, sessions
    /// taken back after a loss ran out in the store while their cookies ran on, and the line
    /// took their slots); a cookie expired by the store's clock takes nothing back.
    async fn touch_seen(
        &self,
        room: &RoomParams,
        vid: VisitorId,
        seen: Option<&SeenGeneration>,
        expires: u64,
    ) -> Result<Touched, StoreError>;

    /// [`Store::touch_seen`] of a session this instance admitted on its own while the store was
    /// away (the `local` policy): the store takes it back also past max-active. The visitor is
    /// in the shop on their cookie whatever the store says; left uncounted, the store let the
    /// line into their slot as well, for as long as their session ran (found by review r89c:
    /// with two instances coming back a moment apart, the first filled the slots, and the
    /// other's local admissions were never counted: four in for a max-active of three). Counted,
    /// the line waits until the count is below max-active again.
    async fn register_local(
        &self,
        room: &RoomParams,
        vid: VisitorId,
        seen: Option<&SeenGeneration>,
        expires: u64,
    ) -> Result<Touched, StoreError>;

    /// Takes an admission for an order. Of concurrent calls for one visitor exactly one wins;
    /// a call re-sent with the same request id wins again. The admission stays pending until
    /// [`Store::settle`], or until `order.grace` has passed and the visitor is seen again.
    async fn consume(
        &self,
        room: &RoomParams,
        vid: VisitorId,
        order: &Order,
    ) -> Result<Consumed, StoreError>;

    /// Settles the pending consume of `request`: confirmed (used up) or given back (the same
    /// visitor holds the same slot again; `max-active` does not block it). Idempotent.
    async fn settle(
        &self,
        room: &RoomParams,
        vid: VisitorId,
        request: &RequestId,
        how: Settle,
    ) -> Result<Settled, StoreError>;

    /// Consumes and confirms at once, for an order known to have gone through (tools, tests,
    /// the demo crowd). `true` when this call used the admission up.
    async fn use_up(&self, room: &RoomParams, vid: VisitorId) -> Result<bool, StoreError> {
        let order = Order {
            request: RequestId::random(),
            grace: std::time::Duration::from_secs(60),
            vouched: false,
            cookie_life: Duration::ZERO,
            cookie_expires: 0,
            generation: None,
            events_version: None,
        };
        if self.consume(room, vid, &order).await? != Consumed::Won {
            return Ok(false);
        }
        self.settle(room, vid, &order.request, Settle::Confirm)
            .await
            .map(|s| s == Settled::Done)
    }

    /// Ends an admission at the origin's word (`Anteroom-Command`, see [`finish`]): out of
    /// `active` whatever state it was in (a pending order of it included), a confirmed marker
    /// that lives until `ending.until` so that nothing renews it, and for
    /// [`Command::Revoke`] an entry in the room's revocation log. Safe to retry: a retried
    /// revoke is numbered again (learned twice, harmlessly), never kept twice.
    ///
    /// The session as the store holds it may outlive the cookie the command came with (renewed
    /// through an instance with a longer `session-ttl`): the marker and the revocation then
    /// last past its deadline by [`order::MARKER_MARGIN`] too. Returns the revocation's end as
    /// recorded (unix seconds): `ending.until`, or later.
    async fn finish(
        &self,
        room: &RoomParams,
        vid: VisitorId,
        ending: &Ending,
    ) -> Result<u64, StoreError>;

    async fn room_state(&self, room: &RoomParams) -> Result<RoomState, StoreError>;

    async fn update_room_state(
        &self,
        room: &RoomParams,
        patch: &RoomPatch,
    ) -> Result<RoomState, StoreError>;

    /// Empties the line (everyone waiting must join again); returns how many were removed.
    async fn clear_waiting(&self, room: &RoomParams) -> Result<u64, StoreError>;

    /// [`Store::update_room_state`] and [`Store::clear_waiting`] as an operator's change: made
    /// and recorded in the room's history in one atomic step ([`history`]).
    async fn change_room_state(
        &self,
        room: &RoomParams,
        patch: &RoomPatch,
        by: &history::Actor,
    ) -> Result<RoomState, StoreError>;
    async fn clear_waiting_by(
        &self,
        room: &RoomParams,
        by: &history::Actor,
    ) -> Result<u64, StoreError>;
    /// The room's recorded changes, newest first, at most `limit`.
    async fn changes(
        &self,
        room: &RoomParams,
        limit: usize,
    ) -> Result<Vec<history::Change>, StoreError>;

    async fn stats(&self, room: &RoomParams) -> Result<RoomStats, StoreError>;

    /// The room's runtime event changes ([`crate::event::schedule::Runtime`] per name) and
    /// their version.
    async fn runtime_events(&self, room: &RoomParams) -> Result<RuntimeEvents, StoreError>;

    /// Keeps `change` as the runtime definition of event `name`, if the runtime changes are
    /// still at `version` (else nothing is changed and the current ones come back, to be
    /// checked again), and records it in the room's history (from `before`, the definition in
    /// force until now). Safe to retry: the same change again is found in force.
    async fn change_event(
        &self,
        room: &RoomParams,
        name: &str,
        change: &crate::event::schedule::Runtime,
        version: u64,
        before: &serde_json::Value,
        by: &history::Actor,
    ) -> Result<EventChange, StoreError>;

    /// Registrations of an event's draw in the draw's order, from 0-based place `from`, at
    /// most `count`; `event` is its id ([`crate::event::Event::id`]).
    async fn draw_list(
        &self,
        room: &RoomParams,
        event: &str,
        from: u64,
        count: u64,
    ) -> Result<Vec<crate::event::draw::RegTicket>, StoreError>;
}

/// The runtime event changes of a room, as the store keeps them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeEvents {
    pub version: u64,
    pub events: std::collections::BTreeMap<String, crate::event::schedule::Runtime>,
    /// The id of the event whose opening the store recorded, as [`Store::runtime_events`] read
    /// it (`None` from other calls): a change is checked against the store's record, not only
    /// against the last tick's (found by review: an instance a tick behind moved an opening
    /// the store had recorded).
    pub opened: Option<String>,
}

impl RuntimeEvents {
    /// Whether the store had recorded `event`'s opening when these were read.
    pub fn opened(&self, event: &crate::event::Event) -> bool {
        self.opened.as_deref().is_some_and(|id| event.is(id))
    }
}

/// What [`Store::change_event`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum EventChange {
    /// Kept; the new version.
    Done(u64),
    /// Someone changed the events meanwhile: these are the current ones.
    Conflict(RuntimeEvents),
    /// The change moves the opening of an event whose opening the store has recorded (found
    /// by re-review: recorded between the caller's read and the write): not kept.
    OpeningRecorded,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The parse before it decoded by itself: checked, then `Uuid::try_parse`.
    fn parse_by_uuid(s: &str) -> Option<VisitorId> {
        let lower_hex = s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        (s.len() == 32 && lower_hex)
            .then(|| Uuid::try_parse(s).ok().map(VisitorId))
            .flatten()
    }

    proptest! {
        #[test]
        fn a_visitor_id_parses_as_uuid_parsed_it(s in "[0-9a-fA-F]{32}|[0-9a-fg-]{31,33}|[0-9a-f]{32}|.{0,40}") {
            prop_assert_eq!(VisitorId::parse(&s), parse_by_uuid(&s));
        }

        #[test]
        fn a_visitor_id_reads_back_what_it_writes(b in any::<[u8; 16]>()) {
            let v = VisitorId::from_bytes(b);
            prop_assert_eq!(VisitorId::parse(&v.to_string()), Some(v));
        }
    }
}
