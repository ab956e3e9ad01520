//! The memory store's audit of admin changes (see [`crate::store::history`]).

use std::time::{SystemTime, UNIX_EPOCH};

use super::RoomData;
use crate::store::history::{Actor, Change, FieldChange, KEEP};

impl RoomData {
    /// Keeps one change, newest first; a retried one (same id) once. A field set to the value
    /// it had is no change (no-ops would push the real changes out of the kept history).
    pub(super) fn record(&mut self, by: &Actor, mut changes: Vec<FieldChange>) {
        changes.retain(|c| c.from != c.to);
        if changes.is_empty() || self.history.iter().any(|c| c.id == by.id) {
            return;
        }
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.history.push_front(Change {
            id: by.id.clone(),
            at_ms,
            by: by.by.clone(),
            client: by.client.clone(),
            changes,
        });
        self.history.truncate(KEEP);
    }
}
