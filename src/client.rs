//! Who the client is: the socket peer, or — only when that peer is a configured trusted proxy —
//! the address it appended to the header it writes (`[listen] client-header`: `X-Forwarded-For`
//! or `Forwarded`). Anything a client writes in those headers itself is ignored, so nobody
//! escapes a per-IP limit or passes a client `bypass` rule by inventing an address.

use std::net::IpAddr;

use http::HeaderMap;
use ipnet::IpNet;

fn trusted(ip: IpAddr, proxies: &[IpNet]) -> bool {
    proxies.iter().any(|n| n.contains(&ip))
}

/// Whether the peer is one of the configured trusted proxies (whose forwarding headers are
/// believed, and kept for the origin).
pub fn is_trusted(peer: IpAddr, proxies: &[IpNet]) -> bool {
    trusted(peer, proxies)
}

/// Parses one `for=` / XFF element: `1.2.3.4`, `1.2.3.4:80`, `[2001:db8::1]:80`, `"[::1]"`.
fn parse_addr(s: &str) -> Option<IpAddr> {
    let s = s.trim().trim_matches('"');
    if let Ok(ip) = s.parse() {
        return Some(ip);
    }
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    s.rsplit_once(':').and_then(|(h, _)| h.parse().ok())
}

/// Which forwarding header names the client behind `trusted-proxies` (`[listen]
/// client-header`): the one the load balancer appends to. The other is passed on as the client
/// wrote it, so it is never read for the client's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientHeader {
    /// `X-Forwarded-For` (nginx `$proxy_add_x_forwarded_for`, HAProxy `option forwardfor`,
    /// Envoy, the cloud load balancers).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=` (RFC 7239).
    Forwarded,
}

impl ClientHeader {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::XForwardedFor => "x-forwarded-for",
            Self::Forwarded => "forwarded",
        }
    }
}

/// One hop of a reported chain: its address, or `None` for an element that does not read as
/// one (garbage, `unknown`, an obfuscated `_name`, a `Forwarded` element without `for=`).
type Hop = Option<IpAddr>;

/// A header's elements, nearest last, read from its raw bytes: a value that is not clean ASCII
/// still yields the elements a proxy appended to it (reading the value as a `str` dropped the
/// whole line, the proxy's own hop included).
fn elements<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .filter(|e| !e.trim_ascii().is_empty())
}

/// An element's address; an IPv4-mapped one as its IPv4 address (as the peer is read).
fn hop_of(element: &[u8]) -> Hop {
    std::str::from_utf8(element)
        .ok()
        .and_then(parse_addr)
        .map(|ip| ip.to_canonical())
}

/// The hops a header reports: each `X-Forwarded-For` element, or each `Forwarded` element's
/// `for=`.
fn hops(headers: &HeaderMap, header: ClientHeader) -> Vec<Hop> {
    match header {
        ClientHeader::XForwardedFor => elements(headers, "x-forwarded-for").map(hop_of).collect(),
        ClientHeader::Forwarded => elements(headers, "forwarded")
            .map(|elem| {
                elem.split(|b| *b == b';').find_map(|pair| {
                    let eq = pair.iter().position(|b| *b == b'=')?;
                    pair[..eq]
                        .trim_ascii()
                        .eq_ignore_ascii_case(b"for")
                        .then(|| hop_of(&pair[eq + 1..]))
                })?
            })
            .collect(),
    }
}

/// The client's address: the socket peer, or, when that peer is a trusted proxy, the first hop
/// that is not one, walking the chain of the header the proxies append to (`header`) from its
/// nearest end; the farthest hop when every hop is a trusted proxy.
///
/// Only `header` is read. A proxy appends what it saw to the header it writes and passes the
/// other on as the client sent it: believing the other at all let a client name itself (found
/// by review: an unreadable `X-Forwarded-For` fell back to the client's own `Forwarded`, and
/// then, with both read, a client's `Forwarded` that disagreed made it the proxy itself, which
/// a `bypass` rule covering the load balancer let past the line). The hop the walk stops at was
/// written by a trusted proxy; when it does not read as an address (`for=unknown`) the client
/// is the proxy that wrote it.
pub fn client_ip(
    peer: IpAddr,
    headers: &HeaderMap,
    proxies: &[IpNet],
    header: ClientHeader,
) -> IpAddr {
    if !trusted(peer, proxies) {
        return peer;
    }
    let chain = hops(headers, header);
    for hop in chain.iter().rev() {
        match hop {
            Some(ip) if trusted(*ip, proxies) => {}
            Some(ip) => return *ip,
            None => return peer,
        }
    }
    chain.first().copied().flatten().unwrap_or(peer)
}

