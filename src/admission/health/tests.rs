use super::sources::{matching, RECENT, SECOND_MASK};
use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_visitor_votes_once_a_second() {
    let h = OriginHealth::default();
    let (a, b) = (
        crate::store::VisitorId::random(),
        crate::store::VisitorId::random(),
    );
    assert!(h.vote(&a, 7));
    assert!(!h.vote(&a, 7), "a second request in the same second");
    assert!(h.vote(&b, 7) || b.as_bytes()[8..] == a.as_bytes()[8..]);
    assert!(h.vote(&a, 8), "the next second");
    assert!(
        h.vote(&a, 0) && !h.vote(&a, 0),
        "second 0 is a second like any"
    );
}

#[test]
fn sources_are_told_apart_within_their_window() {
    let h = OriginHealth::default();
    let vids: Vec<_> = (0..6).map(|_| crate::store::VisitorId::random()).collect();
    let nets: Vec<u64> = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
        .iter()
        .map(|n| network_key(n))
        .collect();
    let none = Sources {
        voting: 0,
        failing: 0,
        slow: 0,
    };
    assert_eq!(h.sources(100, 2), none);
    // One visitor failing every second from one network is one source.
    for s in 90..=100 {
        h.voted_from(&vids[0], nets[0], s, (true, None));
    }
    h.voted_from(&vids[1], nets[1], 99, (true, None));
    h.voted_from(&vids[2], nets[2], 97, (true, None));
    h.voted_from(&vids[3], nets[3], 100, (false, None));
    let got = h.sources(100, 2);
    assert_eq!(
        (got.voting, got.failing),
        (3, 2),
        "the third failed 3 s ago"
    );
    assert_eq!(h.sources(100, 4).failing, 3);
    assert_eq!(h.sources(103, 2), none, "all of them long ago");
    // The second wraps in the entry: ages stay right across it.
    let wrap = SECOND_MASK - 1;
    h.voted_from(&vids[3], nets[3], wrap, (true, None));
    assert_eq!(h.sources(wrap + 1, 2).failing, 1);
}

#[test]
fn one_visitor_from_many_networks_or_many_from_one_is_one_source() {
    let h = OriginHealth::default();
    let vid = crate::store::VisitorId::random();
    for n in 0..5 {
        h.voted_from(&vid, network_key(&format!("10.0.0.{n}")), 50, (true, None));
    }
    assert_eq!(h.sources(50, 2).failing, 1, "one admission, five addresses");
    let net = network_key("10.0.9.9");
    for _ in 0..5 {
        h.voted_from(&crate::store::VisitorId::random(), net, 60, (true, None));
    }
    assert_eq!(h.sources(60, 2).failing, 1, "five visitors, one network");
    // Both at once: the rotating visitor and the many on one network are two.
    for n in 0..3 {
        h.voted_from(&vid, network_key(&format!("10.0.0.{n}")), 60, (true, None));
    }
    assert_eq!(h.sources(60, 2).failing, 2);
    // Many pairs: a pair seen again keeps its entry, new ones take the oldest.
    for i in 0..(2 * RECENT as u64) {
        let v = crate::store::VisitorId::random();
        h.voted_from(&v, network_key(&format!("10.1.0.{i}")), 300, (true, None));
    }
    assert_eq!(h.sources(300, 2).failing, RECENT as u64);
}

#[test]
fn a_matching_is_as_large_as_it_can_be() {
    // v1 from a and b, v2 from a only: v1 takes b, v2 takes a (a greedy pass that gave v1
    // network a would find 1).
    assert_eq!(matching(&[(1, 10), (1, 11), (2, 10)]), 2);
    assert_eq!(matching(&[(1, 10), (2, 10), (3, 10)]), 1);
    assert_eq!(matching(&[(1, 10), (1, 11), (1, 12)]), 1);
    assert_eq!(matching(&[]), 0);
    assert_eq!(matching(&[(1, 10), (2, 11), (3, 12), (3, 10)]), 3);
}

