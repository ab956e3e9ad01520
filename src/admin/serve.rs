//! How the admin listener serves a connection: the bounds the public listener has, which
//! Pingora's own loop for a `ServeHttp` app left out (found by review): a request header must
//! come whole within `[server] client-timeout` and fit `max-header-bytes` (431 otherwise), an idle
//! connection closes after `client-timeout`, a request Pingora cannot parse is answered 400
//! (it was dropped without a word), and at most [`MAX_OPEN`] connections are open at once (a
//! crowd of idle ones used up the process's descriptors, which stopped the public listener
//! too): past it, a new connection is closed at once. Every answer is marked ([`MARK`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use http::StatusCode;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ReusedHttpStream};
use pingora::http::ResponseHeader;
use pingora::protocols::http::ServerSession;
use pingora::server::ShutdownWatch;

use super::api::{error, AdminApp};

/// The most connections the admin listener keeps open at once (operators, their dashboards,
/// the CLI and probes need a few).
pub const MAX_OPEN: usize = 256;

pub use crate::route::headers::ADMIN_MARK as MARK;

/// The most of them one address may hold: one client (a script looping on `/healthz`, a
/// crowd of idle connections) cannot take every place (found by review: 256 busy connections
/// of one client shut the operators out for as long as it kept sending).
pub const MAX_PER_PEER: usize = 64;

/// The connections open now, in all and by the client's address.
#[derive(Debug, Default)]
pub struct Conns {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// Counts an open connection while it lives.
struct Open<'a> {
    conns: &'a Mutex<Conns>,
    peer: Option<IpAddr>,
}

impl<'a> Open<'a> {
    /// Counts one more from `peer`; `None` (not counted) when [`MAX_OPEN`] are open already,
    /// or [`MAX_PER_PEER`] of that address.
    fn enter(conns: &'a Mutex<Conns>, peer: Option<IpAddr>) -> Option<Self> {
        let mut c = conns.lock().unwrap_or_else(|e| e.into_inner());
        let of_peer = peer.map_or(0, |p| c.by_peer.get(&p).copied().unwrap_or(0));
        if c.total >= MAX_OPEN || of_peer >= MAX_PER_PEER {
            return None;
        }
        c.total += 1;
        if let Some(p) = peer {
            *c.by_peer.entry(p).or_insert(0) += 1;
        }
        Some(Self { conns, peer })
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let mut c = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        c.total = c.total.saturating_sub(1);
        if let Some(p) = self.peer {
            if let std::collections::hash_map::Entry::Occupied(mut e) = c.by_peer.entry(p) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
        }
    }
}

/// Whether a warning is due now (at most one a second), by the second it was last given.
fn due(last: &AtomicU64) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    last.swap(now, Ordering::AcqRel) != now
}

#[async_trait]
impl HttpServerApp for AdminApp {
    async fn process_new_http(
        self: &Arc<Self>,
        mut http: ServerSession,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        let peer = http.client_addr().and_then(|a| a.as_inet()).map(|a| a.ip());
        let Some(_open) = Open::enter(&self.open, peer) else {
            if due(&self.crowded_warned) {
                tracing::warn!(
                    limit = MAX_OPEN,
                    per_client = MAX_PER_PEER,
                    client = ?peer,
                    "the admin listener has its most connections open, in all or from this client: a new one is closed (keep the admin listener where only operators reach it)"
                );
            }
            return None;
        };
        let (timeout, max_header) = {
            let s = &self.current.load().config.server;
            (s.client_timeout, s.max_header_bytes)
        };
        let secs = timeout.as_secs().max(1);
        // The wait for a request (the first, or the next on a kept connection): Pingora reads
        // by the keep-alive timeout when one is set, else by the read timeout.
        let closing = *shutdown.borrow();
        http.set_keepalive((!closing).then_some(secs));
        http.set_read_timeout(Some(timeout));
        http.set_write_timeout(Some(timeout));
        // Pingora bounds each read, not the header: one trickled a line at a time stayed open
        // for good, and 256 of them shut the operators out (found by review). The whole wait
        // for a request, and its header, is bounded here.
        match tokio::time::timeout(timeout, http.read_request()).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) | Err(_) => return None,
            Ok(Err(e)) => {
                if matches!(e.etype, pingora::ErrorType::InvalidHTTPHeader) {
                    let body = bytes::Bytes::from_static(
                        b"{\"error\":\"a request that could not be read\"}\n",
                    );
                    let mut resp = ServerSession::generate_error(400);
                    let _ = resp.insert_header(MARK, "1");
                    let _ = resp.insert_header(http::header::CONTENT_TYPE, "application/json");
                    let _ = resp.set_content_length(body.len());
                    let _ = http.write_error_response(resp, body).await;
                }
                http.shutdown().await;
                return None;
            }
        }
        if *shutdown.borrow() {
            http.set_keepalive(None);
        } else if http.get_keepalive().is_some() {
            // Pingora leaves an HTTP/1.0 request without `Connection: keep-alive` unkept.
            http.set_keepalive(Some(secs));
        }
        let size = crate::route::headers::header_bytes(http.req_header());
        let resp = if size > max_header {
            http.set_keepalive(None);
            error(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                &format!(
                    "request header of {size} bytes; the limit is {max_header} (max-header-bytes)"
                ),
            )
        } else {
            self.response(&mut http).await
        };
        let (parts, body) = resp.into_parts();
        let mut header: ResponseHeader = parts.into();
        let _ = header.insert_header(MARK, "1");
        if let Err(e) = http.write_response_header(Box::new(header)).await {
            tracing::debug!(target: "anteroom::admin", "writing an answer: {e}");
            return None;
        }
        if !body.is_empty() {
            if let Err(e) = http.write_response_body(body.into(), true).await {
                tracing::debug!(target: "anteroom::admin", "writing an answer: {e}");
                return None;
            }
        }
        let settings = HttpPersistentSettings::for_session(&http);
        match http.finish().await {
            Ok(kept) => kept.map(|s| ReusedHttpStream::from_reusable_stream(s, settings)),
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_more_than_the_most_are_counted_open_and_a_closed_one_frees_its_place() {
        let conns = Mutex::new(Conns::default());
        let peer = |i: usize| Some(IpAddr::from([10, 0, 0, (i / MAX_PER_PEER) as u8]));
        let held: Vec<Open<'_>> = (0..MAX_OPEN)
            .filter_map(|i| Open::enter(&conns, peer(i)))
            .collect();
        assert_eq!(held.len(), MAX_OPEN);
        assert!(
            Open::enter(&conns, peer(MAX_OPEN)).is_none(),
            "one past the most"
        );
        assert_eq!(
            conns.lock().unwrap().total,
            MAX_OPEN,
            "a refused one is not counted"
        );
        drop(held);
        assert_eq!(conns.lock().unwrap().total, 0);
        assert!(conns.lock().unwrap().by_peer.is_empty());
        // One address alone: its share, and another address still gets in.
        let one: Vec<Open<'_>> = (0..MAX_PER_PEER + 5)
            .filter_map(|_| Open::enter(&conns, peer(0)))
            .collect();
        assert_eq!(one.len(), MAX_PER_PEER);
        assert!(Open::enter(&conns, peer(MAX_PER_PEER)).is_some());
    }

    #[test]
    fn a_warning_is_given_at_most_once_a_second() {
        let last = AtomicU64::new(0);
        assert!(due(&last));
        assert!(!due(&last), "the same second");
    }
}
