//! The answer a visitor waits with: its [`State`] and the [`Status`] JSON (of a waiting
//! response and of `/.anteroom/status`), with the room's event when one is in force.

use serde::Serialize;

/// The visitor's state as shown in JSON and on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Waiting,
    Admitted,
    Full,
    Paused,
    /// Registered in an event's pre-queue: the countdown to the opening.
    Prequeue,
    /// A page's poll came back without the visitor-id cookie its page set: the browser
    /// refuses cookies and cannot hold a place (the poll joined nobody).
    #[serde(rename = "cookies_required")]
    CookiesRequired,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Waiting => "waiting",
            State::Admitted => "admitted",
            State::Full => "full",
            State::Paused => "paused",
            State::Prequeue => "prequeue",
            State::CookiesRequired => "cookies_required",
        }
    }
}

/// The event in force, as a visitor is told of it (the `event` object of the status JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventStatus {
    pub name: String,
    /// RFC 3339, in the offset the operator wrote it in.
    pub opens_at: String,
    pub opens_in_seconds: u64,
    pub closes_at: Option<String>,
    /// "prequeue", "open" or "closed".
    pub phase: &'static str,
    pub draw: bool,
    /// `sha256(seed)`, lowercase hex, from the start of the pre-queue (with a draw).
    pub commitment: Option<String>,
    /// The seed, hex, once the store has seen the event open.
    pub seed: Option<String>,
    /// The visitor's registration ticket in the draw (32 hex), when they registered.
    pub ticket: Option<String>,
    /// Registrations in the draw so far.
    pub registrations: u64,
    /// Where the event, its commitment, seed and list are published.
    pub url: String,
}

/// The draw a visitor's place in line was drawn in, when it is not the event told beside it:
/// its event was cancelled after its pre-queue began (its registrants keep their drawn places
/// and go in by them), perhaps with another event in force now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacedBy {
    /// The cancelled event's name.
    pub event: String,
    /// `sha256(seed)`, hex.
    pub commitment: String,
    /// The seed, hex, once its order is out (the store has left its pre-queue for good).
    pub seed: Option<String>,
    /// The visitor's registration ticket in that draw (32 hex).
    pub ticket: String,
    /// Where that draw, its seed and list are published (by the event's id).
    pub url: String,
}

/// The JSON body of a waiting response and of `/.anteroom/status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub room: String,
    pub state: State,
    /// 1-based place in line; `null` when not in line.
    pub position: Option<u64>,
    pub waiting: u64,
    /// `null` when unknown (the line is on hold, the shop is full and nobody leaves, or the
    /// store cannot answer).
    pub eta_seconds: Option<u64>,
    /// When the estimate is poor (the start of a sale, a rate just changed, recent waits far
    /// from what was told): the range the wait is likely in, whole seconds; both `null` when
    /// `eta_seconds` is good as it is (see [`crate::line::accuracy::band`]).
    pub eta_low_seconds: Option<u64>,
    pub eta_high_seconds: Option<u64>,
    pub retry_after_ms: u64,
    /// What decides when the line moves: `"rate"`, `"max-active"` (the shop is full: it moves
    /// as visitors leave), `"paused"`; `null` when not in line or not known.
    pub held_by: Option<&'static str>,
    /// The room's event in force, if any (`[[room.event]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<Box<EventStatus>>,
    /// The draw the visitor's place was drawn in, when its event is not `event` (cancelled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placed_by: Option<Box<PlacedBy>>,
}

impl Status {
    /// The range the ETA is told as, when it is.
    pub fn eta_range(&self) -> Option<[u64; 2]> {
        Some([self.eta_low_seconds?, self.eta_high_seconds?])
    }

    /// `Retry-After` (and the page's meta refresh) in whole seconds, at least one: rounded up or
    /// down in proportion to the fraction, so that on average it is `retry_after_ms`. Rounding
    /// always up put the polls of a crowd without JavaScript on a one-second grid, and their
    /// turns, which `retry_after_ms` aims at, in waves. The coin is a hash of the (already
    /// jittered) milliseconds, so the header and the page of one answer agree.
    pub fn retry_after_secs(&self) -> u64 {
        let ms = self.retry_after_ms;
        let coin = (ms.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 1000;
        (ms / 1000 + u64::from(ms % 1000 > coin)).max(1)
    }
}
