//! The access line as `tracing`'s formatter writes it (text: the default format without
//! colours; JSON: `flatten_event`), written without allocating: plain strings are quoted as
//! they are, and the time's first part is kept from one line to the next within a second.

use std::fmt::Write as _;
use std::time::UNIX_EPOCH;

use super::Access;

/// The line `tracing`'s formatter writes for the access event (text: the default format
/// without colours; JSON: `flatten_event`).
pub fn format_line(out: &mut String, a: &Access<'_>, json: bool) {
    write_line(out, a, json, (&mut 0, &mut String::new()));
}

/// [`format_line`], with the time's first part (date, hours, minutes, seconds) kept from the
/// line before when it is the same second.
pub(super) fn write_line(
    out: &mut String,
    a: &Access<'_>,
    json: bool,
    stamp: (&mut u64, &mut String),
) {
    let d = a.at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (second, prefix) = stamp;
    if prefix.is_empty() || *second != d.as_secs() {
        *second = d.as_secs();
        prefix.clear();
        let _ = write!(prefix, "{}", Rfc3339Seconds(d.as_secs()));
    }
    let at = |out: &mut String| {
        out.push_str(prefix);
        push_padded(out, d.subsec_micros(), 6);
        out.push('Z');
    };
    if json {
        out.push_str("{\"timestamp\":\"");
        at(out);
        out.push_str("\",\"level\":\"INFO\",\"room\":");
        json_str(out, a.room);
        out.push_str(",\"outcome\":");
        json_str(out, a.outcome);
        out.push_str(",\"status\":");
        push_padded(out, u32::from(a.status), 1);
        out.push_str(",\"method\":");
        json_str(out, a.method);
        out.push_str(",\"path\":");
        json_str(out, a.path);
        out.push_str(",\"duration_ms\":");
        if !push_millis(out, a.duration_ms) {
            match serde_json::Number::from_f64(a.duration_ms) {
                Some(n) => {
                    let _ = write!(out, "{n}");
                }
                None => out.push_str("null"),
            }
        }
        out.push_str(",\"target\":\"anteroom::access\"}\n");
    } else {
        at(out);
        out.push_str("  INFO anteroom::access: room=");
        debug_str(out, a.room);
        out.push_str(" outcome=");
        debug_str(out, a.outcome);
        out.push_str(" status=");
        push_padded(out, u32::from(a.status), 1);
        out.push_str(" method=");
        debug_str(out, a.method);
        out.push_str(" path=");
        debug_str(out, a.path);
        out.push_str(" duration_ms=");
        if !push_millis(out, a.duration_ms) {
            let _ = write!(out, "{:?}", a.duration_ms);
        }
        out.push('\n');
    }
}

