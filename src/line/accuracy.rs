//! How honest the ETA is: every admitted visitor who carried a prediction (their queue
//! ticket's, see [`super::ticket::Predicted`]) gives the ratio of the wait they had to the wait
//! they were told. The instance that admits them exports it (`anteroom_eta_error`), keeps the
//! latest few hundred here (for the dashboard and the admin API), and widens what new visitors are told into a range
//! when the recent ratios (or the state of the line) say a single number would be falsely
//! precise ([`band`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::store::VisitorId;

/// Ratios kept, and for how long: what the line did in the last minutes, not last week's sale.
const KEEP: usize = 500;
const MAX_AGE: Duration = Duration::from_secs(600);

/// Fewer ratios than this are no evidence either way: the band is the unsettled one.
pub const MIN_SAMPLES: usize = 20;
/// The band when there is no evidence (the start of a sale) or the line's pace is changing (a
/// rate just changed, the autopilot moving it): waits from 0.7× to 1.5× the estimate. Wider
/// above: a pace that is still settling has so far only been slower than the rate in force
/// (the measurement catches up from nothing; a cut shows before a raise does).
pub const UNSETTLED: (f64, f64) = (0.7, 1.5);
/// A band narrower than this (high ÷ low) is shown as the single number.
pub const POINT_WITHIN: f64 = 1.3;
/// The measured pace and the rate in force agree when within this share of each other.
pub const AGREE_WITHIN: f64 = 0.15;

/// What the recent ratios say.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Ratios summarised.
    pub count: usize,
    /// Median and 90th percentile of |actual ÷ predicted − 1|.
    pub median_abs_error: f64,
    pub p90_abs_error: f64,
    /// Median of actual ÷ predicted: above 1, visitors waited longer than told.
    pub median_ratio: f64,
    /// 10th and 90th percentiles of actual ÷ predicted.
    pub low: f64,
    pub high: f64,
}

/// Nearest rank: the smallest value with at least `q` of the values at or below it.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1]
}

/// The summary of some ratios (`None` for none; non-finite ones are left out).
pub fn summarise(ratios: impl IntoIterator<Item = f64>) -> Option<Summary> {
    let mut r: Vec<f64> = ratios.into_iter().filter(|x| x.is_finite()).collect();
    if r.is_empty() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    let mut e: Vec<f64> = r.iter().map(|x| (x - 1.0).abs()).collect();
    e.sort_by(f64::total_cmp);
    Some(Summary {
        count: r.len(),
        median_abs_error: quantile(&e, 0.5),
        p90_abs_error: quantile(&e, 0.9),
        median_ratio: quantile(&r, 0.5),
        low: quantile(&r, 0.1),
        high: quantile(&r, 0.9),
    })
}

/// Whether the line's pace is settled enough for the recent ratios to speak for a new
/// estimate: a line moved by the rate whose measured pace agrees with the rate in force, or one
/// held by a full shop whose pace is measured at all. Not settled at the start of a sale (no
/// pace measured yet) and after a rate change (the measurement lags it).
pub fn settled(held_by_rate: bool, measured: f64, rate_in_force: Option<f64>) -> bool {
    if measured < super::forecast::MIN_MEASURED {
        return false;
    }
    if !held_by_rate {
        return true;
    }
    rate_in_force.is_some_and(|rate| {
        rate > 0.0 && (measured - rate).abs() <= AGREE_WITHIN * rate.max(measured)
    })
}

/// The paces an estimate is judged by, in admissions per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paces {
    /// The pace the estimate assumes (`forecast::eta_rate`).
    pub told: f64,
    /// The pace over about the last minute ([`SlowPace`]); 0 when not measured yet.
    pub minute: f64,
    /// The fastest the line can move: the rate in force (or the told pace when a full shop
    /// holds the line: sessions ending set its pace then, whatever the rate).
    pub fastest: f64,
}

/// The factors of the estimate the paces allow: a wait as short as at the fastest of them, as
/// long as at the slower of the told pace and the last minute's. All 1 on a steady line; after
/// an autopilot's cut, the minute's faster pace says the wait may well be shorter than told
/// (the shop may come back), after a raise the rate in force does.
pub fn pace_factors(p: &Paces) -> (f64, f64) {
    if p.told.is_nan() || p.told <= 0.0 {
        return (1.0, 1.0);
    }
    let fastest = p.told.max(p.fastest).max(p.minute);
    let slowest = if p.minute >= super::forecast::MIN_MEASURED {
        p.told.min(p.minute)
    } else {
        p.told
    };
    (p.told / fastest, p.told / slowest)
}

