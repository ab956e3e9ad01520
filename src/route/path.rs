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

use super::spelling::{
    applicable, apply, decode_percent_escapes, hop_decoded, hop_resolved, iis_hop, keep_dots,
    routed_part, trim_segments, COMBINED,
};
pub use super::spelling::{path_info, path_infos, transforms, Transform};
pub(crate) use escapes::{bytes_as_path, plain_escapes};

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

/// Whether [`normalize_path`] may change `path`: it does not start with `/`, or holds a `%`,
/// a `//` or a `/.`. One pass over the bytes: two `str::contains` of two-byte needles built a
/// substring searcher each, on every request (about 450 instructions, `bench/instructions`).
fn needs_normalizing(path: &str) -> bool {
    let b = path.as_bytes();
    b.first() != Some(&b'/')
        || memchr::memchr(b'%', b).is_some()
        || escapes::has_bytes_to_escape(b)
        || memchr::memchr_iter(b'/', b).any(|i| matches!(b.get(i + 1), Some(b'/' | b'.')))
}

/// The segments of `path` with `.` and `..` resolved and empty ones dropped.
pub(super) fn resolved_segments(path: &str) -> Vec<&str> {
    let mut segs: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    segs
}

/// The path as the origin will most likely understand it: its bytes in their plain form
/// ([`escapes`]: the escapes of a path's own characters decoded, bytes no path holds raw
/// escaped), `.` and `..` segments resolved, repeated slashes collapsed.
/// Clean paths (the common case) are returned borrowed.
pub fn normalize_path(path: &str) -> Cow<'_, str> {
    if !needs_normalizing(path) {
        return Cow::Borrowed(path);
    }
    let decoded = escapes::plain_escapes(path);
    let segs = resolved_segments(&decoded);
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

pub(super) fn hex_pair(h: u8, l: u8) -> Option<u8> {
    let hex = |c: u8| (c as char).to_digit(16);
    Some((hex(h)? * 16 + hex(l)?) as u8)
}

/// Whether `s` at `i` is `%XX` for byte `c` (any case of the hex digits).
pub(super) fn encoded_at(s: &[u8], i: usize, c: u8) -> bool {
    s.len() >= i + 3 && s[i] == b'%' && hex_pair(s[i + 1], s[i + 2]) == Some(c)
}

/// The transforms whose readings are additive ([`Reading::additive`]).
const ADDITIVE: u8 = Transform::Dots as u8
    | Transform::Script as u8
    | Transform::Trim as u8
    | Transform::Twice as u8;

