//! Everything a request needs, built once from the config and shared by all services.

use std::future::Future;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::page::Pages;
use crate::room::Room;
use crate::route::Router;
use crate::store::{Store, StoreError};

/// The loaded configuration with its derived state, shared by the proxy and the admission loop.
pub struct Shared {
    pub config: Config,
    pub rooms: Vec<Room>,
    pub router: Router,
    pub pages: Pages,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
}

impl Shared {
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let pages = Pages::load(&config)?;
        let router = Router::new(config.rooms.iter().map(|r| (&r.hosts[..], &r.paths[..])));
        let rooms = config.rooms.iter().cloned().map(Room::new).collect();
        Ok(Self {
            config,
            rooms,
            router,
            pages,
            store,
            clock,
        })
    }

    pub fn room_index(&self, name: &str) -> Option<usize> {
        self.rooms.iter().position(|r| r.name() == name)
    }

    /// Every store call goes through here: bounded by `store.timeout`, because a client of a
    /// dead Redis can otherwise block for seconds per call.
    pub async fn store_call<T>(
        &self,
        op: &'static str,
        room: &str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let after = self.config.store.timeout;
        match tokio::time::timeout(after, call).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Timeout {
                op,
                room: room.to_string(),
                after,
            }),
        }
    }
}

static LAST_STORE_WARNING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Shared {
    /// Logs a store error at most once a second: an outage must not flood the log.
    pub fn warn_store_error(&self, e: &StoreError) {
        use std::sync::atomic::Ordering;
        let now = self.clock.now_secs();
        let last = LAST_STORE_WARNING.load(Ordering::Relaxed);
        if now > last
            && LAST_STORE_WARNING
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(error = %e, "store error");
        }
    }
}