/// The range to tell instead of an estimate, as factors of it, or `None` to tell the number:
/// the recent ratios' 10th to 90th percentiles (always including 1: the estimate itself), at
/// least [`UNSETTLED`] when they are too few or the pace is not settled, and at least what the
/// paces allow ([`pace_factors`]); a range narrower than [`POINT_WITHIN`] is the number.
/// Decided once a tick (the admission loop), applied to every estimate told until the next
/// ([`Band`]).
pub fn band(settled: bool, recent: Option<&Summary>, paces: &Paces) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = match recent.filter(|s| s.count >= MIN_SAMPLES) {
        Some(s) => (s.low.min(1.0), s.high.max(1.0)),
        None => UNSETTLED,
    };
    if !settled {
        (lo, hi) = (lo.min(UNSETTLED.0), hi.max(UNSETTLED.1));
    }
    let (plo, phi) = pace_factors(paces);
    let (lo, hi) = (lo.min(plo).max(0.05), hi.max(phi).min(20.0));
    (hi / lo >= POINT_WITHIN).then_some((lo, hi))
}

/// Time constant of [`SlowPace`].
const SLOW_TAU_SECS: f64 = 60.0;

/// One step of an exponential average with time constant `tau` seconds; the first sample seeds
/// it.
pub fn average(prev: Option<f64>, sample: f64, dt_secs: f64, tau: f64) -> f64 {
    match prev {
        None => sample,
        Some(p) => p + (1.0 - (-dt_secs.max(0.0) / tau).exp()) * (sample - p),
    }
}

/// The store's measured pace (an average over about ten seconds) averaged again over about a
/// minute, while people wait: what the line did through the swings of an autopilot or an
/// operator's changes. Forgotten when the line empties.
#[derive(Debug, Default)]
pub struct SlowPace {
    last: Mutex<Option<(Instant, f64)>>,
}

impl SlowPace {
    /// Notes a tick's measured pace; returns the minute's (0 while nobody waits).
    pub fn note(&self, measured: f64, waiting: bool) -> f64 {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if !waiting || measured < super::forecast::MIN_MEASURED {
            if !waiting {
                *last = None;
            }
            return last.map_or(0.0, |(_, v)| v);
        }
        let now = Instant::now();
        let v = average(
            last.map(|(_, v)| v),
            measured,
            last.map_or(0.0, |(t, _)| now.duration_since(t).as_secs_f64()),
            SLOW_TAU_SECS,
        );
        *last = Some((now, v));
        v
    }
}

/// The range for an estimate of `eta` seconds, in whole seconds (`None`: tell the number).
pub fn range_of(eta: u64, factors: Option<(f64, f64)>) -> Option<(u64, u64)> {
    let (lo, hi) = factors?;
    let e = eta as f64;
    let (lo, hi) = ((e * lo).floor() as u64, (e * hi).ceil() as u64);
    (eta > 0 && hi > lo).then_some((lo, hi))
}

/// The band in force for a room, readable on every request without a lock: [`UNSETTLED`]
/// until the first tick decides.
#[derive(Debug)]
pub struct Band {
    /// Factors × 1000; 0 for "tell the number".
    lo_milli: AtomicU64,
    hi_milli: AtomicU64,
}

impl Default for Band {
    fn default() -> Self {
        let b = Band {
            lo_milli: AtomicU64::new(0),
            hi_milli: AtomicU64::new(0),
        };
        b.set(Some(UNSETTLED));
        b
    }
}

impl Band {
    pub fn set(&self, factors: Option<(f64, f64)>) {
        let (lo, hi) = factors.map_or((0, 0), |(lo, hi)| {
            ((lo * 1000.0).round() as u64, (hi * 1000.0).round() as u64)
        });
        self.lo_milli.store(lo, Ordering::Relaxed);
        self.hi_milli.store(hi, Ordering::Relaxed);
    }

    pub fn get(&self) -> Option<(f64, f64)> {
        let hi = self.hi_milli.load(Ordering::Relaxed);
        (hi > 0).then(|| {
            (
                self.lo_milli.load(Ordering::Relaxed) as f64 / 1000.0,
                hi as f64 / 1000.0,
            )
        })
    }
}

/// One room's recent ratios on this instance, each with the visitor it was measured of.
#[derive(Debug, Default)]
pub struct Accuracy {
    recent: Mutex<VecDeque<(Instant, f64, VisitorId)>>,
}

