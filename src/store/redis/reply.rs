//! The replies of `lua/stats.lua` and `lua/room_state.lua`, and reading one reply item.

use ::redis::{FromRedisValue, Value};

use super::unavailable;
use crate::store::{RoomState, RoomStats, StoreError};

/// Reads reply element `i` as `T`.
pub(super) fn at<T: FromRedisValue>(
    v: &[Value],
    i: usize,
    op: &'static str,
    room: &str,
) -> Result<T, StoreError> {
    let item = v
        .get(i)
        .ok_or_else(|| unavailable(op, room, format!("reply too short ({} items)", v.len())))?;
    ::redis::from_redis_value_ref(item)
        .map_err(|e| unavailable(op, room, format!("reply item {i}: {e}")))
}

fn float(s: &str) -> f64 {
    s.parse().unwrap_or(0.0)
}

pub(super) fn state_from(
    v: &[Value],
    from: usize,
    op: &'static str,
    room: &str,
) -> Result<RoomState, StoreError> {
    let enabled: i64 = at(v, from, op, room)?;
    let queue_all: i64 = at(v, from + 1, op, room)?;
    let rate: String = at(v, from + 2, op, room)?;
    let max: String = at(v, from + 3, op, room)?;
    let switch: String = at(v, from + 4, op, room)?;
    let autopilot_rate: String = at(v, from + 5, op, room)?;
    Ok(RoomState {
        enabled: enabled != 0,
        queue_all: queue_all != 0,
        admit_per_second: rate.parse().ok(),
        max_active: max.parse().ok(),
        autopilot: switch_of(&switch),
        autopilot_rate: autopilot_rate.parse().ok(),
        event_rate: None,
        event_max_active: None,
        changed_at: 0,
    })
}

/// The autopilot switch as the scripts keep it: '1', '0', or '' (as configured).
pub(super) fn switch_of(s: &str) -> Option<bool> {
    match s {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// `stats.lua`'s reply: { waiting, active, admitted, joined, abandoned, measured rate (string),
/// enabled, queue_all, rate override, max-active override, autopilot switch, the autopilot's
/// rate, then digest, count pairs }.
pub(super) fn stats(v: &[Value], room: &str) -> Result<RoomStats, StoreError> {
    let rate: String = at(v, 5, "stats", room)?;
    Ok(RoomStats {
        waiting: at(v, 0, "stats", room)?,
        active: at(v, 1, "stats", room)?,
        admitted_total: at(v, 2, "stats", room)?,
        joined_total: at(v, 3, "stats", room)?,
        abandoned_total: at(v, 4, "stats", room)?,
        would_have_queued: at(v, 12, "stats", room)?,
        measured_rate: float(&rate),
        state: state_from(v, 6, "stats", room)?,
        configs: configs(v, 13, room)?,
    })
}

/// The instances' configuration digests at `from..`: digest, count pairs.
fn configs(
    v: &[Value],
    from: usize,
    room: &str,
) -> Result<std::collections::BTreeMap<String, u64>, StoreError> {
    let mut out = std::collections::BTreeMap::new();
    let mut i = from;
    while i + 1 < v.len() {
        let digest: String = at(v, i, "stats", room)?;
        let count: u64 = at(v, i + 1, "stats", room)?;
        out.insert(digest, count);
        i += 2;
    }
    Ok(out)
}
