//! Status polls and waiting pages answered at the edge: a visitor in line with a valid queue
//! ticket is told their place from this instance's snapshot of the line (see [`crate::line`]),
//! without a store call; the store is asked when the ticket's place may have reached the head.
//! The ticket also carries the first wait the visitor was told, measured against the wait they
//! had when they are admitted (see [`crate::line::accuracy`]).

use super::{secure, Ctx, Proxy, Verdict};
use crate::app::Shared;
use crate::cookie;
use crate::event::Phase;
use crate::line::ticket::{self, Predicted};
use crate::line::{self, forecast, Edge, Ticket};
use crate::store::{Admission, VisitorId};

impl Proxy {
    /// The answer from the snapshot, when the ticket allows one (`None`: ask the store).
    pub(super) fn answer_at_edge(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        t: &Ticket,
    ) -> Option<Verdict> {
        let r = &shared.rooms[room];
        // A random draw is not in place-key order: the snapshot's head says nothing of who was
        // let in, so every poll asks the store (one call, as before edge answers); nor while a
        // random draw let someone in lately (another instance's method, or this room's before
        // a reload: found by review). A dry run lets in whoever polls, the line left from
        // before it too: the store's to answer (found by review: they were told to wait on).
        if matches!(
            r.cfg.params.queueing,
            crate::store::Queueing::Random | crate::store::Queueing::Passthrough
        ) {
            return None;
        }
        // A ticket given before the store lost the room's data: the store's to answer once.
        if r.line.given_before_loss(t.seen) {
            return None;
        }
        let now = shared.clock.now_secs();
        let snapshot = r.line.snapshot();
        let mono = shared.clock.mono_micros();
        let store_answers = r.breaker.state(mono) == crate::breaker::BreakerState::Closed;
        if snapshot.as_deref().is_some_and(|s| s.random_recent) {
            return None;
        }
        let event = r
            .events
            .any()
            .then(|| r.events.view(shared.clock.now_micros()));
        if let Some(v) = event.flatten() {
            let store_says = r.events.store_says_prequeue(&v.event);
            if v.phase == Phase::Prequeue && store_says {
                // A ticket from before this pre-queue began (a place in an earlier line, a draw
                // of an earlier event) is the store's to answer: it registers the visitor.
                if t.seen < v.event.prequeue_from / 1_000_000 {
                    return None;
                }
                // The countdown, from the ticket: no store call. The store answers a visitor
                // away for half of abandon-after, or whose line the snapshot no longer holds (a
                // store that lost its data or a cleared line: it registers them again, at the
                // same draw key); liveness is noted every quarter (the admit call marks it as a
                // registration's). A line that a snapshot taken since the ticket was given
                // saw empty holds nobody's place either (a drawn pre-queue's sample has no
                // epoch, so that alone cannot tell): before, a line cleared in a pre-queue that
                // nobody joined since kept its registrants on the countdown, registered
                // nowhere, until the opening (found by review). The cost is one store call per
                // poll while the snapshot is empty.
                let abandon = r.cfg.abandon_after.as_secs().max(4);
                let since = now.saturating_sub(t.seen);
                let lost = snapshot.as_deref().is_some_and(|s| {
                    let taken = shared
                        .clock
                        .now_micros()
                        .saturating_sub(s.taken.elapsed().as_micros() as u64);
                    crate::line::registration_lost(s, taken, t)
                });
                if since >= abandon / 2 || lost {
                    return None;
                }
                // Nobody moves in a pre-queue: the place the store last gave is the position
                // (only a visitor ahead who gives up can lower it, and the store's next answer
                // says so). Not the snapshot's estimate, which interpolates a line that moves
                // and went down, then up, as registrations came in (found by review).
                let position = if t.drawn {
                    None
                } else if t.shown < ticket::NOT_SHOWN {
                    Some(t.shown.max(1))
                } else {
                    return None;
                };
                // Only where the note can reach the store (see `line::decide`).
                let refresh = store_answers && (since >= abandon / 4 || t.seen > now + 5);
                if r.line
                    .seen
                    .note_poll(t.vid, t.place, mono, refresh, store_answers)
                {
                    Self::give_ticket(shared, ctx, room, &Ticket { seen: now, ..*t });
                }
                r.metrics.polls_edge.inc();
                let status = Self::prequeue_status(
                    shared,
                    room,
                    &v,
                    t.vid,
                    position,
                    r.live.waiting(),
                    t.drawn,
                    t.drawn.then_some(t.place.epoch),
                );
                return Some(Verdict::Wait(status));
            }
            if v.phase == Phase::Prequeue || super::event::opening_unconfirmed(&v, store_says) {
                // The store decides until a tick has seen the pre-queue begin or end.
                return None;
            }
            if v.phase == Phase::Closed && v.event.after_close == crate::event::AfterClose::Release
            {
                // The closing released the line: nobody in it is waiting any more, whatever the
                // last snapshot held (the store, or the event when it is down, says it ended).
                return None;
            }
        }
        // A draw's place is sealed until the store has recorded its order as out (its event
        // seen open): the store's to answer until a tick says so. Before (found by review), an
        // instance whose own file had the opening behind it (a rolling reload that moved it)
        // told every registrant their place from the snapshot while the store, with the
        // instances disagreeing, had recorded nothing.
        if t.drawn && r.events.line_sealed(shared.clock.now_micros()) {
            return None;
        }
        // Past any pre-queue (where nobody is let in, and the countdown is the ticket's): the
        // store is known to be down (its breaker not closed: joins fail at once) and the
        // room's policy lets people in meanwhile: a ticket holder is the policy's to answer like
        // everyone else. Before (found by review), only visitors without a ticket reached
        // `open` or `local`, so newcomers walked in while those who had waited longest were told
        // their place from the snapshot for the whole outage. Under `closed` the snapshot's
        // answer stands: nobody is let in, and the place is shown.
        if r.cfg.on_store_error != crate::config::StorePolicy::Closed && !store_answers {
            return None;
        }
        let Edge::Answer {
            position,
            waiting,
            paused,
            eta_rate,
            refresh,
        } = line::decide(
            snapshot.as_deref(),
            t,
            now,
            r.cfg.abandon_after,
            store_answers,
        )
        else {
            return None;
        };
        let mut next = Ticket {
            shown: position,
            ..*t
        };
        if next.predicted.is_none() && !paused {
            next.predicted = Self::prediction(shared, room, position, eta_rate);
        }
        // A poll the store does not hear is noted for the next admit step that reaches it (see
        // `Proxy::answer_join`'s error arm): a turn given meanwhile that this instance's
        // snapshot does not show yet (its steps' answers late) keeps its claim by it (found by
        // re-review: such polls, answered here while the breaker was open, were not noted, and
        // the turn ran out after claim-ttl).
        if r.line
            .seen
            .note_poll(t.vid, t.place, mono, refresh, store_answers)
        {
            next.seen = now;
        }
        if next != *t {
            Self::give_ticket(shared, ctx, room, &next);
        }
        r.metrics.polls_edge.inc();
        let mut status = Self::in_line_status(
            shared,
            room,
            position,
            waiting,
            eta_rate,
            paused || !store_answers,
        );
        // The store away (the `closed` policy): the place from the snapshot, on hold, held by
        // the store, with no ETA — nobody is let in meanwhile (found by review: told "waiting"
        // with an ETA that did not move, held by max-active).
        if !store_answers && !paused {
            status.held_by = Some("store");
        }
        Some(Verdict::Wait(
            if r.events.any() || r.events.line_draw().is_some() {
                Self::with_event(
                    shared,
                    room,
                    status,
                    t.vid,
                    t.drawn.then_some(t.place.epoch),
                )
            } else {
                status
            },
        ))
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
        let (position, place, eta_rate, drawn) = match joined {
            Admission::Waiting {
                position,
                place,
                eta_rate,
                ..
            } => (*position, *place, Some(*eta_rate), false),
            Admission::Paused {
                position, place, ..
            } => (*position, *place, None, false),
            Admission::Registered {
                position,
                place,
                drawn,
                ..
            } => (position.unwrap_or(ticket::NOT_SHOWN), *place, None, *drawn),
            Admission::Admitted | Admission::Entered | Admission::EnteredFromLine
                if old.is_some() || ctx.carried_ticket =>
            {
                ctx.set_cookies.push(cookie::set_named(
                    &r.ticket_cookie,
                    "",
                    0,
                    secure(shared, ctx),
                ));
                return None;
            }
            _ => return None,
        };
        r.metrics.polls_store.inc();
        let same = old.filter(|t| t.place == place);
        let shown = same.map_or(position, |t| t.shown.clamp(1, position));
        // A drawn place stays drawn (sealed) in the ticket after the opening too: the place
        // is the same, and the visitor keeps their registration ticket on the page.
        let drawn = drawn || same.is_some_and(|t| t.drawn);
        // The first wait told for this place stays the one measured.
        let predicted = same
            .and_then(|t| t.predicted)
            .or_else(|| eta_rate.and_then(|rate| Self::prediction(shared, room, shown, rate)));
        let t = Ticket {
            vid,
            place,
            seen: shared.clock.now_secs(),
            shown,
            predicted,
            drawn,
        };
        Self::give_ticket(shared, ctx, room, &t);
        Some(shown)
    }

