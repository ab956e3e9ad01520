//! A room's parts, each checked on its own: texts, hosts, paths, `abandon-after`, poll tiers
//! (and the plain form of a path prefix, the statuses that carry a page). Part of
//! [`super::rooms`].

use std::time::Duration;

use super::build::Builder;
use super::file::*;
use super::locate::KeyPath;
use super::model::*;
use crate::route::HostPattern;

impl Builder<'_> {
    pub(super) fn texts(
        &mut self,
        p: &KeyPath,
        overrides: Option<
            &std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
        >,
    ) -> std::collections::BTreeMap<String, crate::texts::TextSet> {
        let mut all = std::collections::BTreeMap::new();
        for lang in crate::texts::LANGUAGES {
            if let Some(t) = crate::texts::builtin(lang) {
                all.insert(lang.to_string(), t);
            }
        }
        self.texts_over(p, all, overrides)
    }

    /// `texts` (under `p`) laid over `all`: the room's own over the built-in ones, an event's
    /// over the room's.
    pub(super) fn texts_over(
        &mut self,
        p: &KeyPath,
        mut all: std::collections::BTreeMap<String, crate::texts::TextSet>,
        overrides: Option<
            &std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
        >,
    ) -> std::collections::BTreeMap<String, crate::texts::TextSet> {
        for (lang, texts) in overrides.into_iter().flatten() {
            let lp = p.key("texts").key(lang);
            let Some(set) = all.get_mut(lang) else {
                self.fail(
                    lp,
                    format!("no built-in language {lang:?}"),
                    format!("use one of: {}", crate::texts::LANGUAGES.join(", ")),
                );
                continue;
            };
            for (key, raw) in texts {
                let kp = lp.key(key);
                if !crate::texts::is_key(key) {
                    let known: Vec<&str> = crate::texts::TEXTS.iter().map(|t| t.0).collect();
                    self.fail(
                        kp,
                        format!("unknown text {key:?}"),
                        format!("use one of: {}", known.join(", ")),
                    );
                    continue;
                }
                if let Some(v) = self.string(&kp, raw) {
                    // A placeholder the text does not have is shown as written (found by
                    // review: "{low} to 13 minutes" on the waiting page).
                    let known = crate::texts::placeholders_of(key);
                    let unknown: Vec<&str> = crate::texts::placeholders(&v)
                        .into_iter()
                        .filter(|p| !known.contains(p))
                        .collect();
                    if let Some(p) = unknown.first() {
                        let fix = if known.is_empty() {
                            "this text has no placeholder: write the words only".to_string()
                        } else {
                            let list: Vec<String> =
                                known.iter().map(|k| format!("{{{k}}}")).collect();
                            format!("use {}", list.join(", "))
                        };
                        self.fail(
                            kp,
                            format!("{{{p}}} is not a placeholder of this text: it would be shown as written"),
                            fix,
                        );
                        continue;
                    }
                    set.insert(key.clone(), v);
                }
            }
        }
        all
    }

    pub(super) fn hosts(&mut self, p: &KeyPath, hosts: Option<&[String]>) -> Vec<HostPattern> {
        let Some(hosts) = hosts else {
            return vec![HostPattern::Any];
        };
        if hosts.is_empty() {
            self.fail(
                p.key("hosts"),
                "is empty: the room would match nothing",
                "use [\"*\"] for every host",
            );
        }
        let mut out = Vec::new();
        for (i, h) in hosts.iter().enumerate() {
            match HostPattern::parse(h) {
                Some(hp) if out.contains(&hp) => self.warn(
                    p.key("hosts").index(i),
                    format!("{h:?} is listed twice (host names are read without case and trailing dot)"),
                    "list each host once",
                ),
                Some(hp) => out.push(hp),
                None if !h.is_ascii() => self.fail(
                    p.key("hosts").index(i),
                    format!("{h:?} is not in its ASCII form, which is what browsers send"),
                    "write the name's punycode form (e.g. \"xn--bcher-kva.example\" for \"bücher.example\"; `idn2` prints it)",
                ),
                None => self.fail(
                    p.key("hosts").index(i),
                    format!("{h:?} is not a host pattern"),
                    "use \"*\", \"shop.example.com\" or \"*.example.com\"",
                ),
            }
        }
        out
    }

    pub(super) fn paths(&mut self, p: &KeyPath, paths: &[String]) -> Vec<String> {
        if paths.is_empty() {
            self.fail(
                p.key("paths"),
                "is missing or empty: the room would protect nothing",
                "list the path prefixes to protect, e.g. paths = [\"/products\", \"/orders\"]",
            );
        }
        let mut out: Vec<String> = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            let key = p.key("paths").index(i);
            if !path.starts_with('/') {
                self.fail(
                    key,
                    format!("{path:?} does not start with '/'"),
                    "write a path prefix such as \"/products\"",
                );
            } else if let Some(fix) = not_plain(path) {
                self.fail(
                    key,
                    format!("{path:?} is not in plain form: requests are matched on their normalised readings"),
                    fix,
                );
            } else if path.starts_with("/.anteroom") {
                self.fail(
                    key,
                    "the /.anteroom/ prefix is reserved",
                    "protect other paths",
                );
            } else if out.contains(path) {
                self.fail(
                    key,
                    format!("{path:?} is listed twice"),
                    "remove the duplicate",
                );
            } else {
                out.push(path.clone());
            }
        }
        out
    }

    pub(super) fn abandon_after(
        &mut self,
        p: &KeyPath,
        abandon: Duration,
        slowest: Duration,
        hidden: Duration,
    ) {
        let f = humantime::format_duration;
        let at_least = |d: Duration| f(Duration::from_secs(d.as_secs_f64().ceil() as u64));
        match check_abandon_after(abandon, slowest, hidden) {
            None => {}
            Some(AbandonTooShort::ForPolls(least)) => self.fail(
                p.key("abandon-after"),
                format!(
                    "({}) leaves no room for two polls at the slowest interval ({}) with their +20 % jitter: visitors who do poll would lose their place",
                    f(abandon),
                    f(slowest)
                ),
                format!("make abandon-after at least {} (the default is 5m)", at_least(least)),
            ),
            // A warning, not an error: the product's own contract example (abandon-after =
            // "60s") is a choice an operator may make knowingly (visitors who are not browsers,
            // a sale that wants silent visitors out fast).
            Some(AbandonTooShort::ForHiddenTabs(least)) => self.warn(
                p.key("abandon-after"),
                format!(
                    "({}) is shorter than two polls of a hidden tab (throttled-poll = {}, how often a browser is taken to run a hidden tab's timers): visitors who switch tabs would lose their place",
                    f(abandon),
                    f(hidden)
                ),
                format!(
                    "make abandon-after at least {} (the default is 5m), or lower throttled-poll if the visitors are not browsers",
                    at_least(least)
                ),
            ),
        }
    }

    pub(super) fn poll(&mut self, p: &KeyPath, tiers: Option<&[PollFile]>) -> Vec<PollTier> {
        let Some(tiers) = tiers else {
            return default_poll();
        };
        let key = p.key("poll");
        if tiers.is_empty() {
            self.fail(
                key,
                "is empty",
                "remove it for the defaults, or list tiers like [{ every = \"5s\" }]",
            );
            return default_poll();
        }
        let mut out = Vec::new();
        let mut last_below = 0u64;
        for (i, t) in tiers.iter().enumerate() {
            let tp = key.index(i);
            // At most MAX_POLL: two polls with their jitter must fit in abandon-after, itself at
            // most 30m (found by review: "2h" asked for an abandon-after of 5h, which no config
            // may have).
            let mut every = self.duration_at_most(
                &tp.key("every"),
                Some(&t.every),
                (Duration::from_secs(5), MAX_POLL, false),
                "two polls with their jitter must fit in abandon-after, which is at most 30m",
            );
            // The waiting page polls again after it (found by review: "1ns" passed, and every
            // browser in line polled in a tight loop).
            if every < MIN_POLL {
                self.fail(
                    tp.key("every"),
                    format!("{every:?} is shorter than {MIN_POLL:?}: every waiting browser would poll that often"),
                    "poll every second or slower near the head of the line, e.g. { below = 100, every = \"1s\" }",
                );
                every = MIN_POLL;
            }
            let below = match t.below {
                None => None,
                Some(b) if b >= 1 && (b as u64) > last_below => {
                    last_below = b as u64;
                    Some(b as u64)
                }
                Some(b) if i == 0 => {
                    self.fail(
                        tp.key("below"),
                        format!("{b} is less than 1"),
                        "give the first tier the count of visitors at the front it covers, e.g. below = 100",
                    );
                    None
                }
                Some(b) => {
                    self.fail(
                        tp.key("below"),
                        format!("{b} is not above the previous tier's bound"),
                        "list tiers from the front of the line backwards, with growing `below`",
                    );
                    None
                }
            };
            let last = i + 1 == tiers.len();
            if below.is_none() && !last && t.below.is_none() {
                self.fail(
                    tp.clone(),
                    "only the last tier may leave out `below`",
                    "add below = N to this tier",
                );
            }
            if last && t.below.is_some() {
                self.fail(
                    tp.key("below"),
                    "the last tier must cover everyone behind it",
                    "remove `below` from the last tier, e.g. { every = \"5s\" }",
                );
            }
            out.push(PollTier { below, every });
        }
        out
    }
}

