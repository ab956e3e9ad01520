//! One visitor's share of a room's origin slots while their request bodies are coming: a
//! request with a body longer than what is read whole first ([`crate::proxy`]'s prefetch)
//! holds a slot of `max-origin-inflight` for as long as the body moves (at 1 KiB/s or more),
//! so one admitted visitor uploading slowly on many connections or streams held every slot
//! and shut the room with 503s for everyone (found by re-review). A visitor's requests whose
//! bodies are still coming hold at most [`share_of`] the cap at once, the cap as it is now (a
//! reload that lowers it lowers every share at once: re-review); another waits for one of
//! theirs to be whole, within `origin-queue-timeout` as for a slot. Once a body is whole its
//! request is an ordinary one in flight.
//!
//! A visitor is their admission's id, or, let through without one (the room off), their
//! network as the join limit reads it. Per instance, as the cap.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

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

/// One visitor's places held and waited for.
#[derive(Debug, Default)]
struct Held {
    held: usize,
    waiting: usize,
    freed: Arc<Notify>,
}

/// The shares in use in one room's gate.
#[derive(Debug, Default)]
pub struct Shares {
    held: Mutex<HashMap<Sharer, Held>>,
    /// Woken when the cap changes (a reload): waiters look at their share again (re-review:
    /// a raised cap let newcomers in and left waiters waiting).
    resized: Notify,
    /// The gate's cap is gone ([`Shares::lift`]): every place is given at once.
    lifted: AtomicBool,
}

/// A place in a visitor's share: given back when dropped (the body whole, or the request over).
#[derive(Debug)]
pub struct Uploading {
    sharer: Sharer,
    shares: Arc<Shares>,
    /// The place came after a wait for one of the visitor's others to end.
    waited: bool,
}

impl Uploading {
    /// Whether the place came after a wait (not at once).
    pub fn waited(&self) -> bool {
        self.waited
    }
}

impl Shares {
    /// A place in `sharer`'s share (`share()`: its size now), waited for up to `timeout`;
    /// `None` when none came. Cancel-safe: a request dropped while waiting leaves no trace.
    pub async fn enter(
        self: &Arc<Self>,
        sharer: Sharer,
        share: impl Fn() -> usize,
        timeout: Duration,
    ) -> Option<Uploading> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut waiting = Waiting(None);
        loop {
            let freed = {
                let mut all = self.lock();
                let theirs = all.entry(sharer.clone()).or_default();
                if theirs.held < share().max(1) || self.lifted.load(Ordering::Acquire) {
                    theirs.held += 1;
                    drop(all);
                    let waited = waiting.0.is_some();
                    drop(waiting);
                    return Some(Uploading {
                        sharer,
                        shares: self.clone(),
                        waited,
                    });
                }
                if waiting.0.is_none() {
                    theirs.waiting += 1;
                    waiting = Waiting(Some((self.clone(), sharer.clone())));
                }
                theirs.freed.clone()
            };
            let notified = freed.notified();
            let resized = self.resized.notified();
            tokio::pin!(notified, resized);
            // Registered before the place is looked at again: a place freed meanwhile, or a
            // cap changed, wakes it.
            notified.as_mut().enable();
            resized.as_mut().enable();
            if self.lifted.load(Ordering::Acquire)
                || self
                    .lock()
                    .get(&sharer)
                    .is_some_and(|t| t.held < share().max(1))
            {
                continue;
            }
            let woken = async {
                tokio::select! {
                    _ = &mut notified => {}
                    _ = &mut resized => {}
                }
            };
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return None;
            }
        }
    }

    /// The cap changed: every waiter looks at their share again.
    pub fn resized(&self) {
        self.resized.notify_waiters();
    }

    /// The cap is gone (a reload took it, or its room): every waiter has its place at once,
    /// and so does every later request (found by re-review: requests waiting for their
    /// visitor's share got 503 at their timeout after the cap was gone).
    pub fn lift(&self) {
        self.lifted.store(true, Ordering::Release);
        self.resized.notify_waiters();
    }

    /// Requests waiting for a place in their visitor's share now.
    pub fn waiting(&self) -> usize {
        self.lock().values().map(|t| t.waiting).sum()
    }

    /// Visitors with a place held or waited for now.
    pub fn sharers(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Sharer, Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets `sharer` when nothing holds or waits for a place of theirs.
    fn tidy(all: &mut HashMap<Sharer, Held>, sharer: &Sharer) {
        if all
            .get(sharer)
            .is_some_and(|t| t.held == 0 && t.waiting == 0)
        {
            all.remove(sharer);
        }
    }
}

