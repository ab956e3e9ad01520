//! `/rooms/NAME/events`: a room's events at run time (`[[room.event]]` and what operators
//! added, changed or cancelled), kept in the store so that every instance follows within a
//! tick; each change recorded in the room's history like every other.
//!
//! - `GET /rooms/NAME/events`: the events in force, each with its phase, its source ("config"
//!   or "runtime") and its draw's commitment; the cancelled ones by name.
//! - `POST /rooms/NAME/events` with `name`, `opens_at` and any of `prequeue_from`, `closes_at`,
//!   `draw`, `after_close`, `admit_per_second`, `max_active` (times RFC 3339 with an offset; a
//!   `prequeue_from` left out or already past starts the pre-queue now, by the store's clock;
//!   left out, only for an opening to come within a day: [`implied_start`]).
//! - `PATCH /rooms/NAME/events/EVENT` with any of those: the event changed. Once its pre-queue
//!   has begun, `prequeue_from` and `draw` stay as they are (the commitment is published).
//! - `DELETE /rooms/NAME/events/EVENT`: the event cancelled (kept as cancelled, so that the
//!   config file does not bring it back).
//!
//! An event's `template` and `texts` are the config file's only (a file on the instances).

use http::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use super::api::{error, json_reply, Caller};
use crate::app::Shared;
use crate::config::QueueMethod;
use crate::event::schedule::{self, Runtime};
use crate::event::{time, AfterClose, Event};
use crate::store::EventChange;

/// How often a change is tried again when another operator's change came first.
const TRIES: usize = 3;

/// The fields of `POST` and `PATCH` (an absent one is left as it is; `null` removes an
/// optional one).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventBody {
    pub name: Option<String>,
    #[serde(alias = "prequeue-from")]
    pub prequeue_from: Option<String>,
    #[serde(alias = "opens-at")]
    pub opens_at: Option<String>,
    #[serde(default, alias = "closes-at", deserialize_with = "present")]
    pub closes_at: Option<Option<String>>,
    pub draw: Option<bool>,
    #[serde(alias = "after-close")]
    pub after_close: Option<String>,
    #[serde(default, alias = "admit-per-second", deserialize_with = "present")]
    pub admit_per_second: Option<Option<f64>>,
    #[serde(default, alias = "max-active", deserialize_with = "present")]
    pub max_active: Option<Option<u64>>,
}

fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

fn when(field: &str, text: &str) -> Result<(u64, i32), String> {
    time::parse(text)
        .map_err(|e| format!("{field} {text:?} {e}: write it like \"2027-03-01T10:00:00+09:00\""))
}

/// The longest pre-queue a new event's left-out `prequeue_from` starts (µs): a day. Past it the
/// start must be given.
const IMPLIED_PREQUEUE: u64 = 24 * 3600 * 1_000_000;

/// Whether a new event without `prequeue_from` (its pre-queue begins `now`) may be added: not
/// when its opening is past (told as a pre-queue start after the opening before: found by
/// review, most likely a UTC offset mistaken), nor when the room would be held in a pre-queue
/// for more than a day (an event added for next month held the room from now on).
fn implied_start(e: &Event, now: u64) -> Result<(), String> {
    let opens = time::format_exact(e.opens_at, e.utc_offset);
    if e.opens_at <= now {
        return Err(format!(
            "opens_at {opens} is already past by the store's clock: write an opening to come (mind its UTC offset), or give prequeue_from too to run the event from now"
        ));
    }
    if e.opens_at - now > IMPLIED_PREQUEUE {
        let hours = (e.opens_at - now) / 3_600_000_000;
        return Err(format!(
            "without prequeue_from the pre-queue begins now, and would hold the room for {hours} hours until opens_at {opens}: give prequeue_from, when registration should begin"
        ));
    }
    Ok(())
}

