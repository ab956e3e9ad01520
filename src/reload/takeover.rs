//! Which rooms of the running configuration a reload would hand to another room: where the
//! running routing sends a request to room `o` and the new file's routing to a room of another
//! name, while `o` has admitted sessions or a line. Their cookies and places are `o`'s (signed
//! for its name, kept under it in the store): they would meet the other room's line.
//!
//! Judged by comparing the two routings at probe points, not by reading the new file alone:
//! the first version asked only the new file, so a room already nested in a site-wide one
//! counted as taking the site-wide room's paths, and an unchanged file was refused while the
//! site-wide room had visitors (found by re-review). The hosts probed are every host either
//! file names and one neither names, since `other-hosts = "room"` gives a host-bound room the
//! requests of hosts no room names (found by re-review: such visitors were moved to a room
//! bound to their host, and the reload applied).

use crate::app::Shared;
use crate::config;
use crate::route::{path_covers_folded, HostPattern, Readings, Router, Routing, TWO_ROOMS};

/// A host no room names, as `other-hosts` judges one.
const UNKNOWN_HOST: &str = "anteroom-probe.invalid";

/// A room of the running configuration whose visitors would meet another room of the new
/// file on some of its paths.
pub(super) struct Takeover {
    pub room: String,
    /// The room that would take them; `None`: they would be refused.
    pub by: Option<String>,
    /// Where: a host (or `*`) and a path.
    pub at: String,
    pub gone: bool,
    pub active: u64,
    /// Waiting in its line (for a room that stays in the file; a gone room's line is judged
    /// apart).
    pub waiting: u64,
    /// The store did not answer: the counts are the last tick's and this instance's
    /// admissions since, which do not run down until it answers again.
    pub unanswered: bool,
}

/// Every room of the running configuration that has admitted sessions or a line, and some of
/// whose requests the new file's routing gives to another room.
pub(super) async fn takeovers(old: &Shared, new: &config::Config) -> Vec<Takeover> {
    let router = crate::app::router_of(new);
    let before_rooms: Vec<Claims> = old.rooms.iter().map(|o| Claims::of(&o.cfg)).collect();
    let after_rooms: Vec<Claims> = new.rooms.iter().map(Claims::of).collect();
    let before = Routes {
        router: &old.router,
        rooms: &before_rooms,
    };
    let after = Routes {
        router: &router,
        rooms: &after_rooms,
    };
    let mut out = Vec::new();
    for (i, o) in old.rooms.iter().enumerate() {
        let Some((by, at)) = taken_from(i, &before, &after) else {
            continue;
        };
        let (active, waiting, unanswered) = match old
            .store_call("stats", o.name(), old.store.stats(&o.cfg.params))
            .await
        {
            Ok(st) => (st.active, st.waiting, false),
            Err(e) => {
                old.warn_store_error(&e);
                // As the last tick saw them, with what this instance let in since on its own:
                // the walk-ins the store let in at once, and the `local` policy's admissions
                // (found by re-review r90c: a rename during an outage, with a visitor let in
                // locally or a walk-in within a tick of it, was applied, and that visitor was
                // sent to the back of another room's line).
                let now = old.clock.now_micros();
                let since = o
                    .recovery
                    .entered_since_known()
                    .saturating_add(o.local.active(now));
                (
                    o.live.active().saturating_add(since),
                    o.live.waiting(),
                    true,
                )
            }
        };
        let gone = !new.rooms.iter().any(|r| r.name() == o.name());
        let waiting = if gone { 0 } else { waiting };
        if active > 0 || waiting > 0 {
            out.push(Takeover {
                room: o.name().to_string(),
                by,
                at,
                gone,
                active,
                waiting,
                unanswered,
            });
        }
    }
    out
}

/// A room's name, hosts and paths.
pub(super) struct Claims<'a> {
    pub name: &'a str,
    pub hosts: &'a [HostPattern],
    pub paths: &'a [String],
}

impl<'a> Claims<'a> {
    fn of(r: &'a config::RoomConfig) -> Self {
        Self {
            name: r.name(),
            hosts: &r.hosts,
            paths: &r.paths,
        }
    }
}

/// One file's routing and its rooms, in the router's order.
pub(super) struct Routes<'a> {
    pub router: &'a Router,
    pub rooms: &'a [Claims<'a>],
}

