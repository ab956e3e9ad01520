//! The memory store's records of orders lately, read only by `join-limit`'s count: the same as
//! `{anteroom:R}:ordered:<vid>` in Redis (`note_ordered` in `lua/prelude.lua`). A record of an
//! order that went through (or of the origin's `complete` or `revoke`) keeps when it was and
//! lives `abandon-after` and [`ORDERED_MARGIN`] from then, as long as a queue ticket kept from
//! before it can vouch for a place; apart from the consumed marker, which lives `session-ttl`
//! and a minute (found by review: past the marker, a kept ticket rejoined the line uncounted).

use std::collections::HashMap;
use std::time::Duration;

use crate::clock::{micros, Micros};
use crate::store::order::{ORDERED_MARGIN, TICKET_AGE};
use crate::store::VisitorId;

/// Visitors who ordered lately: when (the store's monotonic clock), and until when the record
/// lives.
#[derive(Debug, Default)]
pub(super) struct Ordered {
    by_vid: HashMap<VisitorId, (Micros, Micros)>,
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
            self.by_vid.retain(|_, (_, until)| *until > now);
        }
        let until = now.saturating_add(micros(abandon_after.saturating_add(ORDERED_MARGIN)));
        let kept = self.by_vid.entry(vid).or_insert((now, 0));
        *kept = (kept.0.max(now), kept.1.max(until));
    }

    /// Whether `vid` ordered since a queue ticket's last poll `age` seconds before `now` (by
    /// the reading instance's clock, in whole seconds: a poll up to [`TICKET_AGE`] after the
    /// order counts as before it).
    pub fn since(&self, vid: &VisitorId, now: Micros, age: u64) -> bool {
        self.by_vid.get(vid).is_some_and(|&(at, until)| {
            let polled = now.saturating_sub(age.saturating_mul(1_000_000));
            until > now && polled <= at.saturating_add(micros(TICKET_AGE))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    #[test]
    fn a_record_lives_abandon_after_and_the_margin_and_is_never_shortened() {
        let mut o = Ordered::default();
        let v = VisitorId::random();
        o.note(v, 10 * S, Duration::from_secs(300));
        // A ticket polled before the order, read until the record's end.
        assert!(o.since(&v, 370 * S - 1, 361));
        assert!(!o.since(&v, 370 * S, 361));
        // A later order under a shorter abandon-after (a reload) keeps the longer record.
        o.note(v, 11 * S, Duration::from_secs(1));
        assert!(o.since(&v, 370 * S - 1, 361));
        assert!(!o.since(&VisitorId::random(), 20 * S, 15));
        // Swept once past its time.
        o.note(VisitorId::random(), 400 * S, Duration::ZERO);
        assert!(!o.by_vid.contains_key(&v));
    }

    #[test]
    fn a_ticket_polled_after_the_order_is_not_of_it() {
        let mut o = Ordered::default();
        let v = VisitorId::random();
        o.note(v, 100 * S, Duration::from_secs(300));
        // Polled 30 s before the order, read 10 s after it: the order is since.
        assert!(o.since(&v, 110 * S, 40));
        // Polled 5 s after it (a place taken since, counted then): not.
        assert!(!o.since(&v, 110 * S, 5));
        // Within the second a ticket's age is told in: taken as before.
        assert!(o.since(&v, 110 * S, 9));
        assert!(!o.since(&v, 110 * S, 8));
    }
}