/// A window whose votes all fall in one part (nothing to set aside): `fast` votes at 15 ms,
/// `slow` at a second, `errors` of them failed.
fn one_part(fast: u64, slow: u64, errors: u64) -> Counts {
    let h = OriginHealth::default();
    let net = network_key("10.0.0.1");
    for i in 0..fast + slow {
        let latency = if i < fast { ms(15) } else { ms(1000) };
        h.record(net, Some(latency), i < errors);
    }
    h.read()
}

fn sources(voting: u64, failing: u64, slow: u64) -> Sources {
    Sources {
        voting,
        failing,
        slow,
    }
}

#[test]
fn failures_count_from_three_sources_or_every_source() {
    let window = one_part(40, 0, 8);
    let target = ms(300);
    let judge = |voting, failing| judged(&window, sources(voting, failing, 0), target, target);
    assert_eq!(judge(10, 2).errors, 0, "two sources among ten");
    assert_eq!(judge(10, MIN_FAILING_SOURCES).errors, 8);
    assert_eq!(judge(2, 2).errors, 8, "every network that voted failed");
    assert_eq!(
        judge(1, 1).errors,
        8,
        "one network behind everyone (a load balancer)"
    );
    assert_eq!(judge(0, 0).errors, 0);
    assert_eq!(judge(9, 1).requests, 40);
}

/// A slow window counts only when the slowness comes from three sources, or every source
/// (found by review: five visitors of one network asking for a slow page among thirty fast
/// ones drove the rate to `min-rate`); else it is judged by its votes that were not slow (taken
/// as at the target, it held the rate where it stood: re-review).
#[test]
fn slowness_counts_from_three_sources_or_every_source() {
    let target = ms(300);
    let slow = one_part(30, 10, 0);
    let rest = bucket_top(bucket_of(ms(15)));
    let judge = |window: &Counts, voting, slow| {
        judged(window, sources(voting, 0, slow), target, target).p90
    };
    assert_eq!(judge(&slow, 30, 1), rest, "one network's slow page");
    assert_eq!(judge(&slow, 30, 2), rest);
    let all = bucket_top(bucket_of(ms(1000)));
    assert_eq!(judge(&slow, 30, 3), all, "three sources: the shop");
    assert_eq!(judge(&slow, 2, 2), all, "every source that voted");
    let fast = one_part(40, 0, 0);
    assert_eq!(judge(&fast, 30, 0), rest, "a fast window is as it was");
}

/// Votes from networks named `10.N.0.0`: `(first, count, latency in ms, failed)`, each
/// network `first..first + count` giving one such vote per `each`.
fn window_of(groups: &[(u32, u32, u64, u64, bool)]) -> Counts {
    let h = OriginHealth::default();
    for &(first, count, each, latency, failed) in groups {
        for n in first..first + count {
            let net = network_key(&format!("10.{}.{}.0", n / 256, n % 256));
            for _ in 0..each {
                h.record(net, Some(ms(latency)), failed);
            }
        }
    }
    h.read()
}

