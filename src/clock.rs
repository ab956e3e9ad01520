//! Time for the store, the breaker and the cookies, behind a trait the tests can drive.
//!
//! Two clocks, kept apart on purpose:
//! - [`Clock::now_micros`] is wall-clock time, for what is wall-clock by nature: cookie expiry,
//!   event times, log stamps. It can step back (NTP, a VM restored, a failover to a host whose
//!   clock is behind).
//! - [`Clock::mono_micros`] is a monotonic clock, for elapsed durations: the circuit breaker's
//!   cooldown and every interval and window of the memory store. It never steps back, so a wall
//!   clock step can neither stall admission nor make a polling visitor look silent.
//!
//! The conformance and property suites drive both through [`ManualClock`]: `advance` moves
//! both, `step_wall_back` moves only the wall clock, as a real step back would. The Redis
//! backend does not use this clock: its scripts read Redis `TIME` and treat a step back there
//! as zero elapsed (`lua/prelude.lua`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Microseconds: since the Unix epoch for wall time, since an arbitrary origin for monotonic.
pub type Micros = u64;

/// A source of wall-clock and monotonic time in microseconds.
pub trait Clock: Send + Sync + 'static {
    /// Wall-clock time since the Unix epoch; may step back.
    fn now_micros(&self) -> Micros;

    /// Monotonic time since an arbitrary origin; never steps back. Only differences mean
    /// anything.
    fn mono_micros(&self) -> Micros;

    fn now_secs(&self) -> u64 {
        self.now_micros() / 1_000_000
    }
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

/// The monotonic origin of this process.
fn mono_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Where monotonic time starts: an hour, not zero, so that 0 (the breaker's "closed") is never a
/// real instant and "a minute ago" never underflows.
const MONO_START: Micros = 3_600_000_000;

/// A test hook: the environment variable `ANTEROOM_TEST_WALL_SHIFT_SECS` (signed seconds,
/// read once) moves this process's wall clock, as on a host whose clock is ahead or behind,
/// for the black-box tests of instances whose clocks disagree (`tests/clock_skew.rs`). The
/// monotonic clock is not moved. Unset in production: no shift.
fn wall_shift_micros() -> i64 {
    static SHIFT: OnceLock<i64> = OnceLock::new();
    *SHIFT.get_or_init(|| {
        std::env::var("ANTEROOM_TEST_WALL_SHIFT_SECS")
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .map_or(0, |s| s.saturating_mul(1_000_000))
    })
}

impl Clock for SystemClock {
    fn now_micros(&self) -> Micros {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        now.saturating_add_signed(wall_shift_micros())
    }

    fn mono_micros(&self) -> Micros {
        MONO_START.saturating_add(micros(mono_origin().elapsed()))
    }
}

/// A clock that only moves when told to; shared between a test and the store it drives.
#[derive(Debug)]
pub struct ManualClock {
    wall: AtomicU64,
    mono: AtomicU64,
}

impl ManualClock {
    /// Starts at a realistic epoch so that cookie expiries and second counts look like real ones.
    pub fn new() -> Self {
        Self::starting_at(1_790_000_000_000_000)
    }

    pub fn starting_at(micros: Micros) -> Self {
        Self {
            wall: AtomicU64::new(micros),
            mono: AtomicU64::new(MONO_START),
        }
    }

    /// Time passes: both clocks move.
    pub fn advance(&self, by: Duration) {
        self.wall.fetch_add(micros(by), Ordering::SeqCst);
        self.mono.fetch_add(micros(by), Ordering::SeqCst);
    }

    /// The wall clock steps back (NTP, a restored VM); no time passes, so the monotonic clock
    /// stays where it is.
    pub fn step_wall_back(&self, by: Duration) {
        let by = micros(by);
        let _ = self
            .wall
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                Some(w.saturating_sub(by))
            });
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> Micros {
        self.wall.load(Ordering::SeqCst)
    }

    fn mono_micros(&self) -> Micros {
        self.mono.load(Ordering::SeqCst)
    }
}

/// Converts a duration to whole microseconds, saturating.
pub fn micros(d: Duration) -> Micros {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wall_step_back_leaves_the_monotonic_clock_alone() {
        let c = ManualClock::new();
        let (w, m) = (c.now_micros(), c.mono_micros());
        c.advance(Duration::from_secs(2));
        assert_eq!(
            (c.now_micros(), c.mono_micros()),
            (w + 2_000_000, m + 2_000_000)
        );
        c.step_wall_back(Duration::from_secs(30));
        assert_eq!(c.now_micros(), w + 2_000_000 - 30_000_000);
        assert_eq!(c.mono_micros(), m + 2_000_000, "no time passed");
    }

    #[test]
    fn the_system_monotonic_clock_never_goes_back() {
        let c = SystemClock;
        let a = c.mono_micros();
        let b = c.mono_micros();
        assert!(b >= a && a >= MONO_START);
    }
}
