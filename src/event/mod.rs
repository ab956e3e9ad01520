//! Scheduled sales (`[[room.event]]`): a pre-queue before the opening, a fair draw at the
//! opening that every visitor can check, and a closing.
//!
//! - An [`Event`] is a window of a room's time: `prequeue-from` ≤ `opens-at` < `closes-at`
//!   (the last optional). Before the pre-queue the room behaves as configured; during it
//!   visitors register (a join) and see a countdown, nobody is admitted; at the opening
//!   admission starts at the event's rate, registrants ahead of everyone who comes later;
//!   after the closing newcomers get "this sale has ended" and the line is kept (or released,
//!   `after-close`).
//! - Which event and which [`Phase`] is decided by the store's clock ([`current`]: the same
//!   rule in `lua/prelude.lua`'s `event_now`), from the list the instance passes with each
//!   call: config events with the runtime changes kept in the store ([`schedule`]).
//! - With `draw = true` a registrant's place is drawn from a seed the room commits to before
//!   anyone registers ([`draw`]): revealed at the opening with the list of all registration
//!   tickets, so that `anteroom verify-draw` can check any visitor's place.

pub mod draw;
pub mod live;
pub mod schedule;
pub mod time;
pub mod verify;

use serde::{Deserialize, Serialize};

use crate::clock::Micros;

pub use schedule::Schedule;

/// What happens to the line at `closes-at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfterClose {
    /// Those in line keep their places and are let in at the rate; only newcomers are turned
    /// away. The default: a visitor who waited in good faith is not sent away by the clock
    /// (the shop can still end the sale for everyone with `queueing = "reject"` or a clear).
    #[default]
    Keep,
    /// The line is emptied at the closing: everyone waiting sees the "ended" page.
    Release,
}

impl AfterClose {
    pub fn as_str(self) -> &'static str {
        match self {
            AfterClose::Keep => "keep",
            AfterClose::Release => "release",
        }
    }
}

/// One scheduled sale, validated. Times are Unix microseconds of the store's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Event {
    pub name: String,
    pub prequeue_from: Micros,
    pub opens_at: Micros,
    #[serde(default)]
    pub closes_at: Option<Micros>,
    #[serde(default)]
    pub draw: bool,
    #[serde(default)]
    pub after_close: AfterClose,
    /// While the event runs (pre-queue to closing): the rate and cap in force, between an
    /// operator's pin and the autopilot.
    #[serde(default)]
    pub admit_per_second: Option<f64>,
    #[serde(default)]
    pub max_active: Option<u64>,
    /// The UTC offset the operator wrote the times in (seconds east), to show them that way.
    #[serde(default)]
    pub utc_offset: i32,
}

/// Where a room stands in its current event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Registrations: nobody is admitted; with a draw, nobody knows their place.
    Prequeue,
    /// Admission at the event's rate.
    Open,
    /// Newcomers get the "ended" answer.
    Closed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Prequeue => "prequeue",
            Phase::Open => "open",
            Phase::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "prequeue" | "pre" => Some(Phase::Prequeue),
            "open" => Some(Phase::Open),
            "closed" => Some(Phase::Closed),
            _ => None,
        }
    }
}

impl Event {
    /// The event's identity in the store: `NAME@PREQUEUE_FROM`. A name used again (an event
    /// cancelled and added anew, or moved in the file) is another event: its own seed, list,
    /// opening and release.
    pub fn id(&self) -> String {
        format!("{}@{}", self.name, self.prequeue_from)
    }

    /// Whether `id` ([`Event::id`]) is this event's.
    pub fn is(&self, id: &str) -> bool {
        id.rsplit_once('@')
            .is_some_and(|(n, p)| n == self.name && p.parse() == Ok(self.prequeue_from))
    }

    /// The phase of this event at `now`, if its pre-queue has begun. `opened`: the store has
    /// seen this event open already (a clock that steps back does not reopen registration).
    pub fn phase(&self, now: Micros, opened: bool) -> Option<Phase> {
        if now < self.prequeue_from && !opened {
            return None;
        }
        Some(match self.closes_at {
            Some(close) if now >= close => Phase::Closed,
            _ if opened || now >= self.opens_at => Phase::Open,
            _ => Phase::Prequeue,
        })
    }