impl Accuracy {
    /// Notes `vid`'s actual ÷ predicted wait, once: `false` when it was not noted (not a
    /// number, or one of `vid`'s is among the recent ones). A visitor's queue ticket replayed
    /// after their admission is answered `admitted` again (they hold the session), and each
    /// replay counted its ratio, as large as the wait since the first ETA (found by review
    /// r85c: 200 replays of one ticket, 30 s after its admission, set every newcomer's range
    /// to 0.7–18 times the estimate).
    pub fn note(&self, vid: VisitorId, ratio: f64) -> bool {
        if !ratio.is_finite() {
            return false;
        }
        let mut r = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if r.iter().any(|(_, _, v)| *v == vid) {
            return false;
        }
        if r.len() == KEEP {
            r.pop_front();
        }
        r.push_back((Instant::now(), ratio, vid));
        true
    }

    /// The summary of the ratios of the last minutes (the admission loop's, once a tick; the
    /// admin API's).
    pub fn summary(&self) -> Option<Summary> {
        let now = Instant::now();
        let mut r = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        while r
            .front()
            .is_some_and(|(t, _, _)| now.duration_since(*t) > MAX_AGE)
        {
            r.pop_front();
        }
        summarise(r.iter().map(|(_, x, _)| *x))
    }

    /// Over a reload: the same line, the same evidence.
    pub fn inherit(&self, old: &Accuracy) {
        let r = old.recent.lock().unwrap_or_else(|e| e.into_inner()).clone();
        *self.recent.lock().unwrap_or_else(|e| e.into_inner()) = r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(ratios: &[f64]) -> Summary {
        summarise(ratios.iter().copied()).expect("a summary")
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        assert_eq!(summarise([]), None);
        assert_eq!(summarise([f64::NAN]), None);
        let s = of(&[1.0]);
        assert_eq!((s.count, s.median_abs_error, s.median_ratio), (1, 0.0, 1.0));
        // Ten ratios 0.55, 0.65, ... 1.45: the 5th, the 9th and the 1st.
        let r: Vec<f64> = (0..10).map(|i| 0.55 + 0.1 * f64::from(i)).collect();
        let s = of(&r);
        assert_eq!(s.count, 10);
        assert!((s.median_ratio - 0.95).abs() < 1e-9, "{s:?}");
        assert!(
            (s.low - 0.55).abs() < 1e-9 && (s.high - 1.35).abs() < 1e-9,
            "{s:?}"
        );
        // Errors 0.05, 0.05, 0.15, 0.15, ... 0.45, 0.45: the 5th is 0.25, the 9th 0.45.
        assert!((s.median_abs_error - 0.25).abs() < 1e-9, "{s:?}");
        assert!((s.p90_abs_error - 0.45).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn a_settled_line_is_one_whose_pace_agrees_with_its_rate() {
        assert!(settled(true, 100.0, Some(100.0)));
        assert!(settled(true, 88.0, Some(100.0)), "within 15 %");
        assert!(!settled(true, 80.0, Some(100.0)), "a rate just raised");
        assert!(!settled(true, 140.0, Some(100.0)), "a rate just cut");
        assert!(!settled(true, 0.0, Some(100.0)), "the start of a sale");
        assert!(!settled(true, 50.0, None), "no tick yet");
        assert!(
            settled(false, 0.5, Some(100.0)),
            "a full shop: its pace is the measure"
        );
        assert!(
            !settled(false, 0.01, Some(100.0)),
            "a full shop nobody leaves"
        );
    }

    const STEADY: Paces = Paces {
        told: 100.0,
        minute: 100.0,
        fastest: 100.0,
    };

    #[test]
    fn a_number_only_when_the_evidence_says_it_is_good() {
        let tight = of(&[0.95; 40]);
        assert_eq!(
            band(true, Some(&tight), &STEADY),
            None,
            "settled, recent errors small"
        );
        // No evidence yet, or too little: the unsettled band.
        assert_eq!(band(true, None, &STEADY), Some(UNSETTLED));
        let few = of(&[1.0; MIN_SAMPLES - 1]);
        assert_eq!(band(true, Some(&few), &STEADY), Some(UNSETTLED));
        // Good evidence, but the rate just changed: a range all the same.
        assert_eq!(band(false, Some(&tight), &STEADY), Some(UNSETTLED));
        // Recent waits spread from 0.6× to 1.8×: that range, settled or not.
        let mut wide = vec![0.6; 5];
        wide.extend([1.0; 30]);
        wide.extend([1.8; 5]);
        assert_eq!(band(true, Some(&of(&wide)), &STEADY), Some((0.6, 1.8)));
        assert_eq!(band(false, Some(&of(&wide)), &STEADY), Some((0.6, 1.8)));
        // Biased but tight (everyone waits 1.5× what they were told): the range holds the
        // estimate itself too, so it says so rather than hiding it.
        assert_eq!(band(true, Some(&of(&[1.5; 40])), &STEADY), Some((1.0, 1.5)));
    }

    /// The bench's autopilot run (a shop that drops to 75/s for half a minute): estimates told
    /// during the drop assumed its pace, and the shop came back, so waits were half of what
    /// was told — under the unsettled band's 0.7×. The minute's pace knew better.
    #[test]
    fn a_pace_that_swings_widens_the_range_to_what_the_last_minute_did() {
        assert_eq!(pace_factors(&STEADY), (1.0, 1.0));
        // Cut to 75/s; the last minute averaged 150/s.
        let cut = Paces {
            told: 75.0,
            minute: 150.0,
            fastest: 75.0,
        };
        assert_eq!(pace_factors(&cut), (0.5, 1.0));
        assert_eq!(band(false, None, &cut), Some((0.5, 1.5)));
        // Raised to 300/s while the pace measured is still 150/s: it may get faster still.
        let raised = Paces {
            told: 150.0,
            minute: 120.0,
            fastest: 300.0,
        };
        assert_eq!(pace_factors(&raised), (0.5, 1.25));
        // Not measured yet: the told pace is all there is.
        let start = Paces {
            told: 175.0,
            minute: 0.0,
            fastest: 175.0,
        };
        assert_eq!(pace_factors(&start), (1.0, 1.0));
        let none = Paces { told: 0.0, ..start };
        assert_eq!(pace_factors(&none), (1.0, 1.0));
    }

    #[test]
    fn the_minute_pace_averages_while_people_wait_and_forgets_between_lines() {
        assert_eq!(
            average(None, 10.0, 5.0, 60.0),
            10.0,
            "the first sample seeds it"
        );
        let one_tau = average(Some(0.0), 100.0, 60.0, 60.0);
        assert!((one_tau - 63.212).abs() < 0.01, "{one_tau}");
        assert_eq!(average(Some(50.0), 100.0, -1.0, 60.0), 50.0, "a step back");
        let p = SlowPace::default();
        assert_eq!(p.note(80.0, true), 80.0);
        assert!(p.note(200.0, true) < 81.0, "a tick later, barely moved");
        assert!(p.note(0.0, true) > 79.0, "no measurement: kept");
        assert_eq!(p.note(80.0, false), 0.0, "the line emptied");
        assert_eq!(p.note(120.0, true), 120.0, "a new line starts afresh");
    }

    #[test]
    fn a_range_is_in_whole_seconds_around_the_estimate() {
        assert_eq!(range_of(100, None), None);
        assert_eq!(range_of(100, Some(UNSETTLED)), Some((70, 150)));
        assert_eq!(range_of(3, Some((0.7, 1.5))), Some((2, 5)));
        assert_eq!(
            range_of(0, Some(UNSETTLED)),
            None,
            "walks in: nothing to widen"
        );
        let b = Band::default();
        assert_eq!(b.get(), Some(UNSETTLED), "no tick has decided yet");
        b.set(Some((0.6, 1.8)));
        assert_eq!(b.get(), Some((0.6, 1.8)));
        b.set(None);
        assert_eq!(b.get(), None);
    }

    #[test]
    fn the_summary_follows_what_is_noted() {
        let a = Accuracy::default();
        assert_eq!(a.summary(), None);
        for _ in 0..KEEP + 10 {
            assert!(a.note(VisitorId::random(), 2.0));
        }
        assert!(!a.note(VisitorId::random(), f64::INFINITY));
        let s = a.summary().expect("a summary");
        assert_eq!((s.count, s.median_ratio), (KEEP, 2.0));
        for _ in 0..KEEP {
            a.note(VisitorId::random(), 1.0);
        }
        assert_eq!(a.summary().map(|s| s.median_ratio), Some(1.0));
        let b = Accuracy::default();
        b.inherit(&a);
        assert_eq!(b.summary().map(|s| s.count), Some(KEEP));
    }

    /// A visitor's wait counts once among the recent ones, however often their ticket is
    /// replayed after their admission (found by review r85c).
    #[test]
    fn a_visitors_wait_counts_once() {
        let a = Accuracy::default();
        let (one, other) = (VisitorId::random(), VisitorId::random());
        assert!(a.note(one, 1.0));
        for _ in 0..200 {
            assert!(!a.note(one, 8.0), "a replay counted");
        }
        assert!(a.note(other, 1.1));
        assert_eq!(
            a.summary().map(|s| (s.count, s.median_ratio < 1.2)),
            Some((2, true))
        );
    }
}
