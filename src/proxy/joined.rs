//! What a visitor is told once the store answered their join: the place in line, the turn, a
//! limit, the end of a sale, or what the room's `on-store-error` policy decides when the store
//! could not answer.

use super::{Ctx, Proxy, Verdict};
use crate::app::Shared;
use crate::line::Ticket;
use crate::page::{self, State, Status};
use crate::room::policy::{self, Failure, OnError};
use crate::room::LocalAdmit;
use crate::store::{Admission, JoinGate, StoreError, VisitorId};

impl Proxy {
    /// The answer to the store's reply to `vid`'s join (`ticket`: the one the request carried
    /// for that id). `uncounted`: the per-client gate of the join, which a fresh local
    /// admission must pass (every local admission from an address is counted by it).
    pub(super) fn answer_join(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        ticket: Option<Ticket>,
        joined: Result<Admission, StoreError>,
        uncounted: Option<&JoinGate>,
    ) -> Verdict {
        let r = &shared.rooms[room];
        let tiers = &r.cfg.poll;
        let name = r.name().to_string();
        {
            let m = &r.metrics;
            match &joined {
                Ok(Admission::Entered) => {
                    m.joined.inc();
                    m.admitted.inc();
                    r.recovery.note_entered();
                }
                Ok(Admission::EnteredFromLine) => {
                    m.admitted.inc();
                    r.recovery.note_entered();
                }
                Ok(Admission::Waiting {
                    joined: true,
                    full,
                    waiting,
                    ..
                }) => {
                    m.joined.inc();
                    // A line formed, or the shop filled, since the last tick: what holds the
                    // line, the ETA and the join challenge go by that from this answer on
                    // (found by review: the first answer after the shop filled said "rate",
                    // with the rate's ETA; newcomers into a line that formed within a tick
                    // were asked no work, 40 of 300 at once).
                    r.live.note_line(*waiting);
                    if *full {
                        r.live.note_full();
                    }
                }
                Ok(
                    Admission::Paused { joined: true, .. }
                    | Admission::Registered { joined: true, .. },
                ) => m.joined.inc(),
                _ => {}
            }
        }
        let shown = joined
            .as_ref()
            .ok()
            .and_then(|a| Self::ticket_after_join(shared, ctx, room, vid, ticket.as_ref(), a));
        match joined {
            Ok(Admission::Admitted) => {
                Self::note_eta(shared, room, ticket.as_ref());
                Self::grant(shared, ctx, room, vid);
                Verdict::Pass { admitted: true }
            }
            Ok(Admission::Entered | Admission::EnteredFromLine) => {
                let p = &r.cfg.params;
                Self::grant_for(shared, ctx, room, vid, p.fast_path_cookie_life());
                Verdict::Pass { admitted: true }
            }
            // The room switched off, as the store tells before this instance's next tick: an
            // order takes the visitor's place as one while it knows the room is off does
            // (found by re-review r96a: within that tick, the place was kept and bought a
            // second order).
            Ok(Admission::Open) => {
                if ctx.order {
                    Self::order_from_line(shared, ctx, room, vid);
                }
                Verdict::Pass { admitted: false }
            }
            Ok(Admission::Waiting {
                position,
                waiting,
                eta_rate,
                ..
            }) => Verdict::Wait(Self::in_line_with_event(
                shared,
                room,
                vid,
                ticket.as_ref(),
                Self::in_line_status(
                    shared,
                    room,
                    shown.unwrap_or(position),
                    waiting,
                    eta_rate,
                    false,
                ),
            )),
            Ok(Admission::Paused {
                position, waiting, ..
            }) => Verdict::Wait(Self::in_line_with_event(
                shared,
                room,
                vid,
                ticket.as_ref(),
                Self::in_line_status(shared, room, shown.unwrap_or(position), waiting, 0.0, true),
            )),
            Ok(Admission::Limited { retry_after }) => Verdict::Limited {
                retry_after,
                polls: false,
            },
            Ok(Admission::Registered {
                position,
                waiting,
                drawn,
                place,
                ..
            }) => Verdict::Wait(match r.events.view(shared.clock.now_micros()) {
                Some(v) => Self::prequeue_status(
                    shared,
                    room,
                    &v,
                    vid,
                    shown.or(position),
                    waiting,
                    drawn,
                    drawn.then_some(place.epoch),
                ),
                // The store knew of a pre-queue this instance's schedule no longer has (changed
                // a moment ago): on hold until the next tick says more.
                // A draw's place has no position to show (found by review: every registrant
                // was told 1).
                None => Status {
                    position: position.filter(|_| !drawn),
                    ..Self::in_line_status(shared, room, position.unwrap_or(1), waiting, 0.0, true)
                },
            }),
            Ok(Admission::Ended) => Verdict::Ended,
            // Not placed by events this instance has not read yet (changed a moment ago), or
            // an order of the visitor's session still in flight: on hold, back within a tick
            // or two.
            Ok(Admission::Unplaced { waiting } | Admission::Settling { waiting }) => {
                Verdict::Wait(Status {
                    waiting,
                    retry_after_ms: page::poll_interval(tiers, 1).as_millis() as u64,
                    ..Self::on_hold(shared, room)
                })
            }
            Ok(Admission::Full { waiting }) => Verdict::Wait(Status {
                room: name,
                state: State::Full,
                position: None,
                waiting,
                eta_seconds: None,
                eta_low_seconds: None,
                eta_high_seconds: None,
                retry_after_ms: page::poll_interval(tiers, u64::MAX).as_millis() as u64,
                held_by: None,
                event: None,
                placed_by: None,
            }),
            Err(e) => {
                shared.warn_store_error(&e);
                // A visitor in line whose poll the store did not hear (the call failed, or met
                // an open breaker) is noted for the next admit call that reaches it; the ticket
                // is not renewed (another instance that reaches the store notes it as usual).
                // So a store that answers the admission steps and not the polls sweeps nobody
                // who kept polling, and a turn given meanwhile keeps its claim (the admit call
                // keeps the claim of a visitor it is told of). Before (found by review), such
                // visitors lost their place or their turn. A poll answered from the snapshot
                // while the breaker is open is noted so too (`answer_at_edge`).
                if let Some(t) = ticket.as_ref().filter(|t| t.vid == vid) {
                    r.line.seen.note(t.vid, t.place, shared.clock.mono_micros());
                }
                // An event decides first: a pre-queue lets nobody in whatever the policy (the
                // sale is not open; nor is it at an opening the store has not recorded yet:
                // `policy`), and after the closing a newcomer is told it ended.
                if let Some(v) = r.events.view(shared.clock.now_micros()) {
                    let drawn_in = ticket.as_ref().filter(|t| t.drawn).map(|t| t.place.epoch);
                    match v.phase {
                        crate::event::Phase::Prequeue => {
                            return Verdict::Wait(Self::prequeue_status(
                                shared,
                                room,
                                &v,
                                vid,
                                None,
                                r.live.waiting(),
                                drawn_in.is_some() || v.event.draw,
                                drawn_in,
                            ));
                        }
                        // The closing by the events this instance has read from the store: one
                        // that has not heard from it since it started may lack a change made at
                        // run time (a closing postponed, an event cancelled), and holds instead
                        // (re-review: it told a line the store still held that the sale ended).
                        crate::event::Phase::Closed if !r.live.heard() => {
                            return Verdict::Wait(Self::on_hold(shared, room));
                        }
                        // A line the closing releases is over for those in it too (before, a
                        // ticket holder fell through to the policy: review).
                        crate::event::Phase::Closed
                            if ticket.is_none()
                                || v.event.after_close == crate::event::AfterClose::Release =>
                        {
                            return Verdict::Ended
                        }
                        _ => {}
                    }
                }
                let p = &r.cfg.params;
                let now = shared.clock.now_micros();
                let decision = policy::on_store_error(
                    r.cfg.on_store_error,
                    Failure::of(&e),
                    &r.last_known(now),
                );
                // Not past the start of the room's next pre-queue: the store ends the sessions it
                // holds then, and not one admitted here and not told yet (found by review r101a:
                // such a cookie ordered after the opening, ahead of the registrants).
                let session_ttl = r
                    .events
                    .any()
                    .then(|| r.events.secs_to_next_prequeue(now))
                    .flatten()
                    .map_or(p.session_ttl, |s| {
                        p.session_ttl.min(std::time::Duration::from_secs(s))
                    });
                let local = |share| LocalAdmit {
                    vid,
                    rate: r.live.rate_in_force().unwrap_or(p.admit_per_second),
                    instances: r.live.instances(),
                    tick: p.tick,
                    share,
                    now,
                    session_ttl,
                    heard_at: r.live.heard_at(),
                };
                match decision {
                    OnError::Pass => {
                        // An order let through: the origin's answer settles it once the store
                        // is back (see `order_from_line`).
                        if ctx.order {
                            Self::order_from_line(shared, ctx, room, vid);
                        }
                        Verdict::Pass { admitted: false }
                    }
                    // This instance's share of the rate and of max-active, from an in-process
                    // bucket: the line's order is suspended while the store is away, the shop's
                    // load is not. A visitor holding a local session is given it again.
                    // A ticket is no new identity to the store, but while it cannot answer it
                    // is no claim on an admission either: an address's tickets get at most its
                    // join-limit of local admissions in a window (found by review: stale
                    // tickets from one address took an outage's local admissions).
                    OnError::Local { .. } if session_ttl.as_secs() == 0 => {
                        Self::held_while_away(shared, room, ticket)
                    }
                    OnError::Local { share } => match r.local.try_admit(&local(share), uncounted) {
                        Some(session) => {
                            if session.fresh {
                                r.metrics.admitted.inc();
                            }
                            Self::grant_for(shared, ctx, room, vid, session.life);
                            Verdict::Pass { admitted: true }
                        }
                        None => Self::held_while_away(shared, room, ticket),
                    },
                    OnError::Hold => Self::held_while_away(shared, room, ticket),
                }
            }
        }
    }
}

impl Proxy {
    /// On hold while the store is away. A visitor in line keeps being shown the place their
    /// ticket last told (it never goes up): before (found by review), the head of the line,
    /// whom the snapshot sends to the store, and everyone once their ticket was older than half
    /// of abandon-after, were told "on hold" with no place while those behind them kept theirs.
    pub(super) fn held_while_away(shared: &Shared, room: usize, ticket: Option<Ticket>) -> Verdict {
        let p = &shared.rooms[room].cfg.params;
        let position = ticket
            .filter(|t| {
                !t.drawn
                    && t.shown < crate::line::ticket::NOT_SHOWN
                    && p.queueing != crate::store::Queueing::Random
            })
            .map(|t| t.shown.max(1));
        let held = Self::on_hold(shared, room);
        // Never a place past the line's length (review r85c).
        Verdict::Wait(Status {
            position,
            waiting: held.waiting.max(position.unwrap_or(0)),
            ..held
        })
    }
}
