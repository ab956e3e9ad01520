//! `GET /.anteroom/event?room=NAME[&event=EVENT][&tickets=1]`: what a room publishes of an
//! event, for anyone to check its draw with `anteroom verify-draw`.
//!
//! The commitment (`sha256(seed)`) from the start of the pre-queue; the seed once the store has
//! seen the event open; with `tickets=1`, the draw's list of registration tickets in the draw's
//! order, read from the store once per instance after the opening and served from memory.

use bytes::Bytes;
use pingora::proxy::Session;
use pingora::Result;
use serde::Serialize;

use super::respond::{json_error, Reply, JSON};
use super::Ctx;
use crate::app::Shared;
use crate::event::live::{CancelledDraw, DrawList};
use crate::event::{draw, time, Event, Phase};

/// The event document (the list is added after it, as `tickets`).
#[derive(Debug, Serialize)]
pub struct Published<'a> {
    pub room: &'a str,
    pub event: &'a str,
    pub prequeue_from: String,
    pub opens_at: String,
    pub closes_at: Option<String>,
    /// "scheduled" (before the pre-queue), "prequeue", "open" or "closed".
    pub phase: &'static str,
    pub draw: bool,
    pub commitment: Option<String>,
    pub seed: Option<String>,
    /// Registrations in the draw: as the last tick counted them, the list's length once read.
    pub registrations: u64,
    /// Where the list is, once the seed is revealed.
    pub tickets_url: Option<String>,
}

fn reply(status: u16, body: Bytes) -> Reply<'static> {
    Reply {
        status,
        content_type: JSON,
        body,
        retry_after: (status == 503).then_some(1),
        cookies: &[],
    }
}

/// The event a request names, else the one in force, else the next to come, else the last.
fn chosen<'a>(
    events: &'a [Event],
    name: Option<&str>,
    now: u64,
    opened: Option<&str>,
) -> Option<&'a Event> {
    if let Some(n) = name {
        return events.iter().find(|e| e.name == n || e.is(n));
    }
    crate::event::current(events, now, opened)
        .map(|(_, e, _)| e)
        .or_else(|| events.iter().find(|e| e.prequeue_from > now))
        .or_else(|| events.last())
}

pub(super) async fn serve(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut Ctx,
    room: usize,
) -> Result<()> {
    let r = &shared.rooms[room];
    let query = session.req_header().uri.query();
    // Decoded: an event's id holds `@`, which URL encoders write `%40` (found by review).
    let name = crate::route::query_param(query, "event").map(crate::route::query_decoded);
    let name = name.as_deref();
    let want_tickets = crate::route::query_param(query, "tickets") == Some("1");
    let schedule = r.events.schedule();
    let seen = r.events.seen();
    let now = r.events.store_now(shared.clock.now_micros());
    let opened = seen
        .as_ref()
        .filter(|s| s.opened_at.is_some())
        .map(|s| s.id.as_str());
    // A cancelled event's draw whose places the line holds is published while it does: asked
    // for by its id (or its name, when no event in force has that name), and the room's
    // document while no event is in force. Before (found by review), the registrants went in
    // by a draw nobody could check.
    let cancelled = r.events.cancelled_draw().filter(|c| match name {
        Some(n) => n == c.id || (n == c.name && schedule.get(n).is_none()),
        None => crate::event::current(&schedule.events, now, opened).is_none(),
    });
    if let Some(c) = cancelled {
        return serve_cancelled(r, session, ctx, &c, want_tickets).await;
    }
    let Some(e) = chosen(&schedule.events, name, now, opened) else {
        return reply(
            404,
            json_error("no such event: this room has none by that name"),
        )
        .send(session)
        .await;
    };
    let seen = seen.as_ref().filter(|s| e.is(&s.id));
    let revealed = r.events.revealed(e);
    let phase = match e.phase(now, revealed) {
        None => "scheduled",
        Some(Phase::Prequeue) if revealed => "open",
        Some(p) => p.as_str(),
    };
    let seed = if e.draw {
        r.events.published_seed(e)
    } else {
        None
    };
    let list = r.events.list(&e.id()).filter(|_| revealed && e.draw);
    if want_tickets && revealed && e.draw && list.is_none() {
        // An older event's list (or one this instance has not read yet): the next tick reads it.
        r.events.want_list(&e.id());
    }
    let listed = list.as_ref().filter(|l| !l.reading);
    let doc = Published {
        room: r.name(),
        event: &e.name,
        prequeue_from: time::format_exact(e.prequeue_from, e.utc_offset),
        opens_at: time::format_exact(e.opens_at, e.utc_offset),
        closes_at: e.closes_at.map(|c| time::format_exact(c, e.utc_offset)),
        phase,
        draw: e.draw,
        commitment: seed
            .filter(|_| now >= e.prequeue_from || revealed)
            .map(|s| draw::commitment(&s)),
        seed: seed.filter(|_| revealed).map(|s| draw::hex(&s)),
        registrations: listed.map_or(seen.map_or(0, |s| s.registrations), |l| {
            l.tickets.len() as u64
        }),
        tickets_url: (e.draw && revealed).then(|| {
            format!(
                "/.anteroom/event?room={}&event={}&tickets=1",
                r.name(),
                e.name
            )
        }),
    };
    let not_yet = "the draw's list is published at the opening";
    send(
        session,
        ctx,
        &doc,
        want_tickets.then_some(listed),
        revealed,
        not_yet,
    )
    .await
}

