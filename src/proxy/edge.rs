//! Status polls and waiting pages answered at the edge: a visitor in line with a valid queue
//! ticket is told their place from this instance's snapshot of the line (see [`crate::line`]),
//! without a store call; the store is asked when the ticket's place may have reached the head.

use pingora::http::RequestHeader;

use super::{cookie_values, secure, Ctx, Proxy, Verdict};
use crate::app::Shared;
use crate::cookie;
use crate::line::{self, ticket, Edge, Ticket};
use crate::store::{Admission, VisitorId};

impl Proxy {
    /// The visitor's queue ticket for this room: only one that verifies and names them.
    pub(super) fn ticket(
        shared: &Shared,
        req: &RequestHeader,
        room: usize,
        vid: VisitorId,
    ) -> Option<Ticket> {
        let r = &shared.rooms[room];
        let value = cookie::find(cookie_values(req), &r.ticket_cookie)?;
        ticket::verify(&shared.config.cookie.keys, r.name(), value).filter(|t| t.vid == vid)
    }

    /// The answer from the snapshot, when the ticket allows one (`None`: ask the store).
    pub(super) fn answer_at_edge(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        t: &Ticket,
    ) -> Option<Verdict> {
        let r = &shared.rooms[room];
        let now = shared.clock.now_secs();
        let snapshot = r.line.snapshot();
        let Edge::Answer {
            position,
            waiting,
            paused,
            eta_rate,
            refresh,
        } = line::decide(snapshot.as_deref(), t, now, r.cfg.params.abandon_after)
        else {
            return None;
        };
        let mut next = Ticket {
            shown: position,
            ..*t
        };
        if refresh && r.line.seen.note(t.vid, t.place) {
            next.seen = now;
        }
        if next != *t {
            Self::give_ticket(shared, ctx, room, &next);
        }
        r.metrics.polls_edge.inc();
        Some(Verdict::Wait(Self::in_line_status(
            shared, room, position, waiting, eta_rate, paused,
        )))
    }

    /// After the store answered: a visitor in line gets (or renews) a ticket for their place,
    /// showing no more than their old ticket did for the same place; one who left the line has
    /// theirs removed. Returns the position to show.
    pub(super) fn ticket_after_join(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        old: Option<&Ticket>,
        joined: &Admission,
    ) -> Option<u64> {
        let r = &shared.rooms[room];
        match joined {
            Admission::Waiting {
                position, place, ..
            }
            | Admission::Paused {
                position, place, ..
            } => {
                r.metrics.polls_store.inc();
                let shown = old
                    .filter(|t| t.place == *place)
                    .map_or(*position, |t| t.shown.clamp(1, *position));
                let t = Ticket {
                    vid,
                    place: *place,
                    seen: shared.clock.now_secs(),
                    shown,
                };
                Self::give_ticket(shared, ctx, room, &t);
                Some(shown)
            }
            Admission::Admitted | Admission::Entered if old.is_some() => {
                ctx.set_cookies.push(cookie::set_named(
                    &r.ticket_cookie,
                    "",
                    0,
                    secure(shared, ctx),
                ));
                None
            }
            _ => None,
        }
    }

    fn give_ticket(shared: &Shared, ctx: &mut Ctx, room: usize, t: &Ticket) {
        let r = &shared.rooms[room];
        if let Some(value) = ticket::sign(&shared.config.cookie.keys, r.name(), t) {
            let secure = secure(shared, ctx);
            ctx.set_cookies.retain(|c| !c.starts_with(&r.ticket_cookie));
            ctx.set_cookies.push(cookie::set_named(
                &r.ticket_cookie,
                &value,
                cookie::VID_MAX_AGE_SECS,
                secure,
            ));
        }
    }
}
