//! The access log off the request path: a request hands its record (a few fields) to a shared
//! list; a thread formats the records — the same text or JSON lines `tracing` writes — and
//! writes them to stderr every [`EVERY`] in one write. No request formats a line, waits on the
//! terminal, a pipe or a journal, or wakes a thread (a first version that woke the writer per
//! line cost more than the write it saved: measured with `perf` on the admitted path).
//!
//! Records are never dropped: past [`BEHIND`] records not yet written a request waits for the
//! writer (backpressure rather than a silent gap). Every other log line (warnings, errors,
//! lifecycle) is still written synchronously through `tracing`, so nothing an operator needs is
//! left in a list when the process exits; at exit at most the last [`EVERY`] of access lines
//! can be. Without the writer (tests, or a thread that could not start) the access line goes
//! through `tracing` like any other.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often the writer writes what has gathered.
pub const EVERY: Duration = Duration::from_millis(25);
/// Gathered records past which the writer is woken at once.
const SOON: usize = 2048;
/// Gathered records past which a request waits for the writer.
pub const BEHIND: usize = 100_000;

/// Seconds as milliseconds to the microsecond (`0.614`, not `0.61379800000000001`): what the
/// clock measures, and what a reader of the log can take in.
pub fn millis(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e3
}

/// One access line's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub at: SystemTime,
    pub room: String,
    pub outcome: &'static str,
    pub status: u16,
    pub method: String,
    pub path: String,
    pub duration_ms: f64,
}

#[derive(Default)]
struct Gathered {
    list: Mutex<Vec<Access>>,
    /// Signalled when the list should be written soon, and when it was taken.
    changed: Condvar,
}

/// The access log's writer.
pub struct AccessLog {
    gathered: Gathered,
    json: bool,
}

static WRITER: OnceLock<&'static AccessLog> = OnceLock::new();

/// The process's access log writer, once [`start`] has run.
pub fn writer() -> Option<&'static AccessLog> {
    WRITER.get().copied()
}

/// Starts the writer thread over stderr, in text or JSON (once per process; a later call
/// changes nothing); `false` if it could not start — then no writer is set and access lines
/// go through `tracing`, so nothing waits on a list that nobody writes.
pub fn start(json: bool) -> bool {
    if WRITER.get().is_some() {
        return true;
    }
    let log: &'static AccessLog = Box::leak(Box::new(AccessLog {
        gathered: Gathered::default(),
        json,
    }));
    let started = std::thread::Builder::new()
        .name("anteroom-log".into())
        .spawn(move || log.run(std::io::stderr()))
        .is_ok();
    started && WRITER.set(log).is_ok()
}

impl AccessLog {
    /// Hands a record to the writer.
    pub fn push(&self, a: Access) {
        let g = &self.gathered;
        let list = g.list.lock().unwrap_or_else(|e| e.into_inner());
        let mut list = g
            .changed
            .wait_while(list, |l| l.len() >= BEHIND)
            .unwrap_or_else(|e| e.into_inner());
        list.push(a);
        if list.len() >= SOON {
            g.changed.notify_all();
        }
    }

    fn run<W: Write>(&self, mut out: W) {
        let g = &self.gathered;
        let mut taken = Vec::new();
        let mut text = String::new();
        loop {
            {
                let list = g.list.lock().unwrap_or_else(|e| e.into_inner());
                let (mut list, _) = g
                    .changed
                    .wait_timeout_while(list, EVERY, |l| l.len() < SOON)
                    .unwrap_or_else(|e| e.into_inner());
                std::mem::swap(&mut *list, &mut taken);
            }
            g.changed.notify_all();
            if taken.is_empty() {
                continue;
            }
            text.clear();
            for a in taken.drain(..) {
                format_line(&mut text, &a, self.json);
            }
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }
}

/// The line `tracing`'s formatter writes for the access event (text: the default format
/// without colours; JSON: `flatten_event`).
pub fn format_line(out: &mut String, a: &Access, json: bool) {
    let at = Rfc3339(a.at);
    if json {
        let s = |v: &str| serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into());
        let ms = serde_json::to_string(&a.duration_ms).unwrap_or_else(|_| "0".into());
        let _ = writeln!(
            out,
            "{{\"timestamp\":\"{at}\",\"level\":\"INFO\",\"room\":{},\"outcome\":{},\"status\":{},\"method\":{},\"path\":{},\"duration_ms\":{ms},\"target\":\"anteroom::access\"}}",
            s(&a.room),
            s(a.outcome),
            a.status,
            s(&a.method),
            s(&a.path),
        );
    } else {
        let _ = writeln!(
            out,
            "{at}  INFO anteroom::access: room={:?} outcome={:?} status={} method={:?} path={:?} duration_ms={:?}",
            a.room, a.outcome, a.status, a.method, a.path, a.duration_ms
        );
    }
}

/// A UTC time as RFC 3339 with microseconds, as `tracing`'s formatter writes it.
struct Rfc3339(SystemTime);

impl std::fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.0.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs();
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
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60,
            d.subsec_micros()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, micros: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros)
    }

    fn record() -> Access {
        Access {
            at: at(1_796_123_572, 335_341),
            room: "sale".into(),
            outcome: "admit",
            status: 200,
            method: "GET".into(),
            path: "/products/\"x\"".into(),
            duration_ms: 0.463941,
        }
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
        assert_eq!(
            Rfc3339(at(1_796_123_572, 335_341)).to_string(),
            "2026-12-01T11:12:52.335341Z"
        );
        assert_eq!(
            Rfc3339(at(951_868_799, 1)).to_string(),
            "2000-02-29T23:59:59.000001Z"
        );
        assert_eq!(Rfc3339(at(0, 0)).to_string(), "1970-01-01T00:00:00.000000Z");
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

    #[test]
    fn every_record_arrives_whole_and_in_order() {
        #[derive(Clone, Default)]
        struct Sink(std::sync::Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let log: &'static AccessLog = Box::leak(Box::new(AccessLog {
            gathered: Gathered::default(),
            json: false,
        }));
        let sink = Sink::default();
        let out = sink.clone();
        std::thread::spawn(move || log.run(out));
        for i in 0..10_000u16 {
            log.push(Access {
                status: i,
                ..record()
            });
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let text = String::from_utf8(sink.0.lock().expect("sink").clone()).expect("utf-8");
            if text.lines().count() == 10_000 {
                for (i, l) in text.lines().enumerate() {
                    assert!(l.contains(&format!(" status={i} ")), "{l}");
                }
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} lines",
                text.lines().count()
            );
            std::thread::yield_now();
        }
    }
}
