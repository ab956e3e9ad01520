//! The takeover rule's tests: who takes a room's requests when a reload changes the file.

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

mod routes {
    use super::*;
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

mod cases {
    use super::*;
    use crate::route::{OtherHosts, PathMatching};

    #[test]
    fn a_spelling_in_two_cases_is_asked_too() {
        let mut forms = super::super::case_forms("/s/v");
        forms.sort();
        assert_eq!(forms, ["/S/V", "/S/v", "/s/V", "/s/v"]);
        assert_eq!(super::super::case_forms("/").len(), 1);
        // Too many segments: the whole path in its three cases.
        assert_eq!(super::super::case_forms("/a/b/c/d/e/f/g").len(), 3);
        // The property test's case: a site-wide room on /s added beside /s/v, lenient.
        let old = [room("b", &[], &["/s/v"])];
        let new = [room("c", &[], &["/s"]), room("b", &[], &["/s/v"])];
        assert!(taken_with(&old, "b", &new, OtherHosts::Refuse, PathMatching::Lenient).is_some());
    }
}

mod properties {
    use super::*;
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
