//! Orders of this instance that the store may not know the end of: an order in flight (its
//! consume won, the origin has not answered), and an order that went through but whose confirm
//! failed (Redis down, partitioned, failing over) until that confirm lands. Meanwhile this
//! instance answers another order of that admission `409` itself, without asking the store —
//! which, had its grace period run out, would give the admission back and let the kept cookie
//! order again. The store's grace period does not run while no call can reach it (it runs on
//! the liveness clock too, see `pending_left` in `lua/markers.lua`), so instances that never
//! saw the order find it pending until the confirm lands; what remains is an instance cut off
//! from the store alone for longer than the grace period while the others are not.
//!
//! Kept over a reload (the same `Arc`). A shutdown or an upgrade waits, for up to
//! `shutdown-timeout`, until nothing is owed (`server::Signals::settle_owed`). Lost with the
//! process: an instance that dies owing a confirm leaves the order to the grace period, as an
//! instance that dies mid-order does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::store::{RequestId, VisitorId};

/// Where an order of this instance stands, for [`Owed::holds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owing {
    /// Its consume won and the origin has not answered: another order waits for it.
    InFlight,
    /// It went through and the store has not heard: another order is refused.
    Confirm,
    /// The shop ended the admission (`Anteroom-Command: complete` or `revoke`) and the store
    /// has not heard: another order is refused, as for [`Owing::Confirm`].
    Command,
}

/// The process is stopping (its listeners closed, or its sockets handed to a new process):
/// an order dropped mid-flight from now was cut off by the shutdown, not given up by its
/// visitor, and stays counted as still at the shop for the exit's report (found by review: the
/// runtime's end dropped such orders, which forgot them, and the exit reported nothing while a
/// second order of the admission went through once the grace period had run).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Marks the process as stopping (see [`STOPPING`]).
pub fn stop() {
    STOPPING.store(true, Ordering::Relaxed);
}

/// Whether the process is stopping.
pub fn stopping() -> bool {
    STOPPING.load(Ordering::Relaxed)
}

/// Per room name, its [`Owed`], over every reload: a room a reload removed still owes what it
/// owed, and the shutdown waits for it and reports it (found by review: only the rooms of the
/// running file were counted, and a removed room's owed confirm was dropped unreported).
#[derive(Debug, Default)]
pub struct OwedBook {
    rooms: Mutex<HashMap<String, Arc<Owed>>>,
}

impl OwedBook {
    /// The record of the room named `room`.
    pub fn of(&self, room: &str) -> Arc<Owed> {
        let mut rooms = self.rooms.lock().unwrap_or_else(|e| e.into_inner());
        rooms.entry(room.to_string()).or_default().clone()
    }

    /// Every room's record, by name.
    pub fn all(&self) -> Vec<(String, Arc<Owed>)> {
        let rooms = self.rooms.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = rooms.iter().map(|(n, o)| (n.clone(), o.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

#[derive(Debug, Default)]
pub struct Owed {
    by_vid: Mutex<HashMap<VisitorId, (RequestId, Owing)>>,
}

impl Owed {
    /// The order `request` of `vid` won its consume and goes to the origin.
    pub fn sending(&self, vid: VisitorId, request: RequestId) {
        self.lock().insert(vid, (request, Owing::InFlight));
    }

    /// The order `request` of `vid` is no longer in flight (answered, failed, or dropped): it
    /// is forgotten unless its confirm is owed.
    pub fn sent(&self, vid: VisitorId, request: &RequestId) {
        let mut m = self.lock();
        if matches!(m.get(&vid), Some((r, Owing::InFlight)) if r == request) {
            m.remove(&vid);
        }
    }

    /// The order `request` of `vid` went through; its confirm has not landed.
    pub fn owe(&self, vid: VisitorId, request: RequestId) {
        self.lock().insert(vid, (request, Owing::Confirm));
    }

    /// The shop's command `request` ended `vid`'s admission; the store has not heard yet.
    pub fn owe_command(&self, vid: VisitorId, request: RequestId) {
        self.lock().insert(vid, (request, Owing::Command));
    }

    /// How many of each kind are owed now.
    pub fn count(&self, kind: Owing) -> usize {
        self.lock().values().filter(|(_, o)| *o == kind).count()
    }

    /// The store answered the confirm of `request` (whatever it said).
    pub fn paid(&self, vid: VisitorId, request: &RequestId) {
        let mut m = self.lock();
        if m.get(&vid).is_some_and(|(r, _)| r == request) {
            m.remove(&vid);
        }
    }

    /// An order of `vid`'s admission is in flight here, or went through and the store does
    /// not know it yet.
    pub fn holds(&self, vid: VisitorId) -> Option<Owing> {
        self.lock().get(&vid).map(|(_, o)| *o)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<VisitorId, (RequestId, Owing)>> {
        self.by_vid.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owed_until_that_order_is_paid() {
        let owed = Owed::default();
        let (v, first, second) = (
            VisitorId::random(),
            RequestId::random(),
            RequestId::random(),
        );
        assert_eq!(owed.holds(v), None);
        owed.owe(v, first.clone());
        assert_eq!(owed.holds(v), Some(Owing::Confirm));
        owed.paid(v, &second);
        assert!(
            owed.holds(v).is_some(),
            "another order's answer pays nothing"
        );
        owed.paid(v, &first);
        assert_eq!(owed.holds(v), None);
        assert!(owed.is_empty());
    }

    #[test]
    fn in_flight_until_sent_and_then_owed_if_its_confirm_is() {
        let owed = Owed::default();
        let (v, first, other) = (
            VisitorId::random(),
            RequestId::random(),
            RequestId::random(),
        );
        owed.sending(v, first.clone());
        assert_eq!(owed.holds(v), Some(Owing::InFlight));
        owed.sent(v, &other);
        assert_eq!(owed.holds(v), Some(Owing::InFlight), "another order's end");
        owed.sent(v, &first);
        assert_eq!(owed.holds(v), None, "answered and given back: forgotten");
        // Answered, confirm owed, and then the request ends: still owed.
        owed.sending(v, first.clone());
        owed.owe(v, first.clone());
        owed.sent(v, &first);
        assert_eq!(owed.holds(v), Some(Owing::Confirm));
        owed.paid(v, &first);
        assert!(owed.is_empty());
    }
}
