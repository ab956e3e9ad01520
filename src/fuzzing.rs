//! Entry points for fuzzing the parsers that face the internet or the operator: the admission
//! cookie, route matching with path normalisation, and the config file. Each takes arbitrary
//! bytes and must never panic; `fuzz/` runs them under libFuzzer (`fuzz/run`), and
//! `tests/fuzz_properties.rs` runs them under proptest in every CI run.

use std::path::Path;

use crate::cookie::{self, CookieKey};
use crate::route::{
    self, HostPattern, OtherHosts, PathMatching, Policy, Readings, RoomRoutes, Router, Routing,
};

/// Cookie parsing and verification on arbitrary input: never panics, and accepts only values
/// this key signed.
pub fn cookie(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(key) = CookieKey::new(b"fuzz-key-fuzz-key-fuzz-key-fuzz-key!") else {
        return;
    };
    let keys = [key];
    if let Some(v) = cookie::verify(&keys, "sale", text, 1) {
        // Anything accepted must be what signing produces.
        let again = cookie::sign(&keys, "sale", v.vid, v.expires);
        assert_eq!(
            again.as_deref(),
            Some(text),
            "accepted a value we did not sign"
        );
    }
    let _ = cookie::find([data], "anteroom_sale");
    let _ = cookie::without_ours(data);
}

/// Path normalisation and routing on arbitrary input: never panics, the normalised path has
/// no dot segments or empty segments left to walk around a room with (it is not idempotent, on
/// purpose: `%%33` decodes once to `%3`, as an origin decodes it once), and — the attacker's
/// goal stated as a property — no spelling that some origin reads as a protected path or host
/// is routed outside its room.
pub fn route(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (host, path) = text.split_once('\n').unwrap_or(("shop.test", text));
    let norm = route::normalize_path(path);
    assert!(norm.starts_with('/'), "{path:?} -> {norm:?}");
    assert!(!norm.contains("//"), "{path:?} -> {norm:?}");
    assert!(
        norm.split('/').all(|s| s != "." && s != ".."),
        "{path:?} -> {norm:?}"
    );
    let _ = HostPattern::parse(host);
    route_property(host, path);
}

/// The rooms of the property: `/products` on every host (upstream 0, the default), `/orders`
/// on `shop.test` only (upstream 0 too, so other hosts must not reach it); and on every host
/// `/주문` and `/q:r`, written as `check` takes them (`/%EC%A3%BC%EB%AC%B8`, `/q:r`: found by
/// review r89a, the raw UTF-8 bytes and `/q%3Ar` missed such rooms).
fn property_router(matching: PathMatching) -> Router {
    let any = [HostPattern::Any];
    let products = ["/products".to_string()];
    let shop = [HostPattern::Exact("shop.test".to_string())];
    let orders = ["/orders".to_string()];
    let korean = [KOREAN_PREFIX.to_string()];
    let colon = ["/q:r".to_string()];
    Router::new(
        [
            RoomRoutes {
                hosts: &any,
                paths: &products,
                upstream: 0,
            },
            RoomRoutes {
                hosts: &shop,
                paths: &orders,
                upstream: 0,
            },
            RoomRoutes {
                hosts: &any,
                paths: &korean,
                upstream: 0,
            },
            RoomRoutes {
                hosts: &any,
                paths: &colon,
                upstream: 0,
            },
        ],
        Policy {
            matching,
            other_hosts: OtherHosts::Refuse,
            default_upstream: 0,
        },
    )
}

/// `/주문` ("order") as `check` takes a room prefix: escaped, upper-case hex.
const KOREAN_PREFIX: &str = "/%EC%A3%BC%EB%AC%B8";

