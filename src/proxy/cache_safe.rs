//! A response that carries one of our cookies must never be stored by a shared cache (a CDN,
//! a corporate proxy): a cached admission or visitor id would be handed to everyone the cache
//! serves, and with it one visitor's place or admission.
//!
//! - The origin's `Cache-Control` is made `private` unless it already says `private` (without a
//!   field list) or `no-store`: `public` and `s-maxage` go, what the browser may do with it
//!   (`max-age`, `no-cache`, ...) stays. No `Cache-Control` at all gets `private` (a shared
//!   cache may store such a response heuristically).
//! - The fields by which an origin speaks to a CDN or caching proxy alone (`CDN-Cache-Control`,
//!   RFC 9213, and the vendors' `Surrogate-Control`, `Cloudflare-CDN-Cache-Control`,
//!   `Edge-Control`, nginx's `X-Accel-Expires`) take precedence over `Cache-Control` there, so
//!   they are removed from such a response.
//! - A `304` never carries our cookie (a cache would merge it into the response it stored). So
//!   that the visitor still gets it, a `GET`/`HEAD` that will get one of our cookies goes to the
//!   origin without `If-None-Match`/`If-Modified-Since`, and the origin answers in full; an
//!   origin that answers `304` anyway gets our cookies dropped from that answer (a renewal comes
//!   again on the next request).
//!
//! - Any answer to a request a room guards is kept out of shared caches the same way (the
//!   first two points), cookie or not, a `304` too: a shared cache in front of anteroom (a CDN)
//!   would serve a stored shop page to visitors who never passed the line — not only those
//!   waiting now, but also once a room switched off is switched on again (found by review: an
//!   admitted visitor's `public, max-age=600` product page was a cache hit for a newcomer).
//!   Not what a bypass rule lets past (open to all anyway), and a `304` without
//!   `Cache-Control` gets none (it would drop the browser's stored `max-age`).
//! - And such a request is asked in full, cookie or not: a CDN that stored a page before a room
//!   guarded its path revalidates the stored copy on an admitted visitor's request, and the
//!   origin's `304` made it fresh again for everyone — a `304`'s headers do not make a stored
//!   copy private (found by review: behind nginx `proxy_cache`, newcomers got the shop's page
//!   from the cache while direct ones waited). Admitted browsers get whole answers, not `304`s.
//!
//! Responses outside every room without our cookies are not touched.

use pingora::http::{RequestHeader, ResponseHeader};

/// Fields through which an origin tells CDNs and caching proxies alone how long to keep a
/// response (RFC 9213, Fastly/Varnish, Cloudflare, Akamai, nginx `proxy_cache`).
const CDN_FIELDS: [&str; 5] = [
    "cdn-cache-control",
    "surrogate-control",
    "cloudflare-cdn-cache-control",
    "edge-control",
    "x-accel-expires",
];

/// The request asks the origin for a `304` if it has not changed.
const CONDITIONALS: [http::header::HeaderName; 2] =
    [http::header::IF_NONE_MATCH, http::header::IF_MODIFIED_SINCE];

/// What a response that is to carry our cookies gets as `Cache-Control`: `None` when the
/// origin's is already safe from shared caches. `values` are the origin's `Cache-Control`
/// lines.
pub fn private_cache_control<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut kept: Vec<&str> = Vec::new();
    for directive in values.into_iter().flat_map(|v| v.split(',')) {
        let d = directive.trim();
        if d.is_empty() {
            continue;
        }
        let name = d.split('=').next().unwrap_or("").trim();
        let unqualified = !d.contains('=');
        if (name.eq_ignore_ascii_case("private") && unqualified)
            || name.eq_ignore_ascii_case("no-store")
        {
            return None;
        }
        if ["public", "s-maxage", "private", "proxy-revalidate"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n))
        {
            continue;
        }
        kept.push(d);
    }
    kept.push("private");
    Some(kept.join(", "))
}

