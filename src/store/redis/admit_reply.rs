//! The reply of `lua/admit.lua`, typed: one place that knows its layout (see the script's
//! header), so the caller reads fields, not positions.

use std::time::Duration;

use ::redis::{FromRedisValue, ParsingError, Value};

use crate::event::Phase;
use crate::store::autopilot::{AutopilotState, Health};
use crate::store::finish::MAX_PER_TICK;
use crate::store::line::{LineSample, MAX_POINTS};
use crate::store::{
    AdmitReport, AdmittedVisitor, EventSeen, LineDraw, Revocation, Revocations, RoomState,
    VisitorId,
};

/// Where the autopilot's fields start.
const AUTOPILOT_FROM: usize = 13;
/// Where the event in force is told: its name, phase, registrations, when it opened, and the
/// version of the runtime events.
const EVENT_FROM: usize = 24;
/// Whether a random draw let someone in lately (1/0).
const RANDOM_AT: usize = 29;
/// The longest tick an instance runs the room with lately (µs).
const TICK_HI_AT: usize = 30;
/// The draw whose places the line holds (its event's id or ''), whether its order is out, and
/// the line's epoch.
const LINE_DRAW_AT: usize = 31;
/// The room's count of admit calls in this generation, this one's included.
const ADMITS_AT: usize = 34;
/// When an operator last changed the room's state ('st_at', µs; 0: never): an instance that
/// learns the state from its ticks re-asserts it with its time (found by review: with 0, a
/// restarted instance's re-assertion of a pause after a rollback lost to an older snapshot's).
const ST_AT: usize = 35;
/// Whether the live instances disagree on the room's events (1; 'ev_mixed'), plus 2 when the
/// caller's draw commitment is not the one its pre-queue began with ('draw_commit'), plus 4
/// while the store waits to be told of sessions admitted on their own ('lc_wait').
const MIXED_AT: usize = 36;
/// The slots of `max-active` this call held back for sessions a store that lost its data
/// forgot: the caller's, what it holds should this call find the loss, or another instance's
/// larger hold kept by the store.
const HELD_BACK_AT: usize = 37;
/// The longest heartbeat life an instance runs the room with lately (µs, 'hb_hi').
const HEARTBEAT_HI_AT: usize = 38;
/// Where the line's sample starts: after the fixed fields (its epoch, then its length).
const LINE_FROM: usize = 39;

/// `admit.lua`'s reply.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmitReply(pub AdmitReport);

fn item<T: FromRedisValue>(v: &[Value], i: usize) -> Result<T, ParsingError> {
    let item = v.get(i).ok_or_else(|| {
        format!(
            "admit reply too short ({} items, wanted {})",
            v.len(),
            i + 1
        )
    })?;
    ::redis::from_redis_value_ref(item)
        .map_err(|e| ParsingError::from(format!("admit reply item {i}: {e}")))
}

fn number(s: &str) -> f64 {
    s.parse().unwrap_or(0.0)
}

/// The autopilot's fields; `None` when the call carried no autopilot.
fn autopilot_of(v: &[Value]) -> Result<Option<AutopilotState>, ParsingError> {
    let f = AUTOPILOT_FROM;
    let running: i64 = item(v, f)?;
    let rate: String = item(v, f + 1)?;
    let changed_at: String = item(v, f + 2)?;
    let reason: String = item(v, f + 3)?;
    let from: String = item(v, f + 4)?;
    let judged: String = item(v, f + 5)?;
    let (requests, errors, p90): (u64, u64, u64) =
        (item(v, f + 6)?, item(v, f + 7)?, item(v, f + 8)?);
    let now: String = item(v, f + 9)?;
    if running == 0 {
        return Ok(None);
    }
    Ok(Some(AutopilotState {
        running: running == 2,
        rate: rate.parse().ok(),
        changed_at,
        now: now.parse().unwrap_or(0),
        reason,
        from: from.parse().ok(),
        judged_p90: judged.parse().ok().map(Duration::from_micros),
        health: Health {
            requests,
            errors,
            p90: Duration::from_micros(p90),
        },
    }))
}

fn vid_of(id: Vec<u8>) -> Result<VisitorId, ParsingError> {
    let id: [u8; 16] = id
        .try_into()
        .map_err(|_| ParsingError::from("a visitor id is not 16 bytes".to_string()))?;
    Ok(VisitorId::from_bytes(id))
}

/// The revocations, from `*i` on (their last number, a count of the numbers that follow,
/// then id and until of each); `*i` ends past them.
fn revoked_of(v: &[Value], i: &mut usize) -> Result<Revocations, ParsingError> {
    let last: u64 = item(v, *i)?;
    let numbers: usize = item(v, *i + 1)?;
    if !numbers.is_multiple_of(2) || numbers > 2 * MAX_PER_TICK {
        return Err(format!("admit reply: {numbers} numbers for the revocations").into());
    }
    let mut list = Vec::with_capacity(numbers / 2);
    let mut at = *i + 2;
    while at < *i + 2 + numbers {
        list.push(Revocation {
            vid: vid_of(item(v, at)?)?,
            until: item(v, at + 1)?,
        });
        at += 2;
    }
    *i = at;
    Ok(Revocations { list, last })
}

