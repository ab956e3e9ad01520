//! Changes to a room's state through the admin API: `PATCH /rooms/NAME` (checked, kept in the
//! store, logged with who made it) and `GET /rooms/NAME/changes` (the store's record of them).

use http::{Response, StatusCode};
use pingora::protocols::http::ServerSession;
use serde::Deserialize;
use serde_json::{json, Value};

use super::api::{change_unsure, error, json_object, json_reply, Caller};
use crate::app::Shared;
use crate::store::history::KEEP;
use crate::store::RoomPatch;

/// How many changes `GET /rooms/NAME/changes` shows unless `?limit=` says otherwise.
const CHANGES_SHOWN: usize = 50;

/// `queue_all: false -> true, admit_per_second: default -> 20` (for the log line).
fn describe(changes: &[crate::store::history::FieldChange]) -> String {
    let shown = |v: &Value| match v {
        Value::Null => "default".to_string(),
        other => other.to_string(),
    };
    changes
        .iter()
        .map(|c| format!("{}: {} -> {}", c.field, shown(&c.from), shown(&c.to)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Fields `PATCH /rooms/NAME` accepts. For the overrides, an absent key leaves it alone and
/// `null` goes back to the configured value.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    /// `null` is the configuration's: on (found by review: a `null` was read as "not given",
    /// answered 200 and changed nothing).
    #[serde(default, deserialize_with = "present")]
    enabled: Option<Option<bool>>,
    /// `null` is the configuration's: not held.
    #[serde(default, deserialize_with = "present")]
    queue_all: Option<Option<bool>>,
    #[serde(default, deserialize_with = "present")]
    admit_per_second: Option<Option<f64>>,
    #[serde(default, deserialize_with = "present")]
    max_active: Option<Option<u64>>,
    /// `false` pauses the autopilot, `true` resumes it, `null` goes back to the config.
    #[serde(default, deserialize_with = "present")]
    autopilot: Option<Option<bool>>,
}

/// Tells a `null` apart from a missing key.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl PatchBody {
    fn check(&self) -> Result<RoomPatch, String> {
        if let Some(Some(r)) = self.admit_per_second {
            if !crate::config::valid_rate(r) {
                return Err(format!("admit_per_second {}", crate::config::RATE_RULE));
            }
        }
        if let Some(Some(m)) = self.max_active {
            if !crate::config::valid_max_active(m) {
                return Err(format!("max_active {}", crate::config::MAX_ACTIVE_RULE));
            }
        }
        Ok(RoomPatch {
            enabled: self.enabled.map(|v| v.unwrap_or(true)),
            queue_all: self.queue_all.map(|v| v.unwrap_or(false)),
            admit_per_second: self.admit_per_second,
            max_active: self.max_active,
            autopilot: self.autopilot,
            as_of: None,
        })
    }
}

pub(super) async fn patch(s: &Shared, body: &[u8], i: usize, who: &Caller) -> Response<Vec<u8>> {
    let patch = match json_object::<PatchBody>(body) {
        Ok(b) => match b.check() {
            Ok(p) => p,
            Err(msg) => return error(StatusCode::UNPROCESSABLE_ENTITY, &msg),
        },
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                "{e}; send a JSON object with any of enabled, queue_all, admit_per_second, max_active, autopilot"
            ),
            )
        }
    };
    let r = &s.rooms[i];
    // Pausing one the room does not have is refused as resuming it is (found by review: the
    // pause was kept unseen, and an autopilot a later reload added started paused).
    if matches!(patch.autopilot, Some(Some(_))) && r.cfg.autopilot.is_none() {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "this room has no autopilot in its config: add autopilot = { target-latency, max-error-rate, min-rate } to it",
        );
    }
    let by = who.actor();
    match s
        .store_call(
            "room_state",
            r.name(),
            s.store.change_room_state(&r.cfg.params, &patch, &by),
        )
        .await
    {
        Ok(state) => {
            r.live.set_state(&state);
            r.recovery.note_state(&state);
            // What the store recorded: each field from what to what.
            let history = s
                .store_call("changes", r.name(), s.store.changes(&r.cfg.params, 10))
                .await;
            let heard = history.is_ok();
            let recorded = history
                .ok()
                .and_then(|all| all.into_iter().find(|c| c.id == by.id));
            // A change of nothing (what was in force asked for again) is no change in the log
            // either, as in the history (found by review: logged as one, `changed=""`).
            if heard && recorded.is_none() {
                tracing::info!(
                    room = r.name(),
                    by = who.label,
                    client = %who.addr,
                    "a room state change through the admin API asked for what was in force: nothing changed"
                );
                return json_reply(StatusCode::OK, &super::view::room(s, i).await);
            }
            let changed = recorded.map_or_else(String::new, |c| describe(&c.changes));
            // Only the keys the change named; `default` for an override removed.
            let shown = |o: Option<Option<String>>| {
                o.map(|v| tracing::field::display(v.unwrap_or_else(|| "default".into())))
            };
            tracing::info!(
                room = r.name(),
                enabled = patch.enabled,
                queue_all = patch.queue_all,
                admit_per_second =
                    shown(patch.admit_per_second.map(|v| v.map(|x| x.to_string()))),
                max_active = shown(patch.max_active.map(|v| v.map(|x| x.to_string()))),
                autopilot = shown(patch.autopilot.map(|v| v.map(|x| x.to_string()))),
                by = who.label,
                client = %who.addr,
                change = by.id,
                changed,
                "room state changed through the admin API"
            );
            json_reply(StatusCode::OK, &super::view::room(s, i).await)
        }
        Err(e) => change_unsure(&e, r.name(), "a room state change", who),
    }
}

/// `GET /rooms/NAME/changes[?limit=N]`: the room's recorded changes, newest first.
pub(super) async fn list(s: &Shared, session: &ServerSession, i: usize) -> Response<Vec<u8>> {
    let r = &s.rooms[i];
    let query = session.req_header().uri.query().unwrap_or("");
    let limit = match query.strip_prefix("limit=").map(str::parse::<usize>) {
        None if query.is_empty() => CHANGES_SHOWN,
        Some(Ok(n)) if (1..=KEEP).contains(&n) => n,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("use ?limit=N with N from 1 to {KEEP}"),
            )
        }
    };
    match s
        .store_call("changes", r.name(), s.store.changes(&r.cfg.params, limit))
        .await
    {
        Ok(changes) => json_reply(
            StatusCode::OK,
            &json!({ "room": r.name(), "kept": KEEP, "changes": changes }),
        ),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}
