//! What a request carries, read the same way by every phase: our cookies, the client's
//! address (as per-client limits count it), whether it prefers JSON, whether our cookies get
//! `Secure`.

use pingora::http::RequestHeader;
use pingora::proxy::Session;

use super::Ctx;
use crate::app::Shared;
use crate::page;
use crate::store::JoinGate;

pub(super) fn cookie_values(req: &RequestHeader) -> impl Iterator<Item = &[u8]> {
    req.headers
        .get_all(http::header::COOKIE)
        .iter()
        .map(|v| v.as_bytes())
}

/// `Secure` on our cookies: the operator's `cookie.secure`, or else whether a trusted proxy
/// says the visitor came over HTTPS.
pub(super) fn secure(shared: &Shared, ctx: &Ctx) -> bool {
    shared.config.cookie.secure.unwrap_or(ctx.https)
}

/// The peer's address, when it is an IP socket; an IPv4 peer on a dual-stack listener
/// (`::ffff:10.0.0.2`) as its IPv4 address, so that `trusted-proxies`, `join-limit` and
/// `bypass` networks written in IPv4 match it.
pub(super) fn peer_ip(session: &Session) -> Option<std::net::IpAddr> {
    session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip().to_canonical())
}

/// The client's address as per-client limits count it (the peer, or a trusted proxy's word).
pub(super) fn client_key(shared: &Shared, session: &Session) -> Option<String> {
    let peer = peer_ip(session)?;
    let listen = &shared.config.listen;
    let ip = crate::client::client_ip(
        peer,
        &session.req_header().headers,
        &listen.trusted_proxies,
        listen.client_header,
    );
    Some(crate::client::limit_key(ip))
}

/// The room's per-client join limit for this request, if the room has one.
pub(super) fn gate(shared: &Shared, session: &Session, room: usize) -> Option<JoinGate> {
    let limit = shared.rooms[room].cfg.join_limit.as_ref()?;
    Some(JoinGate {
        client: client_key(shared, session)?,
        limit: limit.per_ip,
        per: limit.per,
        known_only: false,
        vouched: false,
    })
}

/// Whether `Accept` prefers JSON, its field lines read as one list (RFC 9110: a client may
/// send it in several; found by review, only the first was read).
/// Where a page of ours answering `req` refreshes to: its path and query
/// ([`crate::page::refresh_url`]).
pub(super) fn page_url(req: &RequestHeader) -> String {
    crate::page::refresh_url(req.uri.path_and_query().map_or("/", |p| p.as_str()))
}

pub(super) fn wants_json(req: &RequestHeader) -> bool {
    let mut lines = req
        .headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let Some(first) = lines.next() else {
        return false;
    };
    match lines.next() {
        None => page::prefers_json(first),
        Some(second) => {
            let mut all = [first, second].join(",");
            for more in lines {
                all.push(',');
                all.push_str(more);
            }
            page::prefers_json(&all)
        }
    }
}

/// The room's words for this visitor: the language `Accept-Language` chooses among the room's,
/// else English; with the language they are in (for the page's `lang`).
pub(super) fn words<'a>(
    shared: &'a Shared,
    session: &Session,
    room: usize,
) -> (&'a str, Option<&'a crate::texts::TextSet>) {
    let texts = &shared.rooms[room].cfg.texts;
    let lang = crate::texts::negotiate(
        session
            .req_header()
            .headers
            .get(http::header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok()),
    );
    match texts.get_key_value(lang) {
        Some((l, t)) => (l.as_str(), Some(t)),
        None => ("en", texts.get("en")),
    }
}
