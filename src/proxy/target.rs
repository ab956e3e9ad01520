//! What a request is for: its host readings and path readings, and the routing decision on
//! them ([`crate::route::Router::decide`]). Also the headers through which a client could tell
//! the origin another host or path than the one anteroom routed by, removed unless a trusted
//! proxy sent them.

use bytes::Bytes;
use http::header::{HeaderName, HOST};
use pingora::http::authority::{raw_target_authority, RawTargetAuthority};
use pingora::http::RequestHeader;
use pingora::proxy::Session;

use super::respond::{Reply, HTML, JSON};
use super::{wants_json, Ctx, Outcome, Proxy};
use crate::app::Shared;
use crate::metrics::Reject;
use crate::page::MessageView;
use crate::route::headers::{named, OWN_HEADERS, PATH_OVERRIDES, SPOOFABLE, UPGRADE_HEADERS};
use crate::route::{normalize_host, Readings, Router, Routing};

/// At most this many host readings are kept (Host, plus a trusted proxy's reports).
const MAX_HOSTS: usize = 4;

/// The hosts a request names, normalised, without allocating.
pub struct Hosts<'a> {
    items: [&'a str; MAX_HOSTS],
    n: usize,
}

impl<'a> Hosts<'a> {
    fn new() -> Self {
        Self {
            items: [""; MAX_HOSTS],
            n: 0,
        }
    }