/// The window is judged without the parts a few networks could sway ([`trim`]). Found by
/// review: an honest tail supplied the three slow sources, and one network's slow pages then
/// cut the rate to `min-rate`; a room with a higher target on the same upstream was not
/// protected; many fast identities of one network hid a slow shop.
#[test]
fn a_few_networks_cannot_sway_the_window_either_way() {
    let many = sources(16, 16, 16);
    let target = ms(300);
    // Thirty networks answered in 40 ms, but for 2 % of their votes (350 ms); one network
    // sends a slow page, five identities a second.
    let tail = (0..30)
        .map(|n| (n, 1, 49, 40, false))
        .chain((0..30).map(|n| (n, 1, 1, 350, false)));
    let mut groups: Vec<_> = tail.collect();
    groups.push((1000, 1, 250, 1000, false));
    let w = window_of(&groups);
    assert!(w.total().quantile(0.9) > target, "the votes as they are");
    assert!(
        judged(&w, many, target, target).p90 <= target,
        "one network's page"
    );
    // Two networks: still theirs.
    groups.push((2000, 1, 250, 1000, false));
    let w = window_of(&groups);
    assert!(
        judged(&w, many, target, target).p90 <= target,
        "two networks"
    );
    // A room of a higher target on the same upstream: its own target sets aside the slow.
    let w = window_of(&[(0, 30, 10, 400, false), (1000, 1, 100, 3000, false)]);
    assert!(w.total().quantile(0.9) > ms(1000));
    assert!(judged(&w, many, ms(1000), target).p90 <= ms(1000));
    // A shop slow for everyone is slow, also with one network's many fast identities (a third
    // of the votes).
    let w = window_of(&[(0, 30, 10, 900, false), (1000, 1, 150, 10, false)]);
    assert!(judged(&w, many, target, target).p90 > target, "not hidden");
    // Few networks with most of the votes are most of the visitors: two honest networks in
    // two parts, ten identities each, and three of an attacker's, one identity each, neither
    // hide the shop slow for the two nor make it slow (found by re-review: both honest parts
    // were set aside, and the attacker's decided). Networks 1005–1009 fall in parts of their
    // own (5, 11, 9, 0, 3).
    let honest = |ms| (1005, 2, 20, ms, false);
    let w = window_of(&[honest(900), (1007, 3, 2, 10, false)]);
    assert!(
        judged(&w, many, target, target).p90 > target,
        "hidden by three"
    );
    let w = window_of(&[honest(40), (1007, 3, 2, 1000, false)]);
    assert!(
        judged(&w, many, target, target).p90 <= target,
        "cut by three"
    );
    // One more network's fast (or answered) votes do not make the honest two too few sources
    // for a shop slow (or failing) for both (found by re-review: a third source, that did not
    // see the slowness, raised the sources needed to three, and the shop read as healthy).
    let honest_and_one = sources(3, 2, 2);
    let w = window_of(&[honest(900), (1007, 1, 2, 10, false)]);
    assert!(
        judged(&w, honest_and_one, target, target).p90 > target,
        "hidden by one"
    );
    let w = window_of(&[(1005, 2, 20, 40, true), (1007, 1, 2, 40, false)]);
    assert!(
        judged(&w, honest_and_one, target, target).error_share() > 0.5,
        "hidden by one"
    );
    // One network's identities asking every second, most of the votes beside honest visitors
    // who read a page every few seconds, are still one source among many (found by re-review:
    // eight of them cut a healthy shop from 50 to 14 beside twenty honest networks).
    let w = window_of(&[(0, 20, 5, 40, false), (1000, 1, 120, 600, false)]);
    assert!(
        judged(&w, sources(16, 0, 1), target, target).p90 <= target,
        "cut by one"
    );
    let w = window_of(&[(0, 20, 5, 40, false), (1000, 1, 120, 40, true)]);
    assert_eq!(
        judged(&w, sources(16, 1, 0), target, target).errors,
        0,
        "failed by one"
    );
    // So beside two honest networks (found by re-review: counting the voting sources only in
    // the parts the trim kept, the two honest parts, set aside as the fastest, left the one
    // network's slowness not a few sources', and a healthy shop was cut to `min-rate`).
    let w = window_of(&[(1005, 2, 10, 40, false), (1007, 1, 40, 600, false)]);
    assert_eq!(
        judged(&w, sources(3, 0, 1), target, target).p90,
        target,
        "cut by one of three"
    );
    let w = window_of(&[(1005, 2, 10, 40, false), (1007, 1, 40, 40, true)]);
    let got = judged(&w, sources(3, 1, 0), target, target);
    assert_eq!((got.errors, got.p90), (0, target), "failed by one of three");
    // Beside one honest network the shop is slow (or fails) for, two identities on two more
    // networks asking for fast pages make its slowness a few sources': held at the target,
    // not read as fast (found by re-review: the rest of the votes was none, the p90 read 0,
    // and the rate rose to its ceiling).
    let w = window_of(&[(1005, 1, 20, 900, false), (1007, 2, 1, 10, false)]);
    let got = judged(&w, sources(3, 0, 1), target, target);
    assert_eq!(got.p90, target, "{got:?}");
    let w = window_of(&[(1005, 1, 20, 40, true), (1007, 2, 1, 10, false)]);
    let got = judged(&w, sources(3, 1, 0), target, target);
    assert_eq!((got.errors, got.p90), (0, target), "{got:?}");
    // Two networks of two identities each, slow, among two honest ones that are fast but for
    // one visitor's slightly slow page (the third slow source): both set aside (found by
    // re-review: of four parts one was, and a sixth of the votes cut).
    let w = window_of(&[
        (1005, 1, 18, 40, false),
        (1005, 1, 2, 400, false),
        (1006, 1, 20, 40, false),
        (1007, 2, 4, 600, false),
    ]);
    assert!(
        judged(&w, sources(5, 0, 3), target, target).p90 <= target,
        "cut by two"
    );
    // Failures: one network failing among an honest 1 % does not fail the shop; a shop failing
    // for everyone is not hidden by one network's answered votes.
    let w = window_of(&[
        (0, 30, 99, 40, false),
        (0, 30, 1, 40, true),
        (1000, 1, 500, 40, true),
    ]);
    assert!(
        w.total().errors * 10 > w.total().requests,
        "14 % as they are"
    );
    assert!(judged(&w, many, target, target).error_share() < 0.02);
    let w = window_of(&[(0, 30, 10, 40, true), (1000, 1, 150, 40, false)]);
    assert!(judged(&w, many, target, target).error_share() > 0.5);
    // Three networks slow among thirty: the shop, as before (three of three parts of their
    // own: networks 1005–1007 fall in parts 5, 11 and 9).
    let w = window_of(&[(0, 30, 10, 40, false), (1005, 3, 100, 1000, false)]);
    assert!(judged(&w, many, target, target).p90 > target);
}

