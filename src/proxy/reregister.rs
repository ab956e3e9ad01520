//! The admitted path's one possible store call: the sliding renewal, or, for one session-ttl
//! after the store lost its data, one `touch` per admitted visitor on this instance so that the
//! store counts their session again (see [`crate::room::recovery`]). Outside that window this
//! costs one atomic load.

use super::{Ctx, Proxy};
use crate::app::Shared;
use crate::store::VisitorId;

impl Proxy {
    /// Renews or re-registers the session of a visitor with a valid admission cookie.
    pub(super) async fn keep_session(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        vid: VisitorId,
        expires: u64,
    ) {
        let r = &shared.rooms[room];
        let ttl = r.cfg.params.session_ttl.as_secs().max(1);
        let due = expires.saturating_sub(shared.clock.now_secs()) < ttl / 2;
        if due || !r.recovery.claim(vid, shared.clock.now_micros()) {
            // The renewal's own touch re-registers a session that is due anyway.
            return Self::refresh(shared, ctx, room, vid, expires).await;
        }
        match shared
            .store_call("touch", r.name(), shared.store.touch(&r.cfg.params, vid))
            .await
        {
            // `false`: max-active is reached. The cookie stays valid until it runs out; the
            // visitor is not asked again (one call per visitor, not per request).
            Ok(_) => {}
            Err(e) => {
                shared.warn_store_error(&e);
                r.recovery.release(vid);
            }
        }
    }
}
