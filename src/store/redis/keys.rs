//! A room's keys in Redis (the layout is described in `lua/prelude.lua`; its version is the
//! prelude's `LAYOUT`).

use crate::store::order::MARKER_MARGIN;
use crate::store::{RoomParams, VisitorId};

/// The keys of a room.
pub(super) struct Keys {
    pub waiting: String,
    pub active: String,
    pub room: String,
    pub instances: String,
    /// Each live instance's configuration digest (field: instance id).
    pub configs: String,
    /// Each live instance's window of the origin's health (autopilot).
    pub health: String,
    /// The operators' changes, newest first (`crate::store::history`).
    pub history: String,
    /// The revocation log (`crate::store::finish`).
    pub revoked: String,
    /// The runtime event changes (`crate::event::schedule`).
    pub events: String,
    /// The sessions a pre-queue ended (`end_sessions` in `lua/prelude.lua`).
    pub ended: String,
    /// The used admissions on the liveness clock (`note_used` in `lua/markers.lua`).
    pub used: String,
}

impl Keys {
    pub fn of(room: &str) -> Self {
        Self {
            waiting: format!("{{anteroom:{room}}}:waiting"),
            active: format!("{{anteroom:{room}}}:active"),
            room: format!("{{anteroom:{room}}}:room"),
            instances: format!("{{anteroom:{room}}}:instances"),
            configs: format!("{{anteroom:{room}}}:configs"),
            health: format!("{{anteroom:{room}}}:health"),
            history: format!("{{anteroom:{room}}}:changes"),
            revoked: format!("{{anteroom:{room}}}:revoked"),
            events: format!("{{anteroom:{room}}}:events"),
            ended: format!("{{anteroom:{room}}}:ended"),
            used: format!("{{anteroom:{room}}}:used"),
        }
    }
}

/// A visitor's consumed marker (see `lua/prelude.lua`).
pub(super) fn marker_key(room: &str, vid: VisitorId) -> String {
    format!("{{anteroom:{room}}}:consumed:{vid}")
}

/// A visitor's record of an order lately, read by join-limit's count (`note_ordered` in
/// `lua/prelude.lua`).
pub(super) fn ordered_key(room: &str, vid: VisitorId) -> String {
    format!("{{anteroom:{room}}}:ordered:{vid}")
}

/// How long a consumed marker lives: longer than any cookie of that admission verifies.
pub(super) fn marker_ms(p: &RoomParams) -> u64 {
    u64::try_from(p.session_ttl.saturating_add(MARKER_MARGIN).as_millis()).unwrap_or(u64::MAX)
}
