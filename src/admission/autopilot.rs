//! The autopilot's decision: the admission rate follows the origin's health between `min-rate`
//! and the configured rate (the ceiling). Pure: the health of the last window and the rate in
//! force in, the next rate and why out. The store makes sure one decision per window wins, for
//! every instance (see `lua/admit.lua` and the memory store).
//!
//! The rule is additive increase, multiplicative decrease (TCP's, and what keeps several
//! controllers on one shop fair and stable):
//! - errors over `max-error-rate`: the rate × target ÷ p90, between × 0.5 and × 0.7;
//! - the p90 latency over `target-latency` and not already falling since the last window: the
//!   rate × target ÷ p90, between × 0.85 and × 0.9 (a latency that is over the target is
//!   partly the orders admitted before the last cut still arriving: small steps, one per
//!   window, do not overshoot; a shop that fails is cut harder, above);
//! - over the target but falling since the last window: hold (the last cut is working);
//! - under 80 % of the target, with no errors over the limit, not rising since the last window
//!   (a latency that climbs is a queue forming at the shop, before it reaches the target), and
//!   while the rate is what holds the line (people wait, a slot is free): one step of 5 % of
//!   the ceiling up;
//! - between 80 % and 100 % of the target: hold (the band keeps a shop at its capacity from
//!   being pushed over and pulled back every window).
//!
//! A window with fewer than [`MIN_REQUESTS`] requests (or, at a low rate, than half of what the
//! rate sends in a window, at least 3) says nothing about the shop: no step.

use std::time::Duration;

use crate::config::AutopilotConfig;

/// Requests in a window below which its health is not judged.
pub const MIN_REQUESTS: u64 = 20;
/// Where the autopilot starts when the store has no rate for it yet, as a share of the ceiling.
/// The ceiling is an operator's guess and a guess too high is the case the autopilot exists
/// for: starting there would send a sale's first crowd at a rate the shop may not take, and
/// starting at `min-rate` would waste the first minute of a shop that can take the ceiling.
/// Half of it is reached from either side in a few windows.
pub const START_SHARE: f64 = 0.5;
const ERROR_CUT: f64 = 0.7;
const ERROR_CUT_MIN: f64 = 0.5;
const LATENCY_CUT_MIN: f64 = 0.85;
const LATENCY_CUT_MAX: f64 = 0.9;
const RAISE_BELOW: f64 = 0.8;
const RAISE_STEP: f64 = 0.025;
/// A p90 under this share of the last window's is falling.
const FALLING_SHARE: f64 = 0.95;
/// A p90 more than this above the last window's (and [`RISE_SLACK`]) is rising.
const RISE_SHARE: f64 = 1.1;
const RISE_SLACK: Duration = Duration::from_millis(10);

pub use crate::store::autopilot::Health;

