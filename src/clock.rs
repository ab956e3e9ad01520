//! Time for the store and the cookies, behind a trait the tests can drive.
//!
//! The memory store and cookie expiry read the time through [`Clock`] so that the conformance
//! and property suites can move time forward with [`ManualClock::advance`] instead of sleeping.
//! The Redis backend does not use it for ordering: queue order comes from Redis `TIME`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch.
pub type Micros = u64;

/// A source of wall-clock time in microseconds.
pub trait Clock: Send + Sync + 'static {
    fn now_micros(&self) -> Micros;

    fn now_secs(&self) -> u64 {
        self.now_micros() / 1_000_000
    }
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> Micros {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to; shared between a test and the store it drives.
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// Starts at a realistic epoch so that cookie expiries and second counts look like real ones.
    pub fn new() -> Self {
        Self::starting_at(1_790_000_000_000_000)
    }

    pub fn starting_at(micros: Micros) -> Self {
        Self {
            now: AtomicU64::new(micros),
        }
    }

    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(by.as_micros() as u64, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> Micros {
        self.now.load(Ordering::SeqCst)
    }
}

/// Converts a duration to whole microseconds, saturating.
pub fn micros(d: Duration) -> Micros {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
