//! The request host as origins read it, and the `hosts` patterns of rooms.
//!
//! nginx, Apache and most frameworks serve `SHOP.test.:80` as `shop.test`: letter case, one
//! trailing dot (the fully qualified form) and the port do not change the site. Every place a
//! host is matched (the `Host` header, an absolute-form target, HTTP/2's `:authority`, and
//! from trusted proxies `X-Forwarded-Host` / `Forwarded: host=`) goes through [`normalize_host`],
//! so no spelling of a protected host is routed outside its room.

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
        // The same spelling rules as requests: `shop.test.` is `shop.test`.
        let s = s.strip_suffix('.').unwrap_or(&s).to_string();
        let valid = |h: &str| {
            !h.is_empty()
                && !h.starts_with('.')
                && !h.contains("..")
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

    /// `host` is a request host as [`normalize_host`] returns it.
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

    /// Whether the pattern names hosts (anything but `*`).
    pub fn is_bound(&self) -> bool {
        !matches!(self, Self::Any)
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

    pub(super) fn specificity(&self) -> u8 {
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

/// The host without port, from the `Host` header or the URI authority (brackets of an IPv6
/// literal kept).
pub fn host_without_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map(|(h, _)| &host[..h.len() + 1])
            .unwrap_or(host);
    }
    host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
}

/// A host as origins compare it: without port, without one trailing dot (compared without
/// case by [`HostPattern::matches`]). `None` for a value no origin would take for a host name:
/// empty, a port that is not a number, `user@` parts, spaces, slashes or other stray bytes.
pub fn normalize_host(value: &str) -> Option<&str> {
    let value = value.trim_matches([' ', '\t']);
    let (name, port) = if let Some(rest) = value.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        if inner.is_empty()
            || !inner
                .bytes()
                .all(|c| c.is_ascii_hexdigit() || c == b':' || c == b'.')
        {
            return None;
        }
        let port = match after {
            "" => None,
            a => Some(a.strip_prefix(':')?),
        };
        (&value[..inner.len() + 2], port)
    } else {
        // `rsplit_once(':')`, by `memrchr`: the pattern searcher cost more than the rest.
        match memchr::memrchr(b':', value.as_bytes()) {
            Some(i) => (&value[..i], Some(&value[i + 1..])),
            None => (value, None),
        }
    };
    if let Some(p) = port {
        if !p.is_empty() && (p.len() > 5 || !p.bytes().all(|c| c.is_ascii_digit())) {
            return None;
        }
    }
    if name.starts_with('[') {
        return Some(name);
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && !name.ends_with('.')
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    ok.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_without_case_port_and_trailing_dot() {
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
        assert_eq!(
            HostPattern::parse("Shop.Test."),
            Some(HostPattern::Exact("shop.test".into()))
        );
    }

    #[test]
    fn every_spelling_of_a_host_normalises_to_it() {
        let room = HostPattern::parse("shop.test").unwrap();
        for spelling in [
            "shop.test",
            "SHOP.TEST",
            "shop.test.",
            "Shop.Test.:8080",
            "shop.test:80",
            "shop.test:",
            " shop.test ",
        ] {
            let h = normalize_host(spelling);
            assert!(h.is_some_and(|h| room.matches(h)), "{spelling:?} -> {h:?}");
        }
        assert_eq!(normalize_host("[::1]:8080"), Some("[::1]"));
        assert_eq!(normalize_host("[::1]"), Some("[::1]"));
    }

    #[test]
    fn unusable_hosts_are_none() {
        for bad in [
            "",
            ":80",
            "shop.test..",
            "shop.test:http",
            "user@shop.test",
            "shop.test/x",
            "shop test",
            "[::1",
            "[zz]",
            "[::1]x",
            ".shop.test",
            "shop.test:123456",
        ] {
            assert_eq!(normalize_host(bad), None, "{bad:?}");
        }
    }
}
