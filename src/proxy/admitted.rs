//! The admission cookie: read and verified for a room (with what the room's events refuse),
//! issued to a visitor let in, renewed past half its life, and kept running on this instance
//! when the store cannot renew it. Who the visitor is and their place: [`super::visitor`].

use pingora::http::RequestHeader;

use super::{cookie_values, secure, Ctx, Proxy};
use crate::app::Shared;
use crate::cookie;
use crate::store::VisitorId;

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
        Self::admission_besides(shared, req, room, now, order, &[])
    }

    /// [`Self::admission`], passing over the values of the visitors in `tried` (an order whose
    /// admission the store found used tries the next value the request carries: found by
    /// review, a used admission tossed in first by a sibling site refused every order of the
    /// visitor's own). A revoked value is passed over too, not the end of the search, and a
    /// revocation holds whatever the room's `origin-commands` says now (found by review: a
    /// reload that turned it off let revoked cookies back in).
    pub(super) fn admission_besides(
        shared: &Shared,
        req: &RequestHeader,
        room: usize,
        now: u64,
        order: bool,
        tried: &[VisitorId],
    ) -> Option<cookie::Verified> {
        let r = &shared.rooms[room];
        let v = cookie::find_map(cookie_values(req), &r.cookie_name, |v| {
            cookie::verify(&shared.config.cookie.keys, r.name(), v, now)
                .filter(|v| !tried.contains(&v.vid) && !r.revoked.holds(v.vid, now))
        })?;
        // A pre-queue admits nobody, not with a cookie from before it either: its holder
        // registers like everyone else (the store ended that session as the pre-queue began).
        // Nor is an order at an opening the store had not recorded when this instance last
        // heard from it: the store is asked, which ends a session from before the event if no
        // call has yet (re-review: after an outage that spanned the pre-queue, such a cookie
        // placed an order before the room's tick reached the store).
        (!Self::events_refuse_cookies(shared, room, order)).then_some(v)
    }

    /// Whether the room's events refuse what a cookie of it vouches for now (see
    /// `Events::refuses_cookies`): an admission, an order, or an order's receipt.
    pub(super) fn events_refuse_cookies(shared: &Shared, room: usize, order: bool) -> bool {
        let r = &shared.rooms[room];
        r.events.any()
            && r.events
                .refuses_cookies(shared.clock.now_micros(), r.live.heard(), order)
    }

    /// Whether the request carries an admission of the room for another visitor than `vid`
    /// beside it (a sibling site's tossed in): then no admission cookie is set or cleared, for
    /// it would replace the visitor's own in the browser (found by review: the renewal of a
    /// tossed admission took the place of every visitor's own, and one admission's order left
    /// all of them "already used"). Costs a scan of the header when it carries one value.
    pub(super) fn several_admissions(
        shared: &Shared,
        req: &RequestHeader,
        room: usize,
        now: u64,
        vid: VisitorId,
    ) -> bool {
        let r = &shared.rooms[room];
        if cookie::values(cookie_values(req), &r.cookie_name)
            .nth(1)
            .is_none()
        {
            return false;
        }
        cookie::values(cookie_values(req), &r.cookie_name)
            .take(cookie::VALUES_TRIED)
            .filter_map(|v| cookie::verify(&shared.config.cookie.keys, r.name(), v, now))
            .any(|v| v.vid != vid)
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
    pub(super) fn grant_for(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        ttl: std::time::Duration,
    ) {
        if ctx.hold_admission {
            return;
        }
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
        // Let in: the join challenge's marker that this visitor was asked goes, so that back
        // within its life (their order placed, a line again) they are asked again rather than
        // held to the stricter limit (found by re-review: such a browser got 429 behind an
        // address whose no-script budget was used up). Clearing it spares a script no work.
        if r.cfg.join_challenge.is_some() {
            ctx.set_cookies.push(cookie::set_named(
                &r.asked_cookie,
                "",
                0,
                secure(shared, ctx),
            ));
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
        let seen = shared.seen_generation(room);
        let touch = shared
            .store
            .touch_seen(&r.cfg.params, vid, seen.as_ref(), expires);
        let failed = match shared.store_call("touch", r.name(), touch).await {
            Ok(t) if t.held() => {
                r.note_taken_back(t);
                return Self::grant(shared, ctx, room, vid);
            }
            Ok(crate::store::Touched::TooSoon) => None,
            Ok(_) => return,
            Err(e) => {
                shared.warn_store_error(&e);
                Some(e)
            }
        };
        Self::keep_unrenewed(shared, ctx, room, vid, expires, failed.as_ref());
    }

    /// The store could not renew the admission (`failed`: its error, `None` when a young loss
    /// put it off): kept running here when [`crate::room::kept_life`] says so, its cookie
    /// given a new life (never past the bound after the store last answered), and told to the
    /// store once it answers, counted past max-active (the visitor was in the shop before).
    pub(super) fn keep_unrenewed(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        expires: u64,
        failed: Option<&crate::store::StoreError>,
    ) {
        use crate::room::policy::Failure;
        let breaker_open = failed.is_some_and(|e| Failure::of(e) == Failure::BreakerOpen);
        let r = &shared.rooms[room];
        let ttl = r.cfg.params.session_ttl.as_secs().max(1);
        let left = expires.saturating_sub(shared.cookie_secs(room));
        let away = r.live.heard_at().map(|t| t.elapsed());
        let prequeue_in = r
            .events
            .any()
            .then(|| r.events.secs_to_next_prequeue(shared.clock.now_micros()))
            .flatten();
        if let Some(life) = crate::room::kept_life(breaker_open, left, ttl, away, prequeue_in) {
            let life = std::time::Duration::from_secs(life);
            r.local.keep(vid, shared.clock.now_micros(), life);
            Self::grant_for(shared, ctx, room, vid, life);
        }
    }
}
