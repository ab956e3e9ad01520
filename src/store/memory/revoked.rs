//! The memory store's side of `finish` and of the revocation log: the same steps, in the same
//! order, as `lua/finish.lua` and the revocation read of `lua/admit.lua` (see
//! [`crate::store::finish`]).

use std::collections::VecDeque;

use super::RoomData;
use crate::clock::{micros, Micros};
use crate::store::finish::{self, Command, Ending, Revocation, Revocations};
use crate::store::marks::Mark;
use crate::store::order::MARKER_MARGIN;
use crate::store::{RoomParams, VisitorId};

/// The room's revoked admissions, numbered in the order they came by the store's clock (µs,
/// above the last: as the Redis ZSET scored by the room's `revoke_seq`).
#[derive(Debug, Default)]
pub(super) struct Log {
    entries: VecDeque<(u64, Revocation)>,
    last: u64,
    /// The highest number trimmed (the Redis room hash's `revoke_trimmed`).
    trimmed: u64,
}

impl Log {
    /// Numbers `r` (again, for a retried call: one entry per admission and `until`).
    fn add(&mut self, r: Revocation, wall: Micros) {
        let wall_secs = wall / 1_000_000;
        self.trim(wall_secs);
        self.entries.retain(|(_, e)| *e != r);
        self.last = wall.max(self.last + 1);
        self.entries.push_back((self.last, r));
    }

    /// Drops entries from the oldest while their cookies have expired (a newer entry that
    /// expired earlier goes when it reaches the front: nothing reads past an entry's `until`).
    fn trim(&mut self, wall_secs: u64) {
        let margin = finish::TRIM_MARGIN.as_secs();
        while self
            .entries
            .front()
            .is_some_and(|(_, r)| r.until.saturating_add(margin) < wall_secs)
        {
            if let Some((n, _)) = self.entries.pop_front() {
                self.trimmed = self.trimmed.max(n);
            }
        }
    }

    /// The entries numbered after `after` (see [`finish::read_from`]), at most
    /// [`finish::MAX_PER_TICK`].
    pub(super) fn after(&mut self, after: Option<u64>, stale: bool, wall_secs: u64) -> Revocations {
        let Some(after) = after else {
            return Revocations::default();
        };
        self.trim(wall_secs);
        let present = self.entries.iter().any(|(n, _)| *n == after);
        let from = finish::read_from(after, self.last, stale, present, self.trimmed);
        let list: Vec<(u64, Revocation)> = self
            .entries
            .iter()
            .filter(|(n, _)| *n > from)
            .take(finish::MAX_PER_TICK)
            .copied()
            .collect();
        Revocations {
            last: list.last().map(|(n, _)| *n).unwrap_or(from),
            list: list.into_iter().map(|(_, r)| r).collect(),
        }
    }
}