/// Whatever two networks send (up to a third of the window's votes), they cannot make a shop
/// that answers everyone else in time look slow or failing, nor hide a shop that is slow or
/// failing for everyone else — with a dozen other networks voting.
mod property {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn two_networks_cannot_turn_the_judgement(
            honest in proptest::collection::vec(1u32..30, 12..40),
            shop_slow in any::<bool>(),
            shop_failing in any::<bool>(),
            them in proptest::collection::vec((0u32..3000, 0.0f64..1.0, any::<bool>()), 1..=2),
        ) {
            let h = OriginHealth::default();
            let target = ms(300);
            h.set_slow_over(target);
            for (n, &votes) in honest.iter().enumerate() {
                let net = network_key(&format!("192.168.{n}.0"));
                let latency = if shop_slow { ms(900) } else { ms(40) };
                let vid = crate::store::VisitorId::random();
                for _ in 0..votes {
                    h.record(net, Some(latency), shop_failing);
                    h.voted_from(&vid, net, 100, (shop_failing, Some(latency)));
                }
            }
            // Together at most a third of the window's votes: more, and they are most of the
            // visitors who vote ([`trim::trimmed`] keeps at least half of the votes).
            let most = honest.iter().map(|&n| u64::from(n)).sum::<u64>() / 4;
            for (k, &(latency, share, failed)) in them.iter().enumerate() {
                let net = network_key(&format!("172.16.{k}.0"));
                let votes = ((most as f64) * share) as u64;
                // Each vote from an identity of its own.
                for _ in 0..votes {
                    let latency = Some(ms(u64::from(latency)));
                    h.record(net, latency, failed);
                    let vid = crate::store::VisitorId::random();
                    h.voted_from(&vid, net, 100, (failed, latency));
                }
            }
            // The sources as the table of recent pairs keeps them (before, a count of sixteen
            // of each, slow ones too, whatever the networks sent: an attacker's network in
            // the part of an honest one with most of the votes, which cannot be set aside,
            // then read as the shop — found by a CI run).
            let got = judged(&h.read(), h.sources(100, 2), target, target);
            prop_assert_eq!(got.p90 > target, shop_slow, "{:?}", got);
            prop_assert_eq!(got.error_share() > 0.5, shop_failing, "{:?}", got);
        }
    }
}

