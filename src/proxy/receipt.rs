//! An order's receipt (`order-receipt` on a room). The order's answer clears the admission, so
//! the pages a shop shows right after an order inside the room's paths (a `303` to
//! `/orders/123`) would show the waiting page to someone who just bought (found by review). With
//! `order-receipt` set, the answer that uses the admission up also carries a receipt: for that
//! long, the visitor's `GET` and `HEAD` requests in the room reach the shop.
//!
//! A receipt is signed like an admission under a domain of its own (`cookie::sign_receipt`), so
//! neither verifies as the other, and it is checked without a store call. It is never renewed,
//! buys no order (a consume route with only a receipt gets the waiting flow, like any request
//! without an admission), holds no place in `max-active`, and lives no longer than the admission
//! it came from: a browser that kept the used cookie could open the same pages until then
//! anyway. A revoked visitor's receipt (the shop may send `revoke` on a page the receipt opened),
//! and any receipt in a pre-queue, opens nothing; nor does one open a protocol switch
//! (`Upgrade`: a WebSocket would outlive it).

use pingora::http::RequestHeader;

use super::{cookie_values, method, secure, Ctx, Proxy};
use crate::app::Shared;
use crate::cookie;
use crate::store::VisitorId;

impl Proxy {
    /// The receipt the request carries for `room` at `now` (unix seconds on the store's clock),
    /// when the room gives receipts and the request may pass on one: a read (`GET` or `HEAD` as
    /// every framework reads it) on no consume route.
    pub(super) fn receipt(
        shared: &Shared,
        req: &RequestHeader,
        room: usize,
        now: u64,
        is_consume: bool,
    ) -> Option<cookie::Verified> {
        let r = &shared.rooms[room];
        r.cfg.order_receipt?;
        // Nor a protocol switch: a tunnel would outlive the receipt, and carry what it likes.
        if is_consume || !method::is_read(req) || req.headers.contains_key(http::header::UPGRADE) {
            return None;
        }
        let v = Self::verified_receipt(shared, req, room, now)?;
        // A pre-queue lets nobody through (as for an admission from before it).
        (!Self::events_refuse_cookies(shared, room, false)).then_some(v)
    }

    /// The receipt a request carries for `room`, whatever its method and path, as an origin
    /// command reads it on a page outside every room: only a `revoke` acts on it.
    pub(super) fn receipt_holder(
        shared: &Shared,
        req: &RequestHeader,
        room: usize,
    ) -> Option<super::command::Holder> {
        shared.rooms[room].cfg.order_receipt?;
        let v = Self::verified_receipt(shared, req, room, shared.cookie_secs(room))?;
        Some(super::command::Holder {
            vid: v.vid,
            expires: v.expires,
            receipt: true,
        })
    }

    /// The first of the request's receipts for `room` that verifies at `now` and whose
    /// visitor the shop has not revoked.
    fn verified_receipt(
        shared: &Shared,
        req: &RequestHeader,
        room: usize,
        now: u64,
    ) -> Option<cookie::Verified> {
        let r = &shared.rooms[room];
        cookie::find_map(cookie_values(req), &r.receipt_cookie, |v| {
            cookie::verify_receipt(&shared.config.cookie.keys, r.name(), v, now)
                .filter(|v| !r.revoked.holds(v.vid, now))
        })
    }

    /// Gives the visitor `vid`, whose order of `room` the origin took, a receipt: for the room's
    /// `order-receipt`, and no longer than `admission_expires`, the expiry of the admission the
    /// order used.
    pub(super) fn give_receipt(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        admission_expires: u64,
    ) {
        let r = &shared.rooms[room];
        let Some(life) = r.cfg.order_receipt else {
            return;
        };
        let now = shared.cookie_secs(room);
        let expires = admission_expires.min(now.saturating_add(life.as_secs()));
        let Some(max_age) = expires.checked_sub(now).filter(|&s| s > 0) else {
            return;
        };
        if let Some(value) =
            cookie::sign_receipt(&shared.config.cookie.keys, r.name(), vid, expires)
        {
            ctx.set_cookies.push(cookie::set_named(
                &r.receipt_cookie,
                &value,
                max_age,
                secure(shared, ctx),
            ));
        }
    }
}
