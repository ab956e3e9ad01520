//! How accurate the waiting page's ETA is, per visitor: the wait predicted when they joined the
//! line against the wait they had.
//!
//! The prediction is the first one a visitor was shown: the ETA of their first waiting answer
//! (the waiting page's `var eta0 = N;` and `var eta_range = [LO, HI];`, or a waiting status's
//! `eta_seconds`, `eta_low_seconds`, `eta_high_seconds`); when that answer had none (`null`),
//! the first later waiting answer before the admission that had one. The actual wait runs from
//! the send time of the request that answer answered (`predicted_at`) to the answer that said
//! admitted (`admitted_done`), so it includes the discovery lag (up to one poll interval).

use serde::Serialize;
use serde_json::Value;

use crate::analysis::percentile;
use crate::browser::Record;

/// Shorter predictions are not measured: at the poll floor (one poll a second) they are noise.
pub const MIN_PREDICTED_S: f64 = 1.0;

/// A predicted wait, as one answer told it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// Seconds: the point estimate, or the middle of the range when the answer had only a range.
    pub secs: f64,
    /// `(LO, HI)` seconds when the answer showed a range.
    pub range: Option<(f64, f64)>,
}

impl Prediction {
    fn new(point: Option<f64>, range: Option<(f64, f64)>) -> Option<Prediction> {
        let secs = point.or_else(|| range.map(|(lo, hi)| (lo + hi) / 2.0))?;
        Some(Prediction { secs, range })
    }
}

/// A number of seconds: finite and not negative; anything else (`null`, a string) is none.
fn secs(v: &Value) -> Option<f64> {
    v.as_f64().filter(|s| s.is_finite() && *s >= 0.0)
}

/// A range needs both ends, `LO <= HI`.
fn range_of(lo: Option<f64>, hi: Option<f64>) -> Option<(f64, f64)> {
    let (lo, hi) = (lo?, hi?);
    (lo <= hi).then_some((lo, hi))
}

/// The value after `var NAME = ` in a page's script, up to the `;` (or the line's end), read as
/// JSON. `None` when the line is absent or the value is not JSON.
fn page_value(body: &[u8], var: &str) -> Option<Value> {
    let text = std::str::from_utf8(body).ok()?;
    let rest = &text[text.find(var)? + var.len()..];
    let value = rest.split([';', '\n']).next()?.trim();
    serde_json::from_str(value).ok()
}

/// The prediction a waiting page shows: `var eta0 = N;` (`null`: none) and, from newer servers,
/// `var eta_range = [LO, HI];` (`null` or absent: no range). `None` when it shows neither.
pub fn from_page(body: &[u8]) -> Option<Prediction> {
    let point = page_value(body, "var eta0 = ").as_ref().and_then(secs);
    let range = page_value(body, "var eta_range = ").and_then(|v| match v.as_array()?.as_slice() {
        [lo, hi] => range_of(secs(lo), secs(hi)),
        _ => None,
    });
    Prediction::new(point, range)
}

/// The prediction of a status answer: `eta_seconds` and, from newer servers, `eta_low_seconds`
/// and `eta_high_seconds` (absent or `null`: none).
pub fn from_status(
    eta: Option<&Value>,
    low: Option<&Value>,
    high: Option<&Value>,
) -> Option<Prediction> {
    let range = range_of(low.and_then(secs), high.and_then(secs));
    Prediction::new(eta.and_then(secs), range)
}

/// Keeps a visitor's first prediction, from a waiting answer to a request sent at `sent` (µs),
/// as long as they have not been admitted yet.
pub fn note(rec: &mut Record, sent: u64, prediction: Option<Prediction>) {
    if rec.predicted.is_some() || rec.admitted_done.is_some() {
        return;
    }
    if let Some(p) = prediction {
        rec.predicted = Some(p);
        rec.predicted_at = Some(sent);
    }
}

/// One visitor: predicted seconds, actual seconds, the range shown (`(LO, HI)` seconds).
pub type Visit = (f64, f64, Option<(f64, f64)>);

/// How the predictions came out. Quantiles are nearest-rank ([`percentile`]): the smallest value
/// with at least p % of the values at or below it. `None` when nothing was measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Accuracy {
    /// Visitors with a prediction of at least [`MIN_PREDICTED_S`].
    pub measured: usize,
    /// Visitors left out for a shorter prediction.
    pub skipped: usize,
    /// Median of `|actual / predicted - 1|`, in percent.
    pub median_abs_error_pct: Option<f64>,
    /// 90th percentile of `|actual / predicted - 1|`, in percent.
    pub p90_abs_error_pct: Option<f64>,
    /// Median of `actual / predicted`: above 1, waits ran longer than predicted.
    pub median_ratio: Option<f64>,
    /// Measured visitors who were shown a range.
    pub ranged: usize,
    /// Share of those whose actual wait was within `[LO, HI]` (inclusive), in percent.
    pub within_range_pct: Option<f64>,
}

