//! Which room, if any, a request belongs to: by host and path prefix.
//!
//! Matching runs on every request, so the common case (a clean path, a handful of rooms)
//! allocates nothing. Paths are matched in their normalised form: `/x/../orders` and
//! `/%6Frders` reach the origin as `/orders`, so they must meet the same room.

use std::borrow::Cow;

/// A `hosts` entry of a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `*`: every host.
    Any,
    /// `shop.example.com`, compared without case.
    Exact(String),
    /// `*.example.com`: any subdomain (stored as `.example.com`).
    Suffix(String),
}

impl HostPattern {
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        let valid = |h: &str| {
            !h.is_empty()
                && h.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
        };
        if s == "*" {
            Some(Self::Any)
        } else if let Some(rest) = s.strip_prefix("*.") {
            valid(rest).then(|| Self::Suffix(format!(".{rest}")))
        } else {
            valid(&s).then_some(Self::Exact(s))
        }
    }

    /// `host` is the request host without port.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Exact(h) => host.eq_ignore_ascii_case(h),
            Self::Suffix(sfx) => {
                host.len() > sfx.len()
                    && host.is_char_boundary(host.len() - sfx.len())
                    && host[host.len() - sfx.len()..].eq_ignore_ascii_case(sfx)
            }
        }
    }

    /// Whether some host could match both patterns.
    pub fn overlaps(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Any, _) | (_, Self::Any) => true,
            (Self::Exact(a), Self::Exact(b)) => a == b,
            (Self::Exact(h), Self::Suffix(_)) => other.matches(h),
            (Self::Suffix(_), Self::Exact(h)) => self.matches(h),
            (Self::Suffix(a), Self::Suffix(b)) => {
                a.ends_with(b.as_str()) || b.ends_with(a.as_str())
            }
        }
    }

    fn specificity(&self) -> u8 {
        match self {
            Self::Exact(_) => 2,
            Self::Suffix(_) => 1,
            Self::Any => 0,
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Any => write!(f, "*"),
            Self::Exact(h) => write!(f, "{h}"),
            Self::Suffix(s) => write!(f, "*{s}"),
        }
    }
}

/// Whether the prefix `prefix` covers `path` on a segment boundary: `/cart` covers `/cart`,
/// `/cart/` and `/cart/1`, but not `/cartoon`.
pub fn path_covers(prefix: &str, path: &str) -> bool {
    if !path.starts_with(prefix) {
        return false;
    }
    prefix.ends_with('/') || path.len() == prefix.len() || path.as_bytes()[prefix.len()] == b'/'
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

/// Decodes `%XX` where XX encodes an unreserved character or `/` `.`; leaves the rest alone so
/// nothing that the origin would read differently is changed.
fn decode_unreserved(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                let c = (h * 16 + l) as u8;
                if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'/') {
                    out.push(c);
                    i += 3;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The request host without port, from the `Host` header or the URI authority.
pub fn host_without_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map(|(h, _)| &host[..h.len() + 1])
            .unwrap_or(host);
    }
    host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
}

#[derive(Debug, Clone)]
struct Entry {
    host: HostPattern,
    prefix: String,
    room: usize,
}

/// Rooms' (host, prefix) pairs, most specific first.
#[derive(Debug, Clone, Default)]
pub struct Router {
    entries: Vec<Entry>,
}

impl Router {
    /// `rooms` yields each room's hosts and path prefixes, by room index.
    pub fn new<'a>(rooms: impl IntoIterator<Item = (&'a [HostPattern], &'a [String])>) -> Self {
        let mut entries = Vec::new();
        for (room, (hosts, paths)) in rooms.into_iter().enumerate() {
            for h in hosts {
                for p in paths {
                    entries.push(Entry {
                        host: h.clone(),
                        prefix: p.clone(),
                        room,
                    });
                }
            }
        }
        // Longest prefix wins; on equal prefixes an exact host beats a wildcard.
        entries.sort_by(|a, b| {
            b.prefix
                .len()
                .cmp(&a.prefix.len())
                .then(b.host.specificity().cmp(&a.host.specificity()))
        });
        Self { entries }
    }

    /// The room for a request; `path` must already be normalised.
    pub fn route(&self, host: &str, path: &str) -> Option<usize> {
        self.entries
            .iter()
            .find(|e| path_covers(&e.prefix, path) && e.host.matches(host))
            .map(|e| e.room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_on_segment_boundaries() {
        assert!(path_covers("/cart", "/cart"));
        assert!(path_covers("/cart", "/cart/1"));
        assert!(!path_covers("/cart", "/cartoon"));
        assert!(path_covers("/", "/anything"));
        assert!(path_covers("/shop/", "/shop/x"));
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
        assert_eq!(normalize_path("/.anteroom/status"), "/.anteroom/status");
        // Decoded once, as an origin decodes: found by fuzz/route.
        assert_eq!(normalize_path("%%3333"), "/%333");
    }

    #[test]
    fn hosts_match_without_case_and_port() {
        let p = HostPattern::parse("*.example.com").unwrap();
        assert!(p.matches("shop.EXAMPLE.com"));
        assert!(!p.matches("example.com"));
        assert_eq!(
            host_without_port("shop.example.com:8080"),
            "shop.example.com"
        );
        assert_eq!(host_without_port("[::1]:8080"), "[::1]");
        assert!(HostPattern::parse("bad host").is_none());
        assert!(HostPattern::Any.overlaps(&HostPattern::parse("a.b").unwrap()));
    }

    #[test]
    fn longest_prefix_and_exact_host_win() {
        let a_hosts = [HostPattern::Any];
        let a_paths = ["/".to_string()];
        let b_hosts = [HostPattern::parse("shop.test").unwrap()];
        let b_paths = ["/orders".to_string()];
        let r = Router::new([(&a_hosts[..], &a_paths[..]), (&b_hosts[..], &b_paths[..])]);
        assert_eq!(r.route("shop.test", "/orders/1"), Some(1));
        assert_eq!(r.route("other.test", "/orders/1"), Some(0));
        assert_eq!(r.route("shop.test", "/products"), Some(0));
    }
}
