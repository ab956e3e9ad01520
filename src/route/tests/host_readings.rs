//! The router under every set of host readings, as a property.

use super::*;

proptest::proptest! {
    /// Whatever the rooms and the request's host readings (with `other-hosts = "refuse"`), a
    /// request given a room is given the room of the site every reading names, or a reading
    /// names no site and no other host-bound room protects the path on that room's upstream
    /// (the origin's default site is the room's or unguarded); one let outside names no
    /// room's site and reaches no host-bound room's path on the default upstream.
    #[test]
    fn every_host_reading_is_guarded_by_the_room_given(
        rooms in proptest::collection::vec(
            (0usize..3, proptest::sample::select(vec!["/", "/sale", "/sale/vip"]), 0usize..2),
            1..5,
        ),
        hosts in proptest::collection::vec(
            proptest::sample::select(vec!["shop.test", "vip.test", "evil.test", ""]),
            1..4,
        ),
        path in proptest::sample::select(vec!["/sale/vip/1", "/sale/1", "/about"]),
    ) {
        let pool = [
            HostPattern::Any,
            HostPattern::parse("shop.test").unwrap(),
            HostPattern::parse("vip.test").unwrap(),
        ];
        let patterns: Vec<[HostPattern; 1]> =
            rooms.iter().map(|(h, _, _)| [pool[*h].clone()]).collect();
        let paths: Vec<[String; 1]> = rooms.iter().map(|(_, p, _)| [p.to_string()]).collect();
        let r = Router::new(
            rooms.iter().enumerate().map(|(i, (_, _, up))| RoomRoutes {
                hosts: &patterns[i],
                paths: &paths[i],
                upstream: *up,
            }),
            Policy::default(),
        );
        let covers = |i: usize| path_covers(&paths[i][0], path);
        let names_a_site = |h: &str| (0..rooms.len()).any(|i| pool[rooms[i].0].matches(h) && covers(i));
        let guards_elsewhere = |upstream: usize, besides: Option<usize>| {
            (0..rooms.len()).find(|&i| {
                pool[rooms[i].0].is_bound()
                    && r.upstreams[i] == upstream
                    && Some(i) != besides
                    && covers(i)
            })
        };
        let given = r.decide(&hosts, &Readings::of(path));
        match given {
            Routing::Room(x) => {
                for h in &hosts {
                    if names_a_site(h) {
                        continue;
                    }
                    let z = guards_elsewhere(r.upstreams[x], Some(x));
                    proptest::prop_assert!(
                        z.is_none(),
                        "{hosts:?}{path} given room {x}: {h:?} may read room {z:?}'s site"
                    );
                }
            }
            Routing::Outside => {
                for h in &hosts {
                    proptest::prop_assert!(!names_a_site(h), "{hosts:?}{path} outside");
                }
                let z = guards_elsewhere(r.default_upstream, None);
                proptest::prop_assert!(z.is_none(), "{hosts:?}{path} outside past room {z:?}");
            }
            _ => {}
        }
    }
}

#[test]
fn a_query_value_is_read_with_its_escapes_decoded_when_they_make_text() {
    assert_eq!(query_decoded("drop"), "drop");
    assert_eq!(query_decoded("drop%401796"), "drop@1796");
    assert_eq!(query_decoded("a%2fb%2F"), "a/b/");
    // Not escapes, or not text: as it is.
    assert_eq!(query_decoded("100%"), "100%");
    assert_eq!(query_decoded("%zz%4"), "%zz%4");
    assert_eq!(query_decoded("%ff%fe"), "%ff%fe");
}