/// How origins read a path, written independently of the router's own readings: Tomcat
/// (`;params` stripped per segment), IIS (`\` as `/`, trailing dots and spaces dropped, no
/// case, ASP.NET's cookieless values dropped), a C server (NUL ends it), Spring with `trimTokens` (a segment's ends up to U+0020
/// trimmed), an old WSGI server (`//host/path`), each after decoding
/// unreserved characters once and resolving dot segments; and origins that route the path
/// as sent (dot segments kept), also behind a front controller (`/index.php/path`,
/// `/app.fcgi/path`). Each also behind a hop that decoded the path once before handing it on
/// (nginx's `$uri`: every `%XX` decoded, dot segments resolved; a rewrite that decodes its
/// capture: not resolved).
fn origin_readings(path: &str) -> Vec<String> {
    let mut out = readings_at_the_origin(path);
    // IIS as the hop: its `%u0025` is a `%` to the app behind, which decodes what follows.
    let lower = path.to_ascii_lowercase();
    if lower.contains("%u0025") {
        let mut hop = String::new();
        let mut rest = path;
        while let Some(at) = rest.to_ascii_lowercase().find("%u0025") {
            hop.push_str(&rest[..at]);
            hop.push('%');
            rest = &rest[at + 6..];
        }
        hop.push_str(rest);
        out.extend(readings_at_the_origin(&hop));
    }
    // A WSGI server's `PATH_INFO` (Django, Flask, gunicorn): every `%XX` decoded, UTF-8,
    // raw or escaped alike; what a NUL, `?` or `#` it decoded ends is not routed.
    let wsgi = hop_decoded(path);
    out.push(model_resolve(
        wsgi.split(['?', '#', '\0']).next().unwrap_or(""),
    ));
    if path.contains('%') {
        let decoded = hop_decoded(path);
        let resolved = model_resolve(&decoded);
        for hop in [decoded.clone(), resolved] {
            // A decoded `?`, `#` or NUL ends the path the app routes.
            let hop = hop.split(['?', '#', '\0']).next().unwrap_or("");
            if hop.is_ascii() && hop.starts_with('/') {
                out.extend(readings_at_the_origin(hop));
            }
        }
    }
    out
}

/// Dot segments resolved and empty ones dropped, as the origins of the model resolve them
/// (written apart from the router's own).
fn model_resolve(s: &str) -> String {
    let mut segs: Vec<&str> = Vec::new();
    for seg in s.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            x => segs.push(x),
        }
    }
    format!("/{}", segs.join("/"))
}

/// Decoded bytes as the model writes them: past ASCII, escaped in upper-case hex (an origin
/// routes bytes; a room on `/주문` is `/%EC%A3%BC%EB%AC%B8` here).
fn model_bytes(b: &[u8]) -> String {
    b.iter()
        .map(|&c| {
            if c.is_ascii() {
                (c as char).to_string()
            } else {
                format!("%{c:02X}")
            }
        })
        .collect()
}

