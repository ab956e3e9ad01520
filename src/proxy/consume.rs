//! An order: a request on one of its room's consume routes. Exactly one request per admission
//! reaches the origin; the admission is taken pending and the origin's answer settles it
//! ([`super::origin`]).

use pingora::proxy::Session;
use pingora::Result;

use super::respond::Refusal;
use super::settle::Taken;
use super::{secure, Ctx, Outcome, Proxy};
use crate::app::Shared;
use crate::config::StorePolicy;
use crate::cookie;
use crate::metrics::Reject;
use crate::room::owed::Owing;
use crate::room::policy::{self, Failure, OnError};
use crate::store::order::grace_for;
use crate::store::{Consumed, Order, RequestId, Settle, StoreError, VisitorId};

impl Proxy {
    /// How long an order of the room may take at its origin before it is given back (from the
    /// upstream's timeouts).
    pub(super) fn order_grace(shared: &Shared, room: usize) -> std::time::Duration {
        let up = &shared.config.upstreams[shared.rooms[room].cfg.upstream];
        grace_for(up.connect_timeout, up.write_timeout, up.read_timeout)
    }

    /// An order goes on to the origin: the admission is used up, so its cookie is cleared with
    /// the origin's response (also when the store never saw the order: a kept cookie must not
    /// order again), and the order is kept pending by a heartbeat until the answer settles it.
    pub(super) fn order_goes_on(shared: &Shared, ctx: &mut Ctx, room: usize, taken: Taken) {
        Self::clear_admission_cookie(shared, ctx, room);
        ctx.outcome = Outcome::Consume;
        ctx.heartbeat = Some(super::settle::Heartbeat::start(ctx.shared.arc(), &taken));
        ctx.consumed = Some(taken);
    }

    /// The answer clears the room's admission cookie (and sets no other value of it), unless
    /// the request carries several visitors' admissions (`Ctx::hold_admission`).
    fn clear_admission_cookie(shared: &Shared, ctx: &mut Ctx, room: usize) {
        let r = &shared.rooms[room];
        ctx.set_cookies.retain(|c| !cookie::sets(c, &r.cookie_name));
        if !ctx.hold_admission {
            ctx.set_cookies
                .push(cookie::clear_admission(r.name(), secure(shared, ctx)));
        }
    }

    /// An order let through without an admission (the store's `open` policy while it is away,
    /// the room switched off) by the visitor `vid` the request names: the origin's answer
    /// settles it as an admitted visitor's unseen order, whose confirm uses the admission up and
    /// takes them out of the line. One place in line, one order: a visitor in line who ordered
    /// so kept the place, and their turn bought a second order (found by re-review under
    /// `open`; by review r95b with the room switched off).
    pub(super) fn order_from_line(shared: &Shared, ctx: &mut Ctx, room: usize, vid: VisitorId) {
        let taken = Taken {
            room,
            vid,
            request: RequestId::random(),
            grace: Self::order_grace(shared, room),
            expires: 0,
        };
        Self::order_goes_on(shared, ctx, room, taken);
    }

    /// A new order vouched by an admission cookie that runs until `expires` (the store's clock,
    /// as this instance reads it at `cookie_now`).
    fn vouched_order(shared: &Shared, room: usize, expires: u64, cookie_now: u64) -> Order {
        Order {
            request: RequestId::random(),
            grace: Self::order_grace(shared, room),
            vouched: true,
            cookie_life: std::time::Duration::from_secs(expires.saturating_sub(cookie_now)),
            cookie_expires: expires,
            generation: shared.seen_generation(room),
            events_version: shared.rooms[room].events.window().version,
        }
    }

