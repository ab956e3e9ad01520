//! A request path as the origins behind anteroom may read it.
//!
//! A room on `/products` is only worth something if no spelling of `/products/1` that an origin
//! serves as `/products/1` reaches it without waiting. Origins disagree on spelling: Tomcat and
//! Spring (the seed's own stack) strip `;params` from every segment and so read `..;` as `..`;
//! IIS and several frameworks read `\` (and `%5C`) as `/`, ignore trailing dots and spaces of
//! a segment and match without case; C-based servers stop at a NUL. [`Readings`] holds every
//! reading of a path that a common origin could make, each normalised like [`normalize_path`];
//! the router decides room membership on all of them (see [`super::Routing`]). What is
//! forwarded stays the path as sent, byte for byte.
//!
//! Cost: a clean path (no `%`, `;`, `\`, NUL, dot segments, upper case, `//`) has one
//! borrowed reading and allocates nothing; the rest is paid only by paths that need it.

use std::borrow::Cow;

/// Whether the prefix `prefix` covers `path` on a boundary: `/cart` covers `/cart`, `/cart/`
/// and `/cart/1`, and also `/cart.json` and `/cart;jsessionid=1` — Rails and Spring route a
/// format suffix to the same action, Tomcat reads `;params` as no part of the name — but not
/// `/cartoon`.
pub fn path_covers(prefix: &str, path: &str) -> bool {
    path.starts_with(prefix) && at_boundary(prefix, path.as_bytes())
}

/// [`path_covers`] without regard to ASCII case (for the case-folded readings).
pub fn path_covers_folded(prefix: &str, path: &str) -> bool {
    let (p, s) = (prefix.as_bytes(), path.as_bytes());
    s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p) && at_boundary(prefix, s)
}

fn at_boundary(prefix: &str, path: &[u8]) -> bool {
    prefix.ends_with('/')
        || path.len() == prefix.len()
        || matches!(path[prefix.len()], b'/' | b'.' | b';')
}

/// The path as the origin will most likely understand it: percent-encoded unreserved
/// characters decoded, `.` and `..` segments resolved, repeated slashes collapsed.
/// Clean paths (the common case) are returned borrowed.
pub fn normalize_path(path: &str) -> Cow<'_, str> {
    let needs =
        path.contains('%') || path.contains("//") || path.contains("/.") || !path.starts_with('/');
    if !needs {
        return Cow::Borrowed(path);
    }
    let decoded = decode_unreserved(path);
    let mut segs: Vec<&str> = Vec::new();
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    let mut out = String::with_capacity(decoded.len() + 1);
    for s in &segs {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() || (decoded.ends_with('/') && !segs.is_empty()) {
        out.push('/');
    }
    Cow::Owned(out)
}

/// Decodes `%XX` where XX encodes an unreserved character or `/` `.`; leaves the rest encoded
/// (so nothing that the origin would read differently is changed), with the hex digits in
/// upper case: `%d1` and `%D1` are one byte to every origin.
fn decode_unreserved(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(c) = hex_pair(b[i + 1], b[i + 2]) {
                if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'/') {
                    out.push(c);
                } else {
                    out.push(b'%');
                    out.push(b[i + 1].to_ascii_uppercase());
                    out.push(b[i + 2].to_ascii_uppercase());
                }
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn hex_pair(h: u8, l: u8) -> Option<u8> {
    let hex = |c: u8| (c as char).to_digit(16);
    Some((hex(h)? * 16 + hex(l)?) as u8)
}

/// Whether `s` at `i` is `%XX` for byte `c` (any case of the hex digits).
fn encoded_at(s: &[u8], i: usize, c: u8) -> bool {
    s.len() >= i + 3 && s[i] == b'%' && hex_pair(s[i + 1], s[i + 2]) == Some(c)
}

/// One way an origin may read a path, as a bit of [`Readings`]' transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Transform {
    /// A NUL (raw or `%00`) ends the path (C-based servers and filters).
    Nul = 1,
    /// `;…` is stripped from every segment, so `..;` is `..` (Tomcat, Spring, Jetty).
    Params = 2,
    /// `\` and `%5C` are `/`, and trailing dots and spaces of a segment are ignored (IIS, and
    /// frameworks that run on Windows or copy its rules).
    Windows = 4,
    /// A path that starts with `//` is read as a network-path reference: its first segment is
    /// a host, the path begins after it (Python's `urlsplit` on the request line, as Werkzeug
    /// before 2.2 and other WSGI servers did: `//x/orders` is `/orders`). Not applied when no
    /// path follows the host (`//orders`, the home page to such a server).
    Authority = 8,
}

