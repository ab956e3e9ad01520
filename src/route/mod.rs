//! Which room, if any, a request belongs to: by host and path prefix, on every spelling of
//! both that an origin could read as the protected one.
//!
//! The rule (the README's routing section says it for operators):
//! - the path is read every way a common origin reads it ([`path::Readings`]) and the host as
//!   origins compare it ([`host::normalize_host`]); a request is in a room when *any* reading
//!   is, so no odd spelling walks around a line;
//! - readings that fall in two different rooms are refused (400); with `path-matching =
//!   "strict"` (the default) so are readings that disagree at all (one in a room, one not):
//!   the spelling is ambiguous, and refusing it costs an honest browser nothing. Additive
//!   readings ([`Reading::additive`]: dot segments kept, a PHP script's path info) are the
//!   exception: they put a request in a room without making it ambiguous, and say nothing
//!   when they are outside;
//! - a request whose host names no room, when its path is one that a host-bound room protects
//!   on the same upstream as the default, is dealt with by `other-hosts` (refused by default):
//!   a single-site origin would serve it as the protected host.
//!
//! Matching runs on every request, so the common case (a clean path, a handful of rooms)
//! allocates nothing.

pub mod bypass;
pub mod headers;
pub mod host;
pub mod path;
pub mod spelling;

pub use host::{host_without_port, normalize_host, HostPattern};
pub use path::{normalize_path, path_covers, path_covers_folded, Reading, Readings};

/// How ambiguous spellings of a path are treated (`[listen] path-matching`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathMatching {
    /// Refuse a path whose readings disagree about the room (400).
    #[default]
    Strict,
    /// Put the request in the room any reading falls in; refuse only two different rooms.
    Lenient,
}

/// What a request whose host names no room gets when its path is protected by a host-bound
/// room on the default upstream (`[listen] other-hosts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OtherHosts {
    /// 400: the origin would most likely serve it as the protected host.
    #[default]
    Refuse,
    /// Treated as the room's own host: it waits in that room's line.
    Room,
    /// Forwarded to the default upstream without a line: only for origins that serve each
    /// host as a different site (name-based virtual hosts).
    Pass,
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routing {
    /// Outside every room.
    Outside,
    /// In this room.
    Room(usize),
    /// Under `/.anteroom/` in some reading: answered by anteroom, never forwarded. Carries the
    /// reading to serve.
    Reserved(String),
    /// Refused with 400, for this reason (shown to the client).
    Refuse(&'static str),
}

#[derive(Debug, Clone)]
struct Entry {
    host: HostPattern,
    prefix: String,
    /// The prefix has upper-case letters: every reading is compared with it without case (a
    /// case-insensitive origin serves `/products` as `/Products`).
    fold: bool,
    room: usize,
}

impl Entry {
    fn covers(&self, r: &Reading<'_>) -> bool {
        r.held_by(&self.prefix, self.fold)
    }
}

/// Rooms' (host, prefix) pairs, most specific first.
#[derive(Debug, Clone, Default)]
pub struct Router {
    entries: Vec<Entry>,
    /// Per room: its upstream, for `other-hosts`.
    upstreams: Vec<usize>,
    default_upstream: usize,
    matching: PathMatching,
    other_hosts: OtherHosts,
    /// Any room bound to hosts (the `other-hosts` check is skipped otherwise).
    host_bound: bool,
}

/// How a router treats spellings; from `[listen]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Policy {
    pub matching: PathMatching,
    pub other_hosts: OtherHosts,
    pub default_upstream: usize,
}

/// One room's part of the routing table.
pub struct RoomRoutes<'a> {
    pub hosts: &'a [HostPattern],
    pub paths: &'a [String],
    pub upstream: usize,
}

/// What a single reading says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Outside,
    Room(usize),
    UnknownHost,
}

