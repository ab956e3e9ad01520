//! The origin's word on an admission (`Anteroom-Command: complete | revoke`, see
//! [`crate::proxy`]'s origin commands): the types of `Store::finish` and of the revocations
//! `admit` hands back.
//!
//! Both commands end the admission in the store in one step, like a confirmed order: the
//! visitor leaves `active` (the slot is free at once) and a confirmed marker stops the sliding
//! renewal (`touch`) from bringing it back, for as long as any cookie of it can verify.
//!
//! `revoke` also refuses the admission's cookies before they expire. The admitted path makes
//! no store call, so a revocation is learned the way the line is: the store keeps revoked
//! admissions in a log numbered by a per-room sequence, and each instance's per-tick `admit`
//! asks for the entries after the last number it saw ([`AdmitContext::revoked_after`]). Every
//! instance refuses the cookie locally within a tick; the instance that got the command does
//! at once. An entry lives until every cookie of that admission has expired (`until`, unix
//! seconds as the proxies read cookie expiry), then is trimmed.
//!
//! [`AdmitContext::revoked_after`]: super::AdmitContext::revoked_after

use std::time::Duration;

use super::order::MARKER_MARGIN;
use super::{RequestId, VisitorId};

/// The most revocations one `admit` reply carries; the rest come with the next ticks.
pub const MAX_PER_TICK: usize = 1000;

/// A revoked entry is trimmed this long after its `until` (the store's clock and the proxies'
/// differ a little; nothing reads an entry past its `until`).
pub const TRIM_MARGIN: Duration = MARKER_MARGIN;

/// What the origin said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// The order is done: the slot is freed and the admission cannot be renewed; the cookie
    /// the visitor holds works until it expires (like a consumed order's), for the
    /// confirmation pages after it.
    Complete,
    /// The session ends: the slot is freed and every instance refuses the cookie within a
    /// tick.
    Revoke,
}

impl Command {
    /// The header value, read without case and without surrounding blanks; `None` for any
    /// other word (ignored, and counted as `unknown`).
    pub fn parse(v: &[u8]) -> Option<Self> {
        let v = v.trim_ascii();
        if v.eq_ignore_ascii_case(b"complete") {
            Some(Command::Complete)
        } else if v.eq_ignore_ascii_case(b"revoke") {
            Some(Command::Revoke)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Command::Complete => "complete",
            Command::Revoke => "revoke",
        }
    }
}

/// What the origin's answer commands, from every value of the header (each may list several,
/// comma-separated): the strongest word wins (`revoke` over `complete`), unknown words are
/// counted apart. `(None, 0)` when there is no header.
pub fn commanded<'a>(values: impl Iterator<Item = &'a [u8]>) -> (Option<Command>, u32) {
    let mut found = None;
    let mut unknown = 0;
    for v in values {
        for word in v.split(|b| *b == b',') {
            if word.trim_ascii().is_empty() {
                continue;
            }
            match Command::parse(word) {
                Some(Command::Revoke) => found = Some(Command::Revoke),
                Some(Command::Complete) if found.is_none() => found = Some(Command::Complete),
                Some(Command::Complete) => {}
                None => unknown += 1,
            }
        }
    }
    (found, unknown)
}

/// What `finish` needs to know.
#[derive(Debug, Clone)]
pub struct Ending {
    pub command: Command,
    /// Names the confirmed marker it leaves (a random id no order carries).
    pub request: RequestId,
    /// Until when (unix seconds, the store's clock as the proxies read it) a cookie of this admission can verify:
    /// the revocation lives that long, and the marker at least as long.
    pub until: u64,
}

impl Ending {
    /// The ending of an admission whose cookie expires at `expires` (unix seconds), told at
    /// `now`: past that cookie and past any renewal made meanwhile (`session-ttl` from now),
    /// plus [`MARKER_MARGIN`] for the clocks of other instances.
    pub fn of(command: Command, now: u64, expires: u64, session_ttl: Duration) -> Self {
        let until = expires
            .max(now.saturating_add(session_ttl.as_secs()))
            .saturating_add(MARKER_MARGIN.as_secs());
        Self {
            command,
            request: RequestId::random(),
            until,
        }
    }

    /// How long its marker must live from `now` (unix seconds): until `until`, at least.
    pub fn marker_life(&self, now: u64) -> Duration {
        Duration::from_secs(self.until.saturating_sub(now).max(1))
    }
}

