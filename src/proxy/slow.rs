//! Bounds for slow and oversized clients: the timeouts of a visitor's connection, the size of
//! a request header, and the whole time a request body may take.
//!
//! Pingora's read timeout bounds each read, not a request: a client that trickles a byte before
//! every timeout keeps its request open for as long as it likes. For a body that matters beyond
//! the connection itself: the request holds its slot of `max-origin-inflight` while the body
//! streams to the origin, so one admitted visitor trickling two bodies shut a room capped at 2
//! with 503s for everyone (found by review). The body must now be complete within
//! `client-timeout` of the request's start (or of its origin slot's coming, when it waited for
//! one: nothing reads the body meanwhile), plus what it earns by moving ([`body_due`]): after
//! each piece the read timeout is what is left, never more than `client-timeout`.
//! (A request header has no such total bound: Pingora reads it before any filter runs;
//! docs/SECURITY.md says so.)

use std::time::Duration;

use pingora::proxy::Session;
use pingora::Result;

use super::{Ctx, Proxy};

/// What is left of a body's time: due `limit` after `body_from`, `elapsed` since it.
/// `None`: the time is up.
pub(super) fn body_time_left(elapsed: Duration, limit: Duration) -> Option<Duration> {
    limit.checked_sub(elapsed).filter(|d| !d.is_zero())
}

/// Bytes a second of a body that earn it more time: each [`MIN_RATE`] bytes received move its
/// deadline a second on. An upload that an origin reads slowly (the proxy then reads the
/// visitor no faster) goes on as long as it moves at this pace; one trickled to hold an origin
/// slot must send at least this (found by re-review: a 4 MB upload to a shop reading 320 KB/s
/// was cut at `client-timeout` and told as the visitor's).
pub(super) const MIN_RATE: u64 = 1024;

/// When a body is due (from `body_from`) after a piece of `bytes` came `elapsed` after it,
/// from `due` before: a second later for each [`MIN_RATE`] bytes, but never more than
/// `client-timeout` past the piece. Time is earned as the body moves and not banked (found
/// by re-review: counted over the whole body, 100 KiB sent at once bought 100 s in which a
/// byte every few seconds held the origin slot, and a body silent longer than
/// `client-timeout` after a burst outlived it). The first deadline is `client-timeout`.
pub(super) fn body_due(
    due: Duration,
    elapsed: Duration,
    bytes: u64,
    client_timeout: Duration,
) -> Duration {
    let earned = Duration::from_micros(bytes.saturating_mul(1_000_000) / MIN_RATE);
    due.saturating_add(earned)
        .min(elapsed.saturating_add(client_timeout))
}

impl Proxy {
    /// The connection's timeouts, and 431 for a header over `max-header-bytes`.
    pub(super) fn bound_client(session: &mut Session, ctx: &mut Ctx) -> Result<()> {
        let s = &ctx.shared.config.server;
        let secs = s.client_timeout.as_secs().max(1);
        // Only a connection the client keeps open: Pingora leaves an HTTP/1.0 request without
        // `Connection: keep-alive` unkept, and setting a timeout on it kept it open, so a
        // client reading to the close waited `client-timeout` for every answer (found while
        // testing host readings).
        if session.get_keepalive().is_some() {
            session.set_keepalive(Some(secs));
        }
        session.set_read_timeout(Some(s.client_timeout));
        session.set_write_timeout(Some(s.client_timeout));
        let size = crate::route::headers::header_bytes(session.req_header());
        if size > s.max_header_bytes {
            return pingora::Error::e_explain(
                pingora::ErrorType::HTTPStatus(431),
                format!(
                    "request header of {size} bytes; the limit is {}",
                    s.max_header_bytes
                ),
            );
        }
        Ok(())
    }

    /// After each piece of a request body: the next read may take only what is left until
    /// the body is due ([`body_due`]); past it, the request fails (the connection closes and
    /// its origin slot is free).
    pub(super) fn bound_body(session: &mut Session, end_of_stream: bool, ctx: &Ctx) -> Result<()> {
        if end_of_stream {
            return Ok(());
        }
        match body_time_left(ctx.body_from.elapsed(), ctx.body_due) {
            Some(left) => {
                session.set_read_timeout(Some(left));
                Ok(())
            }
            None => Err(Self::body_too_late(ctx)),
        }
    }

    /// A body not whole within `client-timeout`: the visitor's side (found by review: told
    /// without a side, it was settled, answered and counted in the origin's health as the
    /// shop's failure).
    pub(super) fn body_too_late(ctx: &Ctx) -> Box<pingora::Error> {
        let limit = ctx.shared.config.server.client_timeout;
        pingora::Error::explain(
            pingora::ErrorType::ReadTimedout,
            format!("request body not complete within client-timeout ({limit:?})"),
        )
        .into_down()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_earns_a_second_for_each_kib_it_moves_and_banks_none() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // A KiB a second, in pieces of half a KiB: due stays a client-timeout ahead.
        let mut due = s(60);
        for i in 1..=600u64 {
            due = body_due(due, ms(500 * i), 512, s(60));
        }
        assert_eq!(due, s(60 + 300));
        // Half a KiB a second falls behind and is cut.
        let mut due = s(60);
        let mut at = s(0);
        while body_time_left(at, due).is_some() {
            at += s(1);
            due = body_due(due, at, 512, s(60));
        }
        assert!(at < s(130), "{at:?}");
        // A burst buys no more than client-timeout past it.
        assert_eq!(body_due(s(60), s(1), 100 * 1024 * 1024, s(60)), s(61));
        assert_eq!(body_due(s(60), s(0), 0, s(60)), s(60));
        assert_eq!(
            body_due(Duration::MAX, Duration::MAX, u64::MAX, Duration::MAX),
            Duration::MAX
        );
    }

    proptest::proptest! {
        /// Whatever the pieces, a body's deadline never goes back, and never lies more than
        /// client-timeout past its last piece.
        #[test]
        fn a_deadline_moves_on_only_and_never_far_past_the_last_piece(
            pieces in proptest::collection::vec((0u64..5_000, 0u64..200_000), 1..50),
            ct in 1u64..120,
        ) {
            let ct = Duration::from_secs(ct);
            let mut due = ct;
            let mut at = Duration::ZERO;
            for (gap_ms, bytes) in pieces {
                at += Duration::from_millis(gap_ms);
                let next = body_due(due, at, bytes, ct);
                proptest::prop_assert!(next >= due);
                proptest::prop_assert!(next <= at + ct);
                due = next;
            }
        }
    }

    #[test]
    fn a_body_has_client_timeout_in_all() {
        let s = Duration::from_secs;
        assert_eq!(body_time_left(s(0), s(60)), Some(s(60)));
        assert_eq!(body_time_left(s(59), s(60)), Some(s(1)));
        assert_eq!(body_time_left(s(60), s(60)), None);
        assert_eq!(body_time_left(s(600), s(60)), None);
    }
}
