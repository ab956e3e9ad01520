//! The access log's background writer: a request formats its line and hands it to a thread
//! that writes to stderr, so no request waits on the terminal, a pipe or a journal.
//!
//! Lines are never dropped: the queue holds [`QUEUE`] lines, and only a writer that far behind
//! makes a request wait (backpressure rather than a silent gap). Every other log line (warnings,
//! errors, lifecycle) is still written synchronously, so nothing an operator needs is left in a
//! queue when the process exits; at exit at most the access lines of the last moments can be.

use std::io::Write;
use std::sync::mpsc::{sync_channel, SyncSender};

use tracing_subscriber::fmt::MakeWriter;

/// Lines the writer may fall behind by before a request waits.
pub const QUEUE: usize = 65_536;

/// Hands formatted lines to the writer thread.
#[derive(Clone)]
pub struct Background {
    tx: SyncSender<Vec<u8>>,
}

impl Background {
    /// Starts the writer thread over `out` (stderr in production).
    pub fn start<W: Write + Send + 'static>(mut out: W) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
        std::thread::Builder::new()
            .name("anteroom-log".into())
            .spawn(move || {
                while let Ok(line) = rx.recv() {
                    let _ = out.write_all(&line);
                    // Whatever else is queued goes in the same flush.
                    while let Ok(more) = rx.try_recv() {
                        let _ = out.write_all(&more);
                    }
                    let _ = out.flush();
                }
            })?;
        Ok(Self { tx })
    }
}

/// One event's line, sent when the formatter is done with it.
pub struct Line {
    buf: Vec<u8>,
    tx: SyncSender<Vec<u8>>,
}

impl Write for Line {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            let _ = self.tx.send(std::mem::take(&mut self.buf));
        }
    }
}

impl<'a> MakeWriter<'a> for Background {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line {
            buf: Vec::with_capacity(256),
            tx: self.tx.clone(),
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
