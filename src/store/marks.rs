//! The memory store's consumed markers: per visitor, the last order that took their admission
//! and where it stands (the Redis store keeps the same in `{anteroom:R}:consumed:<vid>`, see
//! `lua/prelude.lua`). Each marker expires on its own, like a Redis key with a `PX`.

use std::collections::{BTreeSet, HashMap};

use super::{RequestId, VisitorId};
use crate::clock::Micros;

/// Where the last order of an admission stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Mark {
    /// Taken by `request`, not settled yet. `held_until` is the session's expiry before the
    /// consume, restored (at least) if it is given back. Its grace period ends at `deadline`
    /// on the store clock and at `live_deadline` on the liveness clock (the grace period and
    /// the clock's cap on from the consume or the last beat), whichever is later
    /// ([`Mark::pending_left`]).
    Pending {
        request: RequestId,
        deadline: Micros,
        held_until: Micros,
        live_deadline: Micros,
    },
    /// Used up by `request`.
    Confirmed(RequestId),
    /// `request` failed and gave the admission back (kept so that a retried give-back is
    /// recognised).
    GivenBack(RequestId),
}

impl Mark {
    /// µs until a pending order's grace period is up (0: it is; and for any other mark), at
    /// store time `now` and liveness clock `live`: both deadlines must have passed, so time in
    /// which no call could reach the store does not run it down (as `pending_left` in
    /// `lua/prelude.lua`).
    pub fn pending_left(&self, now: Micros, live: Micros) -> Micros {
        match self {
            Mark::Pending {
                deadline,
                live_deadline,
                ..
            } => deadline
                .saturating_sub(now)
                .max(live_deadline.saturating_sub(live)),
            _ => 0,
        }
    }

    pub fn request(&self) -> &RequestId {
        match self {
            Mark::Pending { request, .. } | Mark::Confirmed(request) | Mark::GivenBack(request) => {
                request
            }
        }
    }
}

/// Markers by visitor, each with its own expiry.
#[derive(Debug, Default)]
pub struct Marks {
    by_vid: HashMap<VisitorId, (Mark, Micros)>,
    expiries: BTreeSet<(Micros, VisitorId)>,
}

impl Marks {
    /// Forgets the markers whose time is up.
    pub fn prune(&mut self, now: Micros) {
        while let Some(&(until, vid)) = self.expiries.first() {
            if until > now {
                break;
            }
            self.expiries.pop_first();
            self.by_vid.remove(&vid);
        }
    }

    pub fn get(&self, vid: &VisitorId) -> Option<&Mark> {
        self.by_vid.get(vid).map(|(m, _)| m)
    }

    /// Until when the visitor's marker lives (0 when there is none).
    pub fn until(&self, vid: &VisitorId) -> Micros {
        self.by_vid.get(vid).map(|(_, u)| *u).unwrap_or(0)
    }

    /// Sets the marker, living until `until`.
    pub fn set(&mut self, vid: VisitorId, mark: Mark, until: Micros) {
        if let Some((_, old)) = self.by_vid.insert(vid, (mark, until)) {
            self.expiries.remove(&(old, vid));
        }
        self.expiries.insert((until, vid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_expire_on_their_own() {
        let mut m = Marks::default();
        let (a, b) = (VisitorId::random(), VisitorId::random());
        let r = RequestId::random();
        m.set(a, Mark::Confirmed(r.clone()), 10);
        m.set(b, Mark::GivenBack(r.clone()), 20);
        m.set(a, Mark::Confirmed(r.clone()), 30);
        m.prune(25);
        assert!(m.get(&b).is_none());
        assert_eq!(m.get(&a).map(Mark::request), Some(&r));
        m.prune(30);
        assert!(m.get(&a).is_none());
    }
}
