//! The admission loop's part in a room's events: the tick passes the events near now (the
//! store decides the one in force by its clock), learns what the store said of it, reads the
//! runtime changes again when their version moved, and, once a draw is revealed, reads its list
//! (in pages, in the background: never a long store call, never on the request path).

use std::sync::Arc;

use crate::app::Shared;
use crate::event::draw::RegTicket;
use crate::event::live::DrawList;
use crate::store::history::Actor;
use crate::store::{AdmitReport, EventChange, EventsArg, RuntimeEvents};

/// Registrations read per call of the draw's list.
const LIST_PAGE: u64 = 5_000;

/// The events this tick passes to the store (`None` for a room without events).
pub fn prepare(shared: &Shared, room: usize) -> Option<EventsArg> {
    shared.rooms[room]
        .events
        .tick_args(shared.clock.now_micros())
}

/// The commitments of the drawn events `events` holds, "ID HEX\n" each (the first 16 hex
/// digits of each commitment): the store keeps the one an event's pre-queue began with, and a
/// tick whose commitment is another places nobody in the draw (lua/admit.lua, 'draw_commit').
pub fn commitments(shared: &Shared, room: usize, events: Option<&EventsArg>) -> String {
    let Some(events) = events else {
        return String::new();
    };
    let r = &shared.rooms[room].events;
    let mut out = String::new();
    for e in events.events.iter().filter(|e| e.draw) {
        if let Some(c) = r.own_commitment(e) {
            out.push_str(&e.id());
            out.push(' ');
            out.push_str(&c[..16.min(c.len())]);
            out.push('\n');
        }
    }
    out
}

/// What a tick's report says of the room's events.
pub async fn learn(shared: &Arc<Shared>, room: usize, report: &AdmitReport) {
    let r = &shared.rooms[room];
    if r.events.note_recommitted(report.draw_recommitted) {
        if report.draw_recommitted {
            tracing::error!(
                room = r.name(),
                "the draw of the event in force was committed to under another [draw] secret than this instance's: nobody is placed in it through this room's instances meanwhile, and this instance publishes no commitment; start it with the secret the pre-queue began with (or cancel the event and add it again, which draws anew)"
            );
        } else {
            tracing::info!(
                room = r.name(),
                "this instance's draw commitment is the one the pre-queue began with again"
            );
        }
    }
    let moved = r.events.learn(
        report.event.as_ref(),
        report.line_draw.as_ref(),
        report.store_now,
        report.events_version,
        shared.clock.now_micros(),
    );
    let known = r.events.runtime();
    // The store lost the room's data since this instance last heard from it (a new store
    // generation): the runtime changes known here that the store has none of by name are
    // written back, as the room's state is re-asserted, and the store's are read again. Its
    // count of changes starts again, so counts are never compared across a loss: a change made
    // since (through another instance) can carry the number of one made before. Compared, two
    // instances held different events under one number for good (the room admitted nobody),
    // and an instance that came back late wrote its older events over a cancel or a move made
    // since the loss (both found by re-review).
    let lost = r.events.note_generation(&report.generation);
    if lost && !known.events.is_empty() {
        reassert(shared, room, &known, &report.generation).await;
    }
    if moved || lost {
        match shared
            .store_call(
                "runtime_events",
                r.name(),
                shared.store.runtime_events(&r.cfg.params),
            )
            .await
        {
            Ok(runtime) => {
                for w in r.events.rebuild(&runtime) {
                    tracing::warn!(room = r.name(), "{w}");
                }
                r.events.note_read(true, shared.clock.now_micros());
            }
            Err(e) => {
                shared.warn_store_error(&e);
                r.events.note_read(!moved, shared.clock.now_micros());
            }
        }
    } else {
        r.events.note_read(true, shared.clock.now_micros());
    }
    // The list of a draw that opened is read once (this tick's event), and of any other a
    // request asked for (an older event, by name); lists are known by the event's id.
    let schedule = r.events.schedule();
    let mut wanted = r.events.take_wanted();
    if let Some(seen) = report.event.as_ref().filter(|s| s.opened_at.is_some()) {
        wanted.push(seen.id.clone());
    }
    // A draw whose order is out and whose event was cancelled: its list is read as an opened
    // one's (its registrants go in by it).
    let out = report.line_draw.as_ref().filter(|d| d.out);
    if let Some(d) = out {
        wanted.push(d.id.clone());
    }
    for name in wanted {
        let draws = schedule.events.iter().any(|e| e.draw && e.is(&name))
            || out.is_some_and(|d| d.id == name);
        if !draws || r.events.list(&name).is_some() {
            continue;
        }
        // Marked as being read: one reading per instance and event; a failed one is forgotten,
        // and read again when asked for.
        r.events.set_list(DrawList::reading(name.clone()));
        let shared = shared.clone();
        tokio::spawn(async move {
            let r = &shared.rooms[room];
            match read_list(&shared, room, &name).await {
                Ok(tickets) => {
                    tracing::info!(
                        room = r.name(),
                        event = name.as_str(),
                        registrations = tickets.len(),
                        "the draw's list is read: served at /.anteroom/event"
                    );
                    r.events.set_list(DrawList::read(name, tickets));
                }
                Err(e) => {
                    shared.warn_store_error(&e);
                    r.events.clear_list(&name);
                }
            }
        });
    }
}

