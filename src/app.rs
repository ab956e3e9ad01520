//! Everything a request needs. [`Core`] lives as long as the process (store, clock, metrics,
//! breaker); [`Shared`] is one loaded configuration on top of it (rooms, routes, pages) and is
//! swapped whole on a reload, so a request sees one consistent configuration from start to end.

use std::future::Future;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::breaker::{Breaker, BreakerState, Breakers, Transition};
use crate::clock::Clock;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::page::Pages;
use crate::room::Room;
use crate::route::{Policy, RoomRoutes, Router};
use crate::store::{Store, StoreError};

/// The one store operation that may probe a half-open breaker (see [`Core::store_call`]): the
/// admission loop's read of the room's state, which changes nothing in the store.
pub const PROBE_OP: &str = "probe";

/// The current configuration, swapped on SIGHUP.
pub type Current = Arc<ArcSwap<Shared>>;

/// What outlives a reload.
pub struct Core {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Metrics,
    /// One circuit breaker per room ([`Breakers`]).
    pub breakers: Breakers,
    /// What each room's orders owe the store, per room name over reloads.
    pub owed: crate::room::owed::OwedBook,
    /// The store timeout; store settings need a restart to change.
    timeout: std::time::Duration,
    breaker_failures: u32,
    breaker_cooldown: std::time::Duration,
    /// When a store call last succeeded (µs), for `/readyz`.
    store_ok_at: AtomicU64,
    last_store_error: Mutex<Option<String>>,
    last_warning: AtomicU64,
    /// The store as the log names it (no password).
    store_name: String,
    /// Whether the store has answered yet: 0 no call yet, 1 answered, 2 failed before any answer.
    first_answer: std::sync::atomic::AtomicU8,
    /// The HTTPS listener's certificates by SNI, swapped on reload.
    pub tls: Arc<crate::edge::tls::Resolver>,
    /// The last reload's outcome, for `/readyz`: a refused one leaves the old configuration
    /// running, which the process otherwise looks the same with (found by review: a deploy
    /// that sent SIGHUP and checked `/readyz` could not tell).
    last_reload: Mutex<Option<ReloadOutcome>>,
}

/// How the last reload ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadOutcome {
    /// When (Unix ms, the system clock).
    pub at_ms: u64,
    pub applied: bool,
    /// Why it was refused (the first problems), when it was.
    pub error: Option<String>,
}

/// The routing table of a configuration.
pub fn router_of(config: &Config) -> Router {
    Router::new(
        config.rooms.iter().map(|r| RoomRoutes {
            hosts: &r.hosts,
            paths: &r.paths,
            upstream: config.origin_of(r.upstream),
        }),
        Policy {
            matching: config.listen.path_matching,
            other_hosts: config.listen.other_hosts,
            default_upstream: config.origin_of(config.default_upstream),
        },
    )
}

/// One loaded configuration with its derived state.
pub struct Shared {
    pub core: Arc<Core>,
    pub config: Config,
    pub rooms: Vec<Room>,
    pub router: Router,
    pub pages: Pages,
    /// Per upstream (by index): the origin's health as admitted requests found it, shared by
    /// the rooms on it, kept over reloads by the upstream's name. `None` when no room on it has
    /// an autopilot: nothing is recorded on the request path for nobody.
    pub origin_health: Vec<Option<Arc<crate::admission::health::OriginHealth>>>,
    /// Per upstream (by index): its servers when it has several or a health check
    /// ([`crate::origins`]); kept over a reload that leaves the upstream as it was.
    pub pools: Vec<Option<Arc<crate::origins::Pool>>>,
}

impl Deref for Shared {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Core {
    pub fn new(
        config: &Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let metrics = Metrics::new().map_err(|e| format!("metrics: {e}"))?;
        let s = &config.store;
        let now = clock.now_micros();
        Ok(Self {
            store,
            clock,
            metrics,
            breakers: Breakers::new(s.breaker_failures, s.breaker_cooldown),
            owed: Default::default(),
            timeout: s.timeout,
            breaker_failures: s.breaker_failures,
            breaker_cooldown: s.breaker_cooldown,
            store_ok_at: AtomicU64::new(now),
            last_store_error: Mutex::new(None),
            last_warning: AtomicU64::new(0),
            store_name: s.backend.to_string(),
            first_answer: std::sync::atomic::AtomicU8::new(0),
            tls: Arc::new(crate::edge::tls::Resolver::new(&config.tls)),
            last_reload: Mutex::new(None),
        })
    }