    /// The wait a visitor at `position` is told, in seconds (before rounding up): at the rate
    /// an ETA assumes, the measured one (honest about a slow room), or none at all when the shop
    /// is full and nobody leaves (see `forecast::eta_rate`).
    pub(super) fn predicted_wait(
        shared: &Shared,
        room: usize,
        position: u64,
        eta_rate: f64,
    ) -> Option<f64> {
        let r = &shared.rooms[room];
        let rate = forecast::eta_rate(r.live.held_by(), eta_rate, r.live.measured_rate());
        (rate > 0.0 && rate.is_finite()).then(|| position as f64 / rate)
    }

    /// An admitted visitor's wait against the first one they were told (their ticket's).
    pub(super) fn note_eta(shared: &Shared, room: usize, ticket: Option<&Ticket>) {
        let r = &shared.rooms[room];
        let now_ms = Self::eta_clock_ms(shared, room);
        // Once per visitor among the recent ones (a replay of the ticket is `admitted` again).
        if let Some((vid, ratio)) = ticket.and_then(|t| Some((t.vid, t.predicted?.ratio(now_ms)?)))
        {
            if r.line.accuracy.note(vid, ratio) {
                r.metrics.eta_error.observe(ratio);
            }
        }
    }

    /// The wait a visitor at `position` is told now, to keep in their ticket.
    fn prediction(shared: &Shared, room: usize, position: u64, eta_rate: f64) -> Option<Predicted> {
        let wait = Self::predicted_wait(shared, room, position, eta_rate)?;
        Predicted::new(Self::eta_clock_ms(shared, room), wait)
    }

