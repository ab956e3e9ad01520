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
    /// at the old time by calls sent before it). Per room, as the room's node's clock reads (a
    /// cluster's masters may disagree). None before the room's first admit reply, nor while
    /// the clock is frozen.
    pub(super) fn clock_arg_until(&self, room: &str) -> String {
        let ahead = self.ahead().get(room).copied();
        let (Some(ahead), None) = (ahead, self.frozen_time()) else {
            return self.clock_arg();
        };
        let skew = self.skew_us.load(Ordering::Relaxed);
        let deadline = wall_us()
            .saturating_add(skew)
            .saturating_add(ahead)
            .saturating_add(self.slack());
        format!("{skew}:{deadline}")
    }

    /// Learns how far the room's Redis clock is ahead of this host's from an admit reply's
    /// `store_now` (Redis `TIME` plus the test shift, when the script ran), read at `wall`:
    /// short of it by the reply's way back, so the largest reading is the closest. A clock that
    /// went back by more than a deadline's slack (another host after a failover) is taken as it
    /// reads.
    pub(super) fn note_redis_clock(&self, room: &str, store_now: u64, wall: i64) {
        if store_now == 0 || self.frozen_time().is_some() {
            return;
        }
        let reading = i64::try_from(store_now).unwrap_or(i64::MAX)
            - wall.saturating_add(self.skew_us.load(Ordering::Relaxed));
        let slack = self.slack();
        let mut ahead = self.ahead();
        match ahead.get_mut(room) {
            Some(a) if reading > *a || reading < a.saturating_sub(slack) => *a = reading,
            Some(_) => {}
            None => {
                ahead.insert(room.to_string(), reading);
            }
        }
    }

    /// How long after it is made a call may still run and decide: twice the timeout.
    fn slack(&self) -> i64 {
        i64::try_from(micros(self.timeout * 2)).unwrap_or(i64::MAX)
    }

    fn ahead(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, i64>> {
        self.redis_ahead.lock().unwrap_or_else(|e| e.into_inner())
    }
}