    /// Notes how a reload ended (`Err`: refused, and why).
    pub fn note_reload(&self, result: &Result<usize, String>) {
        let applied = result.is_ok();
        self.metrics
            .config_reloads
            .with_label_values(&[if applied { "applied" } else { "refused" }])
            .inc();
        let error = result.as_ref().err().map(|e| {
            const KEEP: usize = 1000;
            match e.char_indices().nth(KEEP) {
                Some((i, _)) => format!("{}…", &e[..i]),
                None => e.clone(),
            }
        });
        let at_ms = crate::clock::Clock::now_micros(&crate::clock::SystemClock) / 1000;
        *self.last_reload.lock().unwrap_or_else(|e| e.into_inner()) = Some(ReloadOutcome {
            at_ms,
            applied,
            error,
        });
    }

    pub fn last_reload(&self) -> Option<ReloadOutcome> {
        self.last_reload
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn last_store_error(&self) -> Option<String> {
        self.last_store_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Logs a room's breaker's move (the gauges are set when scraped: `metrics_of_breakers`).
    fn breaker_moved(&self, room: &str, t: Option<Transition>) {
        match t {
            Some(Transition::Opened) => {
                tracing::warn!(
                    room,
                    failures = self.breaker_failures,
                    cooldown = ?self.breaker_cooldown,
                    "store circuit breaker opened: store calls fail fast"
                );
            }
            Some(Transition::Reopened) => {
                tracing::debug!(room, "store circuit breaker probe failed; open again");
            }
            Some(Transition::Closed) => {
                tracing::info!(
                    room,
                    "store circuit breaker closed: the store answers again"
                );
            }
            None => {}
        }
    }

    /// The breaker of the room named `room`.
    pub fn breaker(&self, room: &str) -> std::sync::Arc<Breaker> {
        self.breakers.of(room)
    }

    /// Every store call goes through here: bounded by `store.timeout`, because a client of a
    /// dead Redis can otherwise block for seconds per call, and behind the circuit breaker, so
    /// that while the store is down calls fail at once instead of each waiting the timeout.
    ///
    /// Only the admission loop probes a half-open breaker ([`PROBE_OP`]), with a call that
    /// changes nothing: a call that times out may still have run, and the probe an `admit` was
    /// ran on a slow Redis once per cooldown, its answer thrown away, each time stepping the
    /// liveness clock, sweeping and admitting (found by review: visitors who kept polling
    /// were swept, and turns given meanwhile ran out unclaimed). Once it is answered, the same
    /// loop's `admit` follows at once: it notices a store that came back without its data (and
    /// holds the line until the room's state is re-asserted); a `join` that reaches such a
    /// store first lets nobody in at once (the generation it carries is not the store's).
    pub async fn store_call<T>(
        &self,
        op: &'static str,
        room: &str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let breaker = self.breakers.of(room);
        if op != PROBE_OP && breaker.state(self.clock.mono_micros()) == BreakerState::HalfOpen {
            self.metrics.store_error(op, "breaker");
            return Err(StoreError::BreakerOpen {
                op,
                room: room.to_string(),
            });
        }
        let Some(permit) = breaker.permit(self.clock.mono_micros()) else {
            self.metrics.store_error(op, "breaker");
            return Err(StoreError::BreakerOpen {
                op,
                room: room.to_string(),
            });
        };
        let after = self.timeout;
        let result = match tokio::time::timeout(after, call).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Timeout {
                op,
                room: room.to_string(),
                after,
            }),
        };
        let now = self.clock.now_micros();
        self.note_first_answer(&result);
        match &result {
            Ok(_) => {
                self.store_ok_at.store(now, Ordering::Relaxed);
                self.breaker_moved(room, breaker.record(permit, self.clock.mono_micros(), true));
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
                // A refusal of one room's key layout is an answer, not an outage: counted as a
                // failure it opened the one breaker, and every other room then followed its
                // on-store-error policy (`open` passed everyone: found by review).
                let answered = e.is_layout_refusal();
                self.breaker_moved(
                    room,
                    breaker.record(permit, self.clock.mono_micros(), answered),
                );
            }
        }
        result
    }

