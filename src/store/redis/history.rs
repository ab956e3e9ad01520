//! The Redis store's side of the audit ([`crate::store::history`]): `room_state.lua` and
//! `clear_waiting.lua` record an operator's change in the step that makes it; `changes.lua`
//! reads them back.

use redis::Value;

use super::keys::Keys;
use super::reply::state_from;
use super::RedisStore;
use crate::store::history::{Actor, Change, KEEP};
use crate::store::{RoomParams, RoomPatch, RoomState, StoreError};

impl RedisStore {
    pub(super) async fn room_state_call(
        &self,
        p: &RoomParams,
        patch: &RoomPatch,
        by: Option<&Actor>,
    ) -> Result<RoomState, StoreError> {
        let k = Keys::of(&p.name);
        let flag = |v: Option<bool>| match v {
            None => String::new(),
            Some(true) => "1".to_string(),
            Some(false) => "0".to_string(),
        };
        fn over<T: ToString>(v: &Option<Option<T>>) -> String {
            match v {
                None => String::new(),
                Some(None) => "-".to_string(),
                Some(Some(x)) => x.to_string(),
            }
        }
        let mut inv = self.scripts.room_state.prepare_invoke();
        inv.key(&k.room)
            .key(&k.history)
            .arg(flag(patch.enabled))
            .arg(flag(patch.queue_all))
            .arg(over(&patch.admit_per_second))
            .arg(over(&patch.max_active))
            .arg(match patch.autopilot {
                None => String::new(),
                Some(None) => "-".to_string(),
                Some(Some(b)) => flag(Some(b)),
            });
        actor_args(&mut inv, by);
        if let Some(as_of) = patch.as_of {
            if by.is_none() {
                // ARGV[7..9] unused without an actor.
                inv.arg("").arg("").arg("");
            }
            inv.arg(as_of);
        }
        let v: Vec<Value> = self.run("room_state", &p.name, &inv).await?;
        let mut state = state_from(&v, 0, "room_state", &p.name)?;
        state.changed_at = super::reply::at(&v, 6, "room_state", &p.name)?;
        Ok(state)
    }

    pub(super) async fn clear_call(
        &self,
        p: &RoomParams,
        by: Option<&Actor>,
    ) -> Result<u64, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.clear_waiting.prepare_invoke();
        inv.key(&k.waiting).key(&k.room).key(&k.history);
        actor_args(&mut inv, by);
        self.run("clear_waiting", &p.name, &inv).await
    }

    pub(super) async fn history(
        &self,
        p: &RoomParams,
        limit: usize,
    ) -> Result<Vec<Change>, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.changes.prepare_invoke();
        inv.key(&k.history).arg(limit.clamp(1, KEEP));
        let entries: Vec<String> = self.run("changes", &p.name, &inv).await?;
        // An entry this version cannot read is left out, not an error for the whole history.
        Ok(entries
            .iter()
            .filter_map(|e| serde_json::from_str(e).ok())
            .collect())
    }
}

/// Who asks (ARGV after the script's own: id, label, address, entries kept), or an empty id.
pub(super) fn actor_args(inv: &mut redis::ScriptInvocation<'_>, by: Option<&Actor>) {
    match by {
        Some(a) => inv.arg(&a.id).arg(&a.by).arg(&a.client).arg(KEEP),
        None => inv.arg(""),
    };
}
