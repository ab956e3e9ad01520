//! The Redis side of events: what join and admit carry of them, and the runtime changes and the
//! draw's list (`lua/events.lua`, `lua/change_event.lua`, `lua/draw_list.lua`).

use ::redis::{ScriptInvocation, Value};

use super::history::actor_args;
use super::keys::Keys;
use super::reply::at;
use super::{unavailable, RedisStore};
use crate::event::draw::{RegTicket, TICKET_LEN};
use crate::event::schedule::Runtime;
use crate::store::history::Actor;
use crate::store::{EventChange, EventsArg, JoinContext, RoomParams, RuntimeEvents, StoreError};

/// The key of an event's draw list (`event`: its id, [`crate::event::Event::id`]).
pub(super) fn draw_key(room: &str, event: &str) -> String {
    format!("{{anteroom:{room}}}:drawn:{event}")
}

/// A join's events: the list's keys (KEYS[8..]), the events (ARGV[14]), the visitor's draw
/// in each (ARGV[15..]) and, after them, the version of the runtime changes they come from and
/// whether the caller is unsettled after an outage ([`JoinContext::unsettled`]).
pub(super) fn join_args(inv: &mut ScriptInvocation<'_>, room: &str, ctx: &JoinContext<'_>) {
    if let Some(events) = ctx.events.filter(|e| !e.is_empty()) {
        inv.arg(&events.lua);
        for (i, e) in events.events.iter().enumerate() {
            inv.key(draw_key(room, &e.id()));
            match ctx.draws.get(i).copied().flatten() {
                Some(d) => inv.arg(d.key).arg(&d.ticket[..]),
                None => inv.arg("").arg(""),
            };
        }
    } else {
        inv.arg("");
    }
    match ctx.events_version {
        Some(v) => inv.arg(v),
        None => inv.arg(""),
    };
    inv.arg(if ctx.unsettled { "1" } else { "" });
}

/// An admit's events: ARGV[24] and their version ARGV[25] (before the liveness batch), and the
/// lists' keys (KEYS[10..]). The version goes also with no events near now: an instance that
/// has not read the store's runtime changes says so, and its events are not counted against
/// the others' (found by re-review r108a: the file-only window of one that could not read them
/// held the room on every instance).
pub(super) fn admit_args(inv: &mut ScriptInvocation<'_>, room: &str, events: Option<&EventsArg>) {
    match events {
        None => {
            inv.arg("").arg("");
        }
        Some(events) => {
            inv.arg(if events.is_empty() {
                ""
            } else {
                events.lua.as_str()
            });
            match events.version {
                Some(v) => inv.arg(v),
                None => inv.arg(""),
            };
            for e in &events.events {
                inv.key(draw_key(room, &e.id()));
            }
        }
    }
}

/// `{ version, name, json, ... }` from `from` on.
fn runtime_of(
    v: &[Value],
    from: usize,
    op: &'static str,
    room: &str,
) -> Result<RuntimeEvents, StoreError> {
    runtime_at(v, from, None, op, room)
}

/// [`runtime_of`] with the id of the opened event at `opened` (the definitions after it).
fn runtime_at(
    v: &[Value],
    from: usize,
    opened: Option<usize>,
    op: &'static str,
    room: &str,
) -> Result<RuntimeEvents, StoreError> {
    let version: u64 = at(v, from, op, room)?;
    let (opened, mut i) = match opened {
        Some(o) => (
            Some(at::<String>(v, o, op, room)?).filter(|id| !id.is_empty()),
            o + 1,
        ),
        None => (None, from + 1),
    };
    let mut events = std::collections::BTreeMap::new();
    while i + 1 < v.len() {
        let name: String = at(v, i, op, room)?;
        let json: String = at(v, i + 1, op, room)?;
        // A definition this version cannot read is left out, not an error for the room.
        if let Ok(r) = serde_json::from_str::<Runtime>(&json) {
            events.insert(name, r);
        }
        i += 2;
    }
    Ok(RuntimeEvents {
        version,
        events,
        opened,
    })
}

impl RedisStore {
    pub(super) async fn runtime_events_call(
        &self,
        p: &RoomParams,
    ) -> Result<RuntimeEvents, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.events.prepare_invoke();
        inv.key(&k.events).key(&k.room);
        let v: Vec<Value> = self.run("events", &p.name, &inv).await?;
        runtime_at(&v, 0, Some(1), "events", &p.name)
    }

    pub(super) async fn change_event_call(
        &self,
        p: &RoomParams,
        name: &str,
        change: &Runtime,
        version: u64,
        before: &serde_json::Value,
        by: &Actor,
    ) -> Result<EventChange, StoreError> {
        let k = Keys::of(&p.name);
        let json =
            serde_json::to_string(change).map_err(|e| unavailable("change_event", &p.name, e))?;
        let mut inv = self.scripts.change_event.prepare_invoke();
        inv.key(&k.events)
            .key(&k.room)
            .key(&k.history)
            .arg(name)
            .arg(json)
            .arg(version)
            .arg(before.to_string());
        actor_args(&mut inv, Some(by));
        let v: Vec<Value> = self.run("change_event", &p.name, &inv).await?;
        let done: i64 = at(&v, 0, "change_event", &p.name)?;
        if done == 1 {
            return Ok(EventChange::Done(at(&v, 1, "change_event", &p.name)?));
        }
        if done == 2 {
            return Ok(EventChange::OpeningRecorded);
        }
        Ok(EventChange::Conflict(runtime_of(
            &v,
            1,
            "change_event",
            &p.name,
        )?))
    }

    pub(super) async fn draw_list_call(
        &self,
        p: &RoomParams,
        event: &str,
        from: u64,
        count: u64,
    ) -> Result<Vec<RegTicket>, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.draw_list.prepare_invoke();
        inv.key(draw_key(&p.name, event))
            .key(&k.room)
            .arg(from)
            .arg(count.max(1));
        let v: Vec<Vec<u8>> = self.run("draw_list", &p.name, &inv).await?;
        v.into_iter()
            .map(|t| {
                RegTicket::try_from(t.as_slice()).map_err(|_| {
                    unavailable(
                        "draw_list",
                        &p.name,
                        format!("a registration ticket is not {TICKET_LEN} bytes"),
                    )
                })
            })
            .collect()
    }
}