const ALL: [Transform; 4] = [
    Transform::Nul,
    Transform::Params,
    Transform::Windows,
    Transform::Authority,
];

/// Which transforms could change this path at all; the others need not be tried.
fn applicable(raw: &str) -> u8 {
    let b = raw.as_bytes();
    let mut flags = 0u8;
    // Only with a path after the host: `//products` would read as `/` (the home page), which
    // no room's line is kept from by this spelling, and a strict room would refuse it.
    if b.starts_with(b"//") && b[2..].contains(&b'/') {
        flags |= Transform::Authority as u8;
    }
    for i in 0..b.len() {
        match b[i] {
            0 => flags |= Transform::Nul as u8,
            b';' => flags |= Transform::Params as u8,
            b'\\' => flags |= Transform::Windows as u8,
            b'.' | b' ' if i + 1 == b.len() || b[i + 1] == b'/' => {
                flags |= Transform::Windows as u8
            }
            b'%' => {
                if encoded_at(b, i, 0) {
                    flags |= Transform::Nul as u8;
                } else if encoded_at(b, i, b';') {
                    flags |= Transform::Params as u8;
                } else if encoded_at(b, i, b'\\')
                    || (encoded_at(b, i, b' ') || encoded_at(b, i, b'.'))
                        && (i + 3 == b.len() || b[i + 3] == b'/' || b[i + 3] == b'%')
                {
                    flags |= Transform::Windows as u8;
                }
            }
            _ => {}
        }
    }
    flags
}

/// Applies the transforms in `set` to the raw path (a leading `//host` first, then NUL, then
/// `\`, then `;params` per segment, then trailing dots and spaces), before the standard
/// normalisation.
fn apply(raw: &str, set: u8) -> String {
    let mut s: Vec<u8> = raw.as_bytes().to_vec();
    if set & Transform::Authority as u8 != 0 && s.starts_with(b"//") {
        // The host ends at the next `/`; without one the path is empty (read as `/`).
        let path = s[2..]
            .iter()
            .position(|&c| c == b'/')
            .map_or(s.len(), |i| i + 2);
        s.drain(..path);
    }
    if set & Transform::Nul as u8 != 0 {
        let end = (0..s.len())
            .find(|&i| s[i] == 0 || encoded_at(&s, i, 0))
            .unwrap_or(s.len());
        s.truncate(end);
    }
    if set & Transform::Windows as u8 != 0 {
        let mut out = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            if s[i] == b'\\' {
                out.push(b'/');
                i += 1;
            } else if encoded_at(&s, i, b'\\') {
                out.push(b'/');
                i += 3;
            } else {
                out.push(s[i]);
                i += 1;
            }
        }
        s = out;
    }
    if set & Transform::Params as u8 != 0 {
        let mut out = Vec::with_capacity(s.len());
        let mut skipping = false;
        let mut i = 0;
        while i < s.len() {
            if s[i] == b'/' {
                skipping = false;
            } else if s[i] == b';' || encoded_at(&s, i, b';') {
                skipping = true;
            }
            if !skipping {
                out.push(s[i]);
            }
            i += 1;
        }
        s = out;
    }
    let mut text =
        String::from_utf8(s).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    if set & Transform::Windows as u8 != 0 {
        text = text
            .split('/')
            .map(strip_windows_tail)
            .collect::<Vec<_>>()
            .join("/");
    }
    text
}

/// `products. ` and `products%20.` read as `products` on Windows; `.` and `..` stay.
fn strip_windows_tail(seg: &str) -> &str {
    let mut s = seg;
    loop {
        let before = s.len();
        s = s.trim_end_matches([' ', '.']);
        for enc in ["%20", "%2e", "%2E"] {
            if let Some(rest) = s.strip_suffix(enc) {
                s = rest;
            }
        }
        if s.len() == before {
            break;
        }
    }
    if s.is_empty() || s.bytes().all(|c| c == b'.') {
        seg
    } else {
        s
    }
}

/// One reading: a normalised path, and whether it was folded to lower case (then it is
/// compared with room prefixes without case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading<'a> {
    pub path: Cow<'a, str>,
    pub folded: bool,
}

