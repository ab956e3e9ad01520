//! Event times as operators write them and visitors read them: RFC 3339 with a UTC offset.

use chrono::{DateTime, FixedOffset, TimeZone};

use crate::clock::Micros;

/// Parses `2027-03-01T10:00:00+09:00` (an offset or `Z` is required: a bare local time means a
/// different instant on every server). Returns Unix microseconds and the offset (seconds east).
pub fn parse(s: &str) -> Result<(Micros, i32), String> {
    let t = DateTime::parse_from_rfc3339(s.trim()).map_err(|e| {
        if looks_local(s) {
            "has no UTC offset: a time without one means another instant on each server".to_string()
        } else {
            format!("is not an RFC 3339 time ({e})")
        }
    })?;
    let us = t.timestamp_micros();
    let us = u64::try_from(us).map_err(|_| "is before 1970".to_string())?;
    Ok((us, t.offset().local_minus_utc()))
}

fn looks_local(s: &str) -> bool {
    let s = s.trim();
    s.as_bytes().get(10) == Some(&b'T')
        && !s.ends_with('Z')
        && s.get(19..)
            .is_some_and(|tail| !tail.contains('+') && !tail.contains('-'))
}

/// `us` in the offset `utc_offset` (seconds east), RFC 3339 to the second.
pub fn format(us: Micros, utc_offset: i32) -> String {
    let secs = i64::try_from(us / 1_000_000).unwrap_or(i64::MAX);
    let Some(offset) = FixedOffset::east_opt(utc_offset).or_else(|| FixedOffset::east_opt(0))
    else {
        return secs.to_string();
    };
    match offset.timestamp_opt(secs, 0).single() {
        Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        None => secs.to_string(),
    }
}

/// `us` in the offset `utc_offset`, RFC 3339 with the fraction of a second when there is one:
/// what visitors and operators are told of an event's times. To the second only, an opening at
/// `…:40.829` read `…:40`, earlier than registration really closed (found by review).
pub fn format_exact(us: Micros, utc_offset: i32) -> String {
    let secs = i64::try_from(us / 1_000_000).unwrap_or(i64::MAX);
    let nanos = (us % 1_000_000) as u32 * 1_000;
    let Some(offset) = FixedOffset::east_opt(utc_offset).or_else(|| FixedOffset::east_opt(0))
    else {
        return secs.to_string();
    };
    match offset.timestamp_opt(secs, nanos).single() {
        Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        None => secs.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_time_keeps_its_fraction_and_reads_back() {
        let (us, off) = parse("2027-03-01T10:00:00+09:00").unwrap();
        assert_eq!(format_exact(us, off), "2027-03-01T10:00:00+09:00");
        for (given, shown) in [
            ("2027-03-01T01:00:40.829Z", "2027-03-01T01:00:40.829Z"),
            ("2027-03-01T01:00:40.000001Z", "2027-03-01T01:00:40.000001Z"),
            (
                "2027-03-01T10:00:40.5+09:00",
                "2027-03-01T10:00:40.500+09:00",
            ),
        ] {
            let (us, off) = parse(given).unwrap();
            assert_eq!(format_exact(us, off), shown);
            assert_eq!(parse(shown).unwrap(), (us, off), "{shown} reads back");
        }
    }

    #[test]
    fn an_offset_is_required_and_kept() {
        let (us, off) = parse("2027-03-01T10:00:00+09:00").unwrap();
        assert_eq!(us, 1_803_862_800_000_000);
        assert_eq!(off, 9 * 3600);
        assert_eq!(format(us, off), "2027-03-01T10:00:00+09:00");
        assert_eq!(format(us, 0), "2027-03-01T01:00:00Z");
        assert_eq!(parse("2027-03-01T01:00:00Z").unwrap(), (us, 0));
        assert_eq!(parse("2027-03-01T01:00:00.5Z").unwrap().0, us + 500_000);
        let local = parse("2027-03-01T10:00:00").unwrap_err();
        assert!(local.contains("no UTC offset"), "{local}");
        assert!(parse("tomorrow").unwrap_err().contains("RFC 3339"));
        assert!(parse("1969-12-31T23:59:59Z").unwrap_err().contains("1970"));
        // Not a character boundary where a time's tail would start: an error, not a panic.
        assert!(parse("2027-03-01T10:00:0€").is_err());
        assert!(parse("2027-03-01T10:00:00€+09:00").is_err());
    }
}