    /// Says in the log, once, that the store answers, or that it did not at first (and once more
    /// when it then does): the line an operator looks for after starting an instance.
    fn note_first_answer<T>(&self, result: &Result<T, StoreError>) {
        const ANSWERED: u8 = 1;
        const FAILED_FIRST: u8 = 2;
        let seen = self.first_answer.load(Ordering::Relaxed);
        match result {
            Ok(_)
                if seen != ANSWERED
                    && self.first_answer.swap(ANSWERED, Ordering::Relaxed) != ANSWERED =>
            {
                tracing::info!(store = %self.store_name, "store connected");
            }
            Err(e)
                if seen == 0
                    && self
                        .first_answer
                        .compare_exchange(0, FAILED_FIRST, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok() =>
            {
                tracing::warn!(
                    store = %self.store_name,
                    error = %e,
                    "cannot reach the store yet: rooms follow on-store-error until it answers"
                );
            }
            _ => {}
        }
    }

    /// The room's circuit breaker is closed: store calls for it are made.
    pub fn store_closed(&self, room: &str) -> bool {
        self.breakers.of(room).state(self.clock.mono_micros()) == BreakerState::Closed
    }

    /// Logs a store error at most once a second: an outage must not flood the log.
    pub fn warn_store_error(&self, e: &StoreError) {
        let now = self.clock.now_secs();
        let last = self.last_warning.load(Ordering::Relaxed);
        if now > last
            && self
                .last_warning
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(error = %e, "store error");
        }
    }
}

impl Shared {
    /// The time an admission cookie's expiry is written in and checked against, for `room`
    /// (unix µs): the store's clock as this instance last learned it (each admit tick reports
    /// it), not this instance's own wall clock. The store's session and its consumed marker run
    /// on the store's clock; a cookie on an instance's clock lived as much longer as that clock
    /// was behind (or the issuing one ahead), and once the marker had expired a consumed
    /// admission ordered again (found by review: two orders from one admission with clocks
    /// a minute or more apart, or a wall clock stepped back). Before the first tick: the
    /// instance's own clock.
    pub fn cookie_micros(&self, room: usize) -> crate::clock::Micros {
        let local = self.clock.now_micros();
        match self.rooms.get(room) {
            Some(r) => r.events.store_now(local),
            None => local,
        }
    }

    /// The store generation this instance last saw, and how long a session the store does not
    /// hold waits after a new one is born before a cookie alone brings it back (consume,
    /// touch): long enough for every instance to see the loss (its breaker cooling down, a
    /// call timing out, two of its ticks) and its heartbeats to write their orders' markers
    /// again. The ticks are the longest any instance ran the room with lately, as the store
    /// last told before the loss (found by review: during a rolling change of `tick`, an
    /// instance on 3 s saw the loss two seconds after one on 100 ms had let a second order of
    /// the admission in).
    pub fn seen_generation(&self, room: usize) -> Option<crate::store::SeenGeneration> {
        let r = &self.rooms[room];
        let s = &self.config.store;
        r.recovery.known().map(|k| {
            let tick = r.cfg.params.tick.max(k.tick_hi.value);
            crate::store::SeenGeneration {
                id: k.generation,
                quiet: s.breaker_cooldown + s.timeout + tick * 2,
            }
        })
    }

    /// [`Shared::cookie_micros`] in whole seconds.
    pub fn cookie_secs(&self, room: usize) -> u64 {
        self.cookie_micros(room) / 1_000_000
    }

