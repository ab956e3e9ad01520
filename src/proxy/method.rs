//! The method a request has to the origin: frameworks read it without case, through override
//! headers, `HEAD` as `GET`, and a POST as whatever its `_method` says. Consume routes and the
//! refusal of echoing methods decide on these readings.

use pingora::http::RequestHeader;

/// Headers through which frameworks let a request claim another method (Laravel, Symfony,
/// Express's method-override, ASP.NET): a consume route is matched on them too.
const METHOD_OVERRIDES: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Whether the header `name` is a method override ([`METHOD_OVERRIDES`], in any spelling).
fn is_override(name: &str) -> bool {
    METHOD_OVERRIDES
        .iter()
        .any(|o| crate::route::headers::named(name, o))
}

/// Whether the request is `method` as some origin reads it: without case (`post` is POST to
/// Symfony, Werkzeug, Django), or through a method-override header, any item of it (Express's
/// method-override takes the first of `PUT, GET`), its name also spelled with `_` for `-`
/// (`X_HTTP_Method_Override` is `HTTP_X_HTTP_METHOD_OVERRIDE` to Rack, PHP and other CGI-style
/// servers, as [`crate::route::headers::named`] reads names).
pub fn is_method(req: &RequestHeader, method: &http::Method) -> bool {
    let want = method.as_str();
    req.method.as_str().eq_ignore_ascii_case(want)
        || req.headers.iter().any(|(name, v)| {
            is_override(name.as_str())
                && v.as_bytes()
                    .split(|&c| c == b',')
                    .any(|m| m.trim_ascii().eq_ignore_ascii_case(want.as_bytes()))
        })
}

/// Whether a consume route for `method` holds the request: [`is_method`]; or `HEAD` for a
/// `GET` route (frameworks answer HEAD with the GET handler, which runs); or any `POST`,
/// which Rails, Laravel, Symfony and Express's method-override turn into the method named by
/// `_method` in its query or form body — a body anteroom does not read before forwarding.
pub fn may_be_method(req: &RequestHeader, method: &http::Method) -> bool {
    let m = req.method.as_str();
    is_method(req, method)
        || (method == http::Method::GET && m.eq_ignore_ascii_case("HEAD"))
        || m.eq_ignore_ascii_case("POST")
}

/// Methods an origin answers by echoing the request, our headers with it (`TRACE`, and IIS's
/// `TRACK`): refused where the origin gets the `origin-secret`.
pub fn echoes(req: &RequestHeader) -> bool {
    let track = http::Method::from_bytes(b"TRACK");
    is_method(req, &http::Method::TRACE) || track.is_ok_and(|m| is_method(req, &m))
}

/// Whether a body sent with the request's method is refused rather than forwarded. An origin
/// that does not read a body it gets reads it as the next request on that connection: a request
/// anteroom never judged (found by review: `GET /public` with a body that was `POST /orders`
/// reached the shop with no admission, over HTTP/1.1 and HTTP/2, and the next visitor on the
/// connection got that answer). Content has no meaning for `GET`, `HEAD`, `TRACE` (and IIS's
/// `TRACK`) and `CONNECT` (RFC 9110 §9.3; a client must not send it with `TRACE`; browsers
/// cannot send it with a `GET` or `HEAD`): such a request with one is refused, read without case
/// as origins read the method. Override headers do not count: they change the handler, not how
/// the server frames the request. Any other request with a body goes on an origin connection
/// that ends with its answer: a handler may answer a `POST` without reading it too (a 404, a
/// redirect: found by re-review), so no method is trusted to have its body read.
pub fn takes_no_body(req: &RequestHeader) -> bool {
    use http::Method;
    match &req.method {
        &Method::GET | &Method::HEAD => true,
        &Method::POST | &Method::PUT | &Method::PATCH | &Method::DELETE | &Method::OPTIONS => false,
        m => ["GET", "HEAD", "TRACE", "TRACK", "CONNECT"]
            .into_iter()
            .any(|name| m.as_str().eq_ignore_ascii_case(name)),
    }
}

/// Whether the request is a CORS preflight as a browser sends it: `OPTIONS` (in capitals, as
/// browsers write it) with `Origin` and `Access-Control-Request-Method`, no body, no method
/// override (which some origins would run as the method it names) and no `Upgrade` (found by
/// review: a WebSocket upgrade sent as a preflight reached the shop past the line, and a shop
/// that took it passed any request over it). Browsers send it without
/// cookies, so no admission can come with it: it never queues (no place is taken for it), and a
/// room's `{ preflight = true }` bypass rule lets it reach the shop.
pub fn is_preflight(req: &RequestHeader) -> bool {
    // The method first: every request of a room asks (the admitted path pays one comparison).
    if req.method != http::Method::OPTIONS {
        return false;
    }
    let h = &req.headers;
    let no_body = !h.contains_key(http::header::TRANSFER_ENCODING)
        && h.get_all(http::header::CONTENT_LENGTH)
            .iter()
            .all(|v| v.as_bytes() == b"0");
    h.contains_key(http::header::ORIGIN)
        && h.contains_key(http::header::ACCESS_CONTROL_REQUEST_METHOD)
        && no_body
        && !h.contains_key(http::header::UPGRADE)
        && !h.keys().any(|name| is_override(name.as_str()))
}