/// Every `%XX` of `path` decoded, as a hop decodes it before handing it on.
fn hop_decoded(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match path
            .get(i + 1..i + 3)
            .filter(|h| b[i] == b'%' && !h.starts_with('+'))
        {
            Some(h) if u8::from_str_radix(h, 16).is_ok() => {
                out.extend(u8::from_str_radix(h, 16));
                i += 3;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    model_bytes(&out)
}

/// [`origin_readings`] of the path as the origin is handed it.
fn readings_at_the_origin(path: &str) -> Vec<String> {
    // Every `%XX` decoded (as http.sys hands ASP.NET the path).
    let decode_all = |s: &str| -> String {
        let b = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let byte = (b[i] == b'%')
                .then(|| s.get(i + 1..i + 3))
                .flatten()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .filter(|_| !s[i + 1..i + 3].starts_with('+'));
            match byte {
                Some(v) => {
                    out.push(v);
                    i += 3;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        }
        model_bytes(&out)
    };
    let decode = |s: &str| -> String {
        let mut out = String::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' && i + 2 < b.len() {
                if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    if v.is_ascii_alphanumeric() || b"-._~/\\;".contains(&v) || v <= b' ' {
                        out.push(v as char);
                        i += 3;
                        continue;
                    }
                }
            }
            // A `%` that starts no escape is the character: kept apart from an escape that
            // decoding the next one makes (`%%45C` is `%EC` as text, not the byte).
            if b[i] == b'%'
                && !b
                    .get(i + 1..i + 3)
                    .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
            {
                out.push_str("%25");
                i += 1;
                continue;
            }
            out.push(b[i] as char);
            i += 1;
        }
        out
    };
    let resolve = model_resolve;
    if !path.is_ascii() {
        return Vec::new();
    }
    let d = decode(path);
    let tomcat: String = d
        .split('/')
        .map(|seg| seg.split(';').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("/");
    // IIS also decodes `%uXXXX` (http.sys), in the same pass as `%XX`: what it names is not
    // decoded again.
    let percent_u = |s: &str| -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(at) = rest.find("%u").into_iter().chain(rest.find("%U")).min() {
            out.push_str(&rest[..at]);
            let hex = rest.get(at + 2..at + 6).unwrap_or("");
            match u32::from_str_radix(hex, 16)
                .ok()
                .filter(|_| hex.len() == 4 && !hex.starts_with('+'))
                .and_then(char::from_u32)
            {
                Some(c) if c.is_ascii_alphanumeric() || "-._~/\\".contains(c) => out.push(c),
                Some(c) => {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("%{b:02X}"));
                    }
                }
                None => {
                    out.push_str(&rest[at..at + 2]);
                    rest = &rest[at + 2..];
                    continue;
                }
            }
            rest = &rest[at + 6..];
        }
        out.push_str(rest);
        out
    };
    // ASP.NET drops a cookieless value's segment (`(S(…))`, `(A(…)F(…))`) wherever it is.
    let cookieless = |seg: &str| -> bool {
        let full = decode_all(seg);
        let Some(inner) = full.strip_prefix('(').and_then(|x| x.strip_suffix(')')) else {
            return false;
        };
        let parts: Vec<&str> = inner.split(')').collect();
        parts.len() > 1
            && parts.last() == Some(&"")
            && parts[..parts.len() - 1].iter().all(|p| {
                let mut c = p.chars();
                matches!((c.next(), c.next()), (Some(l), Some('(')) if l.is_ascii_alphabetic())
                    && !c.as_str().contains('/')
            })
    };
    let iis: String = decode(&percent_u(path))
        .replace('\\', "/")
        .split('/')
        .map(|seg| {
            let t = seg.trim_end_matches(['.', ' ']);
            if t.is_empty() {
                seg
            } else {
                t
            }
        })
        .filter(|seg| !cookieless(seg))
        .collect::<Vec<_>>()
        .join("/")
        .to_ascii_lowercase();
    let c = d.split('\0').next().unwrap_or("").to_string();
    // Spring with trimTokens: `;params` stripped, then Java's `String.trim` of each segment.
    let spring: String = tomcat
        .split('/')
        .map(|seg| seg.trim_matches(|ch: char| ch <= ' '))
        .collect::<Vec<_>>()
        .join("/");
    // An old WSGI server's `urlsplit` of the request line: `//host/path` has the path `/path`
    // (before any decoding).
    let wsgi = match path.strip_prefix("//") {
        Some(after) => after
            .find('/')
            .map_or("/".to_string(), |i| decode(&after[i..])),
        None => d.clone(),
    };
    // Werkzeug, Express, Symfony: the path routed as sent, dot segments not resolved.
    let literal = |s: &str| -> String {
        let segs: Vec<&str> = s.split('/').filter(|x| !x.is_empty()).collect();
        format!("/{}", segs.join("/"))
    };
    let mut out = vec![
        resolve(&tomcat),
        resolve(&iis),
        // A Java app behind IIS (`;params` after IIS's decoding), and a C filter there (NUL).
        resolve(
            &iis.split('/')
                .map(|seg| seg.split(';').next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("/"),
        ),
        resolve(iis.split('\0').next().unwrap_or("")),
        resolve(&c),
        resolve(&spring),
        resolve(&wsgi),
        literal(&d),
    ];
    // Spring with trimTokens behind IIS: IIS's decoding, `;params` stripped, segments trimmed.
    out.push(resolve(
        &iis.split('/')
            .map(|seg| {
                seg.split(';')
                    .next()
                    .unwrap_or("")
                    .trim_matches(|ch: char| ch <= ' ')
            })
            .collect::<Vec<_>>()
            .join("/"),
    ));
    // A front controller (Symfony, Laravel, Apache's PATH_INFO, Flask behind FastCGI, ASP.NET):
    // what follows a segment that names a script, resolved or as sent; also behind IIS. Any
    // of the first three such segments (a directory may carry a script's name) and the last
    // (nginx's greedy `fastcgi_split_path_info`).
    const SCRIPTS: [&str; 17] = [
        "php", "php3", "php4", "php5", "php7", "php8", "phtml", "cgi", "fcgi", "wsgi", "asp",
        "aspx", "ashx", "asmx", "dll", "jsp", "cfm",
    ];
    let names_script = |seg: &str| {
        seg.rsplit_once('.')
            .is_some_and(|(_, ext)| SCRIPTS.iter().any(|e| ext.eq_ignore_ascii_case(e)))
    };
    // Next.js: `/_next/data/<build>/<page>.json` runs `<page>`'s server-side data.
    let resolved = resolve(&d);
    if let Some(rest) = resolved.strip_prefix("/_next/data/") {
        if let Some(page) = rest
            .split_once('/')
            .and_then(|(_, p)| p.strip_suffix(".json"))
        {
            out.push(if page == "index" {
                "/".to_string()
            } else {
                format!("/{page}")
            });
        }
    }
    for whole in [d.as_str(), iis.as_str()] {
        let segs: Vec<&str> = whole.split('/').collect();
        let all: Vec<usize> = (0..segs.len().saturating_sub(1))
            .filter(|&i| names_script(segs[i]))
            .collect();
        let scripts = all.iter().take(3).chain(all.last()).copied();
        for i in scripts {
            if i + 1 < segs.len() {
                let info = format!("/{}", segs[i + 1..].join("/"));
                out.push(resolve(&info));
                out.push(literal(&info));
                // nginx's split ends with PCRE's `$`, which matches before a final newline.
                if let Some(cut) = info.strip_suffix('\n') {
                    out.push(resolve(cut));
                    out.push(literal(cut));
                }
            }
        }
    }
    out
}

