//! Which `[[upstream]]` entries reach one shop: those that share a server. `other-hosts` must
//! treat them as one origin, or a request with another host for a host-bound room's path
//! reaches that room's site through the default upstream, past the line. Two entries that list
//! the same servers in another order, or a pool that overlaps another, share a server (found by
//! review: only the first of `addrs` was compared).

use std::net::{IpAddr, SocketAddr};

use super::model::{Config, Upstream};

impl Config {
    /// The origin upstream `i` belongs to: the lowest index of the entries that share a server
    /// with it, directly or through others (the same for every entry of one origin).
    pub fn origin_of(&self, i: usize) -> usize {
        origin_groups(&self.upstreams).get(i).copied().unwrap_or(i)
    }
}

/// Per upstream, the lowest index of its group (entries joined by a shared server).
pub fn origin_groups(upstreams: &[Upstream]) -> Vec<usize> {
    let mut group: Vec<usize> = (0..upstreams.len()).collect();
    // Few entries: join pairs until nothing changes.
    let mut changed = true;
    while changed {
        changed = false;
        for a in 0..upstreams.len() {
            for b in a + 1..upstreams.len() {
                if group[a] != group[b] && share_a_server(&upstreams[a], &upstreams[b]) {
                    let (keep, drop) = (group[a].min(group[b]), group[a].max(group[b]));
                    for g in group.iter_mut().filter(|g| **g == drop) {
                        *g = keep;
                    }
                    changed = true;
                }
            }
        }
    }
    group
}

/// Where a server address leads: an IPv4-mapped address is its IPv4 address, and every
/// loopback or unspecified address is this host (`127.0.0.1`, `127.0.0.2`, `[::1]` and
/// `0.0.0.0` on one port reach one dual-stack server; found by review).
fn place(a: SocketAddr) -> (Option<IpAddr>, u16) {
    let ip = a.ip().to_canonical();
    if ip.is_loopback() || ip.is_unspecified() {
        (None, a.port())
    } else {
        (Some(ip), a.port())
    }
}

fn servers(u: &Upstream) -> impl Iterator<Item = (Option<IpAddr>, u16)> + '_ {
    std::iter::once(u.addr)
        .chain(u.resolved.iter().flat_map(|(_, a)| a.iter().copied()))
        .map(place)
}

/// Whether two entries name a server in common: an address either resolved to (see
/// [`place`]), or an entry written the same (a name that resolves anew later is still the same
/// server).
fn share_a_server(a: &Upstream, b: &Upstream) -> bool {
    servers(a).any(|x| servers(b).any(|y| x == y))
        || a.resolved.iter().any(|(name, _)| {
            b.resolved
                .iter()
                .any(|(other, _)| name.eq_ignore_ascii_case(other))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(upstreams: &[&[&str]]) -> Config {
        let mut toml =
            String::from("[cookie]\nkeys = [\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"]\n");
        for (i, addrs) in upstreams.iter().enumerate() {
            let list: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
            toml.push_str(&format!(
                "[[upstream]]\nname = \"u{i}\"\naddrs = [{}]\n",
                list.join(", ")
            ));
        }
        toml.push_str("[default]\nupstream = \"u0\"\n");
        crate::config::parse(&toml, "test.toml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn entries_that_share_a_server_are_one_origin() {
        let c = config(&[
            &["127.0.0.1:8001", "127.0.0.1:8002"],
            &["127.0.0.1:8002", "127.0.0.1:8001"],
            &["127.0.0.1:8003"],
            &["127.0.0.1:8004", "127.0.0.1:8003"],
            &["127.0.0.1:8005"],
            &["localhost:8005"],
        ]);
        let groups: Vec<usize> = (0..6).map(|i| c.origin_of(i)).collect();
        assert_eq!(groups[0], groups[1], "the same servers in another order");
        assert_eq!(groups[2], groups[3], "a pool that overlaps another");
        assert_ne!(groups[0], groups[2]);
        assert_eq!(groups[4], 4);
        // `localhost` resolves to a loopback address: one server.
        assert_eq!(groups[5], 4, "a name for the same address");
    }

    #[test]
    fn spellings_of_this_host_on_one_port_are_one_server() {
        let c = config(&[
            &["127.0.0.1:8001"],
            &["[::ffff:127.0.0.1]:8001"],
            &["[::1]:8001"],
            &["0.0.0.0:8001"],
            &["127.0.0.2:8001"],
            &["127.0.0.1:8002"],
            &["192.0.2.1:8001"],
            &["[::ffff:192.0.2.1]:8001"],
        ]);
        let groups: Vec<usize> = (0..8).map(|i| c.origin_of(i)).collect();
        assert_eq!(groups, [0, 0, 0, 0, 0, 5, 6, 6]);
    }

    #[test]
    fn a_chain_of_shared_servers_is_one_origin() {
        let c = config(&[
            &["127.0.0.1:8001"],
            &["127.0.0.1:8003", "127.0.0.1:8002"],
            &["127.0.0.1:8002", "127.0.0.1:8001"],
        ]);
        assert_eq!(
            (0..3).map(|i| c.origin_of(i)).collect::<Vec<_>>(),
            [0, 0, 0]
        );
    }
}