/// Where the new routing (`after`) gives a request the running one (`before`) gives room `o`
/// to a room of another name, or refuses it: that room's name (`None`: refused), and where
/// (host, or `*` for none, and path).
/// The points asked: every host either file names (and one neither names, and none) with each
/// of `o`'s paths and each path of either file one of them covers.
pub(super) fn taken_from(
    o: usize,
    before: &Routes,
    after: &Routes,
) -> Option<(Option<String>, String)> {
    let own = before.rooms.get(o)?;
    let all = || before.rooms.iter().chain(after.rooms.iter());
    let mut hosts: Vec<String> = vec![String::new(), UNKNOWN_HOST.to_string()];
    for p in all().flat_map(|r| r.hosts.iter()) {
        let h = match p {
            HostPattern::Any => continue,
            HostPattern::Exact(h) => h.clone(),
            HostPattern::Suffix(s) => format!("anteroom-probe{s}"),
        };
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let nested = all()
        .flat_map(|r| r.paths.iter())
        .filter(|n| own.paths.iter().any(|p| path_covers_folded(p, n)));
    // Each as written, in lower case and in upper case: a path the file spells with capitals
    // is one the strict routing refuses as written (its readings disagree), while requests in
    // lower case meet the room (re-review: `/SALE/vip` nested in `/sale` took its visitors
    // unseen); under lenient matching a request in capitals can fall in two rooms.
    let mut points: Vec<String> = Vec::new();
    for p in own.paths.iter().chain(nested) {
        for form in case_forms(p) {
            if !points.contains(&form) {
                points.push(form);
            }
        }
    }
    let mut refused = None;
    for h in &hosts {
        for p in &points {
            // As a request is routed: every reading of the path (case-folded too).
            let readings = Readings::of(p);
            if before.router.decide(&[h.as_str()], &readings) != Routing::Room(o) {
                continue;
            }
            let host = if h.is_empty() { "*" } else { h.as_str() };
            match after.router.decide(&[h.as_str()], &readings) {
                Routing::Room(i) => {
                    let by = after.rooms.get(i)?.name;
                    if by != own.name {
                        return Some((Some(by.to_string()), format!("{host}{p}")));
                    }
                }
                // Refused now because its readings fall in two rooms: the room's visitors lose
                // the page (re-review: a site-wide room added under lenient matching). Another
                // refusal (a spelling the narrowed room makes ambiguous, a host the file no
                // longer serves) is what the new file asks for, as a path given to nobody.
                Routing::Refuse(why) if why == TWO_ROOMS && refused.is_none() => {
                    refused = Some(format!("{host}{p}"))
                }
                _ => {}
            }
        }
    }
    refused.map(|at| (None, at))
}

/// At most this many spellings of one path are asked ([`case_forms`]).
const CASE_FORMS: usize = 64;

/// `p` as written, in lower case, in upper case, and — up to [`CASE_FORMS`] of them — with each
/// segment in each of those: a shorter room's prefix matches as written while a longer one's
/// matches a lower-case reading, so under lenient matching `/s/V` falls in `/s` and `/s/v`
/// both (found by the property test below: a site-wide room on `/s` added beside `/s/v` took
/// such requests unseen).
fn case_forms(p: &str) -> Vec<String> {
    let whole = vec![
        p.to_string(),
        p.to_ascii_lowercase(),
        p.to_ascii_uppercase(),
    ];
    let mut forms: Vec<String> = vec![String::new()];
    for (i, segment) in p.split('/').enumerate() {
        let mut kinds = vec![
            segment.to_string(),
            segment.to_ascii_lowercase(),
            segment.to_ascii_uppercase(),
        ];
        kinds.dedup();
        kinds.sort();
        kinds.dedup();
        let mut next = Vec::with_capacity(forms.len() * kinds.len());
        for f in &forms {
            for k in &kinds {
                next.push(if i == 0 {
                    k.clone()
                } else {
                    format!("{f}/{k}")
                });
            }
        }
        if next.len() > CASE_FORMS {
            return whole;
        }
        forms = next;
    }
    for w in whole {
        if !forms.contains(&w) {
            forms.push(w);
        }
    }
    forms
}

#[cfg(test)]
mod tests;
