//! Which requests skip a room's line (`bypass`), and which are search crawlers. Pure decisions
//! over what the request says; the proxy acts on them.
//!
//! A bypass is a way around the line by design, so each kind is read the strict way:
//! - a **path** rule matches only when *every* reading of the path falls under it (see
//!   [`Readings`]): `/feed.xml/../cart`, `/FEED.xml` on a case-insensitive origin or
//!   `/feed.xml;x` must not turn the feed's exemption into one for another page;
//! - a **client** rule reads the client's address as `join-limit` does: the socket peer, or
//!   what a `trusted-proxies` load balancer reports — never a header from anyone else;
//! - a **header** rule compares SHA-256 digests in constant time, so neither the value nor
//!   its length leaks through timing;
//! - a **preflight** rule takes only a CORS preflight with no body and no method override.

use std::net::IpAddr;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{Reading, Readings};
use crate::config::model::BypassRule;

/// The index of the first rule the request matches. `preflight`: the request is a CORS
/// preflight (`crate::proxy::method::is_preflight`).
pub fn matching(
    rules: &[BypassRule],
    readings: &Readings<'_>,
    client: Option<IpAddr>,
    headers: &http::HeaderMap,
    preflight: bool,
) -> Option<usize> {
    rules.iter().position(|rule| match rule {
        BypassRule::Preflight => preflight,
        BypassRule::Path(prefix) => readings.iter().all(|r| strictly_under(prefix, r)),
        BypassRule::Client(nets) => client
            .map(|ip| ip.to_canonical())
            .is_some_and(|ip| nets.iter().any(|n| n.contains(&ip))),
        BypassRule::Header { name, digest } => headers.get_all(name).iter().any(|v| {
            let d: [u8; 32] = Sha256::digest(v.as_bytes()).into();
            bool::from(d.ct_eq(digest))
        }),
    })
}

/// `prefix` covers `reading` as a bypass reads it: stricter than a room's paths, which also
/// take `.ext` and `;params` after the prefix as the same resource (Spring's suffix matching,
/// Tomcat's parameters) — right for what a room protects, too wide for what a rule exempts
/// (`/feed.xml` must not exempt `/feed.xml.php`).
///
/// A script's path info is compared with the prefix read the same way: the rule
/// `/index.php/health` exempts `/index.php/health`, which Symfony reads as `/health` — with
/// each of the prefix's path infos, as the request has one reading for each of its own
/// (re-review: the rule `/dir.cgi/index.php/health` exempted nothing).
fn strictly_under(prefix: &str, reading: &Reading<'_>) -> bool {
    if reading.script {
        let mut infos = super::path::path_infos(prefix).peekable();
        if infos.peek().is_some() {
            return infos.any(|info| starts_on_boundary(info, reading));
        }
    }
    starts_on_boundary(prefix, reading)
}

/// `reading` begins with `prefix`, up to a segment's end.
fn starts_on_boundary(prefix: &str, reading: &Reading<'_>) -> bool {
    let (p, s) = (prefix.as_bytes(), reading.path.as_bytes());
    let starts = s.len() >= p.len()
        && if reading.folded {
            s[..p.len()].eq_ignore_ascii_case(p)
        } else {
            &s[..p.len()] == p
        };
    starts && (prefix.ends_with('/') || s.len() == p.len() || s[p.len()] == b'/')
}

/// Names that the major search engines' crawlers put in their `User-Agent` (Google, Bing,
/// Yahoo, DuckDuckGo, Baidu, Yandex, Apple, Naver, Daum, Seznam, Sogou, Qwant, Petal).
const CRAWLERS: [&str; 15] = [
    "googlebot",
    "google-inspectiontool",
    "bingbot",
    "adidxbot",
    "slurp",
    "duckduckbot",
    "baiduspider",
    "yandexbot",
    "applebot",
    "yeti",
    "daumoa",
    "seznambot",
    "sogou web spider",
    "qwantify",
    "petalbot",
];

