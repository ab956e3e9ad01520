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
        let (active, waiting) = match old
            .store_call("stats", o.name(), old.store.stats(&o.cfg.params))
            .await
        {
            Ok(st) => (st.active, st.waiting),
            Err(e) => {
                old.warn_store_error(&e);
                (o.live.active(), o.live.waiting())
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
mod tests_support {
    use super::{taken_from, Claims, Routes};
    use crate::route::{HostPattern, OtherHosts, PathMatching, Policy, RoomRoutes, Router};

    pub type Room = (&'static str, Vec<HostPattern>, Vec<String>);

    pub fn room(name: &'static str, hosts: &[&str], paths: &[&str]) -> Room {
        let hosts = if hosts.is_empty() {
            vec![HostPattern::Any]
        } else {
            hosts
                .iter()
                .map(|h| HostPattern::parse(h).unwrap())
                .collect()
        };
        (name, hosts, paths.iter().map(|p| p.to_string()).collect())
    }

    pub fn router(file: &[Room], other_hosts: OtherHosts, matching: PathMatching) -> Router {
        Router::new(
            file.iter().map(|(_, h, p)| RoomRoutes {
                hosts: h,
                paths: p,
                upstream: 0,
            }),
            Policy {
                other_hosts,
                matching,
                ..Policy::default()
            },
        )
    }

    fn claims(file: &[Room]) -> Vec<Claims<'_>> {
        file.iter()
            .map(|(n, h, p)| Claims {
                name: n,
                hosts: h,
                paths: p,
            })
            .collect()
    }

    /// Who takes room `name`'s requests of the file `old` in the file `new`.
    pub fn taken_with(
        old: &[Room],
        name: &str,
        new: &[Room],
        other: OtherHosts,
        matching: PathMatching,
    ) -> Option<String> {
        let (ro, rn) = (router(old, other, matching), router(new, other, matching));
        let (co, cn) = (claims(old), claims(new));
        let before = Routes {
            router: &ro,
            rooms: &co,
        };
        let after = Routes {
            router: &rn,
            rooms: &cn,
        };
        let o = old.iter().position(|r| r.0 == name).unwrap();
        taken_from(o, &before, &after).map(|(by, _)| by.unwrap_or_else(|| "(refused)".into()))
    }

    pub fn taken(old: &[Room], name: &str, new: &[Room]) -> Option<String> {
        taken_with(old, name, new, OtherHosts::default(), PathMatching::Strict)
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use crate::route::{OtherHosts, PathMatching};

    #[test]
    fn a_rooms_paths_are_taken_as_routing_gives_them() {
        let sale = room("sale", &[], &["/sale"]);
        let shop = room("shop", &[], &["/shop"]);
        let both = [sale.clone(), shop.clone()];
        let some = |s: &str| Some(s.to_string());
        // Kept as it was, or removed with nothing on its paths.
        assert_eq!(taken(&both, "sale", &both), None);
        assert_eq!(taken(&both, "sale", std::slice::from_ref(&shop)), None);
        // Renamed, in any case.
        let one = std::slice::from_ref(&sale);
        assert_eq!(
            taken(one, "sale", &[room("sale2", &[], &["/sale"])]),
            some("sale2")
        );
        assert_eq!(
            taken(one, "sale", &[room("sale2", &[], &["/Sale"])]),
            some("sale2")
        );
        assert_eq!(
            taken(
                &[room("sale", &[], &["/Sale"])],
                "sale",
                &[room("sale2", &[], &["/sale"])]
            ),
            some("sale2")
        );
        // A prefix that only starts alike takes nothing.
        assert_eq!(taken(one, "sale", &[room("sales", &[], &["/sales"])]), None);
        assert_eq!(taken(one, "sale", &[room("sa", &[], &["/sa"])]), None);
        // A path moved to a room that keeps its name, a room nested inside, a site-wide room.
        let moved = [
            room("sale", &[], &["/sale-old"]),
            room("shop", &[], &["/shop", "/sale"]),
        ];
        assert_eq!(taken(&both, "sale", &moved), some("shop"));
        assert_eq!(
            taken(
                one,
                "sale",
                &[sale.clone(), room("vip", &[], &["/sale/vip"])]
            ),
            some("vip")
        );
        assert_eq!(
            taken(one, "sale", &[room("site", &[], &["/"])]),
            some("site")
        );
        // Another host's room: the room's own visitors never meet it.
        let bound = [room("sale", &["a.example"], &["/sale"])];
        assert_eq!(
            taken(
                &bound,
                "sale",
                &[room("shop", &["b.example"], &["/shop", "/sale"])]
            ),
            None
        );
        // A room for every host: its visitors with that host meet a room bound to it.
        assert_eq!(
            taken(
                one,
                "sale",
                &[sale.clone(), room("vip", &["shop.test"], &["/sale/x"])]
            ),
            some("vip")
        );
    }

    /// Re-review: a room nested in a site-wide one already, in both files, takes nothing from
    /// it; the same file reloaded is no takeover, nor is a nested room removed.
    #[test]
    fn what_a_room_already_had_is_not_taken() {
        let file = [room("shop", &[], &["/"]), room("sale", &[], &["/sale"])];
        assert_eq!(taken(&file, "shop", &file), None);
        assert_eq!(taken(&file, "sale", &file), None);
        let bound = [
            room("shop", &[], &["/"]),
            room("sale", &["b.example"], &["/sale"]),
        ];
        assert_eq!(taken(&bound, "shop", &bound), None);
        assert_eq!(taken(&bound, "sale", &bound), None);
        // The nested room removed: its paths go back to the site-wide room, taking nothing
        // from it; the site-wide room removed, the nested one keeps what it had.
        assert_eq!(taken(&file, "sale", &file[..1]), Some("shop".into()));
        assert_eq!(taken(&file, "shop", &file[..1]), None);
        assert_eq!(taken(&file, "sale", &file[1..]), None);
    }

    /// Re-review: under lenient matching a site-wide room added makes a request in capitals
    /// fall in two rooms, and refused.
    #[test]
    fn a_request_refused_after_the_reload_is_taken() {
        let old = [room("sale", &[], &["/sale"])];
        let new = [room("sale", &[], &["/sale"]), room("site", &[], &["/"])];
        assert_eq!(
            taken_with(
                &old,
                "sale",
                &new,
                OtherHosts::Refuse,
                PathMatching::Lenient
            ),
            Some("(refused)".into())
        );
    }

    /// Re-review: a nested room written with capitals takes the lower-case requests too.
    #[test]
    fn a_nested_room_in_capitals_is_a_takeover() {
        let old = [room("sale", &[], &["/sale"])];
        let new = [
            room("sale", &[], &["/sale"]),
            room("vip", &[], &["/SALE/vip"]),
        ];
        assert_eq!(taken(&old, "sale", &new), Some("vip".into()));
    }

    /// Re-review: with `other-hosts = "room"`, a host-bound room has the requests of hosts no
    /// room names; a room bound to one of them takes those.
    #[test]
    fn the_hosts_a_room_was_given_by_other_hosts_are_its_own() {
        let old = [room("sale", &["a.example"], &["/sale"])];
        let new = [
            room("sale", &["a.example"], &["/sale"]),
            room("bsale", &["b.example"], &["/sale"]),
        ];
        assert_eq!(
            taken_with(&old, "sale", &new, OtherHosts::Room, PathMatching::Strict),
            Some("bsale".into())
        );
        // Refused or passed before: nobody of `sale`'s was on b.example.
        assert_eq!(
            taken_with(&old, "sale", &new, OtherHosts::Refuse, PathMatching::Strict),
            None
        );
        assert_eq!(
            taken_with(&old, "sale", &new, OtherHosts::Pass, PathMatching::Strict),
            None
        );
    }
}

#[cfg(test)]
mod case_tests {
    use super::tests_support::*;
    use crate::route::{OtherHosts, PathMatching};

    #[test]
    fn a_spelling_in_two_cases_is_asked_too() {
        let mut forms = super::case_forms("/s/v");
        forms.sort();
        assert_eq!(forms, ["/S/V", "/S/v", "/s/V", "/s/v"]);
        assert_eq!(super::case_forms("/").len(), 1);
        // Too many segments: the whole path in its three cases.
        assert_eq!(super::case_forms("/a/b/c/d/e/f/g").len(), 3);
        // The property test's case: a site-wide room on /s added beside /s/v, lenient.
        let old = [room("b", &[], &["/s/v"])];
        let new = [room("c", &[], &["/s"]), room("b", &[], &["/s/v"])];
        assert!(taken_with(&old, "b", &new, OtherHosts::Refuse, PathMatching::Lenient).is_some());
    }
}

#[cfg(test)]
mod properties {
    use super::tests_support::*;
    use crate::route::{OtherHosts, PathMatching, Readings, Routing};
    use proptest::prelude::*;

    const PATHS: [&str; 7] = ["/", "/s", "/S", "/s/v", "/S/v", "/s/V", "/t"];
    const HOSTS: [&str; 2] = ["", "h.test"];
    const NAMES: [&str; 4] = ["a", "b", "c", "d"];

    fn file() -> impl Strategy<Value = Vec<(usize, usize, usize)>> {
        proptest::collection::vec((0..NAMES.len(), 0..HOSTS.len(), 0..PATHS.len()), 1..4)
    }

    /// A file of rooms with distinct names, and no two rooms claiming one path (as `check`
    /// requires) for one host.
    fn rooms(spec: &[(usize, usize, usize)]) -> Option<Vec<Room>> {
        let mut out: Vec<Room> = Vec::new();
        for &(n, h, p) in spec {
            let name = NAMES[n];
            let path = PATHS[p];
            let clash = out.iter().any(|(other, hosts, paths)| {
                *other == name
                    || (paths.iter().any(|q| q.eq_ignore_ascii_case(path))
                        && (hosts.len() == 1 || h == 0))
            });
            if clash {
                return None;
            }
            out.push(room(name, if h == 0 { &[] } else { &["h.test"] }, &[path]));
        }
        Some(out)
    }

    proptest! {
        /// Whatever the two files, a request the running routing gives a room and the new one
        /// gives a room of another name is found (over a set of requests that spells every
        /// path of both files in every case, and under them).
        #[test]
        fn every_request_given_to_another_room_is_found(
            old in file(),
            new in file(),
            other in 0..3usize,
            lenient in proptest::bool::ANY,
        ) {
            let (Some(old), Some(new)) = (rooms(&old), rooms(&new)) else {
                return Ok(());
            };
            let other = [OtherHosts::Refuse, OtherHosts::Room, OtherHosts::Pass][other];
            let matching = if lenient { PathMatching::Lenient } else { PathMatching::Strict };
            let (ro, rn) = (router(&old, other, matching), router(&new, other, matching));
            let requests: Vec<String> = PATHS
                .iter()
                .flat_map(|p| {
                    let under = format!("{}/x", p.trim_end_matches('/'));
                    [p.to_string(), p.to_ascii_lowercase(), p.to_ascii_uppercase(), under]
                })
                .collect();
            for (o, (name, _, _)) in old.iter().enumerate() {
                let truth = ["", "h.test", "elsewhere.test"].iter().any(|h| {
                    requests.iter().any(|r| {
                        let readings = Readings::of(r);
                        ro.decide(&[h], &readings) == Routing::Room(o)
                            && match rn.decide(&[h], &readings) {
                                Routing::Room(j) => new[j].0 != *name,
                                Routing::Refuse(why) => why == crate::route::TWO_ROOMS,
                                _ => false,
                            }
                    })
                });
                let found = taken_with(&old, name, &new, other, matching).is_some();
                prop_assert!(!truth || found, "{name}: {old:?} -> {new:?} ({other:?}, {matching:?})");
            }
        }
    }
}