    /// An order with an admission while its room is switched off: it passes whatever the store
    /// says (so does everyone), and takes the admission as a consume does when the store lets
    /// it (won, or no answer: the origin's answer then confirms it, as under `open`). An
    /// admission used, pending elsewhere or ended passes as no admission does.
    pub(super) async fn order_while_off(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        expires: u64,
    ) {
        let r = &shared.rooms[room];
        let order = Self::vouched_order(shared, room, expires, shared.cookie_secs(room));
        let won = match r.owed.holds(vid) {
            Some(_) => Ok(Consumed::Used),
            None => {
                shared
                    .store_call(
                        "consume",
                        r.name(),
                        shared.store.consume(&r.cfg.params, vid, &order),
                    )
                    .await
            }
        };
        if let Err(e) = &won {
            shared.warn_store_error(e);
        }
        if matches!(won, Ok(Consumed::Won) | Err(_)) {
            ctx.holder = Some(super::command::Holder {
                vid,
                expires,
                receipt: false,
            });
            let taken = Taken {
                room,
                vid,
                request: order.request,
                grace: order.grace,
                expires,
            };
            Self::order_goes_on(shared, ctx, room, taken);
        }
    }

    /// The answer to an order whose admission is used, or has an order on its way.
    fn refused(c: &Consumed) -> (u16, &'static str, &'static str, Option<u64>) {
        match c {
            // Also the store's answer for a few seconds after it lost its data, while an order
            // of the admission may be on its way through an instance that has not yet seen the
            // loss: the page says both (found by review: it told of an order in another tab
            // that did not exist). And for a tick while this instance's events are older
            // than the store's (an event just added: review r104a).
            Consumed::Busy { retry_after } => (
                409,
                "Not just yet",
                "An order with this admission may be on its way (for example from another tab), or the waiting room is catching up after a hiccup. Your admission is kept: try again in a moment.",
                Some(retry_after.as_secs().clamp(1, 60)),
            ),
            _ => (
                409,
                "Already used",
                "This admission has already been used, for example in another tab. Join the line again to continue.",
                None,
            ),
        }
    }