/// The figures of a set of visits (seconds, finite, not negative).
pub fn accuracy(visits: &[Visit]) -> Accuracy {
    let (kept, short): (Vec<&Visit>, Vec<&Visit>) =
        visits.iter().partition(|v| v.0 >= MIN_PREDICTED_S);
    let mut ratios: Vec<f64> = kept.iter().map(|v| v.1 / v.0).collect();
    ratios.sort_by(f64::total_cmp);
    let mut errors: Vec<f64> = ratios.iter().map(|r| (r - 1.0).abs() * 100.0).collect();
    errors.sort_by(f64::total_cmp);
    let ranged: Vec<(f64, (f64, f64))> = kept.iter().filter_map(|v| Some((v.1, v.2?))).collect();
    let within = ranged
        .iter()
        .filter(|(actual, (lo, hi))| lo <= actual && actual <= hi)
        .count();
    Accuracy {
        measured: kept.len(),
        skipped: short.len(),
        median_abs_error_pct: percentile(&errors, 50.0),
        p90_abs_error_pct: percentile(&errors, 90.0),
        median_ratio: percentile(&ratios, 50.0),
        ranged: ranged.len(),
        within_range_pct: (!ranged.is_empty()).then(|| within as f64 * 100.0 / ranged.len() as f64),
    }
}

/// The report's `eta` object: [`Accuracy`] and the visitors who waited but could not be measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EtaReport {
    #[serde(flatten)]
    pub accuracy: Accuracy,
    /// Waited, but no waiting answer before their admission (or the run's end) had an ETA.
    pub no_prediction: usize,
    /// Had a prediction but were never admitted in the run: their wait is unknown.
    pub not_admitted: usize,
}

pub fn report(records: &[Record]) -> EtaReport {
    let mut visits = Vec::new();
    let (mut no_prediction, mut not_admitted) = (0, 0);
    for r in records.iter().filter(|r| r.last_waiting_sent.is_some()) {
        match (r.predicted, r.predicted_at, r.admitted_done) {
            (Some(p), Some(at), Some(done)) => {
                visits.push((p.secs, done.saturating_sub(at) as f64 / 1e6, p.range));
            }
            (Some(_), Some(_), None) => not_admitted += 1,
            _ => no_prediction += 1,
        }
    }
    EtaReport {
        accuracy: accuracy(&visits),
        no_prediction,
        not_admitted,
    }
}

