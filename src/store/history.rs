//! The audit of a room's admin changes: who (a token's label, never the token), when, from
//! which address, and each field from what to what. Kept in the store beside the room, so
//! every instance shows the same history (`GET /rooms/NAME/changes`); the newest [`KEEP`]
//! are kept. A change is recorded in the same atomic step that makes it (`lua/room_state.lua`,
//! `lua/clear_waiting.lua`; the memory store under its lock), and a retried call records it
//! once (by the change's id).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{RoomPatch, RoomState};

/// How many changes a room keeps.
pub const KEEP: usize = 200;

/// Who asks for a change.
#[derive(Debug, Clone)]
pub struct Actor {
    /// Unique per change (a retried call carries the same one).
    pub id: String,
    /// The admin token's label.
    pub by: String,
    /// The caller's address.
    pub client: String,
}

/// One change, as kept (JSON in Redis; the scripts write the same shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub id: String,
    /// The store's clock, milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub by: String,
    pub client: String,
    pub changes: Vec<FieldChange>,
}

/// A field a change named: its value before and after (`null`: the configured value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    pub from: Value,
    pub to: Value,
}

/// The fields `patch` names, before and after it (the names and values of the admin API).
pub fn field_changes(patch: &RoomPatch, before: &RoomState, after: &RoomState) -> Vec<FieldChange> {
    let mut out = Vec::new();
    let mut named = |field: &str, named: bool, from: Value, to: Value| {
        if named {
            out.push(FieldChange {
                field: field.to_string(),
                from,
                to,
            });
        }
    };
    named(
        "enabled",
        patch.enabled.is_some(),
        before.enabled.into(),
        after.enabled.into(),
    );
    named(
        "queue_all",
        patch.queue_all.is_some(),
        before.queue_all.into(),
        after.queue_all.into(),
    );
    named(
        "admit_per_second",
        patch.admit_per_second.is_some(),
        before.admit_per_second.into(),
        after.admit_per_second.into(),
    );
    named(
        "max_active",
        patch.max_active.is_some(),
        before.max_active.into(),
        after.max_active.into(),
    );
    named(
        "autopilot",
        patch.autopilot.is_some(),
        before.autopilot.into(),
        after.autopilot.into(),
    );
    out
}

/// An emptied line: how many were waiting, and none.
pub fn cleared(removed: u64) -> Vec<FieldChange> {
    vec![FieldChange {
        field: "waiting".to_string(),
        from: removed.into(),
        to: 0.into(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_named_fields_are_recorded_with_before_and_after() {
        let before = RoomState::default();
        let patch = RoomPatch {
            queue_all: Some(true),
            admit_per_second: Some(Some(50.0)),
            ..RoomPatch::default()
        };
        let mut after = before.clone();
        after.apply(&patch);
        let c = field_changes(&patch, &before, &after);
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!([
                { "field": "queue_all", "from": false, "to": true },
                { "field": "admit_per_second", "from": null, "to": 50.0 },
            ])
        );
        let back = RoomPatch {
            admit_per_second: Some(None),
            ..RoomPatch::default()
        };
        let mut again = after.clone();
        again.apply(&back);
        assert_eq!(
            field_changes(&back, &after, &again)[0].to,
            Value::Null,
            "back to the config"
        );
    }
}