/// A vote is slow over the lowest target watching the upstream; none is before one is set.
#[test]
fn a_vote_is_slow_over_the_target() {
    let h = OriginHealth::default();
    let net = network_key("10.0.0.1");
    let vid = crate::store::VisitorId::random();
    h.voted_from(&vid, net, 10, (false, Some(Duration::from_secs(5))));
    assert_eq!(h.sources(10, 2).slow, 0, "no target set");
    h.set_slow_over(Duration::from_millis(300));
    h.voted_from(&vid, net, 11, (false, Some(Duration::from_millis(200))));
    assert_eq!(h.sources(11, 2).slow, 0);
    h.voted_from(&vid, net, 12, (false, Some(Duration::from_millis(400))));
    assert_eq!(h.sources(12, 2).slow, 1);
}

#[test]
fn buckets_cover_the_range_in_order() {
    assert_eq!(bucket_of(Duration::from_micros(300)), 0);
    let mut last = 0;
    for n in [
        1, 2, 3, 5, 10, 50, 100, 200, 800, 1000, 5000, 60_000, 600_000,
    ] {
        let b = bucket_of(ms(n));
        assert!(b >= last, "{n}");
        assert!(bucket_top(b) >= ms(n) || b == BUCKETS - 1, "{n}");
        assert!(
            b == 0 || bucket_top(b) <= ms(n).mul_f64(1.19) + ms(1),
            "{n}"
        );
        last = b;
    }
}

#[test]
fn the_p90_is_of_the_last_window_only() {
    let h = OriginHealth::default();
    let net = network_key("10.0.0.1");
    let mut w = HealthWindow::default();
    w.tick(h.read(), 3);
    for _ in 0..90 {
        h.record(net, Some(ms(100)), false);
    }
    for _ in 0..10 {
        h.record(net, Some(ms(2000)), true);
    }
    let got = w.tick(h.read(), 3).total();
    assert_eq!((got.requests, got.errors), (100, 10));
    assert!(got.quantile(0.9) >= ms(100) && got.quantile(0.9) < ms(120));
    h.record(network_key("10.0.0.2"), None, true);
    let got = w.tick(h.read(), 3).total();
    assert_eq!((got.requests, got.errors), (101, 11));
    // Two more quiet ticks: the busy one has left the window of three.
    w.tick(h.read(), 3);
    let got = w.tick(h.read(), 3).total();
    assert_eq!(
        (got.requests, got.errors, got.quantile(0.9)),
        (1, 1, Duration::ZERO)
    );
}

/// The p90 of a window's votes up to a latency: what is left of it without the slow ones.
#[test]
fn a_quantile_up_to_a_latency_leaves_the_slower_votes_out() {
    let c = one_part(30, 10, 0).total();
    assert!(c.quantile(0.9) >= Duration::from_secs(1));
    let rest = c.quantile_up_to(0.9, Duration::from_millis(300));
    assert!(rest < Duration::from_millis(20), "{rest:?}");
    assert_eq!(
        Tally::default().quantile_up_to(0.9, Duration::from_secs(1)),
        Duration::ZERO
    );
}

/// Many pairs of one network (or of one visitor) take one another's places in the table, not
/// those of other sources (found by review: forty failing identities of one network sent at
/// once filled it, and every other source that had failed was forgotten).
#[test]
fn one_networks_many_identities_do_not_push_other_sources_out() {
    let h = OriginHealth::default();
    for n in 0..3 {
        let net = network_key(&format!("10.0.0.{n}"));
        h.voted_from(&crate::store::VisitorId::random(), net, 100, (true, None));
    }
    let crowd = network_key("10.9.9.9");
    for _ in 0..40 {
        h.voted_from(&crate::store::VisitorId::random(), crowd, 101, (true, None));
    }
    let vid = crate::store::VisitorId::random();
    for n in 0..40 {
        let net = network_key(&format!("10.8.{n}.0"));
        h.voted_from(&vid, net, 101, (true, None));
    }
    assert_eq!(h.sources(101, 5).failing, 5, "three, the crowd, the rover");
    // Entries long out of the window go before twins.
    for n in 0..RECENT as u64 {
        let net = network_key(&format!("10.7.{n}.0"));
        h.voted_from(
            &crate::store::VisitorId::random(),
            net,
            1000 + n,
            (true, None),
        );
    }
    assert_eq!(h.sources(1000 + RECENT as u64, 30).failing, RECENT as u64);
}
