//! The clock a store's scripts read (Redis `TIME`, shifted or frozen by tests), and the
//! deadline a call carries on it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{micros, wall_us, RedisStore};

impl RedisStore {
    /// Test hook: moves this store's notion of time forward (added to Redis `TIME`).
    pub fn shift_clock(&self, by: Duration) {
        self.skew_us.fetch_add(micros(by) as i64, Ordering::SeqCst);
    }

    /// Test hook: steps this store's notion of time back, as a failover to a host whose clock is
    /// behind would.
    pub fn step_clock_back(&self, by: Duration) {
        self.skew_us.fetch_sub(micros(by) as i64, Ordering::SeqCst);
    }

    /// Test hook: from now on this store's time moves only by `shift_clock` and
    /// `step_clock_back`, as a manual clock does: the scripts are given the time instead of
    /// reading Redis `TIME`. With real time added, a test's simulated ticks stretched by every
    /// call's latency, and on a loaded machine tests of a rate per tick failed now and then.
    pub fn freeze_clock(&self) {
        self.frozen_us.store(wall_us(), Ordering::SeqCst);
    }

    /// The time its scripts read (unix seconds): the wall clock with the test hooks' shift.
    pub fn now_secs(&self) -> u64 {
        let now = self
            .frozen_time()
            .unwrap_or_else(|| wall_us() + self.skew_us.load(Ordering::Relaxed));
        u64::try_from(now / 1_000_000).unwrap_or(0)
    }

    /// While frozen, the store's time (unix µs): the moment of the freeze and the shift since.
    pub(super) fn frozen_time(&self) -> Option<i64> {
        match self.frozen_us.load(Ordering::Relaxed) {
            0 => None,
            at => Some(at + self.skew_us.load(Ordering::Relaxed)),
        }
    }

    /// Every script's clock argument (lua/prelude.lua `now_us`): the test hooks' shift in µs,
    /// added to Redis `TIME`; or, frozen, `@` and the time itself.
    pub(super) fn clock_arg(&self) -> String {
        match self.frozen_time() {
            None => self.skew_us.load(Ordering::Relaxed).to_string(),
            Some(now) => format!("@{now}"),
        }
    }

    /// [`Self::clock_arg`] with the call's deadline on Redis's clock (lua/prelude.lua
    /// `late_call`): twice the timeout from now (a connection to make, then the call), after
    /// which this process has given up on it. A call that runs later (sent while Redis was
    /// paused, run when it resumed) decides nothing by the events it carries: a reload may have
    /// changed them since (found by review: an opening moved later during a pause was recorded
    /// at the old time by calls sent before it). None before the first admit reply, nor while
    /// the clock is frozen.
    pub(super) fn clock_arg_until(&self) -> String {
        let ahead = self.redis_ahead_us.load(Ordering::Relaxed);
        if ahead == i64::MIN || self.frozen_time().is_some() {
            return self.clock_arg();
        }
        let skew = self.skew_us.load(Ordering::Relaxed);
        let within = i64::try_from(micros(self.timeout * 2)).unwrap_or(i64::MAX);
        let deadline = wall_us()
            .saturating_add(skew)
            .saturating_add(ahead)
            .saturating_add(within);
        format!("{skew}:{deadline}")
    }

    /// Learns how far Redis's clock is ahead of this host's from an admit reply's `store_now`
    /// (Redis `TIME` plus the test shift, when the script ran), read at `wall`: short of it by
    /// the reply's way back, so the largest reading is the closest. A clock that went back by
    /// more than a deadline's slack (another host after a failover) is taken as it reads.
    pub(super) fn note_redis_clock(&self, store_now: u64, wall: i64) {
        if store_now == 0 || self.frozen_time().is_some() {
            return;
        }
        let reading = i64::try_from(store_now).unwrap_or(i64::MAX)
            - wall.saturating_add(self.skew_us.load(Ordering::Relaxed));
        let slack = i64::try_from(micros(self.timeout * 2)).unwrap_or(i64::MAX);
        let _ = self
            .redis_ahead_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |ahead| {
                (ahead == i64::MIN || reading > ahead || reading < ahead.saturating_sub(slack))
                    .then_some(reading)
            });
    }
}
