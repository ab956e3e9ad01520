//! A small request body is read whole before its origin slot is asked for: a body trickled
//! at the slowest pace the body rules allow (1 KiB/s, see [`super::slow`]) then waits at the
//! proxy and holds no slot of `max-origin-inflight`, as nginx's request buffering keeps slow
//! clients off the backend (found by re-review: one visitor's form posted slowly held a slot,
//! and a visitor's share of the slots made their own form wait behind their upload). Bodies
//! whose length is declared and at most [`PREFETCH_MAX`] are read so (Pingora keeps them in
//! its retry buffer and sends them to the origin whole); a longer one, or one of unknown
//! length, streams to the origin as it comes and holds its slot meanwhile.

use std::time::Duration;

use pingora::proxy::Session;
use pingora::Result;

use super::slow::{body_due, body_time_left};
use super::{Ctx, Proxy};

/// The largest body read whole before the slot: Pingora's retry buffer (64 KiB).
pub(super) const PREFETCH_MAX: u64 = 64 * 1024;

/// A `Content-Length` value: one number, or a list of the same number, which HTTP/1.1 allows
/// and Pingora takes (found by re-review r86a: `6, 6` was read as no length, and such an order
/// streamed to the shop and was used at its head).
fn declared_length(value: &str) -> Option<u64> {
    let mut items = value.split(',').map(|v| v.trim().parse::<u64>().ok());
    let first = items.next()??;
    items.all(|n| n == Some(first)).then_some(first)
}

/// Whether a body of this declared length (none: unknown) is read whole first.
pub(super) fn prefetched(declared: Option<u64>) -> bool {
    declared.is_some_and(|n| n > 0 && n <= PREFETCH_MAX)
}

impl Proxy {
    /// Reads a small body whole (see the module), each read bounded by what is left of the
    /// body's time. `Ok(true)`: read; `Ok(false)`: not one to read first.
    pub(super) async fn prefetch_body(session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        let req = session.req_header();
        let chunked = req.headers.contains_key(http::header::TRANSFER_ENCODING);
        let declared = req
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(declared_length);
        let expects = req
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if chunked || !prefetched(declared) || session.is_body_empty() {
            return Ok(false);
        }
        session.enable_retry_buffering();
        if expects && !session.is_http2() {
            session.write_continue_response().await?;
        }
        let client_timeout = ctx.shared.config.server.client_timeout;
        while !session.is_body_done() {
            let Some(left) = body_time_left(ctx.body_from.elapsed(), ctx.body_due) else {
                return Err(Self::body_too_late(ctx));
            };
            let read = tokio::time::timeout(left.max(Duration::from_millis(1)), async {
                session.read_request_body().await
            });
            match read.await {
                Ok(Ok(Some(piece))) => {
                    let elapsed = ctx.body_from.elapsed();
                    ctx.body_due =
                        body_due(ctx.body_due, elapsed, piece.len() as u64, client_timeout);
                }
                Ok(Ok(None)) => break,
                Ok(Err(e)) => return Err(e.into_down()),
                Err(_) => return Err(Self::body_too_late(ctx)),
            }
        }
        if session.get_retry_buffer().is_none() {
            return pingora::Error::e_explain(
                pingora::ErrorType::InternalError,
                "a body read ahead did not fit the retry buffer",
            );
        }
        ctx.body_buffered = true;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_declared_bodies_are_read_first() {
        assert!(!prefetched(None));
        assert!(!prefetched(Some(0)));
        assert!(prefetched(Some(1)));
        assert!(prefetched(Some(PREFETCH_MAX)));
        assert!(!prefetched(Some(PREFETCH_MAX + 1)));
    }

    #[test]
    fn a_length_listed_twice_is_one_length() {
        assert_eq!(declared_length("6"), Some(6));
        assert_eq!(declared_length(" 6 , 6"), Some(6));
        assert_eq!(declared_length("6, 7"), None);
        assert_eq!(declared_length("6,"), None);
    }
}
