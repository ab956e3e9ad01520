//! The access log off the request path's shared state: each worker thread formats its access
//! lines (the same text or JSON lines `tracing` writes) into a buffer of its own, and a thread
//! writes every thread's buffer to stderr every [`EVERY`]. No request allocates for its line,
//! takes a lock another worker takes, waits on the terminal, a pipe or a journal, or wakes a
//! thread. (A first version woke the writer per line, which cost more than the write it saved;
//! a second handed each record to one list under one lock, with its strings copied: both
//! measured with `perf` on the admitted path.)
//!
//! Records are never dropped: a thread whose buffer holds [`BEHIND`] bytes not yet written
//! writes it itself (backpressure rather than a silent gap). Lines of one thread keep their
//! order; lines of different threads are written a batch at a time, so they can be out of
//! order by up to [`EVERY`] (each carries its time). Every other log line (warnings, errors,
//! lifecycle) is still written synchronously through `tracing`, so nothing an operator needs is
//! left in a buffer when the process exits; at exit at most the last [`EVERY`] of access lines
//! can be. Without the writer (tests, or a thread that could not start) the access line goes
//! through `tracing` like any other.

mod format;

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

pub use format::format_line;
use format::write_line;

/// How often the writer writes what has gathered.
pub const EVERY: Duration = Duration::from_millis(25);
/// Bytes gathered in one thread's buffer past which that thread writes them itself (about
/// 7,000 lines: a quarter of a second of a busy worker).
pub const BEHIND: usize = 1 << 20;

/// Seconds as milliseconds to the microsecond (`0.614`, not `0.61379800000000001`): what the
/// clock measures, and what a reader of the log can take in.
pub fn millis(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e3
}

/// One access line's fields, borrowed from the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Access<'a> {
    pub at: SystemTime,
    pub room: &'a str,
    pub outcome: &'static str,
    pub status: u16,
    pub method: &'a str,
    pub path: &'a str,
    pub duration_ms: f64,
}

/// One thread's lines not yet written, and the start of its last line's time (the date and
/// time to the second change once a second, not once a line).
#[derive(Default)]
struct Buffer {
    text: String,
    second: u64,
    stamp: String,
}

/// The access log's writer.
pub struct AccessLog {
    /// Every thread's buffer; the writer takes this lock, then each buffer's.
    buffers: Mutex<Vec<Arc<Mutex<Buffer>>>>,
    /// Held while writing, so that a thread writing its own full buffer and the writer do not
    /// interleave (taken before any buffer's lock).
    out: Mutex<Box<dyn Write + Send>>,
    json: bool,
}

static WRITER: OnceLock<&'static AccessLog> = OnceLock::new();

thread_local! {
    /// This thread's buffer in each log it wrote to (one, outside unit tests), by the log's
    /// address.
    static MINE: RefCell<Vec<(usize, Arc<Mutex<Buffer>>)>> = const { RefCell::new(Vec::new()) };
}

/// The process's access log writer, once [`start`] has run.
pub fn writer() -> Option<&'static AccessLog> {
    WRITER.get().copied()
}

