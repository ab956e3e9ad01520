//! One visitor's share of a room's origin slots while their request bodies are coming: a
//! request with a body holds a slot of `max-origin-inflight` for as long as the body moves (at
//! 1 KiB/s or more), so one admitted visitor uploading slowly on many connections or streams
//! held every slot and shut the room with 503s for everyone (found by re-review). A visitor's
//! requests whose bodies are still coming hold at most [`share_of`] the cap at once; another
//! waits for one of theirs to be whole, within `origin-queue-timeout` as for a slot. Once a
//! body is whole its request is an ordinary one in flight.
//!
//! A visitor is their admission's id, or, let through without one (the room off), their
//! network as the join limit reads it. Per instance, as the cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::store::VisitorId;

/// Whose share a request is counted in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Sharer {
    Visitor(VisitorId),
    Client(String),
}

/// How many of a room's `cap` slots one visitor's requests with bodies still coming may
/// hold at once: a quarter, at least one.
pub fn share_of(cap: usize) -> usize {
    (cap / 4).max(1)
}

/// The shares in use in one room's gate.
#[derive(Debug, Default)]
pub struct Shares {
    held: Mutex<HashMap<Sharer, Arc<Semaphore>>>,
}

/// A place in a visitor's share: given back when dropped (the body whole, or the request over).
#[derive(Debug)]
pub struct Uploading {
    permit: Option<OwnedSemaphorePermit>,
    sharer: Sharer,
    shares: Arc<Shares>,
}

impl Shares {
    /// A place in `sharer`'s share of `share`, waited for up to `timeout`; `None` when none
    /// came. Cancel-safe: a request dropped while waiting leaves no trace.
    pub async fn enter(
        self: &Arc<Self>,
        sharer: Sharer,
        share: usize,
        timeout: Duration,
    ) -> Option<Uploading> {
        let permit = {
            let theirs = self
                .lock()
                .entry(sharer.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(share.max(1))))
                .clone();
            match theirs.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => tokio::time::timeout(timeout, theirs.acquire_owned())
                    .await
                    .ok()
                    .and_then(Result::ok),
            }
        };
        // Made before anything can fail, so that its drop tidies up in every case.
        let place = Uploading {
            permit,
            sharer,
            shares: self.clone(),
        };
        place.permit.is_some().then_some(place)
    }

    /// Visitors with a place held or waited for now.
    pub fn sharers(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Sharer, Arc<Semaphore>>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets `sharer`'s share when nothing holds or waits for it: every place and every
    /// waiter holds the semaphore, and a new one is only had under the lock.
    fn tidy(&self, sharer: &Sharer) {
        let mut held = self.lock();
        if held.get(sharer).is_some_and(|s| Arc::strong_count(s) == 1) {
            held.remove(sharer);
        }
    }
}

impl Drop for Uploading {
    fn drop(&mut self) {
        drop(self.permit.take());
        self.shares.tidy(&self.sharer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_visitor_has_a_quarter_of_the_cap_and_at_least_one_slot() {
        assert_eq!(share_of(1), 1);
        assert_eq!(share_of(4), 1);
        assert_eq!(share_of(8), 2);
        assert_eq!(share_of(40), 10);
    }

    #[tokio::test]
    async fn one_visitor_waits_for_their_own_and_others_do_not() {
        let shares = Arc::new(Shares::default());
        let me = Sharer::Visitor(VisitorId::from_bytes([1; 16]));
        let other = Sharer::Client("10.0.0.0/24".into());
        let short = Duration::from_millis(50);
        let first = shares.enter(me.clone(), 1, short).await;
        assert!(first.is_some());
        assert!(
            shares.enter(me.clone(), 1, short).await.is_none(),
            "over the share"
        );
        assert!(
            shares.enter(other.clone(), 1, short).await.is_some(),
            "another's own"
        );
        // Given back: the next of the same visitor's goes on, and a finished share is forgotten.
        let waiter = tokio::spawn({
            let (shares, me) = (shares.clone(), me.clone());
            async move { shares.enter(me, 1, Duration::from_secs(5)).await.is_some() }
        });
        tokio::task::yield_now().await;
        drop(first);
        assert!(waiter.await.unwrap());
        assert_eq!(shares.sharers(), 0, "nothing left behind");
    }
}