/// Before the request goes to the origin: a `GET` or `HEAD` that will get our cookie, or whose
/// answer a room guards (`in_full`), asks for the whole response, not a `304`.
pub fn ask_in_full(req: &mut RequestHeader, in_full: bool) {
    if !in_full {
        return;
    }
    // One look at the names first: a removal that finds nothing still hashes and probes both
    // of Pingora's header maps, twice a request.
    if (req.method == http::Method::GET || req.method == http::Method::HEAD)
        && req.headers.keys().any(|k| CONDITIONALS.contains(k))
    {
        for h in &CONDITIONALS {
            while req.remove_header(h).is_some() {}
        }
    }
}

/// On the origin's answer, before our cookies are added to it: `false` when they must not be
/// (a `304`); otherwise the answer is made safe from shared caches.
pub fn prepare(resp: &mut ResponseHeader) -> pingora::Result<bool> {
    if resp.status == http::StatusCode::NOT_MODIFIED {
        return Ok(false);
    }
    keep_private(resp)?;
    Ok(true)
}

/// Makes an answer safe from shared caches: `Cache-Control` private where it was not, the
/// CDN-only fields removed.
///
/// It runs on every answer a room guards: one pass over the header names finds what is there,
/// and nothing is parsed, removed or allocated that is not needed (the common answer, without
/// `Cache-Control` or a CDN field, gets a static `private`).
pub fn keep_private(resp: &mut ResponseHeader) -> pingora::Result<()> {
    let (mut cache_control, mut cdn) = (false, false);
    for name in resp.headers.keys() {
        if *name == http::header::CACHE_CONTROL {
            cache_control = true;
        } else if CDN_FIELDS.contains(&name.as_str()) {
            cdn = true;
        }
    }
    if !cache_control {
        // A 304 without it leaves the stored copy's caching as it was (a shared cache holds
        // none: the answers it revalidates were private); `private` would drop its max-age.
        if resp.status == http::StatusCode::NOT_MODIFIED {
            return remove_cdn_fields(resp, cdn);
        }
        resp.insert_header(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("private"),
        )?;
    } else {
        let values = resp
            .headers
            .get_all(http::header::CACHE_CONTROL)
            .iter()
            .map(|v| v.to_str().unwrap_or("no-transform"));
        if let Some(cc) = private_cache_control(values) {
            resp.insert_header(http::header::CACHE_CONTROL, cc)?;
        }
    }
    remove_cdn_fields(resp, cdn)
}

