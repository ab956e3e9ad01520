//! A request's state through Pingora's phases ([`Ctx`]) and how it ended ([`Outcome`]).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::{command, held, peer, settle};
use crate::metrics::Reject;

/// How a request ended, for logs and metrics (the discriminant indexes
/// [`crate::metrics::OUTCOMES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Outside every room (or the room is switched off): straight to the origin.
    Pass = 0,
    /// Carried a valid admission, or was admitted by this request.
    Admit = 1,
    /// Got the waiting page or JSON.
    Wait = 2,
    /// A consume route that won the admission.
    Consume = 3,
    /// Refused: already consumed, line full, bad request under `/.anteroom/`.
    Reject = 4,
    /// Answered by `/.anteroom/status`.
    Status = 5,
    /// Let past the line by one of the room's `bypass` rules.
    Bypass = 6,
    /// The waiting page's script or style (`/.anteroom/waiting.js`, `.css`).
    Asset = 7,
    /// Plain HTTP sent to HTTPS (`redirect-http`).
    Redirect = 8,
    /// A read let through by an order's receipt (`order-receipt`).
    Receipt = 9,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        crate::metrics::OUTCOMES[self as usize]
    }
}

/// Per-request state.
pub struct Ctx {
    pub(super) upstream: usize,
    pub(super) room: Option<usize>,
    /// `Set-Cookie` values to add to whatever response the visitor gets.
    pub(super) set_cookies: Vec<String>,
    /// The id the request's visitor-id cookie carries (one the room did not revoke): the
    /// cookie is given again with it, not with the room's own id when its ticket names
    /// another (see `identity`), since the other rooms know the visitor by it.
    pub(super) kept_vid: Option<crate::store::VisitorId>,
    /// The request carried a queue ticket cookie of the room, whether or not it verified here:
    /// an admission removes it either way (found by review r83c: mid key rotation, an instance
    /// that could not read a ticket signed under the new key admitted its visitor and left it).
    pub(super) carried_ticket: bool,
    /// The answer sets no ticket or id cookie of the room: the request holds several places
    /// of a sealed draw, and which is the visitor's own cannot be told (`Proxy::enter_known`).
    pub(super) hold_identity: bool,
    /// The request carries admissions of several visitors: none is set or cleared
    /// (`Proxy::several_admissions`).
    pub(super) hold_admission: bool,
    pub outcome: Outcome,
    pub(super) reject: Option<Reject>,
    pub(super) started: Instant,
    /// When the request's body may start to be read: its start, or when its origin slot came
    /// (nothing reads the body while it waits for one). `client-timeout` bounds the body from
    /// here (found by re-review: counted from the start, an upload that waited in the gate
    /// longer failed at its first piece, and over HTTP/2 gave its slot back at once).
    pub(super) body_from: Instant,
    /// When the body is due, from `body_from` (`slow::body_due`).
    pub(super) body_due: std::time::Duration,
    /// A place in the visitor's share of the room's origin slots while the body comes.
    pub(super) uploading: Option<Box<crate::room::share::Uploading>>,
    /// A trusted proxy says the visitor came over HTTPS.
    pub(super) https: bool,
    /// The admission this request took for an order, pending until the origin's answer
    /// settles it (`origin`).
    pub(super) consumed: Option<settle::Taken>,
    /// The request is on one of its room's consume routes (an order), taken or let through.
    pub(super) order: bool,
    /// Keeps that order's pending consume from coming back while the request is in flight;
    /// stops when settled or when the request ends (dropped with the context).
    pub(super) heartbeat: Option<settle::Heartbeat>,
    /// Our error page, replacing the origin's own 5xx body.
    pub(super) replace_body: Option<Bytes>,
    /// The peer is a trusted proxy: its forwarding headers are believed and kept.
    pub(super) trusted_peer: bool,
    /// The configuration this request started under (a reload does not change it midway),
    /// through this worker thread's hold on it ([`held`]).
    pub(super) shared: Arc<held::Held>,
    /// A slot under the room's `max-origin-inflight`, held until the request ends.
    pub(super) origin_slot: Option<super::origin_slot::Held>,
    /// When the origin was asked (before connecting): its latency, for the autopilot.
    pub(super) upstream_at: Option<Instant>,
    /// Origin servers this request could not connect to (another is tried).
    pub(super) tried: peer::Tried,
    /// `fail_to_proxy` said what went wrong (our `origin failed` line, or the access line for
    /// the visitor's side): Pingora's own error line would repeat it.
    pub(super) failure_told: bool,
    /// The admission this request carried or was given: what an origin command ends.
    pub(super) holder: Option<command::Holder>,
    /// Let past the line by a `path` bypass rule: a page open to everyone, whose caching the
    /// shop decides (a `header` or `client` rule lets one party past a guarded page).
    pub(super) open_bypass: bool,
    /// The request carries a body, which the origin's handler may not read: the connection to
    /// the origin ends with its answer (`method::takes_no_body`).
    pub(super) last_on_connection: bool,
    /// The request was handed to the origin: Pingora's own checks of it passed and
    /// `upstream_request_filter` ran. An order refused before that never reached the shop.
    pub(super) handed_over: bool,
    /// The request's body has been read to its end (and so passed on to the origin).
    pub(super) body_complete: bool,
    /// The body was read whole before the origin slot (`prefetch`).
    pub(super) body_buffered: bool,
    /// The origin's answer has come whole.
    pub(super) answer_whole: bool,
}

impl Ctx {
    /// Whether a room guards the request's answer: in a room and not let past it by a path
    /// bypass rule (open to all anyway). Such an answer is kept out of shared caches and asked
    /// of the origin in full ([`super::cache_safe`]).
    pub(super) fn guarded(&self) -> bool {
        self.room.is_some() && !self.open_bypass
    }

    /// A request's state before any phase ran, under the configuration `shared` holds.
    pub(super) fn new(shared: Arc<held::Held>) -> Self {
        let now = Instant::now();
        Ctx {
            upstream: shared.config.default_upstream,
            room: None,
            set_cookies: Vec::new(),
            kept_vid: None,
            carried_ticket: false,
            hold_identity: false,
            hold_admission: false,
            outcome: Outcome::Pass,
            reject: None,
            started: now,
            body_from: now,
            body_due: shared.config.server.client_timeout,
            uploading: None,
            https: false,
            consumed: None,
            order: false,
            heartbeat: None,
            replace_body: None,
            trusted_peer: false,
            shared,
            origin_slot: None,
            upstream_at: None,
            failure_told: false,
            open_bypass: false,
            last_on_connection: false,
            handed_over: false,
            body_complete: false,
            body_buffered: false,
            answer_whole: false,
            tried: Vec::new(),
            holder: None,
        }
    }
}
