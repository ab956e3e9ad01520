use super::*;

/// A request for `target` with `headers` (also for the other request-reading tests).
pub(in crate::proxy) fn req(target: &str, headers: &[(&str, &str)]) -> RequestHeader {
    let mut r = RequestHeader::build("GET", target.as_bytes(), None).unwrap();
    for (k, v) in headers {
        r.append_header(k.to_string(), *v).unwrap();
    }
    r
}

#[test]
fn host_readings() {
    let r = req("/p", &[("host", "Shop.Test.:8080")]);
    assert_eq!(hosts(&r, false).unwrap().as_slice(), ["Shop.Test"]);
    let two = req("/p", &[("host", "a.test"), ("host", "b.test")]);
    assert!(hosts(&two, false).is_err());
    // An authority on the URI (HTTP/2's `:authority`; Pingora's HTTP/1 ingress already
    // refuses an absolute-form target that differs from Host byte for byte).
    let with_authority = |uri: &str, host: &str| {
        let mut r = req("/p", &[("host", host)]);
        r.set_uri(uri.parse().unwrap());
        r
    };
    assert!(hosts(&with_authority("http://shop.test/p", "other.test"), false).is_err());
    let ok = with_authority("http://SHOP.test./p", "shop.test:80");
    assert_eq!(hosts(&ok, false).unwrap().as_slice(), ["shop.test"]);
    let none = req("/p", &[]);
    assert!(hosts(&none, false).unwrap().as_slice().is_empty());
    let bad = req("/p", &[("host", "shop.test/x")]);
    assert!(hosts(&bad, false).is_err());
    let fwd = req(
        "/p",
        &[
            ("host", "lb.internal"),
            ("x-forwarded-host", "shop.test"),
            ("forwarded", "for=1.2.3.4;host=\"www.shop.test\""),
        ],
    );
    assert_eq!(hosts(&fwd, false).unwrap().as_slice(), ["lb.internal"]);
    assert_eq!(
        hosts(&fwd, true).unwrap().as_slice(),
        ["lb.internal", "shop.test", "www.shop.test"]
    );
    // Every header an origin takes the host from, when a trusted proxy sent it; not the
    // proxy's own name.
    let claims = req(
        "/p",
        &[
            ("host", "lb.internal"),
            ("x-host", "shop.test"),
            ("x-original-host", "Www.Shop.Test"),
            ("x-forwarded-server", "lb-1.internal"),
        ],
    );
    assert_eq!(
        hosts(&claims, true).unwrap().as_slice(),
        ["lb.internal", "shop.test", "Www.Shop.Test"]
    );
    assert_eq!(hosts(&claims, false).unwrap().as_slice(), ["lb.internal"]);
    // A client's CGI-style spelling, passed on by the trusted proxy, is what a server that
    // reads `_` as `-` takes the host from.
    let cgi = req(
        "/p",
        &[("host", "lb.internal"), ("X_Forwarded_Host", "shop.test")],
    );
    assert_eq!(
        hosts(&cgi, true).unwrap().as_slice(),
        ["lb.internal", "shop.test"]
    );
}

#[test]
fn only_paths_and_http_addresses_are_routed() {
    let form_of = |method: &str, target: &str| {
        form(&RequestHeader::build(method, target.as_bytes(), None).unwrap())
    };
    for ok in [
        "/products/1",
        "http://shop.test/products/1",
        "HTTPS://shop.test",
        "http://shop.test?x=1",
    ] {
        assert_eq!(form_of("GET", ok), Ok(Form::Path), "{ok}");
    }
    assert_eq!(form_of("OPTIONS", "*"), Ok(Form::Asterisk));
    for refused in [
        "*",
        "a:/products/1",
        "x:/orders",
        "products/1",
        "shop.test:443",
        "ftp://shop.test/products/1",
        "http:shop.test/products/1",
        "http:/\\shop.test/products/1",
        "http://shop.test\\evil.test/products/1",
        "://shop.test/products/1",
    ] {
        assert!(form_of("GET", refused).is_err(), "{refused}");
    }
    // Routed as the origin reads it: refused, not `/` (a room over `/products` would
    // let `a:/products/1` pass as `/`).
    let r = RequestHeader::build("GET", b"a:/products/1", None).unwrap();
    assert_eq!(r.uri.path(), "/", "what Pingora puts on the URI");
    assert_eq!(r.raw_path(), b"a:/products/1", "what it forwards");
}

#[test]
fn an_absolute_target_names_the_host_without_a_host_header() {
    let no_host = req("http://Shop.Test./products/1", &[]);
    assert_eq!(
        no_host.uri.authority(),
        None,
        "Pingora leaves it off the URI"
    );
    assert_eq!(hosts(&no_host, false).unwrap().as_slice(), ["Shop.Test"]);
    let agreeing = req("http://shop.test/p", &[("host", "SHOP.test:80")]);
    assert_eq!(hosts(&agreeing, false).unwrap().as_slice(), ["SHOP.test"]);
    let other = req("http://evil.test/p", &[("host", "shop.test")]);
    assert!(hosts(&other, false).is_err());
    let unusable = req("http://shop.test:x:y/p", &[]);
    assert!(hosts(&unusable, false).is_err());
}