/// Whether the request only reads, as every framework reads it: `GET` or `HEAD` without case
/// and no method override (which could make it any method: an order). What an order's receipt
/// lets through (`super::receipt`).
pub fn is_read(req: &RequestHeader) -> bool {
    let m = req.method.as_str();
    (m.eq_ignore_ascii_case("GET") || m.eq_ignore_ascii_case("HEAD"))
        && !req.headers.keys().any(|name| is_override(name.as_str()))
}

/// Whether the request sends the shop something it would act on, as a form or a script does:
/// `POST`, `PUT`, `PATCH` or `DELETE`, without case (a page's read, a `HEAD`, an `OPTIONS` are
/// not, whatever override header they carry: found by re-review, a `GET` with one was told its
/// form was not sent). What a waiting page says was not passed on.
pub fn is_form(req: &RequestHeader) -> bool {
    ["POST", "PUT", "PATCH", "DELETE"]
        .iter()
        .any(|m| req.method.as_str().eq_ignore_ascii_case(m))
}

/// Whether a `Content-Length` is one number, as RFC 9112 §6.3 asks of a request: Pingora
/// passes a list of equal values (`79, 79`) on to the origin as it came, which one reads as the
/// length and another refuses (found by review r96b: the shop answered it 502).
pub fn one_length(req: &RequestHeader) -> bool {
    let mut values = req.headers.get_all(http::header::CONTENT_LENGTH).iter();
    match (values.next(), values.next()) {
        (Some(v), None) => !v.is_empty() && v.as_bytes().iter().all(u8::is_ascii_digit),
        (None, _) => true,
        (Some(_), Some(_)) => false,
    }
}

/// The answer to a request whose `Content-Length` is not one number ([`one_length`]).
pub const LENGTH_REFUSED: &str = "A request's Content-Length must be one number: send it once,     as the body's length in bytes.";

