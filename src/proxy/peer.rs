//! Which origin server a request goes to, and another one when it cannot connect.

use std::net::SocketAddr;
use std::time::Instant;

use pingora::proxy::Session;
use pingora::upstreams::peer::HttpPeer;

use super::{cookie_values, peer_ip, Ctx};
use crate::config::model::Balance;

/// The peer for this request: the upstream's one server, or one its pool chooses (not one this
/// request already failed to connect to).
pub(super) fn choose(session: &Session, ctx: &mut Ctx) -> HttpPeer {
    // Timed only where an autopilot watches the origin (see `Shared::origin_health`).
    if ctx.room.is_some()
        && ctx
            .shared
            .origin_health
            .get(ctx.upstream)
            .is_some_and(Option::is_some)
    {
        ctx.upstream_at = Some(Instant::now());
    }
    let up = &ctx.shared.config.upstreams[ctx.upstream];
    let addr = match ctx.shared.pools.get(ctx.upstream).and_then(Option::as_ref) {
        None => up.addr,
        Some(pool) => {
            let key = match up.balance {
                Balance::RoundRobin => Vec::new(),
                Balance::Visitor => visitor_key(session),
            };
            pool.pick(&key, &ctx.tried).unwrap_or(up.addr)
        }
    };
    let mut peer = HttpPeer::new(addr, up.tls, up.sni.clone());
    peer.options.connection_timeout = Some(up.connect_timeout);
    peer.options.total_connection_timeout = Some(up.connect_timeout);
    peer.options.read_timeout = Some(up.read_timeout);
    peer.options.write_timeout = Some(up.write_timeout);
    if up.tls {
        peer.options.ca.clone_from(&up.ca);
        peer.client_cert_key.clone_from(&up.client_cert);
    }
    peer
}

/// What `balance = "visitor"` hashes: the visitor id, or the client's address for a request
/// without one.
fn visitor_key(session: &Session) -> Vec<u8> {
    let req = session.req_header();
    match crate::cookie::find(cookie_values(req), crate::cookie::VID_COOKIE) {
        Some(vid) => vid.as_bytes().to_vec(),
        None => peer_ip(session)
            .map(|ip| ip.to_string().into_bytes())
            .unwrap_or_default(),
    }
}

/// A server this request could not connect to: another one of the pool is tried, while there
/// is one it has not tried (nothing was sent, so any request may go again).
pub(super) fn retry_elsewhere(
    ctx: &mut Ctx,
    peer: &HttpPeer,
    mut e: Box<pingora::Error>,
) -> Box<pingora::Error> {
    let Some(pool) = ctx.shared.pools.get(ctx.upstream).and_then(Option::as_ref) else {
        return e;
    };
    let Some(addr) = peer._address.as_inet().copied() else {
        return e;
    };
    if !ctx.tried.contains(&addr) {
        ctx.tried.push(addr);
    }
    if ctx.tried.len() < pool.len() {
        tracing::debug!(server = %addr, error = %e, "origin server refused the connection; trying another");
        e.set_retry(true);
    }
    e
}

/// Servers already tried, kept with the request.
pub(super) type Tried = Vec<SocketAddr>;
