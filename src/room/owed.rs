//! Orders this instance knows went through but could not tell the store yet: a confirm that
//! failed (Redis down, partitioned, failing over) is owed until it lands. Until then this
//! instance answers another order of that admission `409` itself, without asking the store —
//! which, past the order's grace period, would give the admission back and let the kept cookie
//! order again. Instances that never saw the order rely on the confirm landing first: the
//! retry runs every couple of seconds while the store is away, so that window is short.
//!
//! Kept over a reload (the same `Arc`). Lost with the process: an instance that dies owing a
//! confirm leaves the order to the grace period, as an instance that dies mid-order does.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::{RequestId, VisitorId};

#[derive(Debug, Default)]
pub struct Owed {
    by_vid: Mutex<HashMap<VisitorId, RequestId>>,
}

impl Owed {
    /// The order `request` of `vid` went through; its confirm has not landed.
    pub fn owe(&self, vid: VisitorId, request: RequestId) {
        self.lock().insert(vid, request);
    }

    /// The store answered the confirm of `request` (whatever it said).
    pub fn paid(&self, vid: VisitorId, request: &RequestId) {
        let mut m = self.lock();
        if m.get(&vid) == Some(request) {
            m.remove(&vid);
        }
    }

    /// An order of `vid`'s admission went through and the store does not know it yet.
    pub fn holds(&self, vid: VisitorId) -> bool {
        self.lock().contains_key(&vid)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<VisitorId, RequestId>> {
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
        assert!(!owed.holds(v));
        owed.owe(v, first.clone());
        assert!(owed.holds(v));
        owed.paid(v, &second);
        assert!(owed.holds(v), "another order's answer pays nothing");
        owed.paid(v, &first);
        assert!(!owed.holds(v));
        assert!(owed.is_empty());
    }
}