impl EventBody {
    /// `base` with this body's fields over it; a new event when `base` is `None`. `now` is the
    /// store's clock: a pre-queue start already past begins now.
    pub fn apply(&self, base: Option<&Event>, now: u64) -> Result<Event, String> {
        let mut e = match base {
            Some(b) => b.clone(),
            None => {
                let name = self.name.clone().ok_or("name is required")?;
                let opens = self.opens_at.as_deref().ok_or("opens_at is required")?;
                let (opens_at, utc_offset) = when("opens_at", opens)?;
                Event {
                    name,
                    prequeue_from: opens_at,
                    opens_at,
                    closes_at: None,
                    draw: false,
                    after_close: AfterClose::Keep,
                    admit_per_second: None,
                    max_active: None,
                    utc_offset,
                }
            }
        };
        if let (Some(n), Some(b)) = (&self.name, base) {
            if *n != b.name {
                return Err("an event's name cannot change: cancel it and add another".into());
            }
        }
        if let Some(t) = &self.opens_at {
            let (us, off) = when("opens_at", t)?;
            let moved_start =
                e.prequeue_from == e.opens_at && self.prequeue_from.is_none() && base.is_none();
            e.opens_at = us;
            e.utc_offset = off;
            if moved_start {
                e.prequeue_from = us;
            }
        }
        match &self.prequeue_from {
            Some(t) => e.prequeue_from = when("prequeue_from", t)?.0,
            None if base.is_none() => {
                implied_start(&e, now)?;
                e.prequeue_from = now;
            }
            None => {}
        }
        if let Some(c) = &self.closes_at {
            e.closes_at = c
                .as_deref()
                .map(|t| when("closes_at", t).map(|w| w.0))
                .transpose()?;
        }
        if let Some(d) = self.draw {
            e.draw = d;
        }
        if let Some(a) = &self.after_close {
            e.after_close = match a.as_str() {
                "keep" => AfterClose::Keep,
                "release" => AfterClose::Release,
                other => {
                    return Err(format!(
                        "after_close {other:?}: use \"keep\" or \"release\""
                    ))
                }
            };
        }
        if let Some(r) = self.admit_per_second {
            e.admit_per_second = r;
        }
        if let Some(m) = self.max_active {
            e.max_active = m;
        }
        // A pre-queue that would begin in the past begins now (the seed takes its start: a
        // name used before never gets a seed already revealed).
        let begun = base.is_some_and(|b| now >= b.prequeue_from);
        if !begun && e.prequeue_from < now {
            e.prequeue_from = now.min(e.opens_at);
        }
        Ok(e)
    }
}

/// An event as the API shows it.
pub fn shown(s: &Shared, room: usize, e: &Event) -> Value {
    let r = &s.rooms[room];
    let now = r.events.store_now(s.clock.now_micros());
    let seen = r.events.seen();
    let seen = seen.as_ref().filter(|x| e.is(&x.id));
    let opened = seen.is_some_and(|x| x.opened_at.is_some());
    let phase = e.phase(now, opened).map_or("scheduled", |p| p.as_str());
    let source = if r.events.runtime_of(&e.name).is_some() {
        "runtime"
    } else {
        "config"
    };
    json!({
        "name": e.name,
        "prequeue_from": time::format_exact(e.prequeue_from, e.utc_offset),
        "opens_at": time::format_exact(e.opens_at, e.utc_offset),
        "closes_at": e.closes_at.map(|c| time::format_exact(c, e.utc_offset)),
        "draw": e.draw,
        "after_close": e.after_close.as_str(),
        "admit_per_second": e.admit_per_second,
        "max_active": e.max_active,
        "phase": phase,
        "opened_at": seen
            .and_then(|x| x.opened_at)
            .map(|o| time::format_exact(o, e.utc_offset)),
        "source": source,
        "registrations": seen.map_or(0, |x| x.registrations),
        "commitment": if e.draw && now >= e.prequeue_from { r.events.commitment(e) } else { None },
    })
}

pub async fn list(s: &Shared, room: usize) -> Response<Vec<u8>> {
    let r = &s.rooms[room];
    let schedule = r.events.schedule();
    let runtime = r.events.runtime();
    let cancelled: Vec<&String> = runtime
        .events
        .iter()
        .filter(|(_, rt)| rt.cancelled)
        .map(|(n, _)| n)
        .collect();
    let events: Vec<Value> = schedule.events.iter().map(|e| shown(s, room, e)).collect();
    json_reply(
        StatusCode::OK,
        &json!({
            "room": r.name(),
            "version": runtime.version,
            "events": events,
            "cancelled": cancelled,
        }),
    )
}