    /// `Err` when there are more distinct hosts than are kept: a request naming that many
    /// hosts is refused rather than routed on some of them.
    fn push(&mut self, h: &'a str) -> Result<(), &'static str> {
        if self.items[..self.n].contains(&h) {
            return Ok(());
        }
        if self.n == MAX_HOSTS {
            return Err("the request names too many hosts");
        }
        self.items[self.n] = h;
        self.n += 1;
        Ok(())
    }

    pub fn as_slice(&self) -> &[&'a str] {
        &self.items[..self.n]
    }
}

/// The request's host readings: the `Host` header (one, and usable), the target's authority
/// (HTTP/1 absolute form read from the raw target, HTTP/2 `:authority`), which must agree
/// with it and with each other (one of them is routed on), and — only when the peer is
/// a trusted proxy — `X-Forwarded-Host`, `X-Host`, `X-Original-Host` and `Forwarded: host=`
/// (what origins take the host from). `Err` is the reason for a 400.
pub fn hosts(req: &RequestHeader, trusted_peer: bool) -> Result<Hosts<'_>, &'static str> {
    let mut out = Hosts::new();
    let mut values = req.headers.get_all(HOST).iter();
    let header = match (values.next(), values.next()) {
        (Some(_), Some(_)) => return Err("more than one Host header"),
        (Some(v), None) => Some(
            v.to_str()
                .ok()
                .and_then(normalize_host)
                .ok_or("the Host header is not a host name")?,
        ),
        (None, _) => None,
    };
    // The target's authority: HTTP/2's `:authority` on the URI, or an HTTP/1 absolute-form
    // target's, which Pingora leaves off the URI but forwards (and fills `Host` from when
    // the request has none): read from the raw target, as the origin reads it.
    let unusable = "the request target's host is not usable";
    let on_uri = match req.uri.authority() {
        Some(a) => Some(normalize_host(a.as_str()).ok_or(unusable)?),
        None => None,
    };
    let in_target = match raw_target_authority(req.raw_path()).authority() {
        Some(a) => Some(
            std::str::from_utf8(a)
                .ok()
                .and_then(normalize_host)
                .ok_or(unusable)?,
        ),
        None => None,
    };
    let mut named = None;
    for h in [header, on_uri, in_target].into_iter().flatten() {
        match named {
            Some(n) if !h.eq_ignore_ascii_case(n) => {
                return Err("the request target's host and the Host header disagree")
            }
            Some(_) => {}
            None => named = Some(h),
        }
    }
    // No host named: the origin reads none, and serves its default site, whatever a trusted
    // proxy claims beside (an empty reading, which only a room for any host matches).
    match named {
        Some(h) => out.push(h)?,
        None if trusted_peer => out.push("")?,
        None => {}
    }
    if trusted_peer {
        // `X-Forwarded-Server` is left out: Apache's mod_proxy puts its own server name there,
        // not the host the visitor asked for.
        let claims = ["x-forwarded-host", "x-host", "x-original-host"];
        let claimed = req
            .headers
            .iter()
            .filter(|(k, _)| {
                claims
                    .iter()
                    .any(|c| crate::route::headers::named(k.as_str(), c))
            })
            .map(|(_, v)| v);
        // A claim that is no host name is refused, as such a `Host` is ([`host_claim`]).
        let unreadable = NOT_A_HOST_CLAIM;
        for v in claimed {
            for h in v.to_str().map_err(|_| unreadable)?.split(',') {
                if let Some(h) = host_claim(h)? {
                    out.push(h)?;
                }
            }
        }
        for v in req.headers.get_all(http::header::FORWARDED) {
            for pair in v.to_str().map_err(|_| unreadable)?.split([',', ';']) {
                if let Some((k, h)) = pair.split_once('=') {
                    if k.trim().eq_ignore_ascii_case("host") {
                        if let Some(h) = host_claim(h.trim().trim_matches('"'))? {
                            out.push(h)?;
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// One host claimed by a trusted proxy (an item of `X-Forwarded-Host`, a `Forwarded` host): a
/// claim that is no host name is refused, as such a `Host` is — skipped, it would still reach
/// the origin, which may read a host out of it (Express cuts `shop.test:abc` at the `:`). An
/// empty list item is nothing.
fn host_claim(h: &str) -> Result<Option<&str>, &'static str> {
    let h = h.trim_matches([' ', '\t']);
    if h.is_empty() {
        return Ok(None);
    }
    normalize_host(h).map(Some).ok_or(NOT_A_HOST_CLAIM)
}

const NOT_A_HOST_CLAIM: &str = "a forwarded host claim is not a host name";

/// A path with an escaped line break (`%0D`, `%0A`) is refused, in a room or not: a hop that
/// decodes the path before handing it on (nginx's `proxy_pass` with `$uri`) writes the break
/// into its request to the origin, and what follows it is a request of its own, such as an
/// order (found by review: `/public%20HTTP/1.1%0D%0A…POST%20/orders…` placed one without an
/// admission). No link a browser follows has one.
fn no_line_break(path: &str) -> Result<(), &'static str> {
    let b = path.as_bytes();
    let broken = memchr::memchr_iter(b'%', b).any(|i| {
        b.get(i + 1) == Some(&b'0') && matches!(b.get(i + 2), Some(b'a' | b'A' | b'd' | b'D'))
    });
    if broken {
        Err("the path holds an escaped line break")
    } else {
        Ok(())
    }
}

/// The routing of a request and the readings of its path (the consume check needs them too).
pub struct Target<'a> {
    pub readings: Readings<'a>,
    pub routing: Routing,
}

pub fn target<'a>(router: &Router, req: &'a RequestHeader, trusted_peer: bool) -> Target<'a> {
    let (path, form) = match form(req) {
        Ok(Form::Asterisk) => ("/", Ok(())),
        Ok(Form::Path) => (req.uri.path(), Ok(())),
        Err(why) => (req.uri.path(), Err(why)),
    };
    let mut readings = Readings::of(path);
    readings.add_query_route(path, req.uri.query());
    let form = form.and_then(|()| no_line_break(path));
    let routing = match form.and_then(|()| hosts(req, trusted_peer)) {
        Ok(h) => router.decide(h.as_slice(), &readings),
        Err(why) => Routing::Refuse(why),
    };
    Target { readings, routing }
}

/// The forms of request target that are routed.
#[derive(Debug, PartialEq, Eq)]
enum Form {
    /// Origin form (`/products/1`), or absolute form with an `http`/`https` scheme and an
    /// authority (`http://shop.test/products/1`): the path on the URI is the one the origin
    /// reads.
    Path,
    /// `OPTIONS *`: about the server, not a resource; routed as `/`, so a room over the
    /// whole site holds it too.
    Asterisk,
}

/// What a request target is, read from its raw bytes (what the origin receives). Any other
/// target is refused: Pingora puts `/` on the URI for a target it cannot place (`a:/orders`,
/// `x:/products/1`, `host:443`) but forwards its bytes as they are, and origins such as
/// Werkzeug, gunicorn and Go's `net/http` read the path after the scheme: routed as `/`, it
/// would pass a room that does not cover `/`.
fn form(req: &RequestHeader) -> Result<Form, &'static str> {
    let raw = req.raw_path();
    if raw.first() == Some(&b'/') {
        return Ok(Form::Path);
    }
    if raw == b"*" {
        return if req.method == http::Method::OPTIONS {
            Ok(Form::Asterisk)
        } else {
            Err("the request target `*` is only for OPTIONS")
        };
    }
    match raw_target_authority(raw) {
        RawTargetAuthority::Absolute { scheme, .. }
            if scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https") =>
        {
            Ok(Form::Path)
        }
        _ => Err("the request target is neither a path nor an http(s) address"),
    }
}

/// Whether the request carries a header a client could steer the origin with (see
/// [`SPOOFABLE`], [`PATH_OVERRIDES`], [`UPGRADE_HEADERS`], [`OWN_HEADERS`]); checked before anything is removed,
/// so the common request costs a scan of its header names and nothing else.
pub fn has_spoofable(req: &RequestHeader) -> bool {
    req.headers.keys().any(|k| {
        let k = k.as_str();
        [
            &SPOOFABLE[..],
            &PATH_OVERRIDES,
            &UPGRADE_HEADERS,
            &OWN_HEADERS,
        ]
        .iter()
        .any(|list| list.iter().any(|l| named(k, l)))
    })
}

/// Removes what [`has_spoofable`] found: path overrides and anteroom's own always, a non-WebSocket upgrade always,
/// host headers unless a trusted proxy sent them. Each under any spelling with `_` for `-`.
pub fn strip_spoofable(req: &mut RequestHeader, trusted_peer: bool) {
    let remove = |names: &[&'static str], req: &mut RequestHeader| {
        let found: Vec<HeaderName> = req
            .headers
            .keys()
            .filter(|k| names.iter().any(|l| named(k.as_str(), l)))
            .cloned()
            .collect();
        for name in found {
            while req.remove_header(&name).is_some() {}
        }
    };
    remove(&PATH_OVERRIDES, req);
    remove(&OWN_HEADERS, req);
    if !trusted_peer {
        remove(&SPOOFABLE, req);
    }
    let websocket = req.headers.get_all(http::header::UPGRADE).iter().all(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .all(|p| p.trim().eq_ignore_ascii_case("websocket"))
        })
    });
    if !websocket || req.headers.contains_key("http2-settings") {
        remove(&UPGRADE_HEADERS, req);
    }
}

impl Proxy {
    /// 400 for a request whose host or path cannot be routed without ambiguity.
    pub(super) async fn send_bad_request(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        why: &'static str,
    ) -> pingora::Result<()> {
        ctx.outcome = Outcome::Reject;
        ctx.reject = Some(Reject::BadRequest);
        let json = wants_json(session.req_header());
        let body = if json {
            Bytes::from(serde_json::json!({ "state": "bad_request", "error": why }).to_string())
        } else {
            Bytes::from(shared.pages.message(&MessageView {
                status: 400,
                title: "This address cannot be served",
                message: why,
                retry_seconds: None,
                refresh_url: "",
                room: "",
                lang: "en",
                form_note: None,
            }))
        };
        Reply {
            status: 400,
            content_type: if json { JSON } else { HTML },
            body,
            retry_after: None,
            cookies: &[],
        }
        .send(session)
        .await
    }
}

#[cfg(test)]
pub(super) mod tests;
