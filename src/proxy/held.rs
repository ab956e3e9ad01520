//! The configuration a request holds, without a shared reference count per request.
//!
//! Every request holds the configuration it started under until it ends (a reload does not
//! change it midway). Holding `Arc<Shared>` itself means an atomic increment and decrement of
//! one count that every worker thread shares, on every request, and a clone or two more in the
//! phases that need it while `ctx` is borrowed: the count's cache line then moves between cores
//! several times per request. Instead each worker thread keeps one [`Held`] per configuration
//! (holding the `Arc<Shared>` once) and a request clones the thread's `Arc<Held>`, whose count
//! only that thread touches (when work stealing moves a request to another thread the count is
//! still atomic, only no longer local to one core). A reload is seen by the next request that thread starts: it finds the current
//! configuration is another one and takes a new [`Held`] for it.

use std::cell::RefCell;
use std::ops::Deref;
use std::sync::Arc;

use crate::app::{Current, Shared};

/// One worker thread's hold on one configuration.
pub struct Held(Arc<Shared>);

impl Held {
    /// The configuration itself, for what outlives the request (a settlement sent later).
    pub fn arc(&self) -> Arc<Shared> {
        Arc::clone(&self.0)
    }
}

impl Deref for Held {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

thread_local! {
    static HELD: RefCell<Option<Arc<Held>>> = const { RefCell::new(None) };
}

/// The current configuration for a request starting on this thread.
pub fn hold(current: &Current) -> Arc<Held> {
    // `load` protects the pointer through this thread's own slot: no shared count is touched.
    let now = current.load();
    HELD.with(|cell| {
        let mut cached = cell.borrow_mut();
        match &*cached {
            Some(h) if Arc::ptr_eq(&h.0, &now) => Arc::clone(h),
            _ => {
                let h = Arc::new(Held(arc_swap::Guard::into_inner(now)));
                *cached = Some(Arc::clone(&h));
                h
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_reuses_its_hold_until_the_configuration_is_swapped() {
        let shared = crate::app::tests_support::shared();
        let current: Current = Arc::new(arc_swap::ArcSwap::new(shared));
        let a = hold(&current);
        let b = hold(&current);
        assert!(Arc::ptr_eq(&a, &b), "the same configuration: the same hold");
        let before = Arc::strong_count(&current.load_full());
        let c = hold(&current);
        assert_eq!(
            Arc::strong_count(&current.load_full()),
            before,
            "a request's hold does not count on the configuration itself"
        );
        drop(c);
        current.store(crate::app::tests_support::shared());
        let d = hold(&current);
        assert!(!Arc::ptr_eq(&a, &d), "a reload is seen by the next request");
        assert!(Arc::ptr_eq(&d.0, &current.load_full()));
        // The requests still holding the old configuration keep it, apart from the new one.
        assert!(!Arc::ptr_eq(&a.0, &current.load_full()));
        assert_eq!(a.rooms[0].name(), "sale");
    }

    #[test]
    fn threads_hold_their_own() {
        let current: Current =
            Arc::new(arc_swap::ArcSwap::new(crate::app::tests_support::shared()));
        let here = hold(&current);
        let c2 = Arc::clone(&current);
        let there = std::thread::spawn(move || {
            let h = hold(&c2);
            Arc::as_ptr(&h) as usize
        })
        .join()
        .expect("thread");
        assert_ne!(Arc::as_ptr(&here) as usize, there);
    }
}