/// Whether a trusted proxy says the client came over HTTPS: by the last element of the
/// header (the one the nearest proxy, the trusted peer, wrote; a proxy that appends leaves the
/// client's own before it). Before (found by review), the first element of `X-Forwarded-Proto`
/// and any element of `Forwarded` counted, which the client may have written.
pub fn forwarded_https(peer: IpAddr, headers: &HeaderMap, proxies: &[IpNet]) -> bool {
    if !trusted(peer, proxies) {
        return false;
    }
    let last = |name: &str| {
        headers
            .get_all(name)
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .map(str::trim)
    };
    if headers.contains_key("x-forwarded-proto") {
        return last("x-forwarded-proto").is_some_and(|p| p.eq_ignore_ascii_case("https"));
    }
    last("forwarded").is_some_and(|element| {
        element
            .split(';')
            .filter_map(|p| p.split_once('='))
            .any(|(k, v)| {
                k.trim().eq_ignore_ascii_case("proto")
                    && v.trim().trim_matches('"').eq_ignore_ascii_case("https")
            })
    })
}

/// The key a per-IP limit counts by: the IPv4 address, or the IPv6 /64 (one subscriber's
/// network: counting single IPv6 addresses would be trivial to evade).
pub fn limit_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const XFF: ClientHeader = ClientHeader::XForwardedFor;

    fn h(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    }

    #[test]
    fn only_trusted_peers_may_name_the_client() {
        let lb: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let peer: IpAddr = "10.1.1.1".parse().unwrap();
        let spoof = h(&[("x-forwarded-for", "6.6.6.6, 203.0.113.9")]);
        assert_eq!(
            client_ip(peer, &spoof, &lb, XFF),
            "203.0.113.9".parse::<IpAddr>().unwrap(),
            "rightmost untrusted"
        );
        let outsider: IpAddr = "198.51.100.7".parse().unwrap();
        assert_eq!(
            client_ip(outsider, &spoof, &lb, XFF),
            outsider,
            "an untrusted peer's header is ignored"
        );
        assert_eq!(
            client_ip(peer, &spoof, &[], XFF),
            peer,
            "no trusted proxies configured"
        );
        let chain = h(&[("x-forwarded-for", "203.0.113.9, 10.2.2.2")]);
        assert_eq!(
            client_ip(peer, &chain, &lb, XFF),
            "203.0.113.9".parse::<IpAddr>().unwrap(),
            "skips trusted hops"
        );
        let fwd = h(&[("forwarded", "for=\"[2001:db8::7]:443\";proto=https")]);
        assert_eq!(
            client_ip(peer, &fwd, &lb, ClientHeader::Forwarded),
            "2001:db8::7".parse::<IpAddr>().unwrap()
        );
        assert!(forwarded_https(peer, &fwd, &lb));
        assert!(forwarded_https(
            peer,
            &h(&[("x-forwarded-proto", "https")]),
            &lb
        ));
        assert!(!forwarded_https(
            outsider,
            &h(&[("x-forwarded-proto", "https")]),
            &lb
        ));
        // The nearest proxy's word is the last element: the client's own before it is not.
        for (name, value, https) in [
            ("x-forwarded-proto", "https, http", false),
            ("x-forwarded-proto", "http, https", true),
            ("forwarded", "proto=https, for=10.2.2.2;proto=http", false),
            ("forwarded", "proto=http, for=10.2.2.2;proto=https", true),
        ] {
            assert_eq!(
                forwarded_https(peer, &h(&[(name, value)]), &lb),
                https,
                "{name}: {value}"
            );
        }
        let mut two = HeaderMap::new();
        two.append("x-forwarded-proto", "https".parse().unwrap());
        two.append("x-forwarded-proto", "http".parse().unwrap());
        assert!(!forwarded_https(peer, &two, &lb), "the last line's");
        assert_eq!(
            client_ip(peer, &h(&[("x-forwarded-for", "garbage")]), &lb, XFF),
            peer
        );
    }

    fn raw(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_bytes(v).unwrap(),
            );
        }
        m
    }

    #[test]
    fn only_the_header_the_proxy_appends_to_names_the_client() {
        let lb: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap()];
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let real: IpAddr = "198.51.100.7".parse().unwrap();
        let xff = |pairs: &[(&str, &[u8])]| client_ip(peer, &raw(pairs), &lb, XFF);
        let fwd =
            |pairs: &[(&str, &[u8])]| client_ip(peer, &raw(pairs), &lb, ClientHeader::Forwarded);
        // Found by review: a line that is not clean ASCII was dropped whole, the proxy's own
        // hop with it, and the client's own `Forwarded` believed instead.
        assert_eq!(xff(&[("x-forwarded-for", b"\xff, 198.51.100.7")]), real);
        // Found by re-review: a client's own `Forwarded` that disagreed made it the proxy.
        for forged in [
            &b"for=10.20.1.1"[..],
            b"for=unknown",
            b"for=_x",
            b"proto=http",
        ] {
            assert_eq!(
                xff(&[
                    ("x-forwarded-for", b"\xff, 198.51.100.7"),
                    ("forwarded", forged),
                ]),
                real
            );
        }
        assert_eq!(
            xff(&[("forwarded", b"for=198.51.100.7")]),
            peer,
            "only the named header is read"
        );
        // A proxy that writes `Forwarded` and passes the client's `X-Forwarded-For` on.
        assert_eq!(
            fwd(&[
                ("x-forwarded-for", b"10.20.1.1"),
                ("forwarded", b"for=198.51.100.7"),
            ]),
            real
        );
        assert_eq!(
            fwd(&[(
                "forwarded",
                b"for=10.20.1.1, for=\"198.51.100.7:4711\";proto=https"
            )]),
            real
        );
        assert_eq!(
            fwd(&[("forwarded", b"for=unknown")]),
            peer,
            "a proxy that hides the client"
        );
        assert_eq!(xff(&[("x-forwarded-for", b"198.51.100.7, junk")]), peer);
        assert_eq!(
            xff(&[("x-forwarded-for", b"10.20.1.1, 127.0.0.9")]),
            "10.20.1.1".parse::<IpAddr>().unwrap(),
            "past the trusted hops"
        );
        assert_eq!(
            xff(&[("x-forwarded-for", b"10.20.1.1, ::ffff:127.0.0.9")]),
            "10.20.1.1".parse::<IpAddr>().unwrap(),
            "an IPv4-mapped hop is its IPv4 address"
        );
        assert_eq!(
            xff(&[("x-forwarded-for", b"127.0.0.8, 127.0.0.9")]),
            "127.0.0.8".parse::<IpAddr>().unwrap(),
            "every hop trusted: the farthest"
        );
        assert_eq!(
            xff(&[
                ("x-forwarded-for", b"10.20.1.1"),
                ("x-forwarded-for", b"198.51.100.7"),
            ]),
            real,
            "a proxy that adds a line of its own (HAProxy)"
        );
        assert_eq!(xff(&[("x-forwarded-for", b" , ")]), peer);
    }

    fn header_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just(b"10.20.1.1".to_vec()),
            Just(b"[2001:db8::1]:80".to_vec()),
            Just(b"for=10.20.1.1".to_vec()),
            Just(b"for=\"[2001:db8::1]\"".to_vec()),
            Just(b"127.0.0.9".to_vec()),
            Just(b"unknown".to_vec()),
            Just(vec![0xff]),
            Just(b",".to_vec()),
            Just(b";".to_vec()),
            Just(b" ".to_vec()),
            proptest::collection::vec(0x21u8..0x7f, 0..4),
        ];
        proptest::collection::vec(piece, 0..6).prop_map(|v| v.concat())
    }

    proptest::proptest! {
        /// Whatever a client writes in either header, a trusted proxy that appends what it saw
        /// to the header anteroom reads (and passes the other on) names the client as what it
        /// saw: never an address the client chose, nor the proxy itself.
        #[test]
        fn only_what_the_proxy_appended_names_the_client(
            xff in proptest::option::of(header_bytes()),
            fwd in proptest::option::of(header_bytes()),
            appends_forwarded in proptest::bool::ANY,
            seen in 0u8..=255,
        ) {
            let lb: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap()];
            let peer: IpAddr = "127.0.0.1".parse().unwrap();
            let real = IpAddr::from([198, 51, 100, seen]);
            let append = |old: Option<Vec<u8>>, hop: String| match old {
                Some(mut v) => {
                    v.extend_from_slice(b", ");
                    v.extend_from_slice(hop.as_bytes());
                    v
                }
                None => hop.into_bytes(),
            };
            let (xff, fwd, header) = if appends_forwarded {
                (xff, Some(append(fwd, format!("for={real}"))), ClientHeader::Forwarded)
            } else {
                (Some(append(xff, real.to_string())), fwd, XFF)
            };
            let mut pairs: Vec<(&str, &[u8])> = Vec::new();
            if let Some(v) = &xff {
                pairs.push(("x-forwarded-for", v));
            }
            if let Some(v) = &fwd {
                pairs.push(("forwarded", v));
            }
            let got = client_ip(peer, &raw(&pairs), &lb, header);
            proptest::prop_assert_eq!(got, real, "from {:?} / {:?}", xff, fwd);
        }
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        assert_eq!(
            limit_key("2001:db8:1:2:aaaa::1".parse().unwrap()),
            "2001:db8:1:2::/64"
        );
        assert_eq!(
            limit_key("2001:db8:1:2:bbbb::9".parse().unwrap()),
            "2001:db8:1:2::/64"
        );
        assert_eq!(limit_key("::ffff:192.0.2.1".parse().unwrap()), "192.0.2.1");
        assert_eq!(limit_key("192.0.2.1".parse().unwrap()), "192.0.2.1");
    }
}