    /// Builds the state of one configuration on top of `core`; `previous` (on a reload) hands
    /// over the last known runtime state of rooms that keep their name.
    pub fn new(core: Arc<Core>, config: Config, previous: Option<&Shared>) -> Result<Self, String> {
        let pages = Pages::load(&config)?;
        let router = router_of(&config);
        let key_ids: Vec<&str> = config.cookie.keys.iter().map(|k| k.id()).collect();
        let mut rooms: Vec<Room> = config
            .rooms
            .iter()
            .map(|r| {
                let rules: Vec<String> = r.bypass.iter().map(|b| b.label()).collect();
                let secret = config
                    .draw_secret
                    .as_ref()
                    .map(|s| Arc::from(s.0.as_slice()));
                Room::new(
                    r.clone(),
                    core.metrics.room(r.name(), &rules),
                    secret,
                    &key_ids,
                    core.breakers.of(r.name()),
                    core.owed.of(r.name()),
                )
            })
            .collect();
        if let Some(old) = previous {
            for room in &mut rooms {
                if let Some(o) = old.rooms.iter().find(|o| o.name() == room.name()) {
                    room.inherit(o);
                }
            }
        }
        let origin_health = config
            .upstreams
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let watched = config
                    .rooms
                    .iter()
                    .any(|r| r.upstream == i && r.autopilot.is_some());
                watched.then(|| {
                    let h: Arc<crate::admission::health::OriginHealth> = previous
                        .and_then(|old| {
                            let j = old.config.upstreams.iter().position(|o| o.name == u.name)?;
                            old.origin_health.get(j).cloned().flatten()
                        })
                        .unwrap_or_default();
                    // Slow, for the sources of a slow window: over the lowest target watching.
                    let least = config
                        .rooms
                        .iter()
                        .filter(|r| r.upstream == i)
                        .filter_map(|r| r.autopilot.map(|a| a.target_latency))
                        .min();
                    if let Some(t) = least {
                        h.set_slow_over(t);
                    }
                    h
                })
            })
            .collect();
        let pools = config
            .upstreams
            .iter()
            .map(|u| {
                let kept = previous.and_then(|old| {
                    let j = old.config.upstreams.iter().position(|o| o.name == u.name)?;
                    old.pools.get(j).cloned().flatten().filter(|p| p.serves(u))
                });
                kept.or_else(|| crate::origins::Pool::new(u, &core.metrics.origin_server_up))
            })
            .collect();
        Ok(Self {
            core,
            config,
            rooms,
            router,
            pages,
            origin_health,
            pools,
        })
    }

    pub fn room_index(&self, name: &str) -> Option<usize> {
        self.rooms.iter().position(|r| r.name() == name)
    }

    /// Whether the store answered recently and the breaker is closed: not while it is half
    /// open, trying whether the store is back (found by review: `/readyz` said ready for a
    /// moment each cooldown while Redis was frozen, and a load balancer's check flapped). Nor
    /// while a room's runtime event changes in the store stand unread here for as long
    /// ([`crate::event::live::RoomEvents::unread_for`]): its orders and newcomers are held meanwhile.
    pub fn store_healthy(&self) -> bool {
        let now = self.clock.now_micros();
        let slowest_tick = self
            .rooms
            .iter()
            .map(|r| r.cfg.params.tick)
            .max()
            .unwrap_or_default();
        let fresh = std::time::Duration::from_secs(5).max(slowest_tick * 2);
        let fresh = crate::clock::micros(fresh);
        self.breaker_state() == BreakerState::Closed
            && now.saturating_sub(self.store_ok_at.load(Ordering::Relaxed)) <= fresh
            && self
                .rooms
                .iter()
                .all(|r| r.events.unread_for(now).is_none_or(|t| t <= fresh))
    }

    /// The least healthy of the rooms' breakers: `/readyz` and the metrics tell it.
    pub fn breaker_state(&self) -> BreakerState {
        self.breakers.worst(
            self.rooms.iter().map(|r| r.name()),
            self.clock.mono_micros(),
        )
    }
}

#[cfg(test)]
pub mod tests_support {
    //! A whole configuration on the memory store, for unit tests of what holds one.

    use std::sync::Arc;

    use super::{Core, Shared};

    pub fn shared() -> Arc<Shared> {
        let text = r#"
[listen]
http = "127.0.0.1:18080"
[cookie]
keys = ["unit-test-key-0123456789-0123456789-0123"]
[[upstream]]
name = "shop"
addr = "127.0.0.1:9"
[[room]]
name = "sale"
paths = ["/"]
admit-per-second = 10
max-active = 100
"#;
        let config = crate::config::parse(text, "unit.toml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("config: {e:?}"));
        let clock: Arc<dyn crate::clock::Clock> = Arc::new(crate::clock::SystemClock);
        let store = Arc::new(crate::store::memory::MemoryStore::new(Arc::clone(&clock)));
        let core = Core::new(&config, store, clock).unwrap_or_else(|e| panic!("core: {e}"));
        Arc::new(Shared::new(Arc::new(core), config, None).unwrap_or_else(|e| panic!("{e}")))
    }
}