/// The property: if any origin reading of (host, path) is inside `/products`, or inside
/// `/orders` for a host that reads as `shop.test`, the router puts the request in that room
/// or refuses it — never outside. Checked in both matching modes.
pub fn route_property(host: &str, path: &str) {
    let readings = Readings::of(path);
    let hosts: Vec<&str> = route::normalize_host(host).into_iter().collect();
    for matching in [PathMatching::Strict, PathMatching::Lenient] {
        let routing = property_router(matching).decide(&hosts, &readings);
        for o in origin_readings(path) {
            held_as_origins_read(&routing, &o, &format!("{host:?} {path:?} ({matching:?})"));
        }
    }
}

/// An origin reading `o` inside `/products` (any host) or `/orders` (a single-site origin
/// serves it whatever the host says) must be routed into that room, or refused.
fn held_as_origins_read(routing: &Routing, o: &str, what: &str) {
    let inside = |p: &str, prefix: &str| p == prefix || p.starts_with(&format!("{prefix}/"));
    let want = if inside(o, "/products") {
        Some(0)
    } else if inside(o, "/orders") {
        Some(1)
    } else if inside(o, KOREAN_PREFIX) {
        Some(2)
    } else if inside(o, "/q:r") {
        Some(3)
    } else {
        None
    };
    if let Some(room) = want {
        assert!(
            matches!(routing, Routing::Room(r) if *r == room)
                || matches!(routing, Routing::Refuse(_) | Routing::Reserved(_)),
            "{what}: an origin reads {o:?} but it was routed {routing:?}"
        );
    }
}

/// The same property for the whole request target, routed as the proxy routes it
/// (`proxy::target`): whatever the target's form, where a lenient origin (Werkzeug, gunicorn,
/// Go's `net/http`) finds a protected path in it, the request is in that room or refused.
pub fn route_target_property(host: &str, target: &str) {
    let Ok(mut req) = pingora::http::RequestHeader::build("GET", target.as_bytes(), None) else {
        return;
    };
    if req.insert_header("host", host).is_err() {
        return;
    }
    let Some(path) = lenient_path(target) else {
        return;
    };
    let mut read = origin_readings(&path);
    // CodeIgniter 4 (its `parseRequestURI`), at the site's root and in `/a`: the path's
    // segments are dropped while they equal its `SCRIPT_NAME`'s; when nothing is left and the
    // query starts with `/`, the query up to a second `?` is the route, under the app's base.
    let query = target.split('#').next().unwrap_or("").split_once('?');
    if let Some((_, q)) = query.filter(|(_, q)| q.starts_with('/')) {
        for (script, base) in [("/index.php", ""), ("/a/index.php", "/a")] {
            let mut segs = path.split('/').peekable();
            for s in script.split('/') {
                if segs.peek() != Some(&s) {
                    break;
                }
                segs.next();
            }
            if segs
                .collect::<Vec<_>>()
                .join("/")
                .trim_matches('/')
                .is_empty()
            {
                let route = q.split('?').next().unwrap_or("");
                read.extend(origin_readings(&format!("{base}{route}")));
            }
        }
    }
    for matching in [PathMatching::Strict, PathMatching::Lenient] {
        let router = property_router(matching);
        let routing = crate::proxy::target::target(&router, &req, false).routing;
        for o in &read {
            held_as_origins_read(&routing, o, &format!("{host:?} {target:?} ({matching:?})"));
        }
    }
}

/// Where a lenient origin finds the path in a request target, written independently of
/// Pingora's classifier: after an RFC 3986 scheme and `:` (and the authority, after `//`),
/// or the whole target; anchored at `/`; without query and fragment.
fn lenient_path(target: &str) -> Option<String> {
    let scheme_ok = |s: &str| {
        let mut b = s.bytes();
        b.next().is_some_and(|c| c.is_ascii_alphabetic())
            && b.all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c))
    };
    let after_scheme = match target.split_once(':') {
        Some((scheme, rest)) if !target.starts_with('/') && scheme_ok(scheme) => Some(rest),
        _ => None,
    };
    // An authority only after a scheme: an origin-form `//x/y` is a path to these servers.
    let path = match after_scheme {
        Some(rest) => match rest.strip_prefix("//") {
            Some(after) => &after[after.find(['/', '?', '#'])?..],
            None => rest,
        },
        None => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    Some(if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    })
}

/// Config parsing on arbitrary input: never panics; every error names a position in the file.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = crate::config::parse(text, "fuzz.toml", Path::new("/nonexistent")) {
        for e in errors.0 {
            assert!(e.line >= 1 && e.col >= 1, "{e}");
        }
    }
}