/// Writes the runtime event changes this instance knew back into a store that lost them: those
/// the store has no change of by that name (one made there since the loss, through another
/// instance or written back by one, is kept).
async fn reassert(shared: &Shared, room: usize, known: &RuntimeEvents, generation: &str) {
    let r = &shared.rooms[room];
    let now = match shared
        .store_call(
            "runtime_events",
            r.name(),
            shared.store.runtime_events(&r.cfg.params),
        )
        .await
    {
        Ok(now) => now,
        Err(e) => {
            shared.warn_store_error(&e);
            // Not read: looked at again at the next tick.
            r.events.forget_generation();
            return;
        }
    };
    let mut version = now.version;
    let missing: Vec<_> = known
        .events
        .iter()
        .filter(|(name, _)| !now.events.contains_key(*name))
        .collect();
    if missing.is_empty() {
        return;
    }
    for (name, change) in missing {
        let by = Actor {
            id: format!("reassert-{generation}-{name}"),
            by: "anteroom (re-asserted after the store lost its data)".into(),
            client: "-".into(),
        };
        match shared
            .store_call(
                "change_event",
                r.name(),
                shared.store.change_event(
                    &r.cfg.params,
                    name,
                    change,
                    version,
                    &serde_json::Value::Null,
                    &by,
                ),
            )
            .await
        {
            Ok(EventChange::Done(v)) => version = v,
            // Changed meanwhile, or not written: the store's changes are looked at again at
            // the next tick.
            Ok(EventChange::Conflict(_) | EventChange::OpeningRecorded) => {
                r.events.forget_generation();
                return;
            }
            Err(e) => {
                shared.warn_store_error(&e);
                r.events.forget_generation();
                return;
            }
        }
    }
    tracing::warn!(
        room = r.name(),
        events = known.events.len(),
        "the store lost this room's runtime event changes: re-asserted the ones this instance knew"
    );
}

async fn read_list(
    shared: &Shared,
    room: usize,
    event: &str,
) -> Result<Vec<RegTicket>, crate::store::StoreError> {
    let r = &shared.rooms[room];
    let mut all = Vec::new();
    loop {
        let page = shared
            .store_call(
                "draw_list",
                r.name(),
                shared
                    .store
                    .draw_list(&r.cfg.params, event, all.len() as u64, LIST_PAGE),
            )
            .await?;
        let last = (page.len() as u64) < LIST_PAGE;
        all.extend(page);
        if last {
            return Ok(all);
        }
    }
}