/// `POST` (`name` = `None`), `PATCH` or `DELETE` (`body` = `None`) of one event.
pub async fn change(
    s: &Shared,
    raw: &[u8],
    room: usize,
    name: Option<&str>,
    cancel: bool,
    who: &Caller,
) -> Response<Vec<u8>> {
    let r = &s.rooms[room];
    let body = if cancel {
        EventBody::default()
    } else {
        match super::api::json_object::<EventBody>(raw) {
            Ok(b) => b,
            Err(e) => return error(
                StatusCode::BAD_REQUEST,
                &format!("{e}; send a JSON object with name, opens_at and any of prequeue_from, closes_at, draw, after_close, admit_per_second, max_active"),
            ),
        }
    };
    if matches!(
        r.cfg.queueing,
        QueueMethod::Reject | QueueMethod::Passthrough
    ) {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "this room keeps no line (queueing = reject or passthrough): events need queueing = \"fifo\"",
        );
    }
    let mut conflict = None;
    for _ in 0..TRIES {
        let runtime = match s
            .store_call(
                "runtime_events",
                r.name(),
                s.store.runtime_events(&r.cfg.params),
            )
            .await
        {
            Ok(rt) => rt,
            Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
        };
        r.events.rebuild(&runtime);
        let schedule = r.events.schedule();
        // To the second: the times are shown to the second, so that what a GET shows can be
        // sent back in a PATCH unchanged.
        let now = r.events.store_now(s.clock.now_micros()) / 1_000_000 * 1_000_000;
        let target = name.or(body.name.as_deref()).unwrap_or("");
        let old = schedule.get(target).cloned();
        let (change, before) = match (name, &old, cancel) {
            (Some(_), None, _) => {
                return error(StatusCode::NOT_FOUND, &format!("no event named {target:?} in this room"))
            }
            (Some(_), Some(o), true) => (Runtime { event: None, cancelled: true }, Some(o)),
            // A change that changes nothing is answered as done and not written: written, it
            // would stand for the file's event for good, the file's later changes ignored, and
            // be recorded in the history as a change (found by review: an empty PATCH did both).
            (Some(_), Some(o), false) => match body.apply(Some(o), now) {
                Ok(e) if e == *o => {
                    return json_reply(
                        StatusCode::OK,
                        &json!({ "room": r.name(), "event": target, "cancelled": false, "now": shown(s, room, o), "version": runtime.version, "unchanged": true }),
                    )
                }
                Ok(e) => (Runtime { event: Some(e), cancelled: false }, Some(o)),
                Err(msg) => return error(StatusCode::UNPROCESSABLE_ENTITY, &msg),
            },
            (None, Some(_), _) => {
                return error(
                    StatusCode::CONFLICT,
                    &format!("the room has an event named {target:?}: change it with PATCH, or choose another name"),
                )
            }
            (None, None, _) => match body.apply(None, now) {
                Ok(e) => (Runtime { event: Some(e), cancelled: false }, None),
                Err(msg) => return error(StatusCode::UNPROCESSABLE_ENTITY, &msg),
            },
        };
        if let Some(e) = &change.event {
            // Other rooms' events as they run now (theirs from the file and at run time); this
            // room's own are not counted against it.
            let events_of = |i: usize| {
                s.rooms
                    .get(i)
                    .map_or_else(Vec::new, |o| o.events.schedule().events.clone())
            };
            // Their rates in force: an operator's pin admits above the file's (re-review).
            let rate_of = |i: usize| {
                s.rooms.get(i).map_or(0.0, |o| {
                    let own = o.cfg.params.admit_per_second;
                    o.live.rate_in_force().map_or(own, |r| r.max(own))
                })
            };
            let bound = crate::config::event_rate_bound(
                &s.config.rooms,
                &s.config.upstreams,
                room,
                e,
                &events_of,
                &rate_of,
                now,
            );
            if let (Some(rate), Some(bound)) = (e.admit_per_second, bound) {
                if rate > bound {
                    return error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        &format!("admit_per_second {rate} is more than the upstream's admit-per-second leaves this room ({bound}, after what the other rooms admit meanwhile): send at most {bound}"),
                    );
                }
            }
            if e.draw && r.cfg.queueing == QueueMethod::Random {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "this room lets its line in at random (queueing = \"random\"): a draw would change nothing; use draw = false",
                );
            }
            if e.draw && r.events.seed(e).is_none() {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "a draw needs [draw] secret in the config (to seed it): add it, or draw = false",
                );
            }
            if let Some(o) = &old {
                if let Some(p) =
                    schedule::frozen(o, e, now, runtime.opened(o) || r.events.recorded_open(o))
                {
                    return error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        &format!("{} {}; {}", p.field, p.what, p.fix),
                    );
                }
            }
            let mut proposed: Vec<Event> = schedule
                .events
                .iter()
                .filter(|x| x.name != e.name)
                .cloned()
                .collect();
            proposed.push(e.clone());
            if let Some(p) = schedule::check(&proposed).into_iter().next() {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &format!(
                        "event {:?}: {} {}; {}",
                        proposed[p.event].name, p.field, p.what, p.fix
                    ),
                );
            }
        }
        let before_json = before
            .and_then(|b| serde_json::to_value(b).ok())
            .unwrap_or(Value::Null);
        let actor = who.actor();
        match s
            .store_call(
                "change_event",
                r.name(),
                s.store.change_event(
                    &r.cfg.params,
                    target,
                    &change,
                    runtime.version,
                    &before_json,
                    &actor,
                ),
            )
            .await
        {
            Ok(EventChange::Done(version)) => {
                let mut next = runtime.clone();
                next.events.insert(target.to_string(), change.clone());
                next.version = version;
                r.events.rebuild(&next);
                tracing::info!(
                    room = r.name(),
                    event = target,
                    what = if cancel { "cancelled" } else if old.is_some() { "changed" } else { "added" },
                    by = who.label,
                    client = %who.addr,
                    change = actor.id,
                    "event changed through the admin API"
                );
                let status = if old.is_none() {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                let shown_event = change.event.as_ref().map(|e| shown(s, room, e));
                return json_reply(
                    status,
                    &json!({ "room": r.name(), "event": target, "cancelled": change.cancelled, "now": shown_event, "version": version }),
                );
            }
            Ok(EventChange::Conflict(now)) => conflict = Some(now.version),
            Ok(EventChange::OpeningRecorded) => {
                // Told as the check before the write tells it, the opening now recorded.
                let told = old
                    .as_ref()
                    .zip(change.event.as_ref())
                    .and_then(|(o, e)| schedule::frozen(o, e, now, true))
                    .map_or_else(
                        || "the event's opening was recorded meanwhile".to_string(),
                        |p| format!("{} {}; {}", p.field, p.what, p.fix),
                    );
                return error(StatusCode::UNPROCESSABLE_ENTITY, &told);
            }
            Err(e) => {
                return super::api::change_unsure(&e, r.name(), "an event change", who);
            }
        }
    }
    error(
        StatusCode::CONFLICT,
        &format!(
            "other changes of this room's events kept coming (version {}): try again",
            conflict.unwrap_or(0)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    #[test]
    fn a_body_adds_or_changes_an_event_and_a_past_start_begins_now() {
        let now = 1_803_860_000 * S;
        let add = EventBody {
            name: Some("drop".into()),
            opens_at: Some("2027-03-01T10:00:00+09:00".into()),
            draw: Some(true),
            ..Default::default()
        };
        let e = add.apply(None, now).unwrap();
        assert_eq!(e.opens_at, 1_803_862_800 * S);
        // Left out, the start is now: not for an opening past, nor more than a day away.
        let at = |opens: &str| EventBody {
            opens_at: Some(opens.into()),
            ..add.clone()
        };
        let refused = at("2027-02-28T10:00:00+09:00")
            .apply(None, now)
            .unwrap_err();
        assert!(refused.contains("already past"), "{refused}");
        let refused = at("2027-03-03T10:00:00+09:00")
            .apply(None, now)
            .unwrap_err();
        assert!(refused.contains("for 48 hours"), "{refused}");
        let mut given = at("2027-03-03T10:00:00+09:00");
        given.prequeue_from = Some("2027-03-02T10:00:00+09:00".into());
        assert!(given.apply(None, now).is_ok(), "a start given");
        assert_eq!(
            e.prequeue_from, now,
            "no start given: the pre-queue begins now"
        );
        assert_eq!(e.utc_offset, 9 * 3600);
        let past = EventBody {
            prequeue_from: Some("2020-01-01T00:00:00Z".into()),
            ..add
        };
        assert_eq!(past.apply(None, now).unwrap().prequeue_from, now);
        let later = EventBody {
            closes_at: Some(Some("2027-03-01T12:00:00+09:00".into())),
            admit_per_second: Some(Some(50.0)),
            ..Default::default()
        };
        let changed = later.apply(Some(&e), now).unwrap();
        assert_eq!(changed.closes_at, Some(1_803_870_000 * S));
        assert_eq!(changed.admit_per_second, Some(50.0));
        assert_eq!(changed.prequeue_from, e.prequeue_from);
        let unclose = EventBody {
            closes_at: Some(None),
            ..Default::default()
        };
        assert_eq!(unclose.apply(Some(&changed), now).unwrap().closes_at, None);
        assert!(EventBody {
            name: Some("other".into()),
            ..Default::default()
        }
        .apply(Some(&e), now)
        .is_err());
        assert!(EventBody {
            opens_at: Some("10:00".into()),
            ..Default::default()
        }
        .apply(Some(&e), now)
        .unwrap_err()
        .contains("RFC 3339"));
    }
}
