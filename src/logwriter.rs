//! The access log's background writer: a request formats its line and appends it to a shared
//! buffer; a thread writes the buffer to stderr every [`EVERY`] in one write, so no request
//! waits on the terminal, a pipe or a journal, and none wakes a thread (a wake-up per line cost
//! more than the write it saved: measured with `perf` on the admitted path).
//!
//! Lines are never dropped: past [`BEHIND`] bytes not yet written a request waits for the
//! writer (backpressure rather than a silent gap). Every other log line (warnings, errors,
//! lifecycle) is still written synchronously, so nothing an operator needs is left in a buffer
//! when the process exits; at exit at most the last [`EVERY`] of access lines can be.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How often the writer writes what has gathered.
pub const EVERY: Duration = Duration::from_millis(25);
/// Gathered bytes past which the writer is woken at once.
const SOON: usize = 256 * 1024;
/// Gathered bytes past which a request waits for the writer.
pub const BEHIND: usize = 16 * 1024 * 1024;

#[derive(Default)]
struct Gathered {
    buf: Mutex<Vec<u8>>,
    /// Signalled when the buffer should be written soon, and when it was written.
    changed: Condvar,
}

/// Hands formatted lines to the writer thread.
#[derive(Clone)]
pub struct Background {
    gathered: Arc<Gathered>,
}

impl Background {
    /// Starts the writer thread over `out` (stderr in production).
    pub fn start<W: Write + Send + 'static>(mut out: W) -> std::io::Result<Self> {
        let gathered = Arc::new(Gathered::default());
        let g = gathered.clone();
        std::thread::Builder::new()
            .name("anteroom-log".into())
            .spawn(move || {
                let mut spare = Vec::new();
                loop {
                    {
                        let buf = g.buf.lock().unwrap_or_else(|e| e.into_inner());
                        let (mut buf, _) = g
                            .changed
                            .wait_timeout_while(buf, EVERY, |b| b.len() < SOON)
                            .unwrap_or_else(|e| e.into_inner());
                        std::mem::swap(&mut *buf, &mut spare);
                    }
                    g.changed.notify_all();
                    if !spare.is_empty() {
                        let _ = out.write_all(&spare);
                        let _ = out.flush();
                        spare.clear();
                    }
                }
            })?;
        Ok(Self { gathered })
    }
}

/// One event's line, appended when the formatter is done with it.
pub struct Line<'a> {
    buf: Vec<u8>,
    gathered: &'a Gathered,
}

impl Write for Line<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line<'_> {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let g = self.gathered;
        let buf = g.buf.lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = g
            .changed
            .wait_while(buf, |b| b.len() >= BEHIND)
            .unwrap_or_else(|e| e.into_inner());
        buf.extend_from_slice(&self.buf);
        if buf.len() >= SOON {
            g.changed.notify_all();
        }
    }
}

impl<'a> MakeWriter<'a> for Background {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line {
            buf: Vec::with_capacity(256),
            gathered: &self.gathered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

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

    #[test]
    fn every_line_arrives_whole_and_in_order() {
        let sink = Sink::default();
        let bg = Background::start(sink.clone()).expect("thread");
        for i in 0..10_000 {
            let mut w = bg.make_writer();
            write!(w, "line {i}").expect("write");
            writeln!(w, " end").expect("write");
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let text = String::from_utf8(sink.0.lock().expect("sink").clone()).expect("utf-8");
            if text.lines().count() == 10_000 {
                for (i, l) in text.lines().enumerate() {
                    assert_eq!(l, format!("line {i} end"));
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