/// The summary's line, `None` when nobody waited.
pub fn summary_line(e: &EtaReport) -> Option<String> {
    let a = &e.accuracy;
    if a.measured + a.skipped + e.no_prediction + e.not_admitted == 0 {
        return None;
    }
    let f = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    let range = if a.ranged == 0 {
        "no range shown".to_string()
    } else {
        format!(
            "{} shown a range, {} % within it",
            a.ranged,
            f(a.within_range_pct, 1)
        )
    };
    Some(format!(
        "eta accuracy: {} measured, {} skipped (predicted < {MIN_PREDICTED_S} s), {} without an eta, \
         {} not admitted; |actual/predicted - 1| p50 {} % p90 {} %, median actual/predicted {}; {range}\n",
        a.measured,
        a.skipped,
        e.no_prediction,
        e.not_admitted,
        f(a.median_abs_error_pct, 1),
        f(a.p90_abs_error_pct, 1),
        f(a.median_ratio, 2),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(secs: f64, range: Option<(f64, f64)>) -> Option<Prediction> {
        Some(Prediction { secs, range })
    }

    #[test]
    fn the_page_shows_a_point_a_range_or_nothing() {
        let page = b"<script>\n  var wait = 1500;\n  var eta0 = 42;\n  var T = {};</script>";
        assert_eq!(from_page(page), p(42.0, None));
        // A newer page with a range.
        let page = b"var eta0 = 40;\n  var eta_range = [30, 55];\n";
        assert_eq!(from_page(page), p(40.0, Some((30.0, 55.0))));
        assert_eq!(
            from_page(b"var eta0 = 40;var eta_range = [ 30 , 55 ];"),
            p(40.0, Some((30.0, 55.0)))
        );
        // No ETA; no range.
        assert_eq!(
            from_page(b"var eta0 = null;\n  var eta_range = null;"),
            None
        );
        assert_eq!(from_page(b"var eta0 = null;"), None);
        assert_eq!(from_page(b"<p>no script</p>"), None);
        assert_eq!(
            from_page(b"var eta0 = 7;\n var eta_range = null;"),
            p(7.0, None)
        );
        // A range instead of a point: the middle of it.
        assert_eq!(
            from_page(b"var eta0 = null;\n var eta_range = [10, 20];"),
            p(15.0, Some((10.0, 20.0)))
        );
        // Malformed ranges are no range; junk is no value.
        for bad in [
            "[5]",
            "[9, 3]",
            "[1, 2, 3]",
            "[\"a\", 2]",
            "[-1, 2]",
            "[1, 2",
        ] {
            let page = format!("var eta0 = 6;\nvar eta_range = {bad};");
            assert_eq!(from_page(page.as_bytes()), p(6.0, None), "{bad}");
        }
        assert_eq!(from_page(b"var eta0 = ;"), None);
        assert_eq!(from_page(b"var eta0 = -3;"), None);
        assert_eq!(from_page(b"var eta0 = 2.5;"), p(2.5, None));
        assert_eq!(from_page(b"var eta0 = 3"), p(3.0, None));
        assert_eq!(from_page(&[0xff, 0xfe]), None);
    }

    #[test]
    fn a_status_shows_a_point_a_range_or_nothing() {
        let st = |s: &str| -> Option<Prediction> {
            let v: Value = serde_json::from_str(s).unwrap();
            from_status(
                v.get("eta_seconds"),
                v.get("eta_low_seconds"),
                v.get("eta_high_seconds"),
            )
        };
        assert_eq!(st(r#"{"eta_seconds":12}"#), p(12.0, None));
        assert_eq!(st(r#"{"eta_seconds":null}"#), None);
        assert_eq!(st(r#"{}"#), None);
        assert_eq!(
            st(r#"{"eta_seconds":12,"eta_low_seconds":8,"eta_high_seconds":20}"#),
            p(12.0, Some((8.0, 20.0)))
        );
        assert_eq!(
            st(r#"{"eta_seconds":12,"eta_low_seconds":null,"eta_high_seconds":null}"#),
            p(12.0, None)
        );
        assert_eq!(
            st(r#"{"eta_seconds":null,"eta_low_seconds":8,"eta_high_seconds":20}"#),
            p(14.0, Some((8.0, 20.0)))
        );
        assert_eq!(
            st(r#"{"eta_seconds":12,"eta_low_seconds":8}"#),
            p(12.0, None)
        );
        assert_eq!(st(r#"{"eta_seconds":"12"}"#), None);
    }

    #[test]
    fn the_first_prediction_before_the_admission_is_kept() {
        let mut rec = Record::default();
        note(&mut rec, 100, None);
        assert_eq!((rec.predicted, rec.predicted_at), (None, None));
        note(&mut rec, 200, p(5.0, None));
        note(&mut rec, 300, p(9.0, Some((8.0, 10.0))));
        assert_eq!((rec.predicted, rec.predicted_at), (p(5.0, None), Some(200)));
        // Not one after the admission (a visitor sent back to the line).
        let mut rec = Record {
            admitted_done: Some(50),
            ..Record::default()
        };
        note(&mut rec, 100, p(5.0, None));
        assert_eq!(rec.predicted, None);
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn nothing_measured() {
        let none = Accuracy::default();
        assert_eq!(accuracy(&[]), none);
        assert_eq!(none.median_ratio, None);
        // All under a second: skipped, figures null.
        let short = accuracy(&[(0.0, 3.0, None), (0.9, 1.0, Some((0.0, 2.0)))]);
        assert_eq!(
            short,
            Accuracy {
                skipped: 2,
                ..Accuracy::default()
            }
        );
        let json = serde_json::to_value(EtaReport::default()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "measured": 0, "skipped": 0, "median_abs_error_pct": null,
                "p90_abs_error_pct": null, "median_ratio": null, "ranged": 0,
                "within_range_pct": null, "no_prediction": 0, "not_admitted": 0
            })
        );
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        // Ten visits predicted 10 s; actual 11..=20 s: ratios 1.1..=2.0, errors 10..=100 %.
        // Given in reverse to check the sorting. p50 is the 5th value, p90 the 9th.
        let visits: Vec<Visit> = (1..=10)
            .rev()
            .map(|i| (10.0, 10.0 + i as f64, None))
            .collect();
        let a = accuracy(&visits);
        assert_eq!((a.measured, a.skipped), (10, 0));
        assert!(close(a.median_abs_error_pct, 50.0), "{a:?}");
        assert!(close(a.p90_abs_error_pct, 90.0), "{a:?}");
        assert!(close(a.median_ratio, 1.5), "{a:?}");
        assert_eq!((a.ranged, a.within_range_pct), (0, None));
        // One visit: every quantile is it.
        let a = accuracy(&[(4.0, 3.0, None)]);
        assert!(close(a.median_abs_error_pct, 25.0));
        assert!(close(a.p90_abs_error_pct, 25.0));
        assert!(close(a.median_ratio, 0.75));
        // Errors and ratios are sorted apart: ratios 0.5, 1.0, 1.2 (errors 50, 0, 20 %).
        // Median ratio 1.0; median error 20 %; p90 error 50 % (the 3rd of 3).
        let a = accuracy(&[(10.0, 5.0, None), (10.0, 10.0, None), (10.0, 12.0, None)]);
        assert!(close(a.median_ratio, 1.0), "{a:?}");
        assert!(close(a.median_abs_error_pct, 20.0), "{a:?}");
        assert!(close(a.p90_abs_error_pct, 50.0), "{a:?}");
        // Four values: p50 is the 2nd (ceil(2)), p90 the 4th (ceil(3.6)).
        let a = accuracy(&[
            (1.0, 1.1, None),
            (1.0, 1.2, None),
            (1.0, 1.3, None),
            (1.0, 1.4, None),
            (0.5, 100.0, None),
        ]);
        assert_eq!((a.measured, a.skipped), (4, 1));
        assert!(close(a.median_abs_error_pct, 20.0), "{a:?}");
        assert!(close(a.p90_abs_error_pct, 40.0), "{a:?}");
        assert!(close(a.median_ratio, 1.2), "{a:?}");
    }

    #[test]
    fn ranges_count_inclusive_among_the_measured() {
        let a = accuracy(&[
            (10.0, 8.0, Some((8.0, 12.0))),  // on LO: within
            (10.0, 12.0, Some((8.0, 12.0))), // on HI: within
            (10.0, 12.5, Some((8.0, 12.0))), // above
            (10.0, 7.0, Some((8.0, 12.0))),  // below
            (10.0, 30.0, None),              // no range shown
            (0.5, 1.0, Some((0.0, 2.0))),    // skipped: not counted as ranged
        ]);
        assert_eq!((a.measured, a.skipped, a.ranged), (5, 1, 4));
        assert!(close(a.within_range_pct, 50.0), "{a:?}");
    }

    #[test]
    fn the_report_measures_from_the_answer_the_prediction_came_with() {
        let waited =
            |predicted: Option<Prediction>, at: Option<u64>, admitted: Option<u64>| Record {
                join_sent: Some(1_000_000),
                join_done: Some(1_010_000),
                last_waiting_sent: Some(2_000_000),
                predicted,
                predicted_at: at,
                admitted_done: admitted,
                ..Record::default()
            };
        let records = [
            // Predicted 4 s at 1.5 s (a later answer than the join), admitted at 7.5 s: 6 s.
            waited(p(4.0, Some((3.0, 6.0))), Some(1_500_000), Some(7_500_000)),
            waited(p(9.0, None), Some(1_000_000), None),
            waited(None, None, Some(3_000_000)),
            waited(p(0.0, None), Some(1_000_000), Some(1_200_000)),
            // Served at once: did not wait.
            Record {
                admitted_done: Some(5),
                ..Record::default()
            },
        ];
        let e = report(&records);
        assert_eq!((e.no_prediction, e.not_admitted), (1, 1));
        let a = &e.accuracy;
        assert_eq!((a.measured, a.skipped, a.ranged), (1, 1, 1));
        assert!(close(a.median_ratio, 1.5), "{a:?}");
        assert!(close(a.median_abs_error_pct, 50.0), "{a:?}");
        assert!(close(a.within_range_pct, 100.0), "{a:?}");
        let line = summary_line(&e).unwrap();
        assert!(
            line.starts_with("eta accuracy: 1 measured, 1 skipped (predicted < 1 s), 1 without an eta, 1 not admitted; |actual/predicted - 1| p50 50.0 % p90 50.0 %, median actual/predicted 1.50; 1 shown a range, 100.0 % within it"),
            "{line}"
        );
        assert_eq!(summary_line(&report(&records[4..])), None);
    }
}
