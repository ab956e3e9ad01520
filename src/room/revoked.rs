//! The admissions this instance refuses before their cookies expire: revoked by the origin
//! (`Anteroom-Command: revoke`, see [`crate::store::finish`]). Learned from the per-tick
//! `admit` call (every instance within a tick) and, on the instance that got the command, at
//! once. The admitted path asks [`Revoked::holds`] only in rooms with `origin-commands`, and
//! an empty set answers with one atomic load.
//!
//! Kept over a reload (the same `Arc`): a SIGHUP must not let a revoked cookie back in.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;

use crate::store::{Revocation, Revocations, VisitorId};

/// Above this many entries, a note drops the expired ones first (the set stays as large as
/// the revocations whose cookies still verify).
const PRUNE_ABOVE: usize = 1024;

#[derive(Debug, Default)]
pub struct Revoked {
    by_vid: RwLock<HashMap<VisitorId, u64>>,
    /// Anything held: the admitted path's one load while nobody is revoked.
    any: AtomicBool,
    /// The last revocation number learned from the store (the next admit asks after it).
    last: AtomicU64,
}

impl Revoked {
    /// The visitor's admission is refused at `now` (unix seconds).
    pub fn holds(&self, vid: VisitorId, now: u64) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        self.by_vid
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&vid)
            .is_some_and(|until| *until > now)
    }

    /// Refuses `r.vid` until `r.until` (the later of two notes of one visitor stands).
    pub fn note(&self, r: Revocation, now: u64) {
        self.note_all(std::slice::from_ref(&r), now);
    }

    fn note_all(&self, list: &[Revocation], now: u64) {
        if list.is_empty() {
            return;
        }
        let mut m = self.by_vid.write().unwrap_or_else(|e| e.into_inner());
        if m.len() > PRUNE_ABOVE {
            m.retain(|_, until| *until > now);
        }
        for r in list.iter().filter(|r| r.until > now) {
            let until = m.entry(r.vid).or_insert(0);
            *until = (*until).max(r.until);
        }
        self.any.store(!m.is_empty(), Ordering::Release);
    }

    /// What the last `admit` handed back.
    pub fn learn(&self, r: &Revocations, now: u64) {
        self.note_all(&r.list, now);
        self.last.store(r.last, Ordering::Release);
    }

    /// What the next `admit` asks after.
    pub fn last(&self) -> u64 {
        self.last.load(Ordering::Acquire)
    }

    /// Drops what has expired (once a tick, off the request path).
    pub fn prune(&self, now: u64) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut m = self.by_vid.write().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, until| *until > now);
        self.any.store(!m.is_empty(), Ordering::Release);
    }

    pub fn len(&self) -> usize {
        self.by_vid.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(b: u8, until: u64) -> Revocation {
        Revocation {
            vid: VisitorId::from_bytes([b; 16]),
            until,
        }
    }

    #[test]
    fn a_revocation_holds_until_its_time_and_the_latest_note_stands() {
        let s = Revoked::default();
        let v = VisitorId::from_bytes([1; 16]);
        assert!(!s.holds(v, 0));
        s.note(r(1, 100), 10);
        assert!(s.holds(v, 99));
        assert!(!s.holds(v, 100));
        assert!(!s.holds(VisitorId::from_bytes([2; 16]), 50));
        s.note(r(1, 50), 10);
        assert!(s.holds(v, 99), "an earlier end does not shorten it");
        s.prune(100);
        assert!(s.is_empty() && !s.holds(v, 0));
    }

    #[test]
    fn learning_keeps_the_number_and_skips_what_has_expired() {
        let s = Revoked::default();
        s.learn(
            &Revocations {
                list: vec![r(1, 5), r(2, 500)],
                last: 7,
            },
            10,
        );
        assert_eq!((s.len(), s.last()), (1, 7));
        assert!(s.holds(VisitorId::from_bytes([2; 16]), 10));
    }
}
