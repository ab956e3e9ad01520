//! The memory store's records of orders lately, read only by `join-limit`'s count: the same as
//! `{anteroom:R}:ordered:<vid>` in Redis (`note_ordered` in `lua/prelude.lua`). A record of an
//! order that went through (or of the origin's `complete` or `revoke`) lives `abandon-after`
//! and [`ORDERED_MARGIN`], as long as a queue ticket kept from before it can vouch for a place,
//! and is spent by the visitor's next newcomer join counted within the limit (one order, one
//! counted way back); apart from the consumed marker, which lives `session-ttl` and a minute
//! (found by review: past the marker, a kept ticket rejoined the line uncounted).

use std::collections::HashMap;
use std::time::Duration;

use crate::clock::{micros, Micros};
use crate::store::order::ORDERED_MARGIN;
use crate::store::VisitorId;

/// Visitors whose order is on record, each until when the record lives.
#[derive(Debug, Default)]
pub(super) struct Ordered {
    until: HashMap<VisitorId, Micros>,
    /// When the records past their time were last dropped: at most once a second.
    swept_at: Option<Micros>,
}

impl Ordered {
    /// Records an order of `vid` at `now` under the room's `abandon-after`; never shortens a
    /// record (as `PTTL` in `note_ordered`).
    pub fn note(&mut self, vid: VisitorId, now: Micros, abandon_after: Duration) {
        if self
            .swept_at
            .is_none_or(|at| now.saturating_sub(at) >= 1_000_000)
        {
            self.swept_at = Some(now);
            self.until.retain(|_, until| *until > now);
        }
        let until = now.saturating_add(micros(abandon_after.saturating_add(ORDERED_MARGIN)));
        let kept = self.until.entry(vid).or_insert(0);
        *kept = (*kept).max(until);
    }

    /// Whether an order of `vid` is on record at `now`.
    pub fn holds(&self, vid: &VisitorId, now: Micros) -> bool {
        self.until.get(vid).is_some_and(|until| *until > now)
    }

    /// Spends `vid`'s record: a join of theirs was counted.
    pub fn forget(&mut self, vid: &VisitorId) {
        self.until.remove(vid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_lives_abandon_after_and_the_margin_until_spent() {
        let mut o = Ordered::default();
        let v = VisitorId::random();
        let min = 60_000_000;
        o.note(v, 0, Duration::from_secs(300));
        assert!(o.holds(&v, 300 * 1_000_000 + min - 1));
        assert!(!o.holds(&v, 300 * 1_000_000 + min));
        // A later order under a shorter abandon-after (a reload) keeps the longer record.
        o.note(v, 1_000_000, Duration::from_secs(1));
        assert!(o.holds(&v, 300 * 1_000_000 + min - 1));
        assert!(!o.holds(&VisitorId::random(), 0));
        // Spent by a counted join.
        o.forget(&v);
        assert!(!o.holds(&v, 2_000_000));
        // Swept once past its time.
        o.note(v, 0, Duration::ZERO);
        o.note(VisitorId::random(), 400 * 1_000_000, Duration::ZERO);
        assert!(!o.until.contains_key(&v));
    }
}