/// One reading: a normalised path, and whether it was folded to lower case (then it is
/// compared with room prefixes without case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading<'a> {
    pub path: Cow<'a, str>,
    pub folded: bool,
    /// Made by [`Transform::Dots`], [`Transform::Script`] or [`Transform::Trim`]: it can put
    /// a request into a room, but outside every room it says nothing, and it never makes the
    /// readings disagree for `path-matching = "strict"` — `/x/../products` is `/products` to
    /// most origins and `/index.php/checkout` is a link a PHP shop prints, so neither is
    /// refused for what the other readings say.
    pub additive: bool,
    /// Made by [`Transform::Script`]: a script's path info (a bypass prefix is read the same
    /// way before it is compared with it).
    pub script: bool,
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
        Self::read(raw, true)
    }

    /// [`Readings::of`]; with `twice`, also as decoded a second time ([`Transform::Twice`]).
    fn read(raw: &'a str, twice: bool) -> Self {
        let standard = normalize_path(raw);
        let mut flags = applicable(raw);
        if !twice {
            flags &= !(Transform::Twice as u8);
        }
        if path_info(&standard).is_some() {
            flags |= Transform::Script as u8;
        }
        let has_upper = |p: &str| p.bytes().any(|c| c.is_ascii_uppercase());
        let first = Reading {
            path: standard,
            folded: false,
            additive: false,
            script: false,
        };
        let next = next_data_page(&first.path);
        if flags == 0 && !has_upper(&first.path) && next.is_none() {
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
            out.add(Cow::Owned(folded), true, 0);
        }
        // Every combination of the transforms that apply: origins combine them (IIS reads
        // `\` and case; a Java app on Windows adds `;params`).
        let mut scripts = Vec::new();
        for set in 1..=COMBINED {
            if set & !flags != 0 {
                continue;
            }
            let read = normalize_path(&apply(raw, set)).into_owned();
            scripts.extend(path_infos(&read).map(str::to_string));
            out.add_both(read, 0);
        }
        // A script's path info as these origins read the path: PHP behind IIS reads
        // `/index.php\products` and `/index%u002ephp/orders` as the script and `/products`,
        // `/orders` (found by review).
        for info in scripts {
            out.add_both(info, Transform::Script as u8);
        }
        // The readings of origins that route the path as sent: dot segments kept, a PHP
        // script's path info, and both (Symfony does not resolve `..` in its path info).
        if flags & Transform::Dots as u8 != 0 {
            let mut kept = vec![keep_dots(raw)];
            // Also as PHP behind IIS reads it: IIS's spellings first, dots kept after.
            if flags & Transform::Windows as u8 != 0 {
                kept.push(keep_dots(&apply(raw, Transform::Windows as u8)));
            }
            for kept in kept {
                for info in path_infos(&kept) {
                    // The path info as sent, and resolved on its own
                    // (`/a/index.php/../products` is `/products` after the script, though
                    // `/a/products` before it).
                    let resolved = normalize_path(info).into_owned();
                    out.add_both(
                        info.to_string(),
                        Transform::Dots as u8 | Transform::Script as u8,
                    );
                    out.add_both(resolved, Transform::Script as u8);
                    // nginx's `$` before a final newline, dots kept (found by the property
                    // test: `/a%20/index.php/../orders%0A` is `/orders` to the app).
                    let cut = info
                        .strip_suffix("%0A")
                        .or_else(|| info.strip_suffix("%0a"));
                    if let Some(cut) = cut {
                        let resolved = normalize_path(cut).into_owned();
                        out.add_both(
                            cut.to_string(),
                            Transform::Dots as u8 | Transform::Script as u8,
                        );
                        out.add_both(resolved, Transform::Script as u8);
                    }
                }
                out.add_both(kept, Transform::Dots as u8);
            }
        }
        let infos: Vec<String> = path_infos(out.standard()).map(str::to_string).collect();
        for info in infos {
            out.add_both(info, Transform::Script as u8);
        }
        if let Some(page) = next {
            out.add_both(page, Transform::Script as u8);
        }
        if flags & Transform::Trim as u8 != 0 {
            let mut trimmed = vec![normalize_path(&trim_segments(raw)).into_owned()];
            // Spring behind IIS trims the path IIS read: what its `%uXXXX` names too
            // (`/%u0020orders`), after its own `\` and trailing dots.
            if flags & Transform::Windows as u8 != 0 {
                let iis = apply(raw, Transform::Windows as u8);
                trimmed.push(normalize_path(&trim_segments(&iis)).into_owned());
            }
            for t in trimmed {
                // A script's path info with a segment's whitespace at its end: nginx's
                // `fastcgi_split_path_info` ends with PCRE's `$`, which matches before a final
                // newline, so `/index.php/orders%0A` is `/orders` to the app (found by
                // re-review: an order went through without an admission).
                let infos: Vec<String> = path_infos(&t).map(str::to_string).collect();
                for info in infos {
                    out.add_both(info, Transform::Trim as u8 | Transform::Script as u8);
                }
                out.add_both(t, Transform::Trim as u8);
            }
        }
        if flags & Transform::Twice as u8 != 0 {
            let mut all: Vec<(String, bool, bool)> = Vec::new();
            // nginx resolves the dots of the whole decoded path, then hands it on: the app
            // routes what comes before a decoded `?`, `#` or NUL of either.
            let decoded = hop_decoded(raw);
            let hops = decoded.iter().flat_map(|d| {
                let resolved = hop_resolved(d);
                [
                    routed_part(d).to_string(),
                    routed_part(&resolved).to_string(),
                ]
            });
            let once = std::iter::once(decode_percent_escapes(raw)).chain(iis_hop(raw));
            for once in once.chain(hops) {
                let more = Readings::read(&once, false);
                all.extend(
                    more.iter()
                        .map(|r| (r.path.to_string(), r.folded, r.script)),
                );
            }
            for (path, folded, script) in all {
                let via = Transform::Twice as u8 | if script { Transform::Script as u8 } else { 0 };
                out.add(Cow::Owned(path), folded, via);
            }
        }
        out
    }

    /// The readings of a front controller that takes its route from the query: CodeIgniter
    /// (3 and 4, with its default `uriProtocol`) routes `/?/orders` and `/index.php?/orders`
    /// as `/orders` — when the path, past the script's name, is empty and the query starts
    /// with `/` (up to a second `?`), the query is the route (found by review: an order
    /// reached the shop that way without an admission). The directory the path names (a
    /// script's name dropped), the query's route after it, and what the other readings make
    /// of that; all additive.
    pub fn add_query_route(&mut self, raw: &str, query: Option<&str>) {
        let Some(route) = query_route(raw, query) else {
            return;
        };
        let more = Readings::of(&route);
        let all: Vec<(String, bool)> = more
            .iter()
            .map(|r| (r.path.to_string(), r.folded))
            .collect();
        for (path, folded) in all {
            self.add(Cow::Owned(path), folded, Transform::Script as u8);
        }
    }

    /// Adds `path` (made by the transforms in `via`) and, when it has capitals, its folded
    /// form.
    fn add_both(&mut self, path: String, via: u8) {
        let folded = path
            .bytes()
            .any(|c| c.is_ascii_uppercase())
            .then(|| path.to_ascii_lowercase());
        self.add(Cow::Owned(path), false, via);
        if let Some(f) = folded {
            self.add(Cow::Owned(f), true, via);
        }
    }

    /// Adds a reading unless it is already there: the readings that decide (the standard one
    /// and the combined transforms) are added before the additive ones, so a path read both
    /// ways keeps the stronger.
    fn add(&mut self, path: Cow<'a, str>, folded: bool, via: u8) {
        let same = |r: &Reading<'_>| r.path == path && r.folded == folded;
        if same(&self.first) || self.rest.iter().any(same) {
            return;
        }
        self.rest.push(Reading {
            path,
            folded,
            additive: via & ADDITIVE != 0,
            script: via & Transform::Script as u8 != 0,
        });
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

/// The page whose server-side data Next.js (its Pages Router) runs for a data request:
/// `/_next/data/<build id>/products/1.json` is `/products/1`'s `getServerSideProps`, the build
/// id being in every page it serves (found by review: it reached the shop while `/products/1`
/// waited); `index.json` is the home page; a `basePath` before it stays.
fn next_data_page(path: &str) -> Option<String> {
    let at = next_data_at(path)?;
    let (_build, page) = path[at + NEXT_DATA.len()..].split_once('/')?;
    let page = page.strip_suffix(".json")?;
    let page = if page == "index" { "" } else { page };
    Some(format!("{}/{page}", &path[..at]))
}

const NEXT_DATA: &str = "/_next/data/";

/// Where the first `/_next/data/` starts: the `/`s found by `memchr`, each compared. It runs on
/// every request a room may guard, and `str::find` built a substring searcher for each one (445
/// instructions per request, `bench/instructions`).
fn next_data_at(path: &str) -> Option<usize> {
    memchr::memchr_iter(b'/', path.as_bytes()).find(|&i| path[i..].starts_with(NEXT_DATA))
}

/// The path a front controller routes when it takes its route from the query
/// ([`Readings::add_query_route`]): the path's directory (the script's name dropped) and the
/// query's route after it; `None` when it would not.
fn query_route(raw: &str, query: Option<&str>) -> Option<String> {
    let route = query?.split('?').next().unwrap_or("");
    let route = if let Some(r) = route.strip_prefix('/') {
        r
    } else if route
        .get(..3)
        .is_some_and(|p| p.eq_ignore_ascii_case("%2f"))
    {
        // Escaped, as a script that decodes the query first reads it.
        &route[3..]
    } else {
        return None;
    };
    // CodeIgniter drops the path's segments while they are its script's (`SCRIPT_NAME`): the
    // app's directory with or without a `/` after it (found by re-review: `/shop?/orders` is
    // `/orders` to an app in `/shop`), or its script. Any other path is read so too: the
    // reading only puts a request in a room.
    // The route is read from the query only when nothing but those is left, so the directory
    // is the path without its trailing `/`s and its script (found by the target property:
    // `/index.php/?//x/orders` is `//x/orders` at the root, not under `/index.php`).
    let mut dir = raw.trim_end_matches('/');
    if let Some((d, last)) = dir.rsplit_once('/') {
        if super::spelling::is_script(last.as_bytes()) {
            dir = d.trim_end_matches('/');
        }
    }
    Some(format!("{dir}/{route}"))
}

mod escapes;
#[cfg(test)]
mod tests;