/// A revoked admission, as the instances learn it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revocation {
    pub vid: VisitorId,
    /// Refused until then (unix seconds, the store's clock as the proxies read it:
    /// `Shared::cookie_secs`).
    pub until: u64,
}

/// The revocations an `admit` call hands back: those numbered after the caller's
/// [`super::AdmitContext::revoked_after`], oldest first, and the number to ask after next time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revocations {
    pub list: Vec<Revocation>,
    pub last: u64,
}

/// Where the next read starts: after `after`, or from the start when the caller's number is
/// not of this log: the store's sequence is behind it, the caller knew another store
/// generation (`stale`: the store lost its data; re-review: once the new numbers caught up
/// with the caller's old one, the entries up to it were skipped for good), or the entry the
/// caller read last is not in the log (`present`) and was not trimmed (numbers up to
/// `trimmed` were): the log lost writes and kept its generation (a failover to a replica
/// behind, whose clock was behind too, numbered new entries below the caller's; re-review).
/// A retried revoke renumbers its entry, which reads the log again from the start: harmless.
/// Both backends follow this rule.
pub fn read_from(after: u64, store_last: u64, stale: bool, present: bool, trimmed: u64) -> u64 {
    let lost = after > 0 && !present && after > trimmed;
    if stale || after > store_last || lost {
        0
    } else {
        after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(vs: &[&str]) -> (Option<Command>, u32) {
        commanded(vs.iter().map(|v| v.as_bytes()))
    }

    #[test]
    fn a_caller_reads_from_the_start_when_its_number_is_not_of_this_log() {
        assert_eq!(read_from(0, 0, false, false, 0), 0);
        assert_eq!(read_from(5, 9, false, true, 0), 5);
        // Ahead of the log, of another generation.
        assert_eq!(read_from(10, 9, false, true, 0), 0);
        assert_eq!(read_from(5, 9, true, true, 0), 0);
        // Its last entry gone: trimmed, or lost.
        assert_eq!(read_from(5, 9, false, false, 5), 5);
        assert_eq!(read_from(5, 9, false, false, 7), 5);
        assert_eq!(read_from(5, 9, false, false, 4), 0);
    }

    #[test]
    fn the_header_is_read_without_case_and_revoke_is_the_strongest() {
        assert_eq!(words(&[]), (None, 0));
        assert_eq!(words(&["complete"]), (Some(Command::Complete), 0));
        assert_eq!(words(&[" Complete "]), (Some(Command::Complete), 0));
        assert_eq!(words(&["REVOKE"]), (Some(Command::Revoke), 0));
        assert_eq!(words(&["complete, revoke"]), (Some(Command::Revoke), 0));
        assert_eq!(words(&["revoke", "complete"]), (Some(Command::Revoke), 0));
        assert_eq!(words(&["completed", "x"]), (None, 2));
        assert_eq!(words(&["complete,,"]), (Some(Command::Complete), 0));
        assert_eq!(words(&["com plete"]), (None, 1));
    }

    #[test]
    fn an_ending_outlives_the_cookie_and_any_renewal() {
        let ttl = Duration::from_secs(600);
        // A cookie with 100 s left: a renewal now would run 600 s.
        let e = Ending::of(Command::Revoke, 1_000, 1_100, ttl);
        assert_eq!(e.until, 1_000 + 600 + MARKER_MARGIN.as_secs());
        // A cookie that outlives session-ttl (lowered by a reload since it was issued).
        let e = Ending::of(Command::Complete, 1_000, 5_000, ttl);
        assert_eq!(e.until, 5_000 + MARKER_MARGIN.as_secs());
        assert_eq!(e.marker_life(1_000), Duration::from_secs(4_060));
        assert_eq!(e.marker_life(u64::MAX), Duration::from_secs(1));
    }

    #[test]
    fn a_store_that_numbers_again_is_read_from_the_start() {
        assert_eq!(read_from(0, 0, false, true, 0), 0);
        assert_eq!(read_from(5, 9, false, true, 0), 5);
        assert_eq!(read_from(9, 9, false, true, 0), 9);
        assert_eq!(
            read_from(12, 3, false, true, 0),
            0,
            "the store lost its data"
        );
        assert_eq!(
            read_from(2, 3, true, true, 0),
            0,
            "lost, and numbered past the caller's old number since"
        );
    }
}