fn remove_cdn_fields(resp: &mut ResponseHeader, any: bool) -> pingora::Result<()> {
    if any {
        for f in CDN_FIELDS {
            while resp.remove_header(f).is_some() {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward version `keep_private` is a faster rewrite of.
    fn keep_private_plainly(resp: &mut ResponseHeader) {
        let values = resp
            .headers
            .get_all(http::header::CACHE_CONTROL)
            .iter()
            .map(|v| v.to_str().unwrap_or("no-transform"));
        if let Some(cc) = private_cache_control(values) {
            resp.insert_header(http::header::CACHE_CONTROL, cc).unwrap();
        }
        for f in CDN_FIELDS {
            while resp.remove_header(f).is_some() {}
        }
    }

    #[test]
    fn a_304_without_cache_control_gets_none() {
        let mut r = ResponseHeader::build(304, None).unwrap();
        r.append_header("cdn-cache-control", "max-age=60").unwrap();
        keep_private(&mut r).unwrap();
        assert!(r.headers.get(http::header::CACHE_CONTROL).is_none());
        assert!(r.headers.get("cdn-cache-control").is_none());
        let mut r = ResponseHeader::build(304, None).unwrap();
        r.append_header(http::header::CACHE_CONTROL, "public, max-age=60")
            .unwrap();
        keep_private(&mut r).unwrap();
        assert_eq!(
            r.headers.get(http::header::CACHE_CONTROL).unwrap(),
            "max-age=60, private"
        );
    }

    #[test]
    fn keeping_private_in_one_pass_does_what_the_plain_version_does() {
        let caching: [&[&str]; 5] = [
            &[],
            &["public, max-age=600"],
            &["private"],
            &["no-store"],
            &["s-maxage=60", "max-age=5"],
        ];
        let extra: [&[(&str, &str)]; 4] = [
            &[],
            &[("CDN-Cache-Control", "max-age=600")],
            &[
                ("surrogate-control", "max-age=60"),
                ("x-accel-expires", "60"),
            ],
            &[("content-type", "text/html"), ("etag", "\"v1\"")],
        ];
        for cc in caching {
            for fields in extra {
                let mut fast = ResponseHeader::build(200, None).unwrap();
                for v in cc {
                    fast.append_header(http::header::CACHE_CONTROL, *v).unwrap();
                }
                for (k, v) in fields {
                    fast.append_header(k.to_string(), *v).unwrap();
                }
                let mut plain = fast.clone();
                keep_private(&mut fast).unwrap();
                keep_private_plainly(&mut plain);
                let all = |r: &ResponseHeader| {
                    let mut v: Vec<(String, String)> = r
                        .headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
                        .collect();
                    v.sort();
                    v
                };
                assert_eq!(all(&fast), all(&plain), "{cc:?} {fields:?}");
            }
        }
    }

    #[test]
    fn cacheable_answers_are_made_private_and_safe_ones_are_left() {
        let cases: [(&[&str], Option<&str>); 11] = [
            (&[], Some("private")),
            (&["public, max-age=600"], Some("max-age=600, private")),
            (&["s-maxage=600"], Some("private")),
            (
                &["Public", "S-MaxAge=60, max-age=5"],
                Some("max-age=5, private"),
            ),
            (&["no-cache"], Some("no-cache, private")),
            (
                &["max-age=60, proxy-revalidate"],
                Some("max-age=60, private"),
            ),
            // A field list lets a shared cache store the rest: not enough.
            (
                &["private=\"set-cookie\", max-age=60"],
                Some("max-age=60, private"),
            ),
            (&["private"], None),
            (&["max-age=60, PRIVATE"], None),
            (&["no-store"], None),
            (&["public", "no-store"], None),
        ];
        for (values, want) in cases {
            assert_eq!(
                private_cache_control(values.iter().copied()).as_deref(),
                want,
                "{values:?}"
            );
        }
    }

    #[test]
    fn a_304_never_carries_our_cookie_and_cdn_fields_go() {
        let mut not_modified = ResponseHeader::build(304, None).unwrap();
        assert!(!prepare(&mut not_modified).unwrap());
        let mut ok = ResponseHeader::build(200, None).unwrap();
        ok.insert_header("cache-control", "public, max-age=60")
            .unwrap();
        ok.insert_header("CDN-Cache-Control", "max-age=600")
            .unwrap();
        ok.insert_header("surrogate-control", "max-age=600")
            .unwrap();
        assert!(prepare(&mut ok).unwrap());
        assert_eq!(ok.headers["cache-control"], "max-age=60, private");
        assert!(ok.headers.get("cdn-cache-control").is_none());
        assert!(ok.headers.get("surrogate-control").is_none());
    }

    #[test]
    fn only_a_get_or_head_that_gets_our_cookie_loses_its_conditions() {
        let req = |m: &str| {
            let mut r = RequestHeader::build(m, b"/p", None).unwrap();
            r.insert_header("if-none-match", "\"v1\"").unwrap();
            r.insert_header("if-modified-since", "Wed, 02 Dec 2026 00:00:00 GMT")
                .unwrap();
            r.insert_header("if-match", "\"v1\"").unwrap();
            r
        };
        let mut get = req("GET");
        ask_in_full(&mut get, true);
        assert!(get.headers.get("if-none-match").is_none());
        assert!(get.headers.get("if-modified-since").is_none());
        assert!(get.headers.get("if-match").is_some(), "not a 304 condition");
        let mut kept = req("GET");
        ask_in_full(&mut kept, false);
        assert!(kept.headers.get("if-none-match").is_some());
        let mut put = req("PUT");
        ask_in_full(&mut put, true);
        assert!(
            put.headers.get("if-none-match").is_some(),
            "a PUT's conditions are its own"
        );
    }
}