/// Sends a document, with the draw's list when asked for (`tickets`: `Some` of the list if
/// read): `503` while a revealed draw's list is being read, else `404` with `not_yet`.
async fn send<T: Serialize>(
    session: &mut Session,
    ctx: &mut Ctx,
    doc: &T,
    tickets: Option<Option<&DrawList>>,
    revealed: bool,
    not_yet: &str,
) -> Result<()> {
    let mut body = serde_json::to_vec(doc).unwrap_or_default();
    if let Some(listed) = tickets {
        let Some(list) = listed else {
            let why = if revealed {
                "the draw's list is being read: ask again in a second"
            } else {
                not_yet
            };
            return reply(if revealed { 503 } else { 404 }, json_error(why))
                .send(session)
                .await;
        };
        // The document with `tickets` added: `{..., "tickets": ["hex", ...]}` (the array built
        // once, when the list was read).
        body.pop();
        body.extend_from_slice(b",\"tickets\":");
        body.extend_from_slice(&list.json);
        body.push(b'}');
    }
    ctx.outcome = super::Outcome::Status;
    reply(200, Bytes::from(body)).send(session).await
}

/// The document of a cancelled event's draw ([`crate::event::live::CancelledDraw`]).
#[derive(Debug, Serialize)]
struct Cancelled<'a> {
    room: &'a str,
    event: &'a str,
    /// The event's id (`NAME@PREQUEUE_FROM`, µs): another event of its name may be in force.
    id: &'a str,
    prequeue_from: String,
    /// "cancelled".
    phase: &'static str,
    draw: bool,
    commitment: String,
    /// Once its order is out (the store has left its pre-queue for good).
    seed: Option<String>,
    /// The list's length once read (`null` before).
    registrations: Option<u64>,
    tickets_url: Option<String>,
}

async fn serve_cancelled(
    r: &crate::room::Room,
    session: &mut Session,
    ctx: &mut Ctx,
    c: &CancelledDraw,
    want_tickets: bool,
) -> Result<()> {
    let list = r.events.list(&c.id).filter(|_| c.out);
    if c.out && list.is_none() {
        r.events.want_list(&c.id);
    }
    let listed = list.as_ref().filter(|l| !l.reading);
    let doc = Cancelled {
        room: r.name(),
        event: &c.name,
        id: &c.id,
        prequeue_from: time::format_exact(c.prequeue_from, 0),
        phase: "cancelled",
        draw: true,
        commitment: draw::commitment(&c.seed),
        seed: c.out.then(|| draw::hex(&c.seed)),
        registrations: listed.map(|l| l.tickets.len() as u64),
        tickets_url: c.out.then(|| {
            format!(
                "/.anteroom/event?room={}&event={}&tickets=1",
                r.name(),
                c.id
            )
        }),
    };
    let not_yet = "the draw's list is published once its order is out";
    send(
        session,
        ctx,
        &doc,
        want_tickets.then_some(listed),
        c.out,
        not_yet,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::AfterClose;

    fn ev(name: &str, pre: u64, open: u64) -> Event {
        Event {
            name: name.into(),
            prequeue_from: pre,
            opens_at: open,
            closes_at: Some(open + 10),
            draw: true,
            after_close: AfterClose::Keep,
            admit_per_second: None,
            max_active: None,
            utc_offset: 0,
        }
    }

    #[test]
    fn a_request_gets_the_event_it_names_else_the_one_in_force_else_the_next() {
        let events = vec![ev("a", 100, 200), ev("b", 400, 500)];
        let name = |n, now| chosen(&events, n, now, None).map(|e| e.name.clone());
        assert_eq!(name(Some("b"), 150), Some("b".into()));
        assert_eq!(name(Some("zz"), 150), None);
        assert_eq!(name(None, 150), Some("a".into()));
        assert_eq!(name(None, 50), Some("a".into()), "the next to come");
        assert_eq!(
            name(None, 300),
            Some("a".into()),
            "closed, and still in force"
        );
        assert_eq!(name(None, 450), Some("b".into()));
        // By its id too (the name and the pre-queue's start), never another start's.
        assert_eq!(name(Some("b@400"), 150), Some("b".into()));
        assert_eq!(name(Some("b@401"), 150), None);
    }
}
