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

    /// The entry for one host and one reading of the path.
    fn lookup(&self, host: &str, r: &Reading<'_>) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.covers(r) && e.host.matches(host))
    }

    /// The room for a host and an already normalised path (exact case).
    pub fn route(&self, host: &str, path: &str) -> Option<usize> {
        self.entries
            .iter()
            .find(|e| path_covers(&e.prefix, path) && e.host.matches(host))
            .map(|e| e.room)
    }

    /// A reading that no host matched: is it a path that a host-bound room (other than
    /// `besides`, the room another reading of the host found) protects on the upstream this
    /// request would go to (the default one, or `besides`'s)?
    fn other_host(&self, r: &Reading<'_>, besides: Option<usize>) -> Verdict {
        if !self.host_bound || self.other_hosts == OtherHosts::Pass {
            return Verdict::Outside;
        }
        let upstream = match besides {
            Some(room) => self.upstreams.get(room),
            None => Some(&self.default_upstream),
        };
        let Some(room) = self
            .entries
            .iter()
            .filter(|e| e.host.is_bound() && Some(e.room) != besides)
            .find(|e| e.covers(r) && self.upstreams.get(e.room) == upstream)
            .map(|e| e.room)
        else {
            return Verdict::Outside;
        };
        match self.other_hosts {
            OtherHosts::Room => Verdict::Room(room),
            _ => Verdict::UnknownHost,
        }
    }

    /// A reading a room matched for the request's host (entry `found`: a room for any host, or
    /// one bound to this host) under a shorter prefix than a host-bound room of another host
    /// on the same upstream protects (its host is not the request's, or the lookup would have
    /// found it first): the request names another host for a path that room protects, as when
    /// no room matched, and `other-hosts` decides. `None`: no such claim.
    ///
    /// Found by review: with a room on `/` for any host beside a host-bound room on `/sale`, a
    /// request for `/sale/...` with another `Host` (or none) met the cheap room and went to the
    /// shop, which served it as its own `/sale`: past the host-bound room's line and its
    /// consume route.
    fn bound_over(&self, found: &Entry, r: &Reading<'_>) -> Option<Verdict> {
        if !self.host_bound || self.other_hosts == OtherHosts::Pass {
            return None;
        }
        let upstream = self.upstreams.get(found.room);
        let bound = self.entries.iter().find(|e| {
            e.host.is_bound()
                && e.prefix.len() > found.prefix.len()
                && self.upstreams.get(e.room) == upstream
                && e.covers(r)
        })?;
        Some(match self.other_hosts {
            OtherHosts::Room => Verdict::Room(bound.room),
            _ => Verdict::UnknownHost,
        })
    }

    /// The verdict for one reading of the path over every reading of the host.
    ///
    /// A host reading names a room when one matches it and no host-bound room claims the path
    /// over it ([`Self::bound_over`]). Readings that name two rooms disagree. One that names
    /// none (no room matches it, or a host-bound room claims the path over the one that does)
    /// beside one that names a room is read as the origin may read it: as another host, which
    /// `other-hosts` decides for every host-bound room but the one named (found by review:
    /// behind a trusted proxy, `Host: 127.0.0.1` with `X-Host: other.test` went to the cheap
    /// room's line and reached the shop's default site, the guarded one, at its protected
    /// path; by re-review: with a room for every host beside the host-bound one, a proxy's own
    /// name in `Host` beside the shop's in `X-Forwarded-Host` was refused in every mode).
    fn verdict(&self, hosts: &[&str], r: &Reading<'_>) -> Result<Verdict, &'static str> {
        let mut named: Option<usize> = None;
        let mut claimed: Option<Verdict> = None;
        let mut unnamed = false;
        for h in hosts {
            let Some(e) = self.lookup(h, r) else {
                unnamed = true;
                continue;
            };
            match self.bound_over(e, r) {
                Some(claim) => {
                    claimed = Some(claim);
                    unnamed = true;
                }
                None if named.is_some_and(|n| n != e.room) => return Err(HOSTS_DISAGREE),
                None => named = Some(e.room),
            }
        }
        let Some(x) = named else {
            return Ok(claimed.unwrap_or_else(|| self.other_host(r, None)));
        };
        if !unnamed {
            return Ok(Verdict::Room(x));
        }
        Ok(match self.other_host(r, Some(x)) {
            Verdict::Outside => Verdict::Room(x),
            Verdict::Room(_) => return Err(HOSTS_DISAGREE),
            Verdict::UnknownHost => Verdict::UnknownHost,
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
                        return Routing::Refuse(TWO_ROOMS);
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

/// Why a request whose host readings name two rooms is refused.
const HOSTS_DISAGREE: &str = "the request's host names disagree about the site";

/// Why a request whose readings fall in two rooms is refused.
pub const TWO_ROOMS: &str = "this address can be read as two different protected areas";

/// A query parameter's raw value (the first `name=`); `/.anteroom/` endpoints read theirs so.
pub fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then_some(v)
    })
}

/// A query value with its percent escapes decoded (`%40` is `@`, as URL encoders write it),
/// or as it is when they do not decode to UTF-8.
pub fn query_decoded(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.contains('%') {
        return std::borrow::Cow::Borrowed(value);
    }
    let b = value.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_or(std::borrow::Cow::Borrowed(value), std::borrow::Cow::Owned)
}

fn is_reserved(r: &Reading<'_>) -> bool {
    let p = r.path.as_bytes();
    let pre = b"/.anteroom";
    p.len() >= pre.len()
        && p[..pre.len()].eq_ignore_ascii_case(pre)
        && (p.len() == pre.len() || p[pre.len()] == b'/')
}

#[cfg(test)]
mod tests;
