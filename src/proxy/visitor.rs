//! The visitor's side of a protected request: who they are, one store call to place or admit
//! them, and the answers anteroom writes itself (waiting, limited). Orders are in
//! [`super::consume`].

use pingora::http::RequestHeader;

use super::settle::Taken;
use super::{cookie_values, secure, Ctx, Proxy, Verdict};
use crate::app::Shared;
use crate::cookie;
use crate::line::Ticket;
use crate::page::{self, State, Status};
use crate::room::policy::{self, Failure, OnError};
use crate::room::LocalAdmit;
use crate::store::{Admission, JoinGate, RequestId, VisitorId};

impl Proxy {
    /// The admission the request's cookie carries for `room` at `now` (unix seconds): signed,
    /// for this room, not expired, and not revoked by the origin (`origin-commands`). Anything
    /// else is no admission: the visitor gets the waiting flow.
    pub(super) fn admission(
        shared: &Shared,
        req: &RequestHeader,
        room: usize,
        now: u64,
        order: bool,
    ) -> Option<cookie::Verified> {
        let r = &shared.rooms[room];
        let v = cookie::find_map(cookie_values(req), &r.cookie_name, |v| {
            cookie::verify(&shared.config.cookie.keys, r.name(), v, now)
        })?;
        if r.cfg.origin_commands && r.revoked.holds(v.vid, now) {
            return None;
        }
        // A pre-queue admits nobody, not with a cookie from before it either: its holder
        // registers like everyone else (the store ended that session as the pre-queue began).
        // Nor is an order at an opening the store had not recorded when this instance last
        // heard from it: the store is asked, which ends a session from before the event if no
        // call has yet (re-review: after an outage that spanned the pre-queue, such a cookie
        // placed an order before the room's tick reached the store).
        if r.events.any()
            && r.events
                .refuses_cookies(shared.clock.now_micros(), r.live.heard(), order)
        {
            return None;
        }
        Some(v)
    }

    /// The store generation this instance last saw, and how long a session the store does not
    /// hold waits after a new one is born before a cookie alone brings it back (consume,
    /// touch): long enough for every instance to see the loss (its breaker cooling down, a
    /// call timing out, two ticks) and its heartbeats to write their orders' markers again.
    pub(super) fn seen_generation(
        shared: &Shared,
        room: usize,
    ) -> Option<crate::store::SeenGeneration> {
        let r = &shared.rooms[room];
        let s = &shared.config.store;
        let quiet = s.breaker_cooldown + s.timeout + r.cfg.params.tick * 2;
        r.recovery.known().map(|k| crate::store::SeenGeneration {
            id: k.generation,
            quiet,
        })
    }

    /// How long the visitor-id cookie and a queue ticket given now live: a day, and in a
    /// pre-queue a day past its opening (a registrant is never dropped for silence before the
    /// opening, so a browser closed until then must still hold their place).
    pub(super) fn visitor_cookie_secs(shared: &Shared, room: usize) -> u64 {
        let r = &shared.rooms[room];
        let now = shared.clock.now_micros();
        let opening = r
            .events
            .prequeue_view(now)
            .map_or(0, |v| v.event.opens_at.saturating_sub(now) / 1_000_000);
        cookie::VID_MAX_AGE_SECS.saturating_add(opening)
    }

    /// Issues the admission cookie for a visitor who was just admitted, or whose session was
    /// renewed: valid for `session-ttl`.
    pub(super) fn grant(shared: &Shared, ctx: &mut Ctx, room: usize, vid: VisitorId) {
        let ttl = shared.rooms[room].cfg.params.session_ttl;
        Self::grant_for(shared, ctx, room, vid, ttl);
    }

    /// Issues an admission cookie valid for `ttl`. A fast-path entry's slot is held for
    /// `claim-ttl` until the visitor is back, and its cookie lives as long (see
    /// [`crate::store::RoomParams::fast_path_cookie_life`]); it is renewed to `session-ttl` by
    /// the first request that carries it, through the sliding renewal (one store call).
    fn grant_for(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        ttl: std::time::Duration,
    ) {
        let r = &shared.rooms[room];
        let ttl = ttl.as_secs().max(1);
        let expires = shared.cookie_secs(room) + ttl;
        if let Some(value) = cookie::sign(&shared.config.cookie.keys, r.name(), vid, expires) {
            ctx.set_cookies.push(cookie::set_admission(
                r.name(),
                &value,
                ttl,
                secure(shared, ctx),
            ));
        }
    }

