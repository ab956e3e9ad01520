//! The reader of durations for [`Builder`]: humantime's notation ("250ms", "60s", "10m",
//! "2h 5m", "30d"), longer than zero and at most [`MAX_DURATION`], never in calendar months or
//! years. Each one that fails tells the key, what is wrong and the fix.

use std::time::Duration;

use super::build::Builder;
use super::locate::KeyPath;
use super::values::MAX_DURATION;

impl Builder<'_> {
    /// Like [`Self::duration`], but "0s" is allowed.
    pub(super) fn duration_or_zero(
        &mut self,
        key: &KeyPath,
        raw: Option<&str>,
        default: Duration,
    ) -> Duration {
        match raw.map(str::trim) {
            Some("0" | "0s" | "0ms") => Duration::ZERO,
            other => self.duration(key, other, default),
        }
    }

    /// Like [`Self::duration`] (or [`Self::duration_or_zero`] with `zero`), at most `most`:
    /// `waits` says what a longer one would hold up (found by review r86b: a
    /// `breaker-cooldown` of 300 days held a room for good after one Redis stall, and a
    /// `grace-period` as long kept a stopped process alive).
    pub(super) fn duration_at_most(
        &mut self,
        key: &KeyPath,
        raw: Option<&str>,
        (default, most, zero): (Duration, Duration, bool),
        waits: &str,
    ) -> Duration {
        let d = if zero {
            self.duration_or_zero(key, raw, default)
        } else {
            self.duration(key, raw, default)
        };
        if d <= most {
            return d;
        }
        let f = humantime::format_duration;
        self.fail(
            key.clone(),
            format!(
                "{} is longer than the most taken ({}): {waits}",
                f(d),
                f(most)
            ),
            format!(
                "write at most \"{}\" (the default is {})",
                f(most),
                f(default)
            ),
        );
        default
    }

    pub(super) fn duration(
        &mut self,
        key: &KeyPath,
        raw: Option<&str>,
        default: Duration,
    ) -> Duration {
        let Some(raw) = raw else { return default };
        let Some(text) = self.string(key, raw) else {
            return default;
        };
        if let Some(unit) = calendar_unit(&text) {
            self.fail(
                key.clone(),
                format!(
                    "{text:?} counts in {unit}, which this notation reads as calendar months or \
                     years (\"M\" is months, \"m\" minutes)"
                ),
                "write minutes with a small \"m\" (\"1m\"), or a long span in days (\"30d\")",
            );
            return default;
        }
        match humantime::parse_duration(text.trim()) {
            Ok(d) if d > MAX_DURATION => {
                self.fail(
                    key.clone(),
                    format!("{text:?} is longer than any duration anteroom takes (a year)"),
                    "write a duration of at most \"365d\"; each key's own bound is in the README",
                );
                default
            }
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                self.fail(
                    key.clone(),
                    "must be longer than zero",
                    "write a positive duration such as \"250ms\", \"60s\" or \"10m\"",
                );
                default
            }
            Err(e) => {
                self.fail(
                    key.clone(),
                    format!("{text:?} is not a duration ({e})"),
                    "write a duration such as \"250ms\", \"60s\" or \"10m\"",
                );
                default
            }
        }
    }
}

/// The unit of `text` that counts months or years, if any: `"1M"` was a month, read without a
/// word (found by review r84c: `[store] timeout = "1M"` passed `check`, and every request
/// waited out a stalled Redis; no key of anteroom's is meant in months).
fn calendar_unit(text: &str) -> Option<&str> {
    text.split(|c: char| !c.is_ascii_alphabetic()).find(|unit| {
        matches!(
            *unit,
            "M" | "month" | "months" | "y" | "yr" | "yrs" | "year" | "years"
        )
    })
}

#[cfg(test)]
mod calendar_tests {
    use super::calendar_unit;

    #[test]
    fn months_and_years_are_named_minutes_are_not() {
        for text in [
            "1M", "2months", "1 month", "1y", "1year 2d", "3years", "1h 1M",
        ] {
            assert!(calendar_unit(text).is_some(), "{text}");
        }
        for text in ["1m", "10min", "90s", "2h 5m", "30d", "2w", "250ms", "1us"] {
            assert_eq!(calendar_unit(text), None, "{text}");
        }
    }
}