#[test]
fn a_trusted_peer_s_unusable_host_claim_is_refused() {
    // Skipped, it would reach the origin all the same (Express reads `shop.test` in it).
    for (name, v) in [
        ("x-forwarded-host", "shop.test:abc"),
        ("x-forwarded-host", "shop.test:123456"),
        ("x-forwarded-host", "a.test, shop.test:80:80"),
        ("x_forwarded_host", "shop.test/x"),
        ("forwarded", "for=1.2.3.4;host=\"shop.test:abc\""),
    ] {
        let r = req("/p", &[("host", "other.test"), (name, v)]);
        assert!(hosts(&r, true).is_err(), "{name}: {v}");
        assert!(hosts(&r, false).is_ok(), "not read from an untrusted peer");
    }
    let mut raw = req("/p", &[("host", "other.test")]);
    raw.insert_header(
        "x-forwarded-host",
        http::HeaderValue::from_bytes(b"shop.test\xff").unwrap(),
    )
    .unwrap();
    assert!(hosts(&raw, true).is_err(), "not UTF-8");
    // Empty items are nothing.
    let empty = req(
        "/p",
        &[("host", "other.test"), ("x-forwarded-host", "shop.test, ")],
    );
    assert_eq!(
        hosts(&empty, true).unwrap().as_slice(),
        ["other.test", "shop.test"]
    );
}

#[test]
fn a_request_naming_too_many_hosts_is_refused() {
    let r = req(
        "/p",
        &[
            ("host", "a.test"),
            ("x-forwarded-host", "b.test, c.test, d.test, e.test"),
        ],
    );
    assert!(hosts(&r, true).is_err());
    assert!(
        hosts(&r, false).is_ok(),
        "an untrusted peer's list is not read at all"
    );
}

#[test]
fn spoofable_headers_are_found_and_removed() {
    let mut r = req(
        "/p",
        &[
            ("host", "a"),
            ("X-Forwarded-Host", "b"),
            ("x-original-url", "/x"),
        ],
    );
    assert!(has_spoofable(&r));
    strip_spoofable(&mut r, false);
    assert!(!has_spoofable(&r));
    let mut trusted = req(
        "/p",
        &[
            ("x-forwarded-host", "b"),
            ("x-rewrite-url", "/x"),
            ("upgrade", "h2c"),
            ("http2-settings", "AAA"),
        ],
    );
    strip_spoofable(&mut trusted, true);
    assert!(trusted.headers.get("x-forwarded-host").is_some());
    assert!(trusted.headers.get("x-rewrite-url").is_none());
    assert!(trusted.headers.get("upgrade").is_none());
    assert!(trusted.headers.get("http2-settings").is_none());
    let mut ws = req("/p", &[("upgrade", "WebSocket")]);
    strip_spoofable(&mut ws, false);
    assert!(
        ws.headers.get("upgrade").is_some(),
        "WebSocket upgrades stay"
    );
    assert!(r.headers.get("host").is_some());
    // CGI-style names: `_` is read as `-`; gunicorn's `SCRIPT_NAME` is a path override.
    let mut cgi = req(
        "/p",
        &[
            ("SCRIPT_NAME", "/x"),
            ("script-name", "/x"),
            ("Path_Info", "/products"),
            ("X_Forwarded_Host", "b"),
            ("x_original_url", "/x"),
        ],
    );
    assert!(has_spoofable(&cgi));
    strip_spoofable(&mut cgi, false);
    assert!(!has_spoofable(&cgi), "{:?}", cgi.headers);
    assert_eq!(cgi.headers.len(), 0, "{:?}", cgi.headers);
    assert!(!has_spoofable(&req(
        "/p",
        &[("x_custom", "1"), ("x-hostx", "a")]
    )));
    assert!(!has_spoofable(&req(
        "/p",
        &[("host", "a"), ("cookie", "x=1")]
    )));
}

/// An escaped line break anywhere in the path is refused, in a room or not: a hop that decodes
/// the path writes it into its request to the origin (found by review: a second request, an
/// order, followed it there).
#[test]
fn an_escaped_line_break_in_the_path_is_refused() {
    for path in [
        "/public%20HTTP/1.1%0D%0AHost:%20a%0D%0A%0D%0APOST%20/orders",
        "/about%0a",
        "/x%0Dy",
        "/index.php/orders%0A",
    ] {
        assert!(no_line_break(path).is_err(), "{path}");
    }
    for path in ["/about", "/100%25/x", "/a%0b", "/%0", "/x%20y", "/%00a"] {
        assert_eq!(no_line_break(path), Ok(()), "{path}");
    }
}