/// Whether `user_agent` names a known search crawler (a `User-Agent` can be forged: see
/// docs/SECURITY.md for what that gains).
pub fn is_crawler(user_agent: &str) -> bool {
    let ua = user_agent.to_ascii_lowercase();
    CRAWLERS.iter().any(|c| ua.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_rule(name: &'static str, secret: &str) -> BypassRule {
        BypassRule::Header {
            name: http::HeaderName::from_static(name),
            digest: Sha256::digest(secret.as_bytes()).into(),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_path_rule_needs_every_reading_of_the_path() {
        let rules = [BypassRule::Path("/products/feed.xml".into())];
        let none = http::HeaderMap::new();
        for path in [
            "/products/feed.xml",
            "/products/feed.xml/page2",
            "/products//feed.xml",
        ] {
            assert_eq!(
                matching(&rules, &Readings::of(path), None, &none, false),
                Some(0),
                "{path}"
            );
        }
        for path in [
            // An old WSGI server reads `//products/feed.xml` as `/feed.xml` (`products` is
            // the host), which is not the exempt path.
            "//products/feed.xml",
            "/products/feed.xml/../cart",
            "/products/FEED.xml",
            "/products/feed.xml;/../cart",
            // Stricter than a room's paths: no format suffix or parameter after the prefix.
            "/products/feed.xml.php",
            "/products/feed.xml;x",
            "/products/feed.xml%2f..%2fcart",
            "/products/feed.xml\\..\\cart",
            // Decoded twice, by a hop in front of the app (found by review).
            "/products/feed.xml/%252e%252e/%252e%252e/cart",
            "/products/feed.xml%252f..%252fcart",
            "/products/feed.xml/%25%32e%25%32e/%25%32e%25%32e/cart",
            "/products/feed.xmlx",
            "/products",
        ] {
            assert_eq!(
                matching(&rules, &Readings::of(path), None, &none, false),
                None,
                "{path}"
            );
        }
    }

    #[test]
    fn a_client_rule_reads_the_address_given() {
        let rules = [BypassRule::Client(vec!["10.20.0.0/16".parse().unwrap()])];
        let r = Readings::of("/x");
        let none = http::HeaderMap::new();
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(matching(&rules, &r, ip("10.20.3.4"), &none, false), Some(0));
        assert_eq!(
            matching(&rules, &r, ip("::ffff:10.20.3.4"), &none, false),
            Some(0)
        );
        assert_eq!(matching(&rules, &r, ip("10.21.0.1"), &none, false), None);
        assert_eq!(matching(&rules, &r, None, &none, false), None);
    }

    #[test]
    fn a_header_rule_needs_the_exact_secret() {
        let rules = [header_rule("x-partner-key", "partner-secret-0123456789")];
        let r = Readings::of("/x");
        let with = |v: &str| headers(&[("x-partner-key", v)]);
        assert_eq!(
            matching(&rules, &r, None, &with("partner-secret-0123456789"), false),
            Some(0)
        );
        for wrong in [
            "partner-secret-012345678",
            "partner-secret-0123456789 ",
            "",
            "PARTNER-SECRET-0123456789",
        ] {
            assert_eq!(
                matching(&rules, &r, None, &with(wrong), false),
                None,
                "{wrong:?}"
            );
        }
        assert_eq!(
            matching(&rules, &r, None, &http::HeaderMap::new(), false),
            None
        );
    }

    #[test]
    fn the_first_matching_rule_is_the_one_counted() {
        let rules = [
            BypassRule::Path("/health".into()),
            BypassRule::Client(vec!["127.0.0.0/8".parse().unwrap()]),
        ];
        let none = http::HeaderMap::new();
        let lo = Some("127.0.0.1".parse().unwrap());
        assert_eq!(
            matching(&rules, &Readings::of("/health"), lo, &none, false),
            Some(0)
        );
        assert_eq!(
            matching(&rules, &Readings::of("/cart"), lo, &none, false),
            Some(1)
        );
    }

    #[test]
    fn crawlers_are_told_by_their_names() {
        for ua in [
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "Mozilla/5.0 (compatible; Yeti/1.1; +http://naver.me/spd)",
            "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
        ] {
            assert!(is_crawler(ua), "{ua}");
        }
        for ua in [
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
            "curl/8.5.0",
            "",
        ] {
            assert!(!is_crawler(ua), "{ua}");
        }
    }

    #[test]
    fn a_script_path_rule_reads_its_own_path_info() {
        let none = http::HeaderMap::new();
        let rules = [BypassRule::Path("/index.php/health".to_string())];
        let m = |p: &str| matching(&rules, &Readings::of(p), None, &none, false);
        assert_eq!(m("/index.php/health"), Some(0));
        assert_eq!(m("/index.php/health/x"), Some(0));
        // Another script's path info, or dots that leave the rule: not exempt.
        assert_eq!(m("/other.php/../index.php/health/../../products"), None);
        assert_eq!(m("/index.php/health/.."), None);
        // A rule through two scripts exempts its own path (re-review: it exempted nothing),
        // and nothing whose path is not under it.
        let rules = [BypassRule::Path("/dir.cgi/index.php/health".to_string())];
        let m = |p: &str| matching(&rules, &Readings::of(p), None, &none, false);
        assert_eq!(m("/dir.cgi/index.php/health"), Some(0));
        assert_eq!(m("/index.php/health"), None);
        assert_eq!(m("/x.php/health"), None);
        assert_eq!(m("/dir.cgi/index.php/health/a.php/orders"), None);
        let rules = [BypassRule::Path("/health".to_string())];
        let m = |p: &str| matching(&rules, &Readings::of(p), None, &none, false);
        assert_eq!(m("/health/..%2F..%2Fproducts"), None);
        assert_eq!(m("/health/x/.."), Some(0));
    }
}
