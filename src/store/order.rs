//! The life of an admission from the order to its settlement: the types of `Store::consume` and
//! `Store::settle`.
//!
//! An order takes its admission in two steps, like a message taken from a queue with a
//! visibility timeout (the seed's staging area, SQS): `consume` puts the admission in a
//! *pending* state keyed by the order's [`RequestId`], with a deadline (`grace`); the origin's
//! answer settles it — [`Settle::Confirm`] (the order went through: the admission is used up) or
//! [`Settle::GiveBack`] (it failed: the same visitor gets the same slot back). A pending consume
//! that nobody settles (the instance that took it died) comes back by itself once its deadline has
//! passed, the next time that visitor is seen (`consume` or `touch`): no sweep, and a confirm
//! that arrives late still lands as long as the visitor has not been seen since.
//!
//! Each admission leaves a *marker* that lives at least `session-ttl` plus
//! [`MARKER_MARGIN`] after the consume, and as long past the session's deadline in the store
//! and past the cookie that ordered: longer than any cookie of that admission can verify, since
//! each was issued against that deadline (the admission, every renewal) — also a cookie issued
//! before a reload lowered `session-ttl`. A confirmed marker is what stops the sliding renewal
//! (`touch`) from bringing a used admission back, and a second cookie of it from ordering
//! again.

use std::time::Duration;

/// Added to `session-ttl` for the life of a consumed marker: covers the difference between the
/// proxy's clock (cookie expiry) and the store's (marker expiry).
pub const MARKER_MARGIN: Duration = Duration::from_secs(60);

/// Added to `abandon-after` for the life of an order's record (`note_ordered` in
/// `lua/prelude.lua`, the memory store's `ordered`): a queue ticket kept from before the order
/// vouches for a place for `abandon-after` after its last poll, read by the proxy's clock,
/// which may be behind the store's. While the record lives, the ticket's way back into the line
/// is counted by `join-limit` (`JoinGate::vouched`).
pub const ORDERED_MARGIN: Duration = Duration::from_secs(60);

/// Added to the upstream's timeouts for the grace period of a pending consume.
pub const GRACE_MARGIN: Duration = Duration::from_secs(5);

/// The grace period of an order sent to an upstream with these timeouts: longest the proxy can
/// take to get the origin's answer (connect, write the request, read the answer's head), plus
/// a margin. After it, a pending consume nobody settled is given back.
pub fn grace_for(connect: Duration, write: Duration, read: Duration) -> Duration {
    connect + write + read + GRACE_MARGIN
}

/// Identifies one order (one request to a consume route). Random: unique across instances
/// without coordination. A consume re-sent with the same id is recognised as the same order.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(String);

impl RequestId {
    pub fn random() -> Self {
        Self(format!(
            "{:016x}{:016x}",
            fastrand::u64(..),
            fastrand::u64(..)
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RequestId({})", self.0)
    }
}

/// The store generation a caller last saw, and how long after a new one is born a session
/// the store does not hold is not taken back on a cookie's word (the time every instance takes
/// to see a loss: its breaker's cooldown, a store call's timeout and two ticks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenGeneration {
    pub id: String,
    pub quiet: Duration,
}

/// Who asks the store to count a session it may not hold (touch.lua's `ARGV[10]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taking {
    /// A sliding renewal: taken back only while max-active allows.
    Renewal,
    /// A session an instance kept running, or admitted, on its own while the store was away: taken back
    /// past max-active ([`crate::store::Store::register_local`]).
    Kept,
}

impl Taking {
    pub fn past_cap(self) -> bool {
        self != Taking::Renewal
    }
}

/// The answer of a touch that may take a session the store does not hold back
/// ([`crate::store::Store::touch_seen`], [`crate::store::Store::register_local`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touched {
    /// The session was held, and is renewed.
    Held,
    /// The store did not hold the session and took it back: it is in the store's count from
    /// now, which the last tick's count did not hold (a loss before the next tick forgets it
    /// too: found by review r92a and r93a).
    TakenBack,
    /// Not held, and not to be asked again for this cookie: the room is full, the admission
    /// was used or ended, or the cookie has run out by the store's clock.
    Refused,
    /// Not taken back only because the store lost its data lately, or since the caller last
    /// saw it: asked again later it may be (found by review r92a: taken as final, a forgotten
    /// session was counted as come back, its slot held back no longer, and the line filled it).
    TooSoon,
}