/// Printable ASCII but `"` and `\`: quoted as it is by both `{:?}` and JSON.
fn plain(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

/// `s` as `{:?}` writes it.
fn debug_str(out: &mut String, s: &str) {
    if plain(s) {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        let _ = write!(out, "{s:?}");
    }
}

/// `s` as a JSON string, as `serde_json` writes it.
fn json_str(out: &mut String, s: &str) {
    if plain(s) {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
    }
}

/// A duration in milliseconds to the microsecond (what [`super::millis`] gives) as `{:?}` and
/// `serde_json` write it, from integers: the float formatter was a tenth of the access log's
/// cost per request. False, writing nothing, for any other figure.
fn push_millis(out: &mut String, ms: f64) -> bool {
    let micros = (ms * 1000.0).round();
    if ms.is_sign_negative() || !(0.0..1e12).contains(&micros) || micros / 1000.0 != ms {
        return false;
    }
    let micros = micros as u64;
    let (whole, mut frac) = (micros / 1000, (micros % 1000) as u32);
    let mut digits = 3;
    while digits > 1 && frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    // Below 10^12 µs, the whole milliseconds fit in a u32.
    push_padded(out, u32::try_from(whole).unwrap_or(u32::MAX), 1);
    out.push('.');
    push_padded(out, frac, digits);
    true
}

/// `n` in decimal, zero-padded to `width` digits.
fn push_padded(out: &mut String, n: u32, width: usize) {
    // Ten digits at most, and the zeros in front are already there: written in one piece (a
    // `char` at a time was a quarter of the access line's cost).
    let mut digits = [b'0'; 10];
    let mut i = digits.len();
    let mut n = n;
    while n > 0 || i == digits.len() {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let from = i.min(digits.len().saturating_sub(width));
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(std::str::from_utf8(&digits[from..]).unwrap_or("0"));
}

/// A UTC second as RFC 3339 up to the fraction (`2026-12-01T11:12:52.`): the time `tracing`'s
/// formatter writes, without its microseconds.
struct Rfc3339Seconds(u64);

impl std::fmt::Display for Rfc3339Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.0;
        let (days, rem) = (secs / 86_400, secs % 86_400);
        // Days to a civil date (H. Hinnant's algorithm), for years from 1970 on.
        let z = days as i64 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::millis;
    use super::*;
    use proptest::prelude::*;
    use std::time::{Duration, SystemTime};

    fn at(secs: u64, micros: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros)
    }

    fn record() -> Access<'static> {
        Access {
            at: at(1_796_123_572, 335_341),
            room: "sale",
            outcome: "admit",
            status: 200,
            method: "GET",
            path: "/products/\"x\"",
            duration_ms: 0.463941,
        }
    }

    fn stamp_of(a: &Access<'_>) -> String {
        let mut out = String::new();
        format_line(&mut out, a, false);
        out.split("  ").next().unwrap_or("").to_string()
    }

    #[test]
    fn durations_are_to_the_microsecond() {
        assert_eq!(format!("{:?}", millis(0.000_613_798)), "0.614");
        assert_eq!(format!("{:?}", millis(1.5)), "1500.0");
        assert_eq!(format!("{:?}", millis(0.000_000_4)), "0.0");
        assert_eq!(format!("{:?}", millis(0.012_345_678)), "12.346");
    }

    #[test]
    fn times_are_written_as_tracing_writes_them() {
        let with = |secs, micros| {
            stamp_of(&Access {
                at: at(secs, micros),
                ..record()
            })
        };
        assert_eq!(with(1_796_123_572, 335_341), "2026-12-01T11:12:52.335341Z");
        assert_eq!(with(951_868_799, 1), "2000-02-29T23:59:59.000001Z");
        assert_eq!(with(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(with(0, 999_999), "1970-01-01T00:00:00.999999Z");
    }

    /// A thread's buffer keeps the time's first part from one line to the next: a new second
    /// must write a new one.
    #[test]
    fn the_kept_second_changes_with_the_second() {
        let (mut second, mut prefix, mut out) = (0, String::new(), String::new());
        for (secs, micros) in [(100, 5), (100, 999_999), (101, 0), (86_400, 7), (100, 1)] {
            out.clear();
            let a = Access {
                at: at(secs, micros),
                ..record()
            };
            write_line(&mut out, &a, false, (&mut second, &mut prefix));
            let mut fresh = String::new();
            format_line(&mut fresh, &a, false);
            assert_eq!(out, fresh);
        }
    }

    /// The lines `tracing` wrote for the same event (taken from `anteroom demo`).
    #[test]
    fn lines_are_the_ones_tracing_writes() {
        let mut out = String::new();
        format_line(&mut out, &record(), false);
        assert_eq!(
            out,
            "2026-12-01T11:12:52.335341Z  INFO anteroom::access: room=\"sale\" outcome=\"admit\" status=200 method=\"GET\" path=\"/products/\\\"x\\\"\" duration_ms=0.463941\n"
        );
        out.clear();
        format_line(&mut out, &record(), true);
        let v: serde_json::Value = serde_json::from_str(out.trim_end()).expect("JSON");
        assert_eq!(v["timestamp"], "2026-12-01T11:12:52.335341Z");
        assert_eq!(v["target"], "anteroom::access");
        assert_eq!(v["path"], "/products/\"x\"");
        assert_eq!(v["duration_ms"], 0.463941);
        assert!(out.starts_with(
            "{\"timestamp\":\"2026-12-01T11:12:52.335341Z\",\"level\":\"INFO\",\"room\":\"sale\""
        ));
    }

    proptest! {
        /// The quick quoting is `{:?}` and `serde_json` for every string, and so is the line.
        #[test]
        fn strings_and_figures_are_written_as_debug_and_serde_write_them(
            s in any::<String>(),
            ascii in "[ -~]{0,40}",
            ms in any::<f64>(),
            micros in 0u32..1_000_000,
        ) {
            for s in [s.as_str(), ascii.as_str()] {
                let mut d = String::new();
                debug_str(&mut d, s);
                prop_assert_eq!(d, format!("{s:?}"));
                let mut j = String::new();
                json_str(&mut j, s);
                prop_assert_eq!(j, serde_json::to_string(s).expect("json"));
                let a = Access { path: s, duration_ms: ms, at: at(1_796_123_572, u64::from(micros)), ..record() };
                let mut line = String::new();
                format_line(&mut line, &a, false);
                prop_assert!(line.ends_with(&format!(" path={s:?} duration_ms={ms:?}\n")), "{}", line);
                line.clear();
                format_line(&mut line, &a, true);
                let v: serde_json::Value = serde_json::from_str(line.trim_end()).expect("JSON");
                prop_assert_eq!(v["path"].as_str(), Some(s));
                let n = serde_json::to_string(&ms).expect("json");
                prop_assert!(line.contains(&format!(",\"duration_ms\":{n},")), "{}", line);
            }
            let mut p = String::new();
            push_padded(&mut p, micros, 6);
            prop_assert_eq!(p, format!("{micros:06}"));
        }

        /// Every figure at every width, as `format!` pads it.
        #[test]
        fn a_padded_figure_is_what_format_writes(n in any::<u32>(), width in 0usize..14) {
            let mut p = String::from("x");
            push_padded(&mut p, n, width);
            prop_assert_eq!(p, format!("x{n:0width$}"));
        }

        /// Durations to the microsecond, written from integers, read as the float formatters
        /// write them, in both formats.
        #[test]
        fn durations_are_written_as_debug_and_serde_write_them(
            micros in prop_oneof![0u64..10_000, 0u64..1_000_000_000_000],
        ) {
            let ms = micros as f64 / 1000.0;
            let mut text = String::new();
            prop_assert!(push_millis(&mut text, ms));
            prop_assert_eq!(&text, &format!("{ms:?}"));
            prop_assert_eq!(&text, &serde_json::to_string(&ms).expect("json"));
            prop_assert_eq!(ms, millis(ms / 1000.0));
        }
    }
}
