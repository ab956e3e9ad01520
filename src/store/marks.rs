//! The memory store's consumed markers: per visitor, the last order that took their admission
//! and where it stands (the Redis store keeps the same in `{anteroom:R}:consumed:<vid>`, see
//! `lua/markers.lua`). Each marker expires on its own, like a Redis key with a `PX`.

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
    /// `lua/markers.lua`).
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
    /// Wall-clock seconds before which a visitor's marker is not forgotten, whatever the
    /// monotonic clock says ([`Marks::hold_until_wall`]).
    walls: HashMap<VisitorId, u64>,
}

impl Marks {
    /// Forgets the markers whose time is up at monotonic `now`, unless the wall clock
    /// (`wall_secs`) has not passed what [`Marks::hold_until_wall`] asked: those live on for
    /// what is left of it.
    pub fn prune(&mut self, now: Micros, wall_secs: u64) {
        while let Some(&(until, vid)) = self.expiries.first() {
            if until > now {
                break;
            }
            self.expiries.pop_first();
            match self.walls.get(&vid) {
                Some(&wall_until) if wall_until > wall_secs => {
                    let later = now.saturating_add((wall_until - wall_secs) * 1_000_000);
                    if let Some(entry) = self.by_vid.get_mut(&vid) {
                        entry.1 = later;
                    }
                    self.expiries.insert((later, vid));
                }
                _ => {
                    self.by_vid.remove(&vid);
                    self.walls.remove(&vid);
                }
            }
        }
    }

    /// Keeps the visitor's marker at least until the wall clock reads `secs`: a marker taken
    /// for an order must outlive every cookie of the admission, and cookies expire by the wall
    /// clock (the store's, as the proxy reads it). Its monotonic life alone let a cookie that a
    /// wall clock stepped back kept valid order once more after the marker was gone (the
    /// Redis store's markers expire by Redis's own clock: a step back keeps them longer).
    pub fn hold_until_wall(&mut self, vid: VisitorId, secs: u64) {
        if self.by_vid.contains_key(&vid) {
            let w = self.walls.entry(vid).or_insert(0);
            *w = (*w).max(secs);
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

/// Used admissions on the liveness clock (the Redis store's `{anteroom:R}:used`, `note_used`
/// in `lua/markers.lua`): a confirmed marker expires on the store's clock, which runs while no
/// call reaches the store; this record stands still with the liveness clock, so that an
/// outage longer than the marker's life does not let a kept copy of a used admission's cookie
/// be taken back and order again (found by re-review r98a). The memory store keeps the
/// sessions a pre-queue ended in one too (`{anteroom:R}:used`'s 'e' members).
#[derive(Debug, Default)]
pub struct Used {
    by_vid: HashMap<VisitorId, Micros>,
    ends: BTreeSet<(Micros, VisitorId)>,
}

impl Used {
    /// Records `vid`'s admission as used until liveness clock `until` (never shortened), and
    /// forgets the records `live` has passed.
    pub fn note(&mut self, vid: VisitorId, until: Micros, live: Micros) {
        let had = self.by_vid.get(&vid).copied();
        if had.is_none_or(|h| h < until) {
            if let Some(h) = had {
                self.ends.remove(&(h, vid));
            }
            self.by_vid.insert(vid, until);
            self.ends.insert((until, vid));
        }
        while let Some(&(end, old)) = self.ends.first() {
            if end > live {
                break;
            }
            self.ends.pop_first();
            self.by_vid.remove(&old);
        }
    }

    /// Whether `vid`'s admission was used and a cookie of it may still verify at `live`.
    pub fn holds(&self, vid: &VisitorId, live: Micros) -> bool {
        self.left(vid, live) > 0
    }

    /// How long `vid`'s record still runs at `live` (0: none).
    pub fn left(&self, vid: &VisitorId, live: Micros) -> Micros {
        self.by_vid
            .get(vid)
            .map_or(0, |&until| until.saturating_sub(live))
    }

    /// Admitted again: the record of an earlier admission no longer speaks for the visitor.
    pub fn forget(&mut self, vid: &VisitorId) {
        if let Some(until) = self.by_vid.remove(vid) {
            self.ends.remove(&(until, *vid));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record lives until its end on the liveness clock, is never shortened, goes with a new
    /// admission, and is forgotten once the clock has passed it.
    #[test]
    fn a_used_record_runs_on_the_liveness_clock() {
        let mut u = Used::default();
        let (a, b) = (VisitorId::random(), VisitorId::random());
        u.note(a, 100, 0);
        u.note(a, 50, 0);
        assert!(u.holds(&a, 99));
        assert!(!u.holds(&a, 100));
        u.note(b, 300, 0);
        u.forget(&b);
        assert!(!u.holds(&b, 0));
        u.note(b, 300, 150);
        assert!(!u.by_vid.contains_key(&a), "passed by the clock: forgotten");
        assert_eq!(u.ends.len(), 1);
    }

    #[test]
    fn markers_expire_on_their_own() {
        let mut m = Marks::default();
        let (a, b) = (VisitorId::random(), VisitorId::random());
        let r = RequestId::random();
        m.set(a, Mark::Confirmed(r.clone()), 10);
        m.set(b, Mark::GivenBack(r.clone()), 20);
        m.set(a, Mark::Confirmed(r.clone()), 30);
        m.prune(25, 0);
        assert!(m.get(&b).is_none());
        assert_eq!(m.get(&a).map(Mark::request), Some(&r));
        m.prune(30, 0);
        assert!(m.get(&a).is_none());
    }

    /// A marker held until a wall-clock time outlives its monotonic life while the wall clock
    /// has not reached it (a step back), and goes once it has.
    #[test]
    fn a_marker_held_by_the_wall_clock_outlives_a_step_back() {
        let mut m = Marks::default();
        let a = VisitorId::random();
        m.set(a, Mark::Confirmed(RequestId::random()), 10_000_000);
        m.hold_until_wall(a, 1_000);
        // The monotonic life is up, the wall clock (stepped back) reads 900: 100 s are left.
        m.prune(20_000_000, 900);
        assert!(m.get(&a).is_some());
        assert_eq!(m.until(&a), 120_000_000);
        m.prune(119_000_000, 999);
        assert!(m.get(&a).is_some());
        m.prune(120_000_000, 1_000);
        assert!(m.get(&a).is_none());
        // Gone with its hold: a new marker for the visitor is not held by the old one.
        m.set(a, Mark::Confirmed(RequestId::random()), 130_000_000);
        m.prune(130_000_000, 0);
        assert!(m.get(&a).is_none());
        // No hold for a visitor without a marker.
        m.hold_until_wall(a, 5_000);
        assert!(m.walls.is_empty());
    }
}
