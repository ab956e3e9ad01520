//! A room at run time: its validated config plus what the admission loop last learned.
//!
//! The proxy reads [`Live`] on every protected request without touching the store, so the
//! figures are atomics written by the admission loop each tick ("seen by every instance
//! within a second" comes from the tick, not from a store call per request).

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::config::RoomConfig;
use crate::cookie::room_cookie_name;
use crate::metrics::RoomMetrics;
use crate::store::AdmitReport;

/// Figures from the latest admission tick.
#[derive(Debug)]
pub struct Live {
    enabled: AtomicBool,
    queue_all: AtomicBool,
    waiting: AtomicU64,
    active: AtomicU64,
    /// Measured admissions per second × 1000.
    rate_milli: AtomicU64,
    admitted_total: AtomicU64,
    /// The rate in force (config or override) × 1000, as of the last tick.
    rate_in_force_milli: AtomicU64,
    /// Live proxy instances as of the last tick (for the `local` policy's share).
    instances: AtomicU64,
}

impl Default for Live {
    fn default() -> Self {
        Self {
            enabled: AtomicBool::new(true),
            queue_all: AtomicBool::new(false),
            waiting: AtomicU64::new(0),
            active: AtomicU64::new(0),
            rate_milli: AtomicU64::new(0),
            admitted_total: AtomicU64::new(0),
            rate_in_force_milli: AtomicU64::new(0),
            instances: AtomicU64::new(1),
        }
    }
}

impl Live {
    pub fn update(&self, r: &AdmitReport, rate_in_force: f64) {
        self.rate_in_force_milli
            .store((rate_in_force * 1000.0).round() as u64, Ordering::Relaxed);
        self.instances.store(r.instances.max(1), Ordering::Relaxed);
        self.enabled.store(r.state.enabled, Ordering::Relaxed);
        self.queue_all.store(r.state.queue_all, Ordering::Relaxed);
        self.waiting.store(r.waiting, Ordering::Relaxed);
        self.active.store(r.active, Ordering::Relaxed);
        self.rate_milli
            .store((r.measured_rate * 1000.0).round() as u64, Ordering::Relaxed);
        self.admitted_total.fetch_add(r.admitted, Ordering::Relaxed);
    }

    /// Applies a state change made through this instance at once (others follow at their tick).
    pub fn set_state(&self, s: &crate::store::RoomState) {
        self.enabled.store(s.enabled, Ordering::Relaxed);
        self.queue_all.store(s.queue_all, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn queue_all(&self) -> bool {
        self.queue_all.load(Ordering::Relaxed)
    }

    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    pub fn active(&self) -> u64 {
        self.active.load(Ordering::Relaxed)
    }

    /// The rate in force at the last tick; `None` before the first one.
    pub fn rate_in_force(&self) -> Option<f64> {
        match self.rate_in_force_milli.load(Ordering::Relaxed) {
            0 => None,
            m => Some(m as f64 / 1000.0),
        }
    }

    pub fn instances(&self) -> u64 {
        self.instances.load(Ordering::Relaxed)
    }

    pub fn measured_rate(&self) -> f64 {
        self.rate_milli.load(Ordering::Relaxed) as f64 / 1000.0
    }
}

/// The `local` store-error policy's limiter: while the store cannot answer, this instance admits
/// at its share of the room's rate (the rate divided by the instances last seen alive).
#[derive(Default)]
pub struct LocalBucket {
    limiter: Mutex<Option<(u64, DefaultDirectRateLimiter)>>,
}

impl LocalBucket {
    /// Takes one admission from the bucket if it has one.
    pub fn try_admit(&self, rate: f64, instances: u64, tick: Duration) -> bool {
        let share = (rate / instances.max(1) as f64).max(0.001);
        let key = (share * 1000.0).round() as u64;
        let mut guard = self.limiter.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().map(|(k, _)| *k) != Some(key) {
            // One tick's worth, and never more than a second's worth.
            let window = tick.min(Duration::from_secs(1)).as_secs_f64();
            let burst = (share * window).ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
            let quota = Quota::with_period(Duration::from_secs_f64(1.0 / share))
                .map(|q| q.allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN)));
            let Some(quota) = quota else { return false };
            *guard = Some((key, RateLimiter::direct(quota)));
        }
        guard.as_ref().is_some_and(|(_, l)| l.check().is_ok())
    }
}

/// One room: config, its cookie name, the live figures and its metric handles.
pub struct Room {
    pub cfg: RoomConfig,
    pub cookie_name: String,
    pub live: Live,
    pub metrics: RoomMetrics,
    pub local: LocalBucket,
}

impl Room {
    pub fn new(cfg: RoomConfig, metrics: RoomMetrics) -> Self {
        let cookie_name = room_cookie_name(cfg.name());
        Self {
            cfg,
            cookie_name,
            live: Live::default(),
            metrics,
            local: LocalBucket::default(),
        }
    }

    /// Carries the last known runtime state over a reload, so that a room switched off stays
    /// off until the next tick confirms it.
    pub fn inherit(&self, old: &Room) {
        self.live
            .enabled
            .store(old.live.enabled(), Ordering::Relaxed);
        self.live
            .queue_all
            .store(old.live.queue_all(), Ordering::Relaxed);
        self.live
            .waiting
            .store(old.live.waiting(), Ordering::Relaxed);
        self.live.active.store(old.live.active(), Ordering::Relaxed);
        self.live
            .instances
            .store(old.live.instances(), Ordering::Relaxed);
    }

    pub fn name(&self) -> &str {
        self.cfg.name()
    }
}
