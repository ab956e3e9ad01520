//! Everything a request needs, built once from the config and shared by all services.

use std::future::Future;
use std::sync::Arc;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::breaker::{Breaker, BreakerState, Transition};
use crate::clock::Clock;
use crate::config::Config;
use crate::metrics::Metrics;
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
    pub metrics: Metrics,
    pub breaker: Breaker,
    /// When a store call last succeeded (µs), for `/readyz`.
    store_ok_at: AtomicU64,
    last_store_error: Mutex<Option<String>>,
}

impl Shared {
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let pages = Pages::load(&config)?;
        let router = Router::new(config.rooms.iter().map(|r| (&r.hosts[..], &r.paths[..])));
        let rooms: Vec<Room> = config.rooms.iter().cloned().map(Room::new).collect();
        let names: Vec<&str> = rooms.iter().map(Room::name).collect();
        let metrics = Metrics::new(&names).map_err(|e| format!("metrics: {e}"))?;
        let breaker = Breaker::new(config.store.breaker_failures, config.store.breaker_cooldown);
        let now = clock.now_micros();
        Ok(Self {
            config,
            rooms,
            router,
            pages,
            store,
            clock,
            metrics,
            breaker,
            store_ok_at: AtomicU64::new(now),
            last_store_error: Mutex::new(None),
        })
    }

    /// Whether the store answered recently and the breaker lets calls through.
    pub fn store_healthy(&self) -> bool {
        let now = self.clock.now_micros();
        let slowest_tick = self
            .rooms
            .iter()
            .map(|r| r.cfg.params.tick)
            .max()
            .unwrap_or_default();
        let fresh = std::time::Duration::from_secs(5).max(slowest_tick * 2);
        self.breaker.state(now) != BreakerState::Open
            && now.saturating_sub(self.store_ok_at.load(Ordering::Relaxed))
                <= crate::clock::micros(fresh)
    }

    pub fn last_store_error(&self) -> Option<String> {
        self.last_store_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn breaker_moved(&self, t: Option<Transition>) {
        match t {
            Some(Transition::Opened) => {
                tracing::warn!(
                    failures = self.config.store.breaker_failures,
                    cooldown = ?self.config.store.breaker_cooldown,
                    "store circuit breaker opened: store calls fail fast"
                );
                self.metrics.breaker_open.set(1);
            }
            Some(Transition::Reopened) => {
                tracing::debug!("store circuit breaker probe failed; open again");
                self.metrics.breaker_open.set(1);
            }
            Some(Transition::Closed) => {
                tracing::info!("store circuit breaker closed: the store answers again");
                self.metrics.breaker_open.set(0);
            }
            None => {}
        }
    }

    pub fn room_index(&self, name: &str) -> Option<usize> {
        self.rooms.iter().position(|r| r.name() == name)
    }

    /// Every store call goes through here: bounded by `store.timeout`, because a client of a
    /// dead Redis can otherwise block for seconds per call, and behind the circuit breaker, so
    /// that while the store is down calls fail at once instead of each waiting the timeout.
    pub async fn store_call<T>(
        &self,
        op: &'static str,
        room: &str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let Some(permit) = self.breaker.permit(self.clock.now_micros()) else {
            self.metrics.store_error(op, "breaker");
            return Err(StoreError::BreakerOpen {
                op,
                room: room.to_string(),
            });
        };
        let after = self.config.store.timeout;
        let result = match tokio::time::timeout(after, call).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Timeout {
                op,
                room: room.to_string(),
                after,
            }),
        };
        let now = self.clock.now_micros();
        match &result {
            Ok(_) => {
                self.store_ok_at.store(now, Ordering::Relaxed);
                self.breaker_moved(self.breaker.record(permit, now, true));
            }
            Err(e) => {
                let kind = if matches!(e, StoreError::Timeout { .. }) {
                    "timeout"
                } else {
                    "error"
                };
                self.metrics.store_error(op, kind);
                *self
                    .last_store_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                self.breaker_moved(self.breaker.record(permit, now, false));
            }
        }
        result
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