    /// A consume route: exactly one request per admission reaches the origin. The admission is
    /// taken as pending, keyed by this request's id; the origin's answer settles it
    /// ([`super::origin`]). A call whose reply is lost is asked again with the same id before the
    /// visitor is told anything, so a consume that did go through is found, not lost.
    /// `cookie_expires`: the expiry of the admission cookie that vouches for the order, on the
    /// store's clock as this instance reads it at `cookie_now`.
    pub(super) async fn consume(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        (cookie_expires, cookie_now): (u64, u64),
        tried: Vec<VisitorId>,
    ) -> Result<bool> {
        let r = &shared.rooms[room];
        let order = Self::vouched_order(shared, room, cookie_expires, cookie_now);
        let call = || {
            shared.store_call(
                "consume",
                r.name(),
                shared.store.consume(&r.cfg.params, vid, &order),
            )
        };
        // An order of this admission went through here and the store has not heard yet: it is
        // used, whatever the store would say now. One still in flight here is pending.
        let mut won = match r.owed.holds(vid) {
            Some(Owing::Confirm | Owing::Command) => Ok(Consumed::Used),
            // In flight here: what the store answers while it has the order pending (and what
            // it must be told, were it away past the grace period).
            Some(Owing::InFlight) => Ok(Consumed::Busy {
                retry_after: order.grace / 3,
            }),
            None => call().await,
        };
        // Whether some attempt may have reached the store (a call the breaker stopped did not).
        let mut reached = !matches!(won, Err(StoreError::BreakerOpen { .. }));
        if let Err(e) = &won {
            shared.warn_store_error(e);
            won = call().await;
            reached |= !matches!(won, Err(StoreError::BreakerOpen { .. }));
        }
        let taken = Taken {
            room,
            vid,
            request: order.request.clone(),
            grace: order.grace,
            expires: cookie_expires,
        };
        let used = matches!(won, Ok(Consumed::Used));
        let (status, title, message, retry) = match won {
            Ok(Consumed::Won) => {
                // The order goes to the shop whole: a visitor who closes their side now (HTTP/1.1
                // FIN) no longer cuts it short after its head (found by review: the shop got the
                // head alone, and the admission was used up). An HTTP/2 stream reset still does.
                session.downstream_session.set_abort_on_close(false);
                // A session the store had forgotten is counted again by the consume.
                r.recovery.counted(vid, shared.clock.now_micros());
                Self::order_goes_on(shared, ctx, room, taken);
                return Ok(false);
            }
            // Never used: a pre-queue ended it, and its holder joins the line like anyone (the
            // join answers them, and registers them while a pre-queue runs).
            Ok(Consumed::Ended) => {
                ctx.holder = None;
                // The slot taken for the order goes back first: the line's answer may admit
                // them, and the order then waits for a slot of its own (found by re-review:
                // held, it waited for a second one, and N such orders shut a room capped at N
                // until their waits ran out).
                ctx.origin_slot = None;
                ctx.uploading = None;
                return Box::pin(Self::to_the_line(
                    shared, session, ctx, room, true, cookie_now,
                ))
                .await;
            }
            // Used, or an order of it on its way: another admission the request carries (a
            // sibling site's may come first) orders instead, if there is one (found by review
            // and re-review).
            Ok(c @ (Consumed::Used | Consumed::Busy { .. }))
                if tried.len() + 1 < cookie::VALUES_TRIED =>
            {
                let mut tried = tried;
                tried.push(vid);
                let req = session.req_header();
                match Self::admission_besides(shared, req, room, cookie_now, true, &tried) {
                    Some(next) => {
                        ctx.holder = Some(super::command::Holder {
                            vid: next.vid,
                            expires: next.expires,
                            receipt: false,
                        });
                        let cookie = (next.expires, cookie_now);
                        return Box::pin(Self::consume(
                            shared, session, ctx, room, next.vid, cookie, tried,
                        ))
                        .await;
                    }
                    None => Self::refused(&c),
                }
            }
            Ok(c @ (Consumed::Used | Consumed::Busy { .. })) => Self::refused(&c),
            Err(e) => {
                shared.warn_store_error(&e);
                // `open` lets an order through unconfirmed, as it lets newcomers in — but not
                // through a line last seen held: there the answer is the same as a newcomer's.
                let open = r.cfg.on_store_error == StorePolicy::Open
                    && policy::on_store_error(
                        StorePolicy::Open,
                        Failure::of(&e),
                        &r.last_known(shared.clock.now_micros()),
                    ) == OnError::Pass;
                if open {
                    // Through without a consume the store saw: the origin's answer settles it
                    // like any other (a confirm the store has no marker for uses it up).
                    Self::order_goes_on(shared, ctx, room, taken);
                    return Ok(false);
                }
                // Whatever the store did with it, this order is not going to the origin: a
                // consume that went through unseen is given back, not left to its deadline. A
                // consume the breaker stopped never reached the store: nothing to give back
                // (and no task per request while the store is down).
                if reached {
                    super::settle::settle_later(ctx.shared.arc(), taken, Settle::GiveBack);
                }
                (
                    503,
                    "Please try again",
                    "We could not confirm your place just now. Nothing was lost: try again in a few seconds.",
                    Some(5),
                )
            }
        };
        // Used up: the cookie that vouched for it buys nothing more, and is cleared with the
        // answer, so the page's "join the line again" can be done. Kept, it went on verifying,
        // every page went to the shop, and its holder could not rejoin the line until it ran
        // out (found beside review r102b: a renewal from another tab that landed after the
        // order's answer left a used cookie in the browser for a whole session).
        if used && !ctx.hold_admission {
            Self::clear_admission_cookie(shared, ctx, room);
        }
        // Not going to the origin: its slot goes to the next in line, not to this reply.
        ctx.origin_slot = None;
        let refusal = Refusal {
            status,
            state: match (status, retry) {
                (409, None) => "consumed",
                (409, Some(_)) => "pending",
                _ => "retry",
            },
            title,
            message,
            retry_secs: retry,
            reject: if status == 409 {
                Reject::Consumed
            } else {
                Reject::Store
            },
            lang: "en",
            always_json: false,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await?;
        Ok(true)
    }
}