impl Router {
    pub fn new<'a>(rooms: impl IntoIterator<Item = RoomRoutes<'a>>, policy: Policy) -> Self {
        let mut entries = Vec::new();
        let mut upstreams = Vec::new();
        for (room, r) in rooms.into_iter().enumerate() {
            upstreams.push(r.upstream);
            for h in r.hosts {
                for p in r.paths {
                    entries.push(Entry {
                        host: h.clone(),
                        prefix: p.clone(),
                        fold: path::has_capitals(p),
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
        let host_bound = entries.iter().any(|e| e.host.is_bound());
        Self {
            entries,
            upstreams,
            default_upstream: policy.default_upstream,
            matching: policy.matching,
            other_hosts: policy.other_hosts,
            host_bound,
        }
    }

    /// The room for one host and one reading of the path.
    fn lookup(&self, host: &str, r: &Reading<'_>) -> Option<usize> {
        self.entries
            .iter()
            .find(|e| e.covers(r) && e.host.matches(host))
            .map(|e| e.room)
    }

    /// The room for a host and an already normalised path (exact case).
    pub fn route(&self, host: &str, path: &str) -> Option<usize> {
        self.entries
            .iter()
            .find(|e| path_covers(&e.prefix, path) && e.host.matches(host))
            .map(|e| e.room)
    }

    /// A reading that no host matched: is it a path that a host-bound room protects on the
    /// upstream this request would go to?
    fn other_host(&self, r: &Reading<'_>) -> Verdict {
        if !self.host_bound || self.other_hosts == OtherHosts::Pass {
            return Verdict::Outside;
        }
        let Some(room) = self
            .entries
            .iter()
            .filter(|e| e.host.is_bound())
            .find(|e| e.covers(r) && self.upstreams.get(e.room) == Some(&self.default_upstream))
            .map(|e| e.room)
        else {
            return Verdict::Outside;
        };
        match self.other_hosts {
            OtherHosts::Room => Verdict::Room(room),
            _ => Verdict::UnknownHost,
        }
    }

    /// The verdict for one reading of the path over every reading of the host.
    fn verdict(&self, hosts: &[&str], r: &Reading<'_>) -> Result<Verdict, &'static str> {
        let mut found: Option<usize> = None;
        for h in hosts {
            if let Some(room) = self.lookup(h, r) {
                if found.is_some_and(|f| f != room) {
                    return Err("the request's host names disagree about the site");
                }
                found = Some(room);
            }
        }
        Ok(match found {
            Some(room) => Verdict::Room(room),
            None => self.other_host(r),
        })
    }

    /// Decides where a request goes. `hosts` are the request's host readings, normalised (the
    /// `Host` header, and what trusted proxies report); empty when the request has none.
    pub fn decide(&self, hosts: &[&str], paths: &Readings<'_>) -> Routing {
        if let Some(r) = paths.iter().find(|r| is_reserved(r)) {
            return Routing::Reserved(r.path.to_ascii_lowercase());
        }
        let no_host = [""];
        let hosts = if hosts.is_empty() {
            &no_host[..]
        } else {
            hosts
        };
        let mut first: Option<Verdict> = None;
        let mut room: Option<usize> = None;
        let mut unknown_host = false;
        let mut disagree = false;
        for r in paths.iter() {
            let v = match self.verdict(hosts, r) {
                Ok(v) => v,
                Err(why) => return Routing::Refuse(why),
            };
            // An additive reading (dot segments kept, a script's path info) only ever adds a
            // room: outside, it says nothing; inside, it does not make the spelling ambiguous.
            if r.additive && v == Verdict::Outside {
                continue;
            }
            if !r.additive && first.is_some_and(|f| f != v) {
                disagree = true;
            }
            first.get_or_insert(v);
            match v {
                Verdict::Room(i) => {
                    if room.is_some_and(|j| j != i) {
                        return Routing::Refuse(
                            "this address can be read as two different protected areas",
                        );
                    }
                    room = Some(i);
                }
                Verdict::UnknownHost => unknown_host = true,
                Verdict::Outside => {}
            }
        }
        if unknown_host {
            return Routing::Refuse(
                "this address is protected under another host name; use the shop's own address",
            );
        }
        if disagree && self.matching == PathMatching::Strict {
            return Routing::Refuse(
                "this address is spelled in a way the shop may read differently; use its plain form",
            );
        }
        room.map_or(Routing::Outside, Routing::Room)
    }
}

/// A query parameter's raw value (the first `name=`); `/.anteroom/` endpoints read theirs so.
pub fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then_some(v)
    })
}

fn is_reserved(r: &Reading<'_>) -> bool {
    let p = r.path.as_bytes();
    let pre = b"/.anteroom";
    p.len() >= pre.len()
        && p[..pre.len()].eq_ignore_ascii_case(pre)
        && (p.len() == pre.len() || p[pre.len()] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(policy: Policy) -> Router {
        let any = [HostPattern::Any];
        let shop = [HostPattern::parse("shop.test").unwrap()];
        let all = ["/".to_string()];
        let orders = ["/orders".to_string()];
        let products = ["/products".to_string()];
        Router::new(
            [
                RoomRoutes {
                    hosts: &any,
                    paths: &all,
                    upstream: 1,
                },
                RoomRoutes {
                    hosts: &shop,
                    paths: &orders,
                    upstream: 1,
                },
                RoomRoutes {
                    hosts: &any,
                    paths: &products,
                    upstream: 0,
                },
            ],
            policy,
        )
    }

    fn decide(r: &Router, host: &str, path: &str) -> Routing {
        let hosts: Vec<&str> = normalize_host(host).into_iter().collect();
        r.decide(&hosts, &Readings::of(path))
    }

    #[test]
    fn longest_prefix_and_exact_host_win() {
        let r = router(Policy::default());
        assert_eq!(r.route("shop.test", "/orders/1"), Some(1));
        assert_eq!(r.route("other.test", "/orders/1"), Some(0));
        assert_eq!(r.route("shop.test", "/products"), Some(2));
        assert_eq!(decide(&r, "SHOP.test.:8080", "/orders/1"), Routing::Room(1));
    }

    #[test]
    fn additive_readings_add_a_room_and_never_make_a_spelling_ambiguous() {
        let any = [HostPattern::Any];
        let products = ["/products".to_string()];
        let orders = ["/orders".to_string()];
        for matching in [PathMatching::Strict, PathMatching::Lenient] {
            let r = Router::new(
                [
                    RoomRoutes {
                        hosts: &any,
                        paths: &products,
                        upstream: 0,
                    },
                    RoomRoutes {
                        hosts: &any,
                        paths: &orders,
                        upstream: 0,
                    },
                ],
                Policy {
                    matching,
                    ..Policy::default()
                },
            );
            let d = |p: &str| r.decide(&["shop.test"], &Readings::of(p));
            // Outside by the standard reading, inside by a kept-dots or path-info one.
            for p in [
                "/products/..",
                "/products/1%2F..%2F..%2Fx",
                "/index.php/products",
            ] {
                assert_eq!(d(p), Routing::Room(0), "{p} ({matching:?})");
            }
            // Inside by the standard reading, outside by an additive one: not ambiguous.
            assert_eq!(d("/x/../products/1"), Routing::Room(0), "{matching:?}");
            // Two rooms are still two rooms.
            assert!(matches!(d("/orders/../products"), Routing::Refuse(_)));
            assert_eq!(d("/index.php/about"), Routing::Outside);
            assert_eq!(d("/about/../contact"), Routing::Outside);
        }
    }

    #[test]
    fn any_reading_in_a_room_puts_the_request_there() {
        let any = [HostPattern::Any];
        let products = ["/products".to_string()];
        let one = |upstream| RoomRoutes {
            hosts: &any,
            paths: &products,
            upstream,
        };
        let r = Router::new(
            [one(0)],
            Policy {
                matching: PathMatching::Lenient,
                ..Policy::default()
            },
        );
        for p in [
            "/x/..;/products/1",
            "/PRODUCTS/1",
            "/products\\1",
            "/products%5C1",
            "/products%00",
            "/Products./1",
        ] {
            assert_eq!(decide(&r, "shop.test", p), Routing::Room(0), "{p}");
            assert_eq!(decide(&r, "shop.test", "/products;x/1"), Routing::Room(0));
            // With a catch-all room beside it, the plain reading is in that one: two rooms.
            let strict = router(Policy::default());
            assert!(
                matches!(decide(&strict, "shop.test", p), Routing::Refuse(_)),
                "{p}"
            );
        }
    }

    #[test]
    fn strict_refuses_readings_that_disagree() {
        let r = router(Policy::default());
        assert!(matches!(
            decide(&r, "shop.test", "/PRODUCTS/1"),
            Routing::Refuse(_)
        ));
        assert!(matches!(
            decide(&r, "shop.test", "/x/..;/products/1"),
            Routing::Refuse(_)
        ));
        // A Tomcat session id on a room's own path is no ambiguity: `;` ends the name.
        assert_eq!(
            decide(&r, "shop.test", "/products;jsessionid=1"),
            Routing::Room(2)
        );
        // A reading under /orders (room 1) and one under / (room 0): two rooms, refused in both modes.
        assert!(matches!(
            decide(&r, "shop.test", "/x/..;/orders"),
            Routing::Refuse(_)
        ));
        assert_eq!(decide(&r, "shop.test", "/products/1"), Routing::Room(2));
        assert_eq!(decide(&r, "shop.test", "/About"), Routing::Room(0));
    }

    #[test]
    fn an_upper_case_prefix_holds_its_lower_case_spelling() {
        let any = [HostPattern::Any];
        let products = ["/Products".to_string()];
        let r = Router::new(
            [RoomRoutes {
                hosts: &any,
                paths: &products,
                upstream: 0,
            }],
            Policy::default(),
        );
        for p in ["/products/1", "/Products/1", "/PRODUCTS", "/products.json"] {
            assert_eq!(decide(&r, "shop.test", p), Routing::Room(0), "{p}");
        }
    }

    #[test]
    fn the_reserved_prefix_in_any_reading_is_never_forwarded() {
        let r = router(Policy::default());
        assert!(matches!(
            decide(&r, "x", "/.ANTEROOM/status"),
            Routing::Reserved(_)
        ));
        assert!(matches!(
            decide(&r, "x", "/.anteroom;x/status"),
            Routing::Reserved(_)
        ));
    }

    #[test]
    fn other_hosts_on_a_protected_upstream() {
        let shop = [HostPattern::parse("shop.test").unwrap()];
        let products = ["/products".to_string()];
        let make = |other_hosts| {
            Router::new(
                [RoomRoutes {
                    hosts: &shop,
                    paths: &products,
                    upstream: 0,
                }],
                Policy {
                    other_hosts,
                    ..Policy::default()
                },
            )
        };
        let refuse = make(OtherHosts::Refuse);
        assert!(matches!(
            decide(&refuse, "evil.test", "/products/1"),
            Routing::Refuse(_)
        ));
        assert!(matches!(
            refuse.decide(&[], &Readings::of("/products/1")),
            Routing::Refuse(_)
        ));
        assert_eq!(decide(&refuse, "evil.test", "/about"), Routing::Outside);
        assert_eq!(
            decide(&refuse, "shop.test.", "/products/1"),
            Routing::Room(0)
        );
        let room = make(OtherHosts::Room);
        assert_eq!(
            room.decide(&[], &Readings::of("/products/1")),
            Routing::Room(0)
        );
        let pass = make(OtherHosts::Pass);
        assert_eq!(decide(&pass, "evil.test", "/products/1"), Routing::Outside);
    }
}