impl Reading<'_> {
    /// Whether `prefix` covers this reading (without case when the reading is folded).
    pub fn covered_by(&self, prefix: &str) -> bool {
        if self.folded {
            path_covers_folded(prefix, &self.path)
        } else {
            path_covers(prefix, &self.path)
        }
    }

    /// Whether a configured prefix puts this reading into a line: a prefix written with
    /// capitals (`fold`, see [`has_capitals`]) is compared without case, since it is written
    /// for a case-insensitive origin, which serves `/orders` as `/Orders`; any other as
    /// [`Reading::covered_by`]. Rooms and consume routes both decide by this.
    pub fn held_by(&self, prefix: &str, fold: bool) -> bool {
        if fold {
            path_covers_folded(prefix, &self.path)
        } else {
            self.covered_by(prefix)
        }
    }
}

/// A configured prefix with capitals: matched without case ([`Reading::held_by`]).
pub fn has_capitals(prefix: &str) -> bool {
    prefix.bytes().any(|c| c.is_ascii_uppercase())
}

/// Every reading of one request path. The first is always the standard one
/// ([`normalize_path`] of the path as sent).
#[derive(Debug, Clone)]
pub struct Readings<'a> {
    /// The standard reading; kept apart so that a clean path allocates nothing.
    first: Reading<'a>,
    /// The other readings, when the path needs them.
    rest: Vec<Reading<'a>>,
}

impl<'a> Readings<'a> {
    pub fn of(raw: &'a str) -> Self {
        let standard = normalize_path(raw);
        let flags = applicable(raw);
        let has_upper = |p: &str| p.bytes().any(|c| c.is_ascii_uppercase());
        let first = Reading {
            path: standard,
            folded: false,
        };
        if flags == 0 && !has_upper(&first.path) {
            return Self {
                first,
                rest: Vec::new(),
            };
        }
        let mut out = Self {
            first,
            rest: Vec::new(),
        };
        let folded = out.first.path.to_ascii_lowercase();
        if folded != out.first.path {
            out.add(Cow::Owned(folded), true);
        }
        // Every combination of the transforms that apply: origins combine them (IIS reads
        // `\` and case; a Java app on Windows adds `;params`).
        for set in 1..=15u8 {
            if set & !flags != 0 {
                continue;
            }
            let p = normalize_path(&apply(raw, set)).into_owned();
            let folded = has_upper(&p).then(|| p.to_ascii_lowercase());
            out.add(Cow::Owned(p), false);
            if let Some(f) = folded {
                out.add(Cow::Owned(f), true);
            }
        }
        out
    }

    fn add(&mut self, path: Cow<'a, str>, folded: bool) {
        let r = Reading { path, folded };
        if r != self.first && !self.rest.contains(&r) {
            self.rest.push(r);
        }
    }

    pub fn standard(&self) -> &str {
        &self.first.path
    }

    pub fn iter(&self) -> impl Iterator<Item = &Reading<'a>> {
        std::iter::once(&self.first).chain(self.rest.iter())
    }

    /// Some reading falls under the configured `prefix` ([`Reading::held_by`]): what puts a
    /// request *into* a line (consume routes; rooms decide the same way with the flag kept).
    pub fn any_covered_by(&self, prefix: &str) -> bool {
        let fold = has_capitals(prefix);
        self.iter().any(|r| r.held_by(prefix, fold))
    }

    /// Every reading falls under `prefix`: the only way a rule may *exempt* a request from a
    /// line (bypass paths), or an odd spelling becomes a way around it.
    pub fn all_covered_by(&self, prefix: &str) -> bool {
        self.iter().all(|r| r.covered_by(prefix))
    }

    pub fn len(&self) -> usize {
        1 + self.rest.len()
    }

    /// Never: there is always the standard reading.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The transforms, for documentation and tests.