impl Touched {
    /// Held now, renewed or taken back.
    pub fn held(self) -> bool {
        matches!(self, Touched::Held | Touched::TakenBack)
    }
}

/// What `consume` needs to know about the order.
#[derive(Debug, Clone)]
pub struct Order {
    pub request: RequestId,
    /// How long the consume stays pending before it comes back by itself.
    pub grace: Duration,
    /// The caller verified a signed admission cookie for this visitor. When the store holds
    /// neither a session nor a marker for them (it lost its data), such a consume wins and
    /// re-registers the admission; without it, no session means no admission.
    pub vouched: bool,
    /// How long the cookie that vouched for it stays valid, as the proxy reads its expiry: the
    /// order's marker outlives it (and `session-ttl`) by [`MARKER_MARGIN`], so that no cookie
    /// of a used admission can verify after the marker is gone — also when `session-ttl` was
    /// lowered by a reload after the cookie was issued.
    pub cookie_life: Duration,
    /// When that cookie expires (unix seconds, the store's clock as the proxy reads it); 0:
    /// not known. The store vouches only for a cookie that has not expired by its own clock:
    /// the proxy's reading may be off (an instance before its first tick, whose clock is
    /// behind, let a consumed admission order again once its marker was gone: found by
    /// re-review).
    pub cookie_expires: u64,
    /// The store generation this instance last saw (`None`: none yet). A store that lost its
    /// data since, or whose generation is younger than a few ticks, has an order of this
    /// admission in flight on another instance not yet written again (that instance's
    /// heartbeat does it once its tick sees the loss): a consume vouched by a cookie alone
    /// waits meanwhile (found by re-review: a second order won 30 ms after a FLUSHALL, the
    /// first still at the shop).
    pub generation: Option<SeenGeneration>,
    /// The version of the runtime event changes the caller's events come from (`None`: not
    /// checked). Older than the store's, or while the store waits to hear every instance after
    /// a stall, or on a call that runs past its caller's deadline, nothing is taken: the caller
    /// may not yet have read a pre-queue that has begun and ends the session this order would
    /// use, and the order went to the shop ahead of every registrant in the pre-queue's first
    /// tick (found by review r104a). The store answers busy (a tick or two: until the
    /// caller's window is built from what it read), as a join by such events places nobody
    /// ([`crate::store::JoinContext::events_version`]).
    pub events_version: Option<u64>,
}

impl Order {
    /// How long the order's marker lives: past the cookie and past any cookie of a session.
    pub fn marker_life(&self, session_ttl: Duration) -> Duration {
        session_ttl
            .max(self.cookie_life)
            .saturating_add(MARKER_MARGIN)
    }
}

/// The answer of `consume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consumed {
    /// This order holds the admission now (pending until settled), or a re-sent call of the
    /// order that did.
    Won,
    /// Used already (or never admitted): 409.
    Used,
    /// A session a pre-queue ended (its cookie kept from before the event): it was never used,
    /// and its holder joins the line like anyone (found by review: told "already used").
    Ended,
    /// Another order of this admission is pending (a second tab): 409, and when it would come
    /// back if that order is never settled.
    Busy { retry_after: Duration },
}

/// How the origin's answer settles a pending consume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// The order went through (any answer below 500): the admission is used up.
    Confirm,
    /// The order failed (5xx, refused, timed out): the admission comes back.
    GiveBack,
    /// The order is still on its way (a slow request body, a slow shop): its deadline moves to
    /// this long from now. The instance that took it sends this while the request is in flight
    /// (a heartbeat, like SQS's ChangeMessageVisibility), so a pending order is never given
    /// back under a request that is still running — and still is when that instance dies.
    Extend(Duration),
}

/// The answer of `settle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// This call settled it.
    Done,
    /// It was settled that way already (a retried call).
    Already,
    /// It was settled the other way already; nothing changed.
    Reversed,
    /// No consume of this order is known: its deadline passed and the admission was taken by
    /// another order since, or the store lost it.
    Gone,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_covers_the_upstream_timeouts() {
        let s = Duration::from_secs;
        assert_eq!(grace_for(s(3), s(30), s(30)), s(68));
        assert_eq!(
            grace_for(Duration::ZERO, Duration::ZERO, Duration::ZERO),
            GRACE_MARGIN
        );
    }

    #[test]
    fn request_ids_are_distinct_and_hex() {
        let a = RequestId::random();
        let b = RequestId::random();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
