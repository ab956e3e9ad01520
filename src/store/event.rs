//! What the store is told of a room's events and what it tells back (see [`crate::event`] for
//! the rules, `lua/prelude.lua` for the scripts' side of them).
//!
//! Every store call that can be decided by an event carries the room's events near now
//! ([`EventsArg`], a window of the schedule): the store picks the one in force by its own clock,
//! so instances whose clocks disagree still agree on the phase. A join into a drawn pre-queue
//! also carries the visitor's place in the draw ([`Draw`]), which only an instance can compute
//! (the seed is derived from a secret the store never sees).

use crate::clock::Micros;
use crate::event::draw::RegTicket;
use crate::event::{schedule, Event, Phase};

use super::JoinGate;

/// The room's events near now, for a store call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventsArg {
    /// Sorted by `prequeue-from`.
    pub events: Vec<Event>,
    /// The same as `lua/prelude.lua`'s `parse_events` reads them.
    pub lua: String,
    /// The version of the runtime changes these come from ([`super::RuntimeEvents`]); an admit
    /// whose events are older than the store's makes no irreversible step by them (an opening
    /// recorded, a line released) and admits nobody. `None`: not checked (tools, tests).
    pub version: Option<u64>,
}

impl EventsArg {
    pub fn of(window: &[Event]) -> Self {
        Self {
            events: window.to_vec(),
            lua: schedule::encode(window),
            version: None,
        }
    }

    /// [`EventsArg::of`], from the runtime changes at `version`.
    pub fn at(window: &[Event], version: u64) -> Self {
        Self {
            version: Some(version),
            ..Self::of(window)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// A visitor's registration in an event's draw: the ticket and its draw key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    pub ticket: RegTicket,
    pub key: u64,
}

/// What a join carries besides the visitor: the per-client limit and the events.
#[derive(Debug, Clone, Copy, Default)]
pub struct JoinContext<'a> {
    pub gate: Option<&'a JoinGate>,
    pub events: Option<&'a EventsArg>,
    /// Per event of `events` (same order), the visitor's draw where the event draws.
    pub draws: &'a [Option<Draw>],
    /// The version of the runtime changes the caller's events come from (also when it has
    /// none: an operator may just have added one). Older than the store's, a newcomer is not
    /// placed ([`super::Admission::Unplaced`]) and nothing is decided by them. `None`: not
    /// checked (tools, tests).
    pub events_version: Option<u64>,
    /// The caller has sessions it admitted on its own (`local`) that the store has not been
    /// told of, or its admission loop's calls failed since the last answer: nobody walks in at
    /// once ([`super::Outage`]).
    pub unsettled: bool,
}

/// The event in force as an admit call found it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSeen {
    /// The event's id ([`crate::event::Event::id`], `NAME@PREQUEUE_FROM`): a name used again
    /// is another event, whose opening this is not.
    pub id: String,
    pub name: String,
    pub phase: Phase,
    /// Registrations in its draw so far (0 without one).
    pub registrations: u64,
    /// When the store saw it open (its clock, Unix µs).
    pub opened_at: Option<Micros>,
}

impl EventSeen {
    /// The event's overrides in force, from the call's events: (rate, max-active).
    pub fn overrides(&self, events: Option<&EventsArg>) -> (Option<f64>, Option<u64>) {
        if !Event::overrides_in(self.phase) {
            return (None, None);
        }
        events
            .and_then(|a| a.events.iter().find(|e| e.is(&self.id)))
            .map_or((None, None), |e| (e.admit_per_second, e.max_active))
    }
}

/// The draw whose places the line holds, as an admit call found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineDraw {
    /// Its event's id ([`crate::event::Event::id`]): the event may be cancelled since, or
    /// another of its name in force, and still its draw orders these places.
    pub id: String,
    /// Its order is out: the store saw its event open, or the live instances' events no longer
    /// hold it (cancelled). Its seed may be published, and nobody is placed by it again.
    pub out: bool,
    /// The line's epoch its places are in: a drawn place of another epoch is another draw's.
    pub epoch: u64,
}

impl LineDraw {
    /// The event's name and pre-queue start, from its id.
    pub fn name_and_start(&self) -> Option<(&str, Micros)> {
        let (name, pre) = self.id.rsplit_once('@')?;
        Some((name, pre.parse().ok()?))
    }
}