pub fn transforms() -> &'static [Transform] {
    &ALL
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(raw: &str) -> Vec<String> {
        Readings::of(raw)
            .iter()
            .map(|r| r.path.to_string())
            .collect()
    }

    #[test]
    fn prefixes_match_on_segment_boundaries() {
        assert!(path_covers("/cart", "/cart"));
        assert!(path_covers("/cart", "/cart/1"));
        assert!(!path_covers("/cart", "/cartoon"));
        assert!(path_covers("/", "/anything"));
        assert!(path_covers("/shop/", "/shop/x"));
        assert!(path_covers_folded("/cart", "/CART/1"));
        assert!(!path_covers_folded("/cart", "/CARTOON"));
        // Format suffixes (Rails, Spring) and ;params (Tomcat) end a name too.
        assert!(path_covers("/orders", "/orders.json"));
        assert!(path_covers("/orders", "/orders;jsessionid=1"));
        assert!(path_covers_folded("/orders", "/ORDERS.XML"));
    }

    #[test]
    fn normalisation_defeats_traversal_and_encoding() {
        assert_eq!(normalize_path("/products/1"), "/products/1");
        assert_eq!(normalize_path("/x/../orders"), "/orders");
        assert_eq!(normalize_path("/%6Frders"), "/orders");
        assert_eq!(normalize_path("//orders"), "/orders");
        assert_eq!(normalize_path("/./orders/"), "/orders/");
        assert_eq!(normalize_path("/../../"), "/");
        assert_eq!(normalize_path("/a%2"), "/a%2");
        assert_eq!(normalize_path("/a%20b"), "/a%20b");
        assert_eq!(normalize_path("/%d1%82"), "/%D1%82");
        assert_eq!(normalize_path("/.anteroom/status"), "/.anteroom/status");
        // Decoded once, as an origin decodes: found by fuzz/route.
        assert_eq!(normalize_path("%%3333"), "/%333");
    }

    #[test]
    fn a_clean_path_has_one_borrowed_reading() {
        let r = Readings::of("/products/1");
        assert_eq!(r.len(), 1);
        assert!(matches!(
            r.iter().next().map(|r| &r.path),
            Some(Cow::Borrowed(_))
        ));
    }

    #[test]
    fn each_origin_family_is_read() {
        // Tomcat / Spring: ;params per segment, ..; as ..
        assert!(paths("/products;jsessionid=1/2").contains(&"/products/2".to_string()));
        assert!(paths("/x/..;/products/1").contains(&"/products/1".to_string()));
        assert!(paths("/products%3Bx/1").contains(&"/products/1".to_string()));
        // IIS: backslashes, %5C, trailing dots and spaces
        assert!(paths("/products\\1").contains(&"/products/1".to_string()));
        assert!(paths("/x%5C..%5Cproducts").contains(&"/products".to_string()));
        assert!(paths("/products./1").contains(&"/products/1".to_string()));
        assert!(paths("/products%20/1").contains(&"/products/1".to_string()));
        // NUL ends the path
        assert!(paths("/products%00.css").contains(&"/products".to_string()));
        // An old WSGI server: `//host/path` is `/path`; without a path after the host, `/`
        assert!(paths("//x/orders/1").contains(&"/orders/1".to_string()));
        assert!(paths("//x;y/orders").contains(&"/orders".to_string()));
        assert_eq!(
            paths("//orders"),
            ["/orders"],
            "no path after the host: not read so"
        );
        assert_eq!(Readings::of("//x/orders").standard(), "/x/orders");
        // Case, also combined with another family
        let r = Readings::of("/PRODUCTS;x\\1");
        assert!(
            r.iter().any(|r| r.folded && r.path == "/products/1"),
            "{r:?}"
        );
        // The standard reading comes first and is the path as sent, normalised.
        assert_eq!(Readings::of("/a/../B;x").standard(), "/B;x");
    }

    #[test]
    fn exempting_needs_every_reading() {
        let r = Readings::of("/feed.xml;/../products");
        assert!(r.any_covered_by("/products"));
        // A prefix written with capitals holds every case of it, as a room's does.
        for p in ["/orders", "/ORDERS", "/Orders/1", "/oRdErS;x"] {
            assert!(Readings::of(p).any_covered_by("/Orders"), "{p}");
        }
        assert!(!Readings::of("/ordersx").any_covered_by("/Orders"));
        assert!(!Readings::of("/Orders").all_covered_by("/orders/1"));
        assert!(!r.all_covered_by("/feed.xml"));
        assert!(Readings::of("/feed.xml").all_covered_by("/feed.xml"));
    }

    #[test]
    fn dot_only_segments_keep_their_meaning() {
        assert_eq!(strip_windows_tail(".."), "..");
        assert_eq!(strip_windows_tail("."), ".");
        assert_eq!(strip_windows_tail("a. ."), "a");
        assert_eq!(strip_windows_tail("a%2e"), "a");
    }
}
