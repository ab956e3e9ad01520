//! How the request arrived: over HTTPS (our own TLS listener, or a trusted proxy that says so)
//! or plain HTTP, and the `308` to HTTPS for plain HTTP when `[listen] redirect-http` is on.

use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::Result;

use super::{peer_ip, Ctx, Outcome, Proxy};
use crate::app::Shared;

impl Proxy {
    /// Notes whether the peer is a trusted proxy and whether the visitor came over HTTPS.
    pub(super) fn note_arrival(shared: &Shared, session: &Session, ctx: &mut Ctx) {
        // Our own listener: the connection itself is TLS.
        ctx.https = session.digest().is_some_and(|d| d.ssl_digest.is_some());
        let trusted = &shared.config.listen.trusted_proxies;
        if !trusted.is_empty() {
            if let Some(peer) = peer_ip(session) {
                ctx.trusted_peer = crate::client::is_trusted(peer, trusted);
                ctx.https |=
                    crate::client::forwarded_https(peer, &session.req_header().headers, trusted);
            }
        }
    }

    /// With `redirect-http`, a plain-HTTP request gets a `308` to the same URL over HTTPS (or a
    /// 400 when it names no usable host); `Ok(true)` when it was answered here.
    pub(super) async fn redirect_to_https(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
    ) -> Result<bool> {
        let listen = &shared.config.listen;
        let Some(https) = listen.https.filter(|_| listen.redirect_http && !ctx.https) else {
            return Ok(false);
        };
        let req = session.req_header();
        // The host as routing reads it (Host, or the target's authority; the two must agree);
        // never a forwarding header: a redirect is not made up from what a client reports.
        let hosts = super::target::hosts(req, false);
        let host = hosts
            .as_ref()
            .ok()
            .and_then(|h| h.as_slice().first().copied());
        let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
        let Some(location) = crate::edge::redirect::location(host, path, https.port()) else {
            Self::send_bad_request(shared, session, ctx, "the request names no usable host")
                .await?;
            return Ok(true);
        };
        ctx.outcome = Outcome::Redirect;
        let mut h = ResponseHeader::build(308, Some(3))?;
        h.insert_header(http::header::LOCATION, location)?;
        h.insert_header(http::header::CACHE_CONTROL, "no-store")?;
        // An answer of ours, as every other (found by review: the 308 had none of these).
        super::respond::ours(&mut h)?;
        h.insert_header(http::header::CONTENT_LENGTH, 0)?;
        session.write_response_header(Box::new(h), true).await?;
        Ok(true)
    }
}