/// The answer to a request whose method takes no body ([`takes_no_body`]).
pub const BODY_REFUSED: &str = "A GET, HEAD or TRACE request cannot carry a body here: send the \
    request without one, or with the method its body is for (POST).";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::target::tests::req;

    #[test]
    fn a_content_length_is_one_number() {
        assert!(one_length(&req("/orders", &[])));
        assert!(one_length(&req("/orders", &[("Content-Length", "79")])));
        for bad in ["79, 79", "79,79", "+79", " 79", "", "0x4f", "79 "] {
            assert!(
                !one_length(&req("/orders", &[("Content-Length", bad)])),
                "{bad:?}"
            );
        }
        let two = req(
            "/orders",
            &[("Content-Length", "79"), ("Content-Length", "79")],
        );
        assert!(!one_length(&two), "two lines");
    }

    #[test]
    fn methods_are_read_without_case_and_through_overrides() {
        let post = http::Method::POST;
        assert!(is_method(&req("/orders", &[]), &http::Method::GET));
        let mut lower = RequestHeader::build("post", b"/orders", None).unwrap();
        assert!(is_method(&lower, &post));
        lower.set_method(http::Method::GET);
        assert!(!is_method(&lower, &post));
        let overridden = req("/orders", &[("X-HTTP-Method-Override", "post")]);
        assert!(is_method(&overridden, &post));
        let listed = req("/orders", &[("X-HTTP-Method-Override", "GET, post ")]);
        assert!(is_method(&listed, &post), "any item of a list");
        for name in [
            "X_HTTP_Method_Override",
            "x_http_method",
            "X-Method_Override",
        ] {
            assert!(
                is_method(&req("/orders", &[(name, "POST")]), &post),
                "{name}"
            );
        }
        assert!(!is_method(
            &req("/orders", &[("X-HTTP-Method-Overrides", "POST")]),
            &post
        ));
    }

    #[test]
    fn a_consume_route_holds_what_frameworks_make_of_a_request() {
        let build = |m: &str| RequestHeader::build(m, b"/x", None).unwrap();
        let (get, put) = (http::Method::GET, http::Method::PUT);
        assert!(
            may_be_method(&build("HEAD"), &get),
            "HEAD runs GET's handler"
        );
        assert!(!may_be_method(&build("HEAD"), &put));
        for m in ["POST", "post"] {
            assert!(may_be_method(&build(m), &put), "{m} with `_method=PUT`");
            assert!(may_be_method(&build(m), &get), "{m} with `_method=GET`");
        }
        assert!(!may_be_method(&build("GET"), &put));
        assert!(!may_be_method(&build("PATCH"), &get));
    }

    #[test]
    fn echoing_methods_in_every_spelling() {
        for m in ["TRACE", "trace", "Trace", "TRACK", "track"] {
            assert!(
                echoes(&RequestHeader::build(m, b"/x", None).unwrap()),
                "{m}"
            );
        }
        assert!(echoes(&req("/x", &[("x-http-method", "trace")])));
        assert!(!echoes(&req("/x", &[])));
        assert!(!echoes(&RequestHeader::build("POST", b"/x", None).unwrap()));
    }

    #[test]
    fn a_body_is_refused_on_methods_that_take_none() {
        let build = |m: &str| RequestHeader::build(m, b"/x", None).unwrap();
        for m in ["GET", "get", "HEAD", "Head", "TRACE", "track", "CONNECT"] {
            assert!(takes_no_body(&build(m)), "{m}");
        }
        for m in [
            "POST", "post", "PUT", "PATCH", "DELETE", "delete", "OPTIONS", "PROPFIND",
        ] {
            assert!(!takes_no_body(&build(m)), "{m}");
        }
        // An override names the handler; the server frames the request by its own method.
        let overridden = req("/x", &[("X-HTTP-Method-Override", "POST")]);
        assert!(takes_no_body(&overridden));
    }

    #[test]
    fn a_read_is_a_get_or_head_nothing_can_turn_into_another_method() {
        let with = |m: &str, headers: &[(&str, &str)]| {
            let mut r = req("/orders/1", headers);
            r.set_method(http::Method::from_bytes(m.as_bytes()).unwrap());
            r
        };
        for m in ["GET", "HEAD", "get", "Head"] {
            assert!(is_read(&with(m, &[])), "{m}");
        }
        for m in ["POST", "post", "PUT", "DELETE", "OPTIONS", "PATCH", "GETX"] {
            assert!(!is_read(&with(m, &[])), "{m}");
        }
        for o in [
            "X-HTTP-Method-Override",
            "x-http-method",
            "X_Method_Override",
        ] {
            assert!(!is_read(&with("GET", &[(o, "GET")])), "{o}");
        }
        assert!(is_read(&with("GET", &[("X-Other", "POST")])));
    }

    #[test]
    fn a_form_is_what_a_form_or_a_script_sends_to_be_acted_on() {
        let with = |m: &str, headers: &[(&str, &str)]| {
            let mut r = req("/orders/1", headers);
            r.set_method(http::Method::from_bytes(m.as_bytes()).unwrap());
            r
        };
        for m in ["POST", "post", "PUT", "Patch", "DELETE"] {
            assert!(is_form(&with(m, &[])), "{m}");
        }
        for m in ["GET", "HEAD", "OPTIONS", "get"] {
            assert!(!is_form(&with(m, &[])), "{m}");
        }
        assert!(!is_form(&with("GET", &[("X-HTTP-Method-Override", "GET")])));
    }

    #[test]
    fn a_preflight_is_an_options_request_a_browser_sends() {
        let cors = [
            ("Origin", "https://app.shop.example"),
            ("Access-Control-Request-Method", "POST"),
        ];
        let build = |m: &str, extra: &[(&str, &str)]| {
            let mut r = RequestHeader::build(m, b"/orders", None).unwrap();
            for (k, v) in cors.iter().chain(extra) {
                r.append_header(k.to_string(), *v).unwrap();
            }
            r
        };
        assert!(is_preflight(&build("OPTIONS", &[])));
        assert!(is_preflight(&build("OPTIONS", &[("Content-Length", "0")])));
        assert!(
            !is_preflight(&build("options", &[])),
            "not as browsers write it"
        );
        assert!(!is_preflight(&build("GET", &[])));
        assert!(!is_preflight(&build("OPTIONS", &[("Content-Length", "5")])));
        assert!(!is_preflight(&build(
            "OPTIONS",
            &[("Transfer-Encoding", "chunked")]
        )));
        for o in [
            "X-HTTP-Method-Override",
            "x_http_method",
            "X-Method-Override",
        ] {
            assert!(!is_preflight(&build("OPTIONS", &[(o, "GET")])), "{o}");
        }
        assert!(!is_preflight(&build(
            "OPTIONS",
            &[("Upgrade", "websocket")]
        )));
        let mut bare = RequestHeader::build("OPTIONS", b"/orders", None).unwrap();
        assert!(!is_preflight(&bare));
        bare.append_header("Origin", "https://x.example").unwrap();
        assert!(
            !is_preflight(&bare),
            "without Access-Control-Request-Method"
        );
    }
}
