//! What a visitor who is not let in is told: their place in line as a [`Status`], and the
//! waiting response (HTML or JSON) that carries it.

use bytes::Bytes;
use pingora::proxy::Session;
use pingora::Result;

use super::respond::{Reply, HTML, JSON};
use super::{wants_json, Ctx, Outcome, Proxy};
use crate::app::Shared;
use crate::line::accuracy;
use crate::line::forecast::HeldBy;
use crate::line::Ticket;
use crate::metrics::Reject;
use crate::page::{self, State, Status};
use crate::store::VisitorId;

impl Proxy {
    /// "On hold, keep polling", with no place: what a visitor is told while the store cannot
    /// be asked and the room lets nobody in meanwhile.
    pub(super) fn on_hold(shared: &Shared, room: usize) -> Status {
        let r = &shared.rooms[room];
        Status {
            room: r.name().to_string(),
            state: State::Paused,
            position: None,
            waiting: r.live.waiting(),
            eta_seconds: None,
            eta_low_seconds: None,
            eta_high_seconds: None,
            retry_after_ms: page::poll_interval(&r.cfg.poll, u64::MAX).as_millis() as u64,
            // Held by the store's absence, not "not in line" (found by review: a visitor in
            // line was told `null`, as if they had no place).
            held_by: Some(HeldBy::Store.as_str()),
            event: None,
            placed_by: None,
        }
    }

    /// What a visitor in line is told.
    pub(super) fn in_line_status(
        shared: &Shared,
        room: usize,
        position: u64,
        waiting: u64,
        eta_rate: f64,
        paused: bool,
    ) -> Status {
        let r = &shared.rooms[room];
        let tiers = &r.cfg.poll;
        // The line is at least as long as the place shown: a ticket's place never goes up,
        // while a snapshot's count does go down (found by review r85c: during a Redis stall,
        // `position: 305` of `waiting: 303`).
        let waiting = waiting.max(position);
        // Drawn at random, a visitor has no place: each admission is anyone's, and the wait is
        // that of the middle of the line.
        let random = r.cfg.params.queueing == crate::store::Queueing::Random;
        let (shown, position) = if random {
            (None, waiting.div_ceil(2).max(1))
        } else {
            (Some(position), position)
        };
        if paused {
            return Status {
                room: r.name().to_string(),
                state: State::Paused,
                position: shown,
                waiting,
                eta_seconds: None,
                eta_low_seconds: None,
                eta_high_seconds: None,
                retry_after_ms: page::poll_interval(tiers, position).as_millis() as u64,
                held_by: Some(HeldBy::Paused.as_str()),
                event: None,
                placed_by: None,
            };
        }
        // The ETA is `predicted_wait`'s, a range when it is poor; the next poll aims at the
        // soonest the turn can come, at the rate in force. A poll timed by the measured rate
        // comes late whenever the measurement lags the rate (the start of a sale, a rate just
        // raised): visitors then learn of their turn late, and together (issue 15).
        let soonest = r.live.rate_in_force().unwrap_or(0.0).max(eta_rate);
        let held = r.live.held_by();
        let eta_seconds =
            Self::predicted_wait(shared, room, position, eta_rate).map(|w| w.ceil() as u64);
        let range = eta_seconds.and_then(|e| accuracy::range_of(e, r.line.band.get()));
        Status {
            room: r.name().to_string(),
            state: State::Waiting,
            position: shown,
            waiting,
            eta_seconds,
            eta_low_seconds: range.map(|(lo, _)| lo),
            eta_high_seconds: range.map(|(_, hi)| hi),
            retry_after_ms: page::poll_for_turn(
                tiers,
                position,
                soonest,
                page::poll_floor(r.cfg.params.tick),
            )
            .as_millis() as u64,
            // A visitor in line is held by something: the rate, unless the last tick said more.
            held_by: Some(held.unwrap_or(HeldBy::Rate).as_str()),
            event: None,
            placed_by: None,
        }
    }

    /// A status of a room with events tells the event in force (and a registrant's ticket).
    pub(super) fn in_line_with_event(
        shared: &Shared,
        room: usize,
        vid: VisitorId,
        ticket: Option<&Ticket>,
        status: Status,
    ) -> Status {
        let events = &shared.rooms[room].events;
        // A room whose only event was cancelled may still hold its draw's places.
        if !events.any() && events.line_draw().is_none() {
            return status;
        }
        Self::with_event(
            shared,
            room,
            status,
            vid,
            ticket.filter(|t| t.drawn).map(|t| t.place.epoch),
        )
    }

    pub(super) async fn send_wait(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        status: &Status,
    ) -> Result<()> {
        let r = &shared.rooms[room];
        let json = wants_json(session.req_header());
        let code = if status.state == State::Full {
            503
        } else {
            r.cfg.waiting_status
        };
        let (content_type, body) = if json {
            (
                JSON,
                Bytes::from(serde_json::to_vec(status).unwrap_or_default()),
            )
        } else {
            let (lang, room_texts) = super::request::words(shared, session, room);
            // An event with its own texts speaks them while it runs.
            let own = status
                .event
                .as_ref()
                .and_then(|e| r.cfg.event_pages.get(&e.name))
                .and_then(|p| p.texts.get(lang));
            let texts = own.or(room_texts).or_else(|| r.cfg.texts.values().next());
            let empty = crate::texts::TextSet::new();
            (
                HTML,
                Bytes::from(shared.pages.waiting(
                    room,
                    status,
                    lang,
                    texts.unwrap_or(&empty),
                    (
                        &super::request::page_url(session.req_header()),
                        super::method::is_form(session.req_header()),
                    ),
                )),
            )
        };
        if status.state == State::Full {
            ctx.outcome = Outcome::Reject;
            ctx.reject = Some(Reject::Full);
        } else {
            ctx.outcome = Outcome::Wait;
        }
        Reply {
            status: code,
            content_type,
            body,
            retry_after: Some(status.retry_after_secs()),
            cookies: &ctx.set_cookies,
        }
        .send(session)
        .await
    }
}