/// Starts the writer thread over stderr, in text or JSON (once per process; a later call
/// changes nothing); `false` if it could not start — then no writer is set and access lines
/// go through `tracing`, so nothing gathers in a buffer that nobody writes.
pub fn start(json: bool) -> bool {
    if WRITER.get().is_some() {
        return true;
    }
    let log = AccessLog::leaked(Box::new(std::io::stderr()), json);
    let started = std::thread::Builder::new()
        .name("anteroom-log".into())
        .spawn(move || log.run())
        .is_ok();
    started && WRITER.set(log).is_ok()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AccessLog {
    fn leaked(out: Box<dyn Write + Send>, json: bool) -> &'static AccessLog {
        Box::leak(Box::new(AccessLog {
            buffers: Mutex::new(Vec::new()),
            out: Mutex::new(out),
            json,
        }))
    }

    /// This thread's buffer, made on its first line.
    fn mine(&'static self) -> Arc<Mutex<Buffer>> {
        let id = self as *const AccessLog as usize;
        MINE.with(|m| {
            let mut m = m.borrow_mut();
            if let Some((_, b)) = m.iter().find(|(i, _)| *i == id) {
                return Arc::clone(b);
            }
            let b = Arc::new(Mutex::new(Buffer::default()));
            lock(&self.buffers).push(Arc::clone(&b));
            m.push((id, Arc::clone(&b)));
            b
        })
    }

    /// Formats a record into this thread's buffer.
    pub fn push(&'static self, a: &Access<'_>) {
        let mine = self.mine();
        let full = {
            let mut b = lock(&mine);
            let Buffer {
                text,
                second,
                stamp,
            } = &mut *b;
            write_line(text, a, self.json, (second, stamp));
            text.len() >= BEHIND
        };
        if full {
            let mut out = lock(&self.out);
            // Taken whole (the buffer starts again small), so a stall leaves no large buffer.
            let text = std::mem::take(&mut lock(&mine).text);
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }

    fn run(&'static self) {
        let mut scratch = String::new();
        loop {
            std::thread::sleep(EVERY);
            self.write_gathered(&mut scratch);
        }
    }

    /// Writes every buffer's lines; forgets the buffers of threads that have ended.
    fn write_gathered(&self, scratch: &mut String) {
        let mut out = lock(&self.out);
        let mut buffers = lock(&self.buffers);
        for b in buffers.iter() {
            std::mem::swap(&mut lock(b).text, scratch);
            if !scratch.is_empty() {
                let _ = out.write_all(scratch.as_bytes());
                scratch.clear();
            }
        }
        // Only this list holds the buffer of a thread that has ended; that thread may have
        // written a last line after its buffer was taken above, so it is written before the
        // buffer is forgotten.
        buffers.retain(|b| {
            if Arc::strong_count(b) > 1 {
                return true;
            }
            let rest = std::mem::take(&mut lock(b).text);
            let _ = out.write_all(rest.as_bytes());
            false
        });
        let _ = out.flush();
        // A burst leaves no large buffer behind.
        if scratch.capacity() > BEHIND {
            *scratch = String::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn record() -> Access<'static> {
        Access {
            at: UNIX_EPOCH + Duration::from_secs(1_796_123_572),
            room: "sale",
            outcome: "admit",
            status: 200,
            method: "GET",
            path: "/products",
            duration_ms: 0.463941,
        }
    }

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Sink {
        fn text(&self) -> String {
            String::from_utf8(lock(&self.0).clone()).expect("utf-8")
        }
    }

    /// Polls until the sink holds `n` lines (or fails after 10 s).
    fn wait_for_lines(sink: &Sink, n: usize) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let text = sink.text();
            if text.lines().count() >= n {
                return text;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} lines of {n}",
                text.lines().count()
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn every_record_arrives_whole_and_in_order_per_thread() {
        let sink = Sink::default();
        let log = AccessLog::leaked(Box::new(sink.clone()), false);
        std::thread::spawn(move || log.run());
        let threads: Vec<_> = (0..3u16)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..5_000u16 {
                        log.push(&Access {
                            status: i,
                            outcome: ["a", "b", "c"][usize::from(t)],
                            ..record()
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let text = wait_for_lines(&sink, 15_000);
        assert_eq!(text.lines().count(), 15_000);
        for t in ["a", "b", "c"] {
            let statuses: Vec<u16> = text
                .lines()
                .filter(|l| l.contains(&format!(" outcome=\"{t}\" ")))
                .map(|l| {
                    let s = l.split(" status=").nth(1).unwrap_or("");
                    s.split(' ').next().unwrap_or("").parse().expect("status")
                })
                .collect();
            assert_eq!(statuses, (0..5_000).collect::<Vec<_>>(), "thread {t}");
        }
        // The ended threads' buffers were written and are forgotten.
        let mut scratch = String::new();
        log.write_gathered(&mut scratch);
        assert!(lock(&log.buffers).is_empty());
    }

    /// With no writer running (stuck, say), a thread writes its own lines once its buffer is
    /// full: nothing is lost and nothing waits forever.
    #[test]
    fn a_full_buffer_is_written_by_its_own_thread() {
        let sink = Sink::default();
        let log = AccessLog::leaked(Box::new(sink.clone()), false);
        let mut line = String::new();
        format_line(&mut line, &record(), false);
        let n = BEHIND / line.len() + 1;
        for _ in 0..n {
            log.push(&record());
        }
        let text = sink.text();
        assert_eq!(
            text.lines().count(),
            n,
            "all written, by the pushing thread"
        );
        assert!(text.lines().all(|l| format!("{l}\n") == line));
    }
}
