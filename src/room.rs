//! A room at run time: its validated config plus what the admission loop last learned.
//!
//! The proxy reads [`Live`] on every protected request without touching the store, so the
//! figures are atomics written by the admission loop each tick ("seen by every instance
//! within a second" comes from the tick, not from a store call per request).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
        }
    }
}

impl Live {
    pub fn update(&self, r: &AdmitReport) {
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

    pub fn measured_rate(&self) -> f64 {
        self.rate_milli.load(Ordering::Relaxed) as f64 / 1000.0
    }
}

/// One room: config, its cookie name, the live figures and its metric handles.
pub struct Room {
    pub cfg: RoomConfig,
    pub cookie_name: String,
    pub live: Live,
    pub metrics: RoomMetrics,
}

impl Room {
    pub fn new(cfg: RoomConfig, metrics: RoomMetrics) -> Self {
        let cookie_name = room_cookie_name(cfg.name());
        Self {
            cfg,
            cookie_name,
            live: Live::default(),
            metrics,
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
    }

    pub fn name(&self) -> &str {
        self.cfg.name()
    }
}
