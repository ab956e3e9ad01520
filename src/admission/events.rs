//! The admission loop's part in a room's events: the tick passes the events near now (the
//! store decides the one in force by its clock), learns what the store said of it, reads the
//! runtime changes again when their version moved, and, once a draw is revealed, reads its list
//! (in pages, in the background: never a long store call, never on the request path).

use std::sync::Arc;

use crate::app::Shared;
use crate::event::draw::RegTicket;
use crate::event::live::DrawList;
use crate::store::{AdmitReport, EventsArg};

/// Registrations read per call of the draw's list.
const LIST_PAGE: u64 = 5_000;

/// The events this tick passes to the store (`None` for a room without events).
pub fn prepare(shared: &Shared, room: usize) -> Option<EventsArg> {
    shared.rooms[room]
        .events
        .tick_args(shared.clock.now_micros())
}

/// What a tick's report says of the room's events.
pub async fn learn(shared: &Arc<Shared>, room: usize, report: &AdmitReport) {
    let r = &shared.rooms[room];
    let moved = r.events.learn(
        report.event.as_ref(),
        report.store_now,
        report.events_version,
        shared.clock.now_micros(),
    );
    if moved {
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
            }
            Err(e) => shared.warn_store_error(&e),
        }
    }
    let Some(seen) = &report.event else {
        return;
    };
    let draws = r.events.schedule().get(&seen.name).is_some_and(|e| e.draw);
    let loaded = r.events.list().is_some_and(|l| l.event == seen.name);
    if draws && seen.opened_at.is_some() && !loaded {
        // One reading per instance and event; a failed one is tried at a later tick.
        let name = seen.name.clone();
        r.events.set_list(DrawList {
            event: name.clone(),
            tickets: Arc::new(Vec::new()),
        });
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
                    r.events.set_list(DrawList {
                        event: name,
                        tickets: Arc::new(tickets),
                    });
                }
                Err(e) => {
                    shared.warn_store_error(&e);
                    r.events.clear_list();
                }
            }
        });
    }
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
