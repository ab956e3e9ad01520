//! The last 15 minutes of a room as this instance's admission loop saw them, one sample a
//! second: what the dashboard charts (`GET /rooms/NAME/series`). Written by the room's
//! admission task, read by the admin API; a short lock once a second.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One sample a second, 15 minutes of them.
pub const EVERY: Duration = Duration::from_secs(1);
pub const KEPT: usize = 900;

/// One sample: `[unix ms, waiting, active, admitted per second (measured), the rate in force,
/// the origin's p90 in ms or null, the origin's error share or null, the ETA's median and p90
/// absolute error (|actual ÷ predicted − 1| of the visitors admitted in the last minutes) or
/// null]` (an array keeps a quarter of an hour of them small).
pub type Sample = (
    u64,
    u64,
    u64,
    f64,
    f64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

#[derive(Debug, Default)]
pub struct Series {
    samples: Mutex<VecDeque<Sample>>,
}

/// What a tick saw.
pub struct Seen {
    pub waiting: u64,
    pub active: u64,
    pub measured_rate: f64,
    pub rate: f64,
    pub origin_p90_ms: Option<f64>,
    pub origin_error_share: Option<f64>,
    pub eta_error: Option<(f64, f64)>,
}

impl Series {
    /// Takes over a reloaded room's samples (found by review: every SIGHUP, a certificate's
    /// renewal too, blanked the dashboard's charts).
    pub fn inherit(&self, old: &Series) {
        let kept = old
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        *self.samples.lock().unwrap_or_else(|e| e.into_inner()) = kept;
    }

    /// Notes a tick, unless the last sample is younger than [`EVERY`].
    pub fn note(&self, seen: &Seen) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if s.back()
            .is_some_and(|last| now < last.0 + EVERY.as_millis() as u64)
        {
            return;
        }
        s.push_back((
            now,
            seen.waiting,
            seen.active,
            seen.measured_rate,
            seen.rate,
            seen.origin_p90_ms,
            seen.origin_error_share,
            seen.eta_error.map(|e| e.0),
            seen.eta_error.map(|e| e.1),
        ));
        while s.len() > KEPT {
            s.pop_front();
        }
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(waiting: u64) -> Seen {
        Seen {
            waiting,
            active: 1,
            measured_rate: 2.0,
            rate: 3.0,
            origin_p90_ms: None,
            origin_error_share: Some(0.0),
            eta_error: Some((0.04, 0.16)),
        }
    }

    #[test]
    fn one_sample_a_second_and_a_quarter_of_an_hour_kept() {
        let s = Series::default();
        s.note(&seen(1));
        s.note(&seen(2));
        let got = s.samples();
        assert_eq!(got.len(), 1, "a second apart at least");
        assert_eq!((got[0].1, got[0].4, got[0].5), (1, 3.0, None));
        assert_eq!((got[0].7, got[0].8), (Some(0.04), Some(0.16)));
        let mut q = s.samples.lock().unwrap();
        for i in 0..(KEPT as u64 + 10) {
            q.push_back((i, i, 0, 0.0, 0.0, None, None, None, None));
            while q.len() > KEPT {
                q.pop_front();
            }
        }
        drop(q);
        let got = s.samples();
        assert_eq!(got.len(), KEPT);
        assert_eq!(got[0].0, 10);
    }
}
