//! The admitted path's one possible store call: the sliding renewal, or one `touch` that makes
//! the store count a session it does not know: for one session-ttl after the store lost its
//! data, once per admitted visitor on this instance (see [`crate::room::recovery`]); and once
//! for each visitor this instance admitted on its own (`local` policy) while the store was away.
//! Outside those cases this costs two atomic loads.

use super::{Ctx, Proxy};
use crate::app::Shared;
use crate::clock::Micros;
use crate::store::{Touched, VisitorId};

impl Proxy {
    /// Renews or re-registers the session of a visitor with a valid admission cookie (`now`:
    /// this instance's wall clock, read once for the request; `cookie_now`: the same instant on
    /// the store's clock, in seconds, which the cookie was checked at).
    pub(super) async fn keep_session(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        expires: u64,
        now: Micros,
        cookie_now: u64,
    ) {
        let r = &shared.rooms[room];
        let ttl = r.cfg.params.session_ttl.as_secs().max(1);
        let due = expires.saturating_sub(cookie_now) < ttl / 2;
        // Admitted here by the `local` policy while the store was away: the store has not
        // counted this session yet.
        let local = r.local.unregistered(vid);
        // Not while the loss is young: an order of this admission may be in flight on an
        // instance that has not seen it yet (see `Proxy::seen_generation`).
        let seen = shared.seen_generation(room);
        let quiet = seen.as_ref().map_or(std::time::Duration::ZERO, |s| s.quiet);
        if !local && (due || !r.recovery.claim(vid, now, quiet)) {
            // The renewal's own touch re-registers a session that is due anyway.
            return Self::refresh(shared, ctx, room, vid, expires).await;
        }
        // A local admission is counted past max-active: its visitor is in the shop whatever the
        // store says (found by review r89c).
        let touch = if local {
            shared
                .store
                .register_local(&r.cfg.params, vid, seen.as_ref(), expires)
        } else {
            shared
                .store
                .touch_seen(&r.cfg.params, vid, seen.as_ref(), expires)
        };
        match shared.store_call("touch", r.name(), touch).await {
            // Refused: max-active is reached (a session the store lost), or the admission was
            // used or ended. The cookie stays valid until it runs out; the visitor is not asked
            // again (one call per visitor, not per request).
            Ok(Touched::Refused) => {
                if local {
                    r.local.registered(vid);
                }
            }
            // Not taken back while a loss is young: a later request asks again (found by
            // review r92a: taken as final, the session counted as come back, and the line
            // took its slot).
            Ok(Touched::TooSoon) => {
                if !local {
                    r.recovery.release(vid);
                }
                if due {
                    Self::keep_unrenewed(shared, ctx, room, vid, expires, None);
                }
            }
            Ok(held @ (Touched::Held | Touched::TakenBack)) => {
                if local {
                    r.local.registered(vid);
                }
                r.note_taken_back(held);
                if due {
                    Self::grant(shared, ctx, room, vid);
                }
            }
            Err(e) => {
                shared.warn_store_error(&e);
                if !local {
                    r.recovery.release(vid);
                }
                // A session kept here while the store is away, due again: kept on.
                if due {
                    Self::keep_unrenewed(shared, ctx, room, vid, expires, Some(&e));
                }
            }
        }
    }
}