/// Counts a request among its visitor's waiters while it waits (also when dropped midway).
struct Waiting(Option<(Arc<Shares>, Sharer)>);

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some((shares, sharer)) = self.0.take() {
            let mut all = shares.lock();
            if let Some(t) = all.get_mut(&sharer) {
                t.waiting = t.waiting.saturating_sub(1);
            }
            Shares::tidy(&mut all, &sharer);
        }
    }
}

impl Drop for Uploading {
    fn drop(&mut self) {
        let mut all = self.shares.lock();
        if let Some(t) = all.get_mut(&self.sharer) {
            t.held = t.held.saturating_sub(1);
            t.freed.notify_waiters();
        }
        Shares::tidy(&mut all, &self.sharer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

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
        let one = || 1;
        let first = shares.enter(me.clone(), one, short).await;
        assert!(first.is_some());
        assert!(
            shares.enter(me.clone(), one, short).await.is_none(),
            "over the share"
        );
        assert!(
            shares.enter(other.clone(), one, short).await.is_some(),
            "another's own"
        );
        // Given back: the next of the same visitor's goes on, and a finished share is forgotten.
        let waiter = tokio::spawn({
            let (shares, me) = (shares.clone(), me.clone());
            async move {
                shares
                    .enter(me, || 1, Duration::from_secs(5))
                    .await
                    .is_some()
            }
        });
        tokio::task::yield_now().await;
        drop(first);
        assert!(waiter.await.unwrap());
        assert_eq!(shares.sharers(), 0, "nothing left behind");
    }

    /// Re-review: a share is the cap's as it is now, also for a visitor who held places
    /// under a larger one.
    #[tokio::test]
    async fn a_lowered_cap_lowers_a_share_already_in_use() {
        let shares = Arc::new(Shares::default());
        let me = Sharer::Visitor(VisitorId::from_bytes([2; 16]));
        let size = Arc::new(AtomicUsize::new(3));
        let share = || size.load(Ordering::SeqCst);
        let short = Duration::from_millis(50);
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(shares.enter(me.clone(), share, short).await.unwrap());
        }
        size.store(1, Ordering::SeqCst);
        assert!(shares.enter(me.clone(), share, short).await.is_none());
        held.pop();
        assert!(
            shares.enter(me.clone(), share, short).await.is_none(),
            "still one held"
        );
        held.pop();
        assert!(shares.enter(me.clone(), share, short).await.is_some());
        assert_eq!(shares.sharers(), 0);
    }

    /// Re-review: a raised cap wakes a visitor waiting for their share at once.
    #[tokio::test]
    async fn a_raised_cap_wakes_a_waiter() {
        let shares = Arc::new(Shares::default());
        let me = Sharer::Visitor(VisitorId::from_bytes([3; 16]));
        let size = Arc::new(AtomicUsize::new(1));
        let share = || size.load(Ordering::SeqCst);
        let held = shares
            .enter(me.clone(), share, Duration::from_millis(50))
            .await
            .unwrap();
        let waiter = tokio::spawn({
            let (shares, me, size) = (shares.clone(), me.clone(), size.clone());
            async move {
                let share = || size.load(Ordering::SeqCst);
                shares
                    .enter(me, share, Duration::from_secs(30))
                    .await
                    .is_some()
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        size.store(2, Ordering::SeqCst);
        shares.resized();
        let woke = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(
            woke.is_ok_and(|r| r.unwrap()),
            "still waiting beside a place held"
        );
        drop(held);
    }
}