    /// Whether the event's overrides (rate, cap, page) apply in `phase`: from the pre-queue to
    /// the closing.
    pub fn overrides_in(phase: Phase) -> bool {
        phase != Phase::Closed
    }
}

/// The event in force at `now` and its phase: the latest (by `prequeue-from`) whose pre-queue
/// has begun; `events` sorted by `prequeue-from`. `opened` is the id ([`Event::id`]) of the
/// event the store has seen open, which stays the one in force while the clock is back before
/// its pre-queue.
pub fn current<'a>(
    events: &'a [Event],
    now: Micros,
    opened: Option<&str>,
) -> Option<(usize, &'a Event, Phase)> {
    let started = events.iter().rposition(|e| e.prequeue_from <= now);
    let was_opened = opened.and_then(|o| events.iter().position(|e| e.is(o)));
    let i = match (started, was_opened) {
        (Some(s), Some(o)) => s.max(o),
        (s, o) => s.or(o)?,
    };
    let e = &events[i];
    let phase = e.phase(now, opened.is_some_and(|o| e.is(o)))?;
    Some((i, e, phase))
}

/// An event name: what a store key, a URL and a log line can carry as it is.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        // `.` and `..` are no URL's segment: a client that normalises paths cannot name them
        // in `/rooms/NAME/events/EVENT` (found by review).
        && !name.bytes().all(|b| b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn ev(name: &str, pre: u64, open: u64, close: Option<u64>) -> Event {
        Event {
            name: name.into(),
            prequeue_from: pre,
            opens_at: open,
            closes_at: close,
            draw: true,
            after_close: AfterClose::Keep,
            admit_per_second: None,
            max_active: None,
            utc_offset: 0,
        }
    }

    #[test]
    fn the_phase_follows_the_clock_and_an_opening_seen_stays_open() {
        let e = ev("a", 100, 200, Some(300));
        assert_eq!(e.phase(99, false), None);
        assert_eq!(e.phase(100, false), Some(Phase::Prequeue));
        assert_eq!(e.phase(199, false), Some(Phase::Prequeue));
        assert_eq!(e.phase(200, false), Some(Phase::Open));
        assert_eq!(e.phase(300, false), Some(Phase::Closed));
        // The store saw it open; its clock stepped back: registration does not reopen.
        assert_eq!(e.phase(150, true), Some(Phase::Open));
        assert_eq!(e.phase(50, true), Some(Phase::Open));
        let open_ended = ev("b", 100, 200, None);
        assert_eq!(open_ended.phase(10_000, false), Some(Phase::Open));
    }

    #[test]
    fn the_event_in_force_is_the_latest_begun() {
        let events = vec![
            ev("a", 100, 200, Some(300)),
            ev("b", 400, 500, None),
            ev("c", 900, 950, Some(990)),
        ];
        assert!(current(&events, 50, None).is_none());
        let at = |now, opened| current(&events, now, opened).map(|(i, _, p)| (i, p));
        assert_eq!(at(150, None), Some((0, Phase::Prequeue)));
        assert_eq!(at(350, None), Some((0, Phase::Closed)));
        assert_eq!(at(450, None), Some((1, Phase::Prequeue)));
        assert_eq!(at(800, None), Some((1, Phase::Open)));
        assert_eq!(at(920, None), Some((2, Phase::Prequeue)));
        assert_eq!(at(1000, None), Some((2, Phase::Closed)));
        // Opened "b", then the clock went back before b's pre-queue: b, open.
        assert_eq!(at(350, Some("b@400")), Some((1, Phase::Open)));
        assert_eq!(at(50, Some("b@400")), Some((1, Phase::Open)));
        // An opening of an earlier event does not hold back a later one.
        assert_eq!(at(920, Some("a@100")), Some((2, Phase::Prequeue)));
        // The same name at another start is another event: not the one seen open.
        assert_eq!(at(50, Some("b@399")), None);
        // An opened name no longer in the list is nobody.
        assert_eq!(at(50, Some("gone@1")), None);
    }

    #[test]
    fn names_are_plain() {
        assert!(valid_name("spring-drop_2027.1"));
        for bad in [
            "",
            "a b",
            "a/b",
            "ä",
            "a\nb",
            &"x".repeat(65),
            ".",
            "..",
            "...",
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