    /// The clock waits are stamped and measured by (ms): the store's, as this instance reads
    /// it, so that instances whose clocks disagree agree on a wait (found by re-review r86b:
    /// one two minutes ahead read honest waits as nine times what was told).
    fn eta_clock_ms(shared: &Shared, room: usize) -> u64 {
        shared.rooms[room]
            .events
            .store_now(shared.clock.now_micros())
            / 1000
    }

    /// Gives the ticket, and the visitor-id cookie again beside it: both live as long
    /// ([`Proxy::visitor_cookie_secs`]) and are renewed together as the visitor polls.
    fn give_ticket(shared: &Shared, ctx: &mut Ctx, room: usize, t: &Ticket) {
        if ctx.hold_identity {
            return;
        }
        let r = &shared.rooms[room];
        if let Some(value) = ticket::sign(&shared.config.cookie.keys, r.name(), t) {
            let secure = secure(shared, ctx);
            let life = Self::visitor_cookie_secs(shared, room);
            ctx.set_cookies.retain(|c| {
                !cookie::sets(c, &r.ticket_cookie) && !cookie::sets(c, cookie::VID_COOKIE)
            });
            let kept = ctx.kept_vid.unwrap_or(t.vid);
            ctx.set_cookies.push(cookie::set_vid(kept, life, secure));
            ctx.set_cookies
                .push(cookie::set_named(&r.ticket_cookie, &value, life, secure));
        }
    }
}
