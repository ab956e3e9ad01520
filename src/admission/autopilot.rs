//! The autopilot's decision: the admission rate follows the origin's health between `min-rate`
//! and the configured rate (the ceiling). Pure: the health of the last window and the rate in
//! force in, the next rate and why out. The store makes sure one decision per window wins, for
//! every instance (see `lua/admit.lua` and the memory store).
//!
//! The rule is additive increase, multiplicative decrease (TCP's, and what keeps several
//! controllers on one shop fair and stable), with the decrease sized by what the latency says
//! of the shop's queue. A shop past its capacity queues: the wait grows by `s` seconds per
//! second when `1 + s` orders arrive for every one it serves, so between two windows the p90's
//! rise says how far over the shop's capacity the rate was, and the p90's excess over the
//! target says how much queue there is to drain:
//! - the p90 over `target-latency` and not falling (or errors over `max-error-rate`): the rate
//!   of the window before (what sent the orders the latest window shows) ÷ (1 + s), the
//!   capacity that queue growth implies, × (1 − excess ÷ 2 s), to drain the excess within two
//!   seconds, at least × 0.5 — and never above the rate in force, so a cut the window before
//!   made already is not made twice; with errors at most × 0.5 of the rate in force (a shop
//!   that fails has lost more than its latency shows: the orders it turns away do not wait);
//! - over the target but falling since the last window, or failing or over it but no longer
//!   rising right after a cut: hold (the last cut is working);
//! - under 80 % of the target, with no errors over the limit, not rising since the last window
//!   (a latency that climbs is a queue forming at the shop, before it reaches the target), and
//!   while the rate is what holds the line (people wait, a slot is free): up by 5 % of the
//!   ceiling per second of window;
//! - between 80 % and 100 % of the target: hold (the band keeps a shop at its capacity from
//!   being pushed over and pulled back every window).
//!
//! A window with fewer than [`MIN_REQUESTS`] requests (or, at a low rate, than half of what the
//! rate sends in a window, at least 3) says nothing about the shop: no step.
//!
//! Why this rule, and the ones it replaced, are in `docs/BENCHMARKS.md` ("The autopilot").

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
/// The least a cut keeps of the rate, and the most a failing window keeps.
const CUT_FLOOR: f64 = 0.5;
const ERROR_CUT: f64 = 0.5;
/// The time within which a cut means to drain the queue's excess over the target.
const DRAIN_WITHIN: f64 = 2.0;
const RAISE_BELOW: f64 = 0.8;
/// A raise: this share of the ceiling per second of window.
const RAISE_PER_SECOND: f64 = 0.05;
/// A p90 rising faster than this (seconds of wait per second) is a queue forming: no raise.
const RISING: f64 = 0.05;

pub use crate::store::autopilot::Health;

/// Why the rate changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No rate in the store yet: [`start_rate`].
    Start,
    Errors,
    Latency,
    Healthy,
    /// Back within this instance's bounds (a ceiling lowered, a floor raised by a reload), the
    /// shop's health not judged.
    Bounds,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Start => "start",
            Reason::Errors => "errors",
            Reason::Latency => "latency",
            Reason::Healthy => "healthy",
            Reason::Bounds => "bounds",
        }
    }

    pub fn parse(s: &str) -> Option<Reason> {
        [
            Reason::Start,
            Reason::Errors,
            Reason::Latency,
            Reason::Healthy,
            Reason::Bounds,
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

/// The window judged before the one being judged now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Previous {
    pub p90: Duration,
    /// The rate in force during it: what sent the orders whose wait the latest window shows
    /// (they reach the shop, and queue there, a while after their admission).
    pub rate: f64,
}

/// The next rate after a window of `health` at `current`, or `None` to keep it. `previous`:
/// the window before, if it was judged.
/// `rate_holds_the_line`: people wait and the rate, not `max-active` or a pause, decides when
/// they get in — only then can a higher rate be tried (a quiet room's health says nothing of
/// what a crowd at a higher rate would do).
pub fn decide(
    cfg: &AutopilotConfig,
    ceiling: f64,
    current: f64,
    health: &Health,
    previous: Option<Previous>,
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
    let window = cfg.window.as_secs_f64();
    let enough = MIN_REQUESTS
        .min((current_in * window * 0.5).ceil() as u64)
        .max(3);
    // How fast the shop's queue grows: seconds of wait per second (0 when not known), and
    // the rate that made it grow (the orders a window shows were sent the window before).
    let slope = previous.map_or(0.0, |p| (p90 - p.p90.as_secs_f64()) / window.max(1e-9));
    let sent_at = previous.map_or(current_in, |p| p.rate.clamp(min, ceiling));
    let failing = health.error_share() > cfg.max_error_rate;
    let just_cut = sent_at > current_in + 1e-9;
    let next = if health.requests < enough {
        None
    } else if (failing || p90 > target) && (slope < 0.0 && !failing || slope <= 0.0 && just_cut) {
        // Over the target but coming down, or no longer rising right after a cut: the last
        // cut is working (orders admitted before it are still reaching the shop, and shoppers
        // turned away try again); cutting again now would overshoot.
        None
    } else if failing || p90 > target {
        let capacity = sent_at / (1.0 + slope.max(0.0));
        let drain = (1.0 - (p90 - target).max(0.0) / DRAIN_WITHIN).max(CUT_FLOOR);
        let mut rate = (capacity * drain).min(current_in);
        if failing {
            rate = rate.min(current_in * ERROR_CUT);
        }
        let reason = if failing {
            Reason::Errors
        } else {
            Reason::Latency
        };
        if rate < current_in - 1e-9 {
            Some(step(rate, reason))
        } else {
            // The cut this window calls for was made already (from the window before).
            None
        }
    } else if p90 < target * RAISE_BELOW && rate_holds_the_line && slope <= RISING {
        Some(step(
            current_in + ceiling * RAISE_PER_SECOND * window,
            Reason::Healthy,
        ))
    } else {
        None
    };
    let moved = |s: &Step| (s.rate - current).abs() > 1e-9;
    match next {
        // A decision of its own: more than a return within bounds.
        Some(s) if moved(&s) && (s.rate - current_in).abs() > 1e-9 => Some(s),
        // A ceiling lowered by a reload (or a min raised): back within bounds, said as such
        // (found by review: told as a latency cut of an idle, fast shop, or as a healthy step).
        _ if (current_in - current).abs() > 1e-9 => Some(step(current_in, Reason::Bounds)),
        Some(s) if moved(&s) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
