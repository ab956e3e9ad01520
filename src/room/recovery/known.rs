//! What an instance last learned from the store about a room, and the longest values the
//! instances run it with, kept past a loss of the store's data. Part of [`super`].

use crate::clock::Micros;
use crate::store::RoomState;

/// What this instance last learned from the store about a room.
#[derive(Debug, Clone, PartialEq)]
pub struct Known {
    pub generation: String,
    pub state: RoomState,
    /// The store's count of active sessions.
    pub active: u64,
    /// The longest tick an instance ran the room with lately ([`crate::store::AdmitReport::tick_hi`]),
    /// kept across a loss ([`Longest::after`]): the store's record of it goes with its data.
    pub tick_hi: Longest,
    /// The longest heartbeat life an instance ran the room with lately
    /// ([`crate::store::AdmitReport::heartbeat_hi`]), kept across a loss the same way: the
    /// finder of a loss makes the store wait that long for the instances from before it
    /// ([`crate::store::Outage::heartbeat_hi`]).
    pub heartbeat_hi: Longest,
}

/// How long a longer value the store told is kept after it last told it, when it tells a
/// shorter one: past a data loss, until the slow instance has reported again (an admit a tick
/// of its away, ten seconds at most).
pub const LONGEST_KEPT: Micros = 60_000_000;

/// The longest of a value the instances run the room with lately, as the store told it, and
/// when it last told it (this instance's clock, µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Longest {
    pub value: std::time::Duration,
    pub at: Micros,
}

impl Longest {
    /// The longest to go by from the one `kept` and the one the store tells at `now`: a longer
    /// or equal one at once; a shorter one only once the longer has not been told for
    /// [`LONGEST_KEPT`] (found by review: right after a loss the store knew only the fast
    /// instance's tick, and an order on a slower one was taken again).
    pub fn after(kept: Option<Longest>, told: std::time::Duration, now: Micros) -> Longest {
        match kept {
            Some(k) if k.value > told && now.saturating_sub(k.at) < LONGEST_KEPT => k,
            _ => Longest {
                value: told,
                at: now,
            },
        }
    }
}