impl RoomData {
    /// `finish.lua`: out of active and out of the line, a confirmed marker living at least
    /// until `ending.until` and past the session's deadline here (by the margin), and a
    /// revocation numbered in the log, as long. Returns the revocation's end.
    pub(super) fn finish_admission(
        &mut self,
        p: &RoomParams,
        vid: VisitorId,
        ending: &Ending,
        now: Micros,
        wall: Micros,
    ) -> u64 {
        let wall_secs = wall / 1_000_000;
        self.marks.prune(now, wall_secs);
        let margin = micros(MARKER_MARGIN);
        let mut marker_until = now + micros(ending.marker_life(wall_secs));
        let mut revoked_until = ending.until;
        if let Some(exp) = self.active.remove(&vid) {
            self.expiries.remove(&(exp, vid));
            if exp > now {
                marker_until = marker_until.max(exp + margin);
                // `exp` is on the store's monotonic clock; the revocation's end on the wall's.
                let left = (exp - now).div_ceil(1_000_000);
                revoked_until = revoked_until.max(wall_secs + left + MARKER_MARGIN.as_secs());
            }
        }
        self.remove_waiter(vid);
        let until = self.marks.until(&vid).max(marker_until);
        self.marks
            .set(vid, Mark::Confirmed(ending.request.clone()), until);
        // `ending.until` is on the wall clock, which may step back.
        self.marks.hold_until_wall(vid, ending.until);
        // The origin's word settles an order in flight, and the admission is used on the
        // liveness clock as long as its marker lives, too (as in finish.lua).
        self.pending_live.forget(&vid);
        let wall_left = micros(std::time::Duration::from_secs(
            ending.until.saturating_sub(wall_secs),
        ));
        self.note_used(p, vid, now, (until - now).max(wall_left));
        // The session the origin ended counts as ordered for join-limit (as in finish.lua).
        self.ordered.note(vid, now, p.abandon_after);
        if ending.command == Command::Revoke {
            self.revoked.add(
                Revocation {
                    vid,
                    until: revoked_until,
                },
                wall,
            );
        }
        revoked_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(byte: u8, until: u64) -> Revocation {
        Revocation {
            vid: VisitorId::from_bytes([byte; 16]),
            until,
        }
    }

    #[test]
    fn the_log_is_read_after_a_number_and_trimmed_when_expired() {
        let mut log = Log::default();
        assert_eq!(log.after(None, false, 0), Revocations::default());
        log.add(r(1, 100), 0);
        log.add(r(2, 500), 0);
        let all = log.after(Some(0), false, 0);
        assert_eq!((all.list.len(), all.last), (2, 2));
        let rest = log.after(Some(1), false, 0);
        assert_eq!((rest.list.as_slice(), rest.last), (&[r(2, 500)][..], 2));
        assert_eq!(log.after(Some(2), false, 0).list, vec![]);
        // A retry is numbered again and kept once.
        log.add(r(1, 100), 0);
        assert_eq!(log.after(Some(2), false, 0).list, vec![r(1, 100)]);
        assert_eq!(log.after(Some(0), false, 0).list.len(), 2);
        // Past its until (and the margin), the oldest goes.
        let later = 500 + finish::TRIM_MARGIN.as_secs() + 1;
        assert_eq!(log.after(Some(0), false, later).list, vec![]);
        // Numbered by the clock (µs), above the last: a log restored from an older copy hands
        // out no number twice once time has moved on.
        let at = later * 1_000_000;
        log.add(r(3, later + 10), at);
        let n = log.after(Some(3), false, later);
        assert_eq!((n.list.as_slice(), n.last), (&[r(3, later + 10)][..], at));
        log.add(r(4, later + 10), at);
        assert_eq!(log.after(Some(at), false, later).last, at + 1);
        // A caller ahead of the log (it lost its data) reads from the start.
        let reset = log.after(Some(at + 99), false, later);
        assert_eq!(reset.list.len(), 2);
        // A caller of another generation reads from the start, behind the log or not.
        assert_eq!(log.after(Some(at), true, later).list.len(), 2);
    }

    /// A log that lost writes and kept its generation (a failover to a replica behind, whose
    /// clock is behind too): the entry a caller read last is gone without a trim, and the
    /// caller reads from the start, also once the new numbers passed its own (re-review).
    #[test]
    fn a_caller_whose_last_entry_was_lost_reads_from_the_start() {
        let mut log = Log::default();
        log.add(r(1, 10_000), 100);
        log.add(r(2, 10_000), 200);
        let seen = log.after(Some(0), false, 0).last;
        assert_eq!(seen, 200);
        // The second write lost; the next is numbered on a clock behind, the one after it
        // past the caller's number.
        log.entries.pop_back();
        log.last = 100;
        log.add(r(3, 10_000), 150);
        log.add(r(4, 10_000), 300);
        let got = log.after(Some(seen), false, 0);
        assert_eq!(got.list, vec![r(1, 10_000), r(3, 10_000), r(4, 10_000)]);
        // A trimmed last entry is not a loss.
        let mut log = Log::default();
        log.add(r(1, 10), 100);
        log.add(r(2, 10_000), 200);
        assert_eq!(log.after(Some(100), false, 1_000).list, vec![r(2, 10_000)]);
    }
}