/// The event in force (`None` without one) and the runtime events' version.
fn event_of(v: &[Value]) -> Result<(Option<EventSeen>, u64), ParsingError> {
    let f = EVENT_FROM;
    let id: String = item(v, f)?;
    let name = id
        .rsplit_once('@')
        .map_or(id.as_str(), |(n, _)| n)
        .to_string();
    let phase: String = item(v, f + 1)?;
    let registrations: u64 = item(v, f + 2)?;
    let opened: String = item(v, f + 3)?;
    let version: u64 = item(v, f + 4)?;
    let seen = match Phase::parse(&phase) {
        Some(phase) if !name.is_empty() => Some(EventSeen {
            id,
            name,
            phase,
            registrations,
            opened_at: opened.parse().ok(),
        }),
        _ => None,
    };
    Ok((seen, version))
}

impl FromRedisValue for AdmitReply {
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let v: Vec<Value> = FromRedisValue::from_redis_value(v)?;
        let rate: String = item(&v, 5)?;
        let (enabled, queue_all): (i64, i64) = (item(&v, 6)?, item(&v, 7)?);
        let (rate_override, max_override): (String, String) = (item(&v, 8)?, item(&v, 9)?);
        let new_generation: i64 = item(&v, 12)?;
        let autopilot = autopilot_of(&v)?;
        let switch: String = item(&v, AUTOPILOT_FROM + 10)?;
        let store_now: String = item(&v, AUTOPILOT_FROM + 9)?;
        let (event, events_version) = event_of(&v)?;
        let random_recent: i64 = item(&v, RANDOM_AT)?;
        let tick_hi: String = item(&v, TICK_HI_AT)?;
        let heartbeat_hi: String = item(&v, HEARTBEAT_HI_AT)?;
        let line_draw: String = item(&v, LINE_DRAW_AT)?;
        let draw_out: i64 = item(&v, LINE_DRAW_AT + 1)?;
        let draw_epoch: u64 = item(&v, LINE_DRAW_AT + 2)?;
        let admits: u64 = item(&v, ADMITS_AT)?;
        let changed_at: u64 = item(&v, ST_AT)?;
        let events_mixed: i64 = item(&v, MIXED_AT)?;
        let epoch: u64 = item(&v, LINE_FROM)?;
        let numbers: usize = item(&v, LINE_FROM + 1)?;
        if !numbers.is_multiple_of(2) || numbers > 2 * MAX_POINTS {
            return Err(format!("admit reply: {numbers} numbers for the line's points").into());
        }
        let mut points = Vec::with_capacity(numbers / 2);
        let mut i = LINE_FROM + 2;
        while i < LINE_FROM + 2 + numbers {
            points.push((item(&v, i)?, item(&v, i + 1)?));
            i += 2;
        }
        let revoked = revoked_of(&v, &mut i)?;
        let mut admitted_visitors = Vec::new();
        while i + 1 < v.len() {
            let waited: u64 = item(&v, i + 1)?;
            admitted_visitors.push(AdmittedVisitor {
                vid: vid_of(item(&v, i)?)?,
                waited: Duration::from_micros(waited),
            });
            i += 2;
        }
        Ok(Self(AdmitReport {
            admitted: item(&v, 0)?,
            admitted_visitors,
            abandoned: item(&v, 1)?,
            expired: item(&v, 2)?,
            waiting: item(&v, 3)?,
            active: item(&v, 4)?,
            measured_rate: number(&rate),
            state: RoomState {
                enabled: enabled != 0,
                queue_all: queue_all != 0,
                admit_per_second: rate_override.parse().ok(),
                max_active: max_override.parse().ok(),
                autopilot: super::reply::switch_of(&switch),
                autopilot_rate: autopilot
                    .as_ref()
                    .filter(|a| a.running)
                    .and_then(|a| a.rate),
                event_rate: None,
                event_max_active: None,
                changed_at,
            },
            instances: item(&v, 10)?,
            generation: item(&v, 11)?,
            new_generation: new_generation == 1,
            admits,
            line: LineSample { epoch, points },
            autopilot,
            revoked,
            event,
            events_version,
            store_now: store_now.parse().unwrap_or(0),
            random_recent: random_recent == 1,
            events_mixed: events_mixed & 1 != 0,
            draw_recommitted: events_mixed & 2 != 0,
            untold_hold: events_mixed & 4 != 0,
            held_back: item(&v, HELD_BACK_AT)?,
            tick_hi: Duration::from_micros(tick_hi.parse().unwrap_or(0)),
            heartbeat_hi: Duration::from_micros(heartbeat_hi.parse().unwrap_or(0)),
            line_draw: (!line_draw.is_empty()).then_some(LineDraw {
                id: line_draw,
                out: draw_out == 1,
                epoch: draw_epoch,
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i64) -> Value {
        Value::Int(i)
    }

    fn text(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn parses_the_layout_of_the_script() {
        let reply = Value::Array(vec![
            int(1),
            int(2),
            int(3),
            int(4),
            int(5),
            text("9.5"),
            int(1),
            int(1),
            text(""),
            text("40"),
            int(3),
            text("123-abc"),
            int(1),
            // The autopilot: running at 120/s since a latency step from 150/s.
            int(2),
            text("120"),
            text("1700000000000000"),
            text("latency"),
            text("150"),
            text("950000"),
            int(400),
            int(2),
            int(900000),
            text("1700000002000000"),
            text("0"),
            // The event: "drop", in its pre-queue, 12 registered, not opened; runtime version 3.
            text("drop"),
            text("pre"),
            int(12),
            text(""),
            int(3),
            // A random draw lately; the longest tick 3 s; the line holds a cancelled event's
            // draw, its order out.
            int(1),
            text("3000000"),
            text("old@1700000000000000"),
            int(1),
            int(777),
            // The room's 88th admit call; an operator's change at 1700000001000000; the
            // instances disagree on the events, and the store waits to be told of local
            // admissions; 2 slots held back; the longest heartbeat 12 s.
            int(88),
            int(1_700_000_001_000_000),
            int(5),
            int(2),
            text("12000000"),
            int(777),
            int(4),
            int(0),
            int(10),
            int(3),
            int(40),
            // Revocations: the last number 9, one entry.
            int(9),
            int(2),
            Value::BulkString(vec![5; 16]),
            int(1_800_000_000),
            Value::BulkString(vec![7; 16]),
            int(250),
        ]);
        let AdmitReply(r) = AdmitReply::from_redis_value(reply).unwrap();
        assert_eq!((r.admitted, r.abandoned, r.expired), (1, 2, 3));
        assert_eq!((r.waiting, r.active, r.instances), (4, 5, 3));
        assert_eq!(r.measured_rate, 9.5);
        assert!(r.state.enabled && r.state.queue_all);
        assert_eq!(
            (r.state.admit_per_second, r.state.max_active),
            (None, Some(40))
        );
        assert_eq!((r.generation.as_str(), r.new_generation), ("123-abc", true));
        assert!(r.random_recent);
        assert_eq!(r.tick_hi, Duration::from_secs(3));
        let d = r.line_draw.unwrap();
        assert!(d.out);
        assert_eq!(d.epoch, 777);
        assert_eq!(r.admits, 88);
        assert_eq!(r.state.changed_at, 1_700_000_001_000_000);
        assert!(r.events_mixed && !r.draw_recommitted && r.untold_hold);
        assert_eq!(r.held_back, 2);
        assert_eq!(r.heartbeat_hi, Duration::from_secs(12));
        assert_eq!(d.name_and_start(), Some(("old", 1_700_000_000_000_000)));
        assert_eq!(r.line.epoch, 777);
        assert_eq!(r.line.points, vec![(0, 10), (3, 40)]);
        assert_eq!(r.revoked.last, 9);
        assert_eq!(
            r.revoked.list,
            vec![Revocation {
                vid: VisitorId::from_bytes([5; 16]),
                until: 1_800_000_000
            }]
        );
        assert_eq!(r.admitted_visitors.len(), 1);
        assert_eq!(r.admitted_visitors[0].vid, VisitorId::from_bytes([7; 16]));
        assert_eq!(r.admitted_visitors[0].waited, Duration::from_micros(250));
        let ap = r.autopilot.unwrap();
        assert!(ap.running);
        assert_eq!(
            (ap.rate, ap.from, ap.reason.as_str()),
            (Some(120.0), Some(150.0), "latency")
        );
        assert_eq!(ap.since_step(), Duration::from_secs(2));
        assert_eq!(ap.health.requests, 400);
        assert_eq!(ap.health.p90, Duration::from_millis(900));
        assert_eq!(r.state.autopilot_rate, Some(120.0));
        assert_eq!(r.state.autopilot, Some(false));
        assert_eq!(r.store_now, 1_700_000_002_000_000);
        assert_eq!(r.events_version, 3);
        let ev = r.event.unwrap();
        assert_eq!(
            (ev.name.as_str(), ev.phase, ev.registrations, ev.opened_at),
            ("drop", Phase::Prequeue, 12, None)
        );
    }

    #[test]
    fn a_short_reply_is_an_error_not_a_panic() {
        assert!(AdmitReply::from_redis_value(Value::Array(vec![int(1)])).is_err());
    }
}