/// The shortest poll interval a tier may set.
pub const MIN_POLL: Duration = Duration::from_millis(100);

/// The longest: two polls of it with their +20 % jitter (24m) fit in the longest abandon-after
/// (30m, [`super::model::MAX_ABANDON_AFTER`]).
pub const MAX_POLL: Duration = Duration::from_secs(600);

/// Why a configured path prefix is not in plain form, as the fix to print: requests are
/// matched on their normalised readings ([`crate::route::normalize_path`]), so a prefix in any
/// other form would match none of them.
///
/// A prefix with a trailing `/` is not plain either: it would leave the bare path (`/orders`,
/// `/orders.json`) outside the room, and frameworks route `/orders` and `/orders/` alike (found
/// by review: `consume = ["POST /orders/"]` let `POST /orders` through with no admission).
pub(super) fn not_plain(path: &str) -> Option<String> {
    // A query or a fragment is no part of a path: a prefix with one matches no request, and the
    // room protects nothing (found by review: `paths = ["/products?x=1"]` passed `check`, and
    // every request reached the shop).
    if let Some(at) = path.find(['?', '#']) {
        let bare = &path[..at];
        return Some(if bare.is_empty() || bare == "/" {
            "a path prefix is a path: no '?' query or '#' fragment (a room covers its paths whatever the query)".to_string()
        } else {
            format!("write it as {bare:?}: a path, without the '?' query or '#' fragment (a room covers its paths whatever the query)")
        });
    }
    // A prefix is literal: `*` is no pattern, and a space or a control character never reaches
    // a path unescaped (found by review: `"/products/*"` and `"/pro ducts"` passed `check`,
    // and the room held neither `/products/1` nor `/pro%20ducts`).
    // A `*` inside a path is a character of it (re-review: refusing it left such a path no way
    // to be guarded); one that ends the path is a pattern's.
    if let Some(at) = path
        .strip_suffix('*')
        .map(|p| p.trim_end_matches('*').len())
    {
        let bare = path[..at].trim_end_matches('/');
        return Some(format!(
            "a path prefix is literal, not a pattern: write it as {:?} (a prefix covers itself and everything under it)",
            if bare.is_empty() { "/" } else { bare }
        ));
    }
    if path.chars().any(|c| c == ' ' || c.is_control()) {
        return Some(format!(
            "write it as {:?}: a space or a control character reaches a path escaped",
            // `;` escaped too: the plain form keeps no raw one (found by re-review r91a: the
            // fix given was refused at the next run).
            path.replace(' ', "%20")
                .replace(';', "%3B")
                .chars()
                .map(|c| if c.is_control() {
                    format!("%{:02X}", c as u32)
                } else {
                    c.to_string()
                })
                .collect::<String>()
        ));
    }
    if let Some(bare) = path.strip_suffix('/').filter(|b| !b.is_empty()) {
        if not_plain(bare).is_none() {
            return Some(format!(
                "write it as {bare:?}, without the last '/' (a prefix covers itself and everything under it)"
            ));
        }
    }
    let plain = crate::route::normalize_path(path) == path
        && !path.contains([';', '\\', '\0'])
        && path.is_ascii();
    (!plain).then(|| {
        format!(
            "write it as {:?} (a path's own characters unescaped — letters, digits and - . _ ~ ! $ & ' ( ) * + , = : @ — other escapes in upper-case hex, non-ASCII and \" < > [ ] ^ ` {{ | }} escaped; no ';', '\\', dot segments or repeated slashes)",
            // A `;` is written escaped (Tomcat reads a raw one as the start of parameters: `/`
            // in its place named another path; found by re-review r90a).
            crate::route::normalize_path(&percent_encode_non_ascii(
                &path.replace(';', "%3B").replace(['\\', '\0'], "/")
            ))
        )
    })
}

/// Non-ASCII bytes of a path as browsers send them (`%D1%82`, upper-case hex).
fn percent_encode_non_ascii(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii() {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A status whose answer carries a page: not 1xx, 204, 205 or a redirect (no body a browser
/// shows, or one it follows without a Location; a 204 or 304 with a page's length also leaves
/// the connection waiting for a body that never comes).
pub(super) fn carries_a_page(s: i64) -> bool {
    (200..=599).contains(&s) && !matches!(s, 204 | 205) && !(300..400).contains(&s)
}
