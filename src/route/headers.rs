//! Headers through which a client could tell the origin another host, path or protocol than
//! the one anteroom routed by: the proxy removes them (`src/proxy/target.rs`), and no header of
//! anteroom's own (`origin-secret`) may be one of them.

/// Headers some origins and frameworks take the host from instead of the request line
/// (`X-Forwarded-Host` in Rails, Django, Spring with `ForwardedHeaderFilter`, Symfony;
/// `Forwarded: host=`). From anyone but a trusted proxy they are removed before the request is
/// forwarded: an origin that believes them would otherwise serve a protected host through an
/// unprotected one. From a trusted proxy they are kept, and all but `X-Forwarded-Server` (the
/// proxy's own name in Apache's mod_proxy) are readings of the host.
pub const SPOOFABLE: [&str; 5] = [
    "x-forwarded-host",
    "x-host",
    "x-original-host",
    "x-forwarded-server",
    "forwarded",
];

/// Headers that IIS (URL Rewrite), Symfony and Zend take the *path* from (`X-Original-URL`,
/// `X-Rewrite-URL`), the CGI variables gunicorn takes from a request header of that name
/// when the peer is in its `forwarded-allow-ips` (127.0.0.1 by default: anteroom on the same
/// host) — `SCRIPT_NAME: /x` makes `/x/products` the app's `/products` — and `X-Script-Name`,
/// which the widely copied Flask "ReverseProxied" middleware cuts off the path the same way:
/// removed from every request, a trusted proxy's too — load balancers pass client headers
/// through, and anteroom routes on the request line only.
pub const PATH_OVERRIDES: [&str; 5] = [
    "x-original-url",
    "x-rewrite-url",
    "script-name",
    "path-info",
    "x-script-name",
];

/// A header name as CGI-style servers read it (`X_Forwarded_Host` and `X-Forwarded-Host` are
/// both `HTTP_X_FORWARDED_HOST`; gunicorn reads `SCRIPT_NAME` as sent): whether `name` (lower
/// case, as the HTTP crate keeps it) is `listed` with `_` read as `-`.
pub fn named(name: &str, listed: &str) -> bool {
    name.len() == listed.len()
        && name
            .bytes()
            .zip(listed.bytes())
            .all(|(a, b)| a == b || (a == b'_' && b == b'-'))
}

/// An `Upgrade` to anything but WebSocket (`h2c` above all) would, once the origin answers
/// 101, turn the connection into a tunnel that speaks to the origin past every room: the
/// header (and `HTTP2-Settings`) is removed, and the origin answers in HTTP/1.1.
pub const UPGRADE_HEADERS: [&str; 2] = ["upgrade", "http2-settings"];

/// The origin's word to anteroom (`Anteroom-Command`, `origin-commands`): removed from every
/// request, a trusted proxy's too, so that a shop that echoes request headers in its answer
/// does not let a visitor speak for it (found by review r106a: a visitor's own
/// `Anteroom-Command: revoke`, echoed, was obeyed).
pub const OWN_HEADERS: [&str; 1] = ["anteroom-command"];

/// Every header `strip_spoofable` (src/proxy/target.rs) may remove (a header of anteroom's own must not be one).
pub const STRIPPED_HEADERS: [&[&str]; 4] =
    [&SPOOFABLE, &PATH_OVERRIDES, &UPGRADE_HEADERS, &OWN_HEADERS];

/// The header every answer of the admin listener carries (`Anteroom-Admin: 1`): the CLI sends
/// its token only to a server that answers with it. The public listener removes it from the
/// shop's answers, so that a shop cannot pass for the admin listener (found by review: one
/// that sent it was sent the token).
pub const ADMIN_MARK: &str = "anteroom-admin";

/// What a request header counts against `[server] max-header-bytes`: each field's name and
/// value with its separators, and the request target. The public listener and the admin one
/// measure alike.
pub fn header_bytes(req: &pingora::http::RequestHeader) -> usize {
    req.headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum::<usize>()
        + req
            .uri
            .path_and_query()
            .map(|p| p.as_str().len())
            .unwrap_or(0)
}