/// Why the rate changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No rate in the store yet: [`start_rate`].
    Start,
    Errors,
    Latency,
    Healthy,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Start => "start",
            Reason::Errors => "errors",
            Reason::Latency => "latency",
            Reason::Healthy => "healthy",
        }
    }

    pub fn parse(s: &str) -> Option<Reason> {
        [
            Reason::Start,
            Reason::Errors,
            Reason::Latency,
            Reason::Healthy,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// A decided step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub rate: f64,
    pub reason: Reason,
}

/// The rate the autopilot starts at.
pub fn start_rate(cfg: &AutopilotConfig, ceiling: f64) -> f64 {
    (ceiling * START_SHARE).max(cfg.min_rate).min(ceiling)
}

/// The next rate after a window of `health` at `current`, or `None` to keep it. `previous`:
/// the p90 of the window before, if it was judged.
/// `rate_holds_the_line`: people wait and the rate, not `max-active` or a pause, decides when
/// they get in — only then can a higher rate be tried (a quiet room's health says nothing of
/// what a crowd at a higher rate would do).
pub fn decide(
    cfg: &AutopilotConfig,
    ceiling: f64,
    current: f64,
    health: &Health,
    previous: Option<Duration>,
    rate_holds_the_line: bool,
) -> Option<Step> {
    let min = cfg.min_rate.min(ceiling);
    let current_in = current.clamp(min, ceiling);
    let step = |rate: f64, reason| Step {
        rate: rate.clamp(min, ceiling),
        reason,
    };
    let target = cfg.target_latency.as_secs_f64();
    let p90 = health.p90.as_secs_f64();
    let enough = MIN_REQUESTS
        .min((current_in * cfg.window.as_secs_f64() * 0.5).ceil() as u64)
        .max(3);
    let next = if health.requests < enough {
        None
    } else if health.error_share() > cfg.max_error_rate {
        // Failing, and as far behind as its latency says (a shop that lost most of its
        // workers at once is cut to half in one step, not in three).
        let cut = (target / p90.max(1e-9)).clamp(ERROR_CUT_MIN, ERROR_CUT);
        Some(step(current_in * cut, Reason::Errors))
    } else if p90 > target && previous.is_some_and(|p| health.p90 < p.mul_f64(FALLING_SHARE)) {
        // Over the target but coming down: the last cut is working (orders admitted before it
        // are still reaching the shop); cutting again now would overshoot.
        None
    } else if p90 > target {
        let cut = (target / p90).clamp(LATENCY_CUT_MIN, LATENCY_CUT_MAX);
        Some(step(current_in * cut, Reason::Latency))
    } else if p90 < target * RAISE_BELOW
        && rate_holds_the_line
        && previous.is_none_or(|p| health.p90 <= p.mul_f64(RISE_SHARE) + RISE_SLACK)
    {
        Some(step(current_in + ceiling * RAISE_STEP, Reason::Healthy))
    } else {
        None
    };
    match next {
        Some(s) if (s.rate - current).abs() > 1e-9 => Some(s),
        // A ceiling lowered by a reload (or a min raised): back within bounds.
        None if (current_in - current).abs() > 1e-9 => Some(step(
            current_in,
            if current_in < current {
                Reason::Latency
            } else {
                Reason::Healthy
            },
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> AutopilotConfig {
        AutopilotConfig {
            target_latency: Duration::from_millis(800),
            max_error_rate: 0.01,
            min_rate: 5.0,
            window: Duration::from_secs(2),
        }
    }

    fn health(requests: u64, errors: u64, p90_ms: u64) -> Health {
        Health {
            requests,
            errors,
            p90: Duration::from_millis(p90_ms),
        }
    }

    #[test]
    fn it_starts_at_half_the_ceiling_within_bounds() {
        assert_eq!(start_rate(&cfg(), 400.0), 200.0);
        assert_eq!(start_rate(&cfg(), 6.0), 5.0, "never under min-rate");
        assert_eq!(start_rate(&cfg(), 4.0), 4.0, "never over the ceiling");
    }

    #[test]
    fn errors_and_latency_cut_health_raises_the_band_holds() {
        let c = cfg();
        // (The ceiling is 400: a raise is 2.5 % of it, 10/s.)
        let d = |h: Health, line| decide(&c, 400.0, 200.0, &h, None, line);
        assert_eq!(
            d(health(1000, 20, 300), true),
            Some(Step {
                rate: 140.0,
                reason: Reason::Errors
            })
        );
        // Failing far behind (4 s against 0.8 s): halved at once.
        assert_eq!(d(health(1000, 20, 4000), true).map(|s| s.rate), Some(100.0));
        // Slow, not failing: 1.6 s against 0.8 s is cut by the 0.85 floor; 0.85 s by 0.9.
        assert_eq!(d(health(1000, 0, 1600), true).map(|s| s.rate), Some(170.0));
        assert_eq!(d(health(1000, 0, 850), true).map(|s| s.rate), Some(180.0));
        // Over the target but falling since the last window: the last cut is working.
        let falling = decide(
            &c,
            400.0,
            200.0,
            &health(1000, 0, 900),
            Some(Duration::from_millis(1200)),
            true,
        );
        assert_eq!(falling, None);
        assert_eq!(
            d(health(1000, 0, 300), true),
            Some(Step {
                rate: 210.0,
                reason: Reason::Healthy
            })
        );
        assert_eq!(d(health(1000, 0, 700), true), None, "the band");
        let rising = decide(
            &c,
            400.0,
            200.0,
            &health(1000, 0, 500),
            Some(Duration::from_millis(300)),
            true,
        );
        assert_eq!(rising, None, "a queue forming");
        assert_eq!(d(health(1000, 0, 300), false), None, "no line: no raise");
        assert_eq!(d(health(10, 5, 5000), true), None, "too few requests");
    }

    #[test]
    fn min_and_ceiling_hold() {
        let c = cfg();
        assert_eq!(
            decide(&c, 400.0, 6.0, &health(100, 50, 9000), None, true).map(|s| s.rate),
            Some(5.0)
        );
        assert_eq!(
            decide(&c, 400.0, 5.0, &health(100, 50, 9000), None, true),
            None
        );
        assert_eq!(
            decide(&c, 400.0, 395.0, &health(100, 0, 10), None, true).map(|s| s.rate),
            Some(400.0)
        );
        assert_eq!(
            decide(&c, 400.0, 400.0, &health(100, 0, 10), None, true),
            None
        );
        // A reload lowered the ceiling: back under it at once.
        assert_eq!(
            decide(&c, 100.0, 300.0, &health(0, 0, 0), None, true).map(|s| s.rate),
            Some(100.0)
        );
    }

    /// A shop of `workers` that take `service` each, with a queue that gives up after
    /// `timeout` (503): what an admitted visitor's order waits, window after window. Orders
    /// reach the shop `lag` windows after their admission (the visitor learns of their turn,
    /// loads a page, orders), which is what makes a latency signal late.
    struct Shop {
        workers: f64,
        service: f64,
        timeout: f64,
        backlog: f64,
        lag: std::collections::VecDeque<f64>,
    }

    impl Shop {
        fn new(lag: usize) -> Self {
            Shop {
                workers: 40.0,
                service: 0.2,
                timeout: 1.0,
                backlog: 0.0,
                lag: std::iter::repeat_n(0.0, lag).collect(),
            }
        }

        fn capacity(&self) -> f64 {
            self.workers / self.service
        }

        /// One window at `rate`: the health the autopilot sees.
        fn window(&mut self, rate: f64, secs: f64) -> Health {
            self.lag.push_back(rate * secs);
            let arrived = self.lag.pop_front().unwrap_or(0.0);
            let served = (self.capacity() * secs).min(self.backlog + arrived);
            self.backlog = (self.backlog + arrived - served).max(0.0);
            // Orders that would wait past the timeout are turned away.
            let most = self.capacity() * self.timeout;
            let errors = (self.backlog - most).max(0.0);
            self.backlog -= errors;
            let wait = self.backlog / self.capacity();
            Health {
                requests: arrived as u64,
                errors: errors as u64,
                p90: Duration::from_secs_f64(self.service + wait),
            }
        }
    }

    /// The trace of a sale on [`Shop`] whose capacity drops from 200/s to 75/s at window 40
    /// for 30 windows, with a ceiling of 400/s (an operator's overestimate).
    fn sale(c: &AutopilotConfig, lag: usize) -> Vec<(usize, f64, f64, f64, u64, f64)> {
        let ceiling = 400.0;
        let mut shop = Shop::new(lag);
        let mut rate = start_rate(c, ceiling);
        let mut previous = None;
        let mut trace = Vec::new();
        let secs = c.window.as_secs_f64();
        for w in 0..120 {
            shop.workers = if (40..70).contains(&w) { 15.0 } else { 40.0 };
            let h = shop.window(rate, secs);
            if let Some(s) = decide(c, ceiling, rate, &h, previous, true) {
                rate = s.rate;
            }
            previous = Some(h.p90);
            assert!((c.min_rate..=ceiling).contains(&rate), "{rate}");
            let served = h.requests.saturating_sub(h.errors) as f64;
            trace.push((
                w,
                rate,
                shop.capacity(),
                h.p90.as_secs_f64(),
                h.errors,
                served,
            ));
        }
        trace
    }

    /// Step response and recovery on a shop whose capacity drops and comes back, with an
    /// overestimated ceiling and orders that reach the shop a window after their admission:
    /// the rate follows the capacity, once settled it swings no further than a bounded band
    /// around it (no oscillation that grows or stays wide), and few orders fail.
    #[test]
    fn it_follows_a_capacity_drop_and_recovery_without_oscillating() {
        let c = AutopilotConfig {
            target_latency: Duration::from_millis(400),
            window: Duration::from_secs(1),
            ..cfg()
        };
        let trace = sale(&c, 1);
        let show = || {
            trace
                .iter()
                .map(|t| format!("{}:{:.0}/{:.0}/{:.2}/{}", t.0, t.1, t.2, t.3, t.4))
                .collect::<Vec<_>>()
                .join(" ")
        };
        // Settled phases: the rate's swing stays within a band around the capacity.
        for (from, to, cap) in [(15, 40, 200.0), (50, 70, 75.0), (85, 120, 200.0)] {
            let rates: Vec<f64> = trace[from..to].iter().map(|t| t.1).collect();
            let lo = rates.iter().cloned().fold(f64::MAX, f64::min);
            let hi = rates.iter().cloned().fold(0.0, f64::max);
            assert!(
                lo >= 0.6 * cap && hi <= 1.3 * cap,
                "windows {from}..{to}: rate {lo:.0}..{hi:.0} around {cap}: {}",
                show()
            );
            let mean = rates.iter().sum::<f64>() / rates.len() as f64;
            assert!(
                mean >= 0.85 * cap,
                "windows {from}..{to}: mean {mean:.0} of {cap}: {}",
                show()
            );
        }
        // It reacts within a few windows of the drop, and the shop's latency comes back
        // under the target within a few more.
        let reacted = trace[40..].iter().position(|t| t.1 < 150.0).unwrap();
        assert!(reacted <= 3, "reacted after {reacted} windows: {}", show());
        let calm = trace[40..]
            .iter()
            .skip(reacted)
            .position(|t| t.3 < 0.4)
            .unwrap();
        assert!(
            calm <= 10,
            "latency back after {calm} more windows: {}",
            show()
        );
        // Of all orders, few fail: the drop's first windows, before it could react.
        let errors: u64 = trace.iter().map(|t| t.4).sum();
        let served: f64 = trace.iter().map(|t| t.5).sum();
        assert!(
            (errors as f64) < 0.01 * served,
            "{errors} failed of {served:.0}: {}",
            show()
        );
        // The shop is kept busy: orders served against what it could have served.
        let possible: f64 = trace.iter().map(|t| t.2).sum();
        assert!(
            served >= 0.85 * possible,
            "{served:.0} of {possible:.0}: {}",
            show()
        );
    }
}