    /// Places the visitor or lets them in: from the line's snapshot when their queue ticket
    /// allows (no store call), else one store call.
    pub(super) async fn enter(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        gate: Option<JoinGate>,
        ticket: Option<Ticket>,
        had_vid: bool,
    ) -> Verdict {
        if let Some(v) = ticket
            .as_ref()
            .and_then(|t| Self::answer_at_edge(shared, ctx, room, t))
        {
            return v;
        }
        let r = &shared.rooms[room];
        // Without a ticket this is a store join that join-limit may count: past the limit on
        // this instance alone, a newcomer is refused here, without a store call. One that came
        // with a visitor id of its own may be in line, which only the store knows: it asks,
        // and the store answers a known visitor as ever and refuses a newcomer uncounted (found
        // by review: a visitor in line polling without its ticket was told 429 by a flood from
        // its network's newcomers, and lost the place for silence).
        let mut gate = gate;
        if let Some(g) = gate.as_mut().filter(|_| ticket.is_none()) {
            if let Some(retry_after) = r.prelimit.check(g) {
                if !had_vid {
                    return Verdict::Limited { retry_after };
                }
                g.known_only = true;
            }
        }
        // A room with events passes them (the store decides the one in force by its clock), and
        // the visitor's place in each draw that has not opened.
        let events = r.events.for_join(vid, shared.clock.now_micros());
        let join = events.context(gate.as_ref());
        let joined = shared
            .store_call(
                "join",
                r.name(),
                shared
                    .store
                    .join_with(&r.params_at(shared.clock.now_micros()), vid, &join),
            )
            .await;
        let tiers = &r.cfg.poll;
        let name = r.name().to_string();
        {
            let m = &r.metrics;
            match &joined {
                Ok(Admission::Entered) => {
                    m.joined.inc();
                    m.admitted.inc();
                }
                Ok(
                    Admission::Waiting { joined: true, .. }
                    | Admission::Paused { joined: true, .. }
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
            Ok(Admission::Entered) => {
                let p = &r.cfg.params;
                Self::grant_for(shared, ctx, room, vid, p.fast_path_cookie_life());
                Verdict::Pass { admitted: true }
            }
            Ok(Admission::Open) => Verdict::Pass { admitted: false },
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
            Ok(Admission::Limited { retry_after }) => Verdict::Limited { retry_after },
            Ok(Admission::Registered {
                position,
                waiting,
                drawn,
                ..
            }) => Verdict::Wait(match r.events.view(shared.clock.now_micros()) {
                Some(v) => {
                    Self::prequeue_status(shared, room, &v, vid, shown.or(position), waiting, drawn)
                }
                // The store knew of a pre-queue this instance's schedule no longer has (changed
                // a moment ago): on hold until the next tick says more.
                None => {
                    Self::in_line_status(shared, room, position.unwrap_or(1), waiting, 0.0, true)
                }
            }),
            Ok(Admission::Ended) => Verdict::Ended,
            // Not placed by events this instance has not read yet (changed a moment ago): on
            // hold, back within a tick or two.
            Ok(Admission::Unplaced { waiting }) => Verdict::Wait(Status {
                waiting,
                retry_after_ms: page::poll_interval(tiers, 1).as_millis() as u64,
                ..Self::on_hold(shared, room)
            }),
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
            }),
            Err(e) => {
                shared.warn_store_error(&e);
                // An event decides first: a pre-queue lets nobody in whatever the policy (the
                // sale is not open; nor is it at an opening the store has not recorded yet:
                // `policy`), and after the closing a newcomer is told it ended.
                if let Some(v) = r.events.view(shared.clock.now_micros()) {
                    let drawn = ticket.as_ref().is_some_and(|t| t.drawn);
                    match v.phase {
                        crate::event::Phase::Prequeue => {
                            return Verdict::Wait(Self::prequeue_status(
                                shared,
                                room,
                                &v,
                                vid,
                                None,
                                r.live.waiting(),
                                drawn || v.event.draw,
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
                let local = |share| LocalAdmit {
                    vid,
                    rate: r.live.rate_in_force().unwrap_or(p.admit_per_second),
                    instances: r.live.instances(),
                    tick: p.tick,
                    share,
                    now,
                    session_ttl: p.session_ttl,
                };
                match decision {
                    OnError::Pass => {
                        // An order let through: the origin's answer settles it once the store
                        // is back, as an admitted visitor's unseen order (a confirm the store
                        // never saw uses the visitor's admission up and takes them out of the
                        // line: a visitor in line who ordered here kept the place, and their
                        // turn bought a second order; found by re-review).
                        if ctx.order {
                            let taken = Taken {
                                room,
                                vid,
                                request: RequestId::random(),
                                grace: Self::order_grace(shared, room),
                            };
                            Self::order_goes_on(shared, ctx, room, taken);
                        }
                        Verdict::Pass { admitted: false }
                    }
                    // This instance's share of the rate and of max-active, from an in-process
                    // bucket: the line's order is suspended while the store is away, the shop's
                    // load is not.
                    OnError::Local { share } if r.local.try_admit(&local(share)) => {
                        r.metrics.admitted.inc();
                        Self::grant(shared, ctx, room, vid);
                        Verdict::Pass { admitted: true }
                    }
                    OnError::Local { .. } | OnError::Hold => {
                        Verdict::Wait(Self::on_hold(shared, room))
                    }
                }
            }
        }
    }

    /// Sliding expiry: past half its life the admission is renewed, if the store agrees (not for
    /// an admission that was used or has an order pending). A store that cannot answer postpones
    /// the renewal; the current cookie stays valid until it expires. A fast-path cookie
    /// (`claim-ttl`) is past half a session's life at once when `claim-ttl` is under half a
    /// session: its first return renews it.
    pub(super) async fn refresh(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        expires: u64,
    ) {
        let r = &shared.rooms[room];
        let ttl = r.cfg.params.session_ttl.as_secs().max(1);
        if expires.saturating_sub(shared.cookie_secs(room)) >= ttl / 2 {
            return;
        }
        let seen = Self::seen_generation(shared, room);
        let touch = shared.store.touch_seen(&r.cfg.params, vid, seen.as_ref());
        match shared.store_call("touch", r.name(), touch).await {
            Ok(true) => Self::grant(shared, ctx, room, vid),
            Ok(false) => {}
            Err(e) => shared.warn_store_error(&e),
        }
    }
}
