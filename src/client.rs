//! Who the client is: the socket peer, or — only when that peer is a configured trusted proxy —
//! the address it reports in `X-Forwarded-For` / `Forwarded`. Anything a client writes in those
//! headers itself is ignored, so nobody escapes a per-IP limit by inventing an address.

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

/// The addresses a trusted proxy chain reports, nearest last.
fn reported(headers: &HeaderMap) -> Vec<IpAddr> {
    let xff: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(parse_addr)
        .collect();
    if !xff.is_empty() {
        return xff;
    }
    headers
        .get_all(http::header::FORWARDED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .flat_map(|elem| elem.split(';'))
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("for")
                .then(|| parse_addr(v))
                .flatten()
        })
        .collect()
}

/// The client's address: the first untrusted hop, walking the reported chain from the end.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, proxies: &[IpNet]) -> IpAddr {
    if !trusted(peer, proxies) {
        return peer;
    }
    let chain = reported(headers);
    chain
        .iter()
        .rev()
        .find(|ip| !trusted(**ip, proxies))
        .or(chain.first())
        .copied()
        .unwrap_or(peer)
}

/// Whether a trusted proxy says the client came over HTTPS.
pub fn forwarded_https(peer: IpAddr, headers: &HeaderMap, proxies: &[IpNet]) -> bool {
    if !trusted(peer, proxies) {
        return false;
    }
    if let Some(v) = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
    {
        return v
            .split(',')
            .next()
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    }
    headers
        .get(http::header::FORWARDED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split([',', ';'])
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
            client_ip(peer, &spoof, &lb),
            "203.0.113.9".parse::<IpAddr>().unwrap(),
            "rightmost untrusted"
        );
        let outsider: IpAddr = "198.51.100.7".parse().unwrap();
        assert_eq!(
            client_ip(outsider, &spoof, &lb),
            outsider,
            "an untrusted peer's header is ignored"
        );
        assert_eq!(
            client_ip(peer, &spoof, &[]),
            peer,
            "no trusted proxies configured"
        );
        let chain = h(&[("x-forwarded-for", "203.0.113.9, 10.2.2.2")]);
        assert_eq!(
            client_ip(peer, &chain, &lb),
            "203.0.113.9".parse::<IpAddr>().unwrap(),
            "skips trusted hops"
        );
        let fwd = h(&[("forwarded", "for=\"[2001:db8::7]:443\";proto=https")]);
        assert_eq!(
            client_ip(peer, &fwd, &lb),
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
        assert_eq!(
            client_ip(peer, &h(&[("x-forwarded-for", "garbage")]), &lb),
            peer
        );
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
