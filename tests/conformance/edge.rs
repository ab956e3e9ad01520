//! What the edge answers rest on: places in join's answers, the line sampled by every admit,
//! and the liveness batch — the same on every backend.

use std::time::Duration;

use anteroom::line::{estimate, Estimate};
use anteroom::store::line::Place;
use anteroom::store::{Admission, AdmitContext, Command, Ending, RoomPatch, VisitorId};

use super::{occupy, room, waiting_pos, Harness};

fn place_of(a: &Admission) -> Place {
    match a {
        Admission::Waiting { place, .. } | Admission::Paused { place, .. } => *place,
        other => panic!("not in line: {other:?}"),
    }
}

/// Against the store's own rank (ZRANK in Redis): every visitor's estimated rank from the
/// sample is exact at the head and within max(one tick's batch, 1 % of the rank) behind it.
pub async fn the_sampled_line_places_everyone_within_a_batch_or_one_percent(h: &dyn Harness) {
    let s = h.store();
    // 30/s with a 100 ms tick: a batch of 3.
    let p = room("sample", 30.0, 1);
    occupy(&*s, &p).await;
    let held = RoomPatch {
        queue_all: Some(true),
        ..Default::default()
    };
    s.update_room_state(&p, &held).await.unwrap();
    let mut line = Vec::new();
    for _ in 0..2500 {
        let v = VisitorId::random();
        let a = s.join(&p, v).await.unwrap();
        line.push((v, place_of(&a)));
    }
    let keys: Vec<u64> = line.iter().map(|(_, pl)| pl.key).collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "places follow the line"
    );
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert_eq!(r.waiting, 2500);
    let points = &r.line.points;
    assert_eq!(points.first().map(|x| x.0), Some(0));
    assert_eq!(points.last().map(|x| x.0), Some(2499));
    assert!(points.len() < 500, "{} points for 2500", points.len());
    for (rank, (v, place)) in line.iter().enumerate().skip(1) {
        let exact = waiting_pos(&s.join(&p, *v).await.unwrap()).unwrap() - 1;
        assert_eq!(exact, rank as u64);
        let Estimate::Ahead(est) = estimate(&r.line, *place) else {
            panic!("rank {rank} asked the store");
        };
        let allowed = if exact < 64 { 0 } else { 3u64.max(exact / 100) };
        assert!(
            est.abs_diff(exact) <= allowed,
            "rank {exact}: estimated {est}"
        );
    }
    assert_eq!(estimate(&r.line, line[0].1), Estimate::AskStore, "the head");
}

/// A second admit within half a tick (another instance's, on Redis reusing the first one's
/// sample) tells the line as it is after its own admissions: exact at the head, within a batch
/// or 1 % behind it (found by review: the reused sample was the line before that call's batch,
/// and positions told through the second instance ran a batch above ZRANK). Here the shop is
/// full after the first call (max-active 10 of a batch of 30) and five sessions end before the
/// second.
pub async fn a_second_admit_within_half_a_tick_samples_the_line_after_its_batch(h: &dyn Harness) {
    let s = h.store();
    // 300/s with a 100 ms tick: a batch of 30.
    let p = room("resample", 300.0, 10);
    let line = super::line_up(&*s, &p, 600).await;
    h.advance(Duration::from_millis(100));
    let first = s.admit(&p).await.unwrap();
    assert_eq!(first.admitted, 10, "{first:?}");
    let now = h.wall_secs();
    let ending = Ending::of(Command::Complete, now, now + 600, Duration::from_secs(600));
    for v in first.admitted_visitors.iter().take(5) {
        s.finish(&p, v.vid, &ending).await.unwrap();
    }
    h.advance(Duration::from_millis(40));
    let second = s.admit(&p).await.unwrap();
    assert_eq!(second.admitted, 5, "the second call admits too: {second:?}");
    let gone = 15;
    assert_eq!(second.waiting as usize, line.len() - gone);
    assert_eq!(second.line.points.first().map(|x| x.0), Some(0));
    for (i, v) in line.iter().enumerate().skip(gone + 1) {
        let a = s.join(&p, *v).await.unwrap();
        let exact = waiting_pos(&a).unwrap() - 1;
        assert_eq!(exact as usize, i - gone);
        let Estimate::Ahead(est) = estimate(&second.line, place_of(&a)) else {
            panic!("rank {exact} asked the store");
        };
        let allowed = if exact < 64 - gone as u64 {
            0
        } else {
            30u64.max(exact / 100)
        };
        assert!(
            est.abs_diff(exact) <= allowed,
            "rank {exact}: estimated {est}"
        );
    }
}

/// Visitors who poll only through tickets keep their places through the admit call's batch;
/// one whose ticket names an earlier place (they left and joined again) is not moved by it.
pub async fn the_liveness_batch_keeps_places_and_only_the_named_ones(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("batch", 100.0, 1);
    p.abandon_after = Duration::from_secs(10);
    occupy(&*s, &p).await;
    let polling = VisitorId::random();
    let silent = VisitorId::random();
    let pp = place_of(&s.join(&p, polling).await.unwrap());
    let sp = place_of(&s.join(&p, silent).await.unwrap());
    // The silent visitor's ticket is of another place than theirs: it must not keep them.
    let wrong = Place {
        key: sp.key + 1,
        ..sp
    };
    for _ in 0..30 {
        h.advance(Duration::from_millis(500));
        let ctx = AdmitContext {
            seen: vec![(polling, pp), (silent, wrong)],
            ..Default::default()
        };
        s.admit_with(&p, &ctx).await.unwrap();
    }
    let st = s.stats(&p).await.unwrap();
    assert_eq!((st.waiting, st.abandoned_total), (1, 1), "{st:?}");
    let a = s.join(&p, polling).await.unwrap();
    assert!(
        matches!(
            a,
            Admission::Waiting {
                position: 1,
                joined: false,
                ..
            }
        ),
        "{a:?}"
    );
    assert_eq!(place_of(&a), pp, "the same place");
    let a = s.join(&p, silent).await.unwrap();
    assert!(
        matches!(a, Admission::Waiting { joined: true, .. }),
        "{a:?}"
    );
}

/// A line that empties starts over: a ticket of the old line names no place in the new one.
pub async fn a_place_of_an_emptied_line_names_no_place_in_the_next(h: &dyn Harness) {
    let s = h.store();
    let p = room("epoch", 100.0, 1);
    occupy(&*s, &p).await;
    let v = VisitorId::random();
    let old = place_of(&s.join(&p, v).await.unwrap());
    assert_eq!(s.clear_waiting(&p).await.unwrap(), 1);
    // An epoch is the time its line started: some time passes between two calls.
    h.advance(Duration::from_millis(1));
    let w = VisitorId::random();
    s.join(&p, w).await.unwrap();
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert_eq!(r.waiting, 1);
    let behind = Place {
        key: old.key + 1_000_000,
        ..old
    };
    assert_ne!(r.line.epoch, old.epoch, "a new epoch");
    assert_eq!(estimate(&r.line, behind), Estimate::AskStore);
}

/// A visitor whose turn came, named by the admit call's batch (they polled through a ticket and
/// the store did not hear it: the poll failed or met an open breaker), keeps the claim from
/// that call; one whose claim already ran out is not brought back by it, nor is a session
/// shortened. Before (found by review), a Redis that answered the admission steps in time and
/// the polls too late gave turns that ran out after claim-ttl while their visitors polled.
pub async fn a_turn_whose_visitor_is_noted_keeps_its_claim(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("claimkeep", 1.0, 2);
    p.claim_ttl = Duration::from_secs(5);
    let line = super::line_up(&*s, &p, 3).await;
    let (a, b, c) = (line[0], line[1], line[2]);
    let mut places = Vec::new();
    for v in &line {
        places.push(place_of(&s.join(&p, *v).await.unwrap()));
    }
    let turn = |r: &anteroom::store::AdmitReport, v| r.admitted_visitors.iter().any(|x| x.vid == v);
    // The first two get their turns (max-active 2); c waits for a slot.
    let (mut a_in, mut b_in, mut c_in) = (false, false, false);
    let mut b_expired = false;
    let mut expired = 0;
    for step in 0..20 {
        h.advance(Duration::from_secs(1));
        // a and c are noted every step (b only once its claim ran out: too late).
        let mut seen = vec![(a, places[0]), (c, places[2])];
        if b_expired {
            seen.push((b, places[1]));
        }
        let ctx = AdmitContext {
            seen,
            ..Default::default()
        };
        let r = s.admit_with(&p, &ctx).await.unwrap();
        a_in |= turn(&r, a);
        b_in |= turn(&r, b);
        c_in |= turn(&r, c);
        expired += r.expired;
        b_expired |= b_in && expired > 0;
        assert!(
            step < 3 || (a_in && b_in),
            "a and b had their turns by step 3"
        );
    }
    assert!(c_in, "c had its turn once b's claim ran out");
    assert_eq!(expired, 1, "b's claim alone ran out");
    assert_eq!(
        s.join(&p, a).await.unwrap(),
        Admission::Admitted,
        "a's turn, kept by the batch for four times claim-ttl"
    );
    assert_eq!(s.join(&p, c).await.unwrap(), Admission::Admitted);
    let again = s.join(&p, b).await.unwrap();
    assert!(
        matches!(again, Admission::Waiting { joined: true, .. }),
        "b's claim ran out before it was noted: a newcomer now ({again:?})"
    );
    // A session (claimed, session-ttl long) named by the batch keeps its own end.
    h.advance(Duration::from_secs(1));
    let ctx = AdmitContext {
        seen: vec![(a, places[0])],
        ..Default::default()
    };
    s.admit_with(&p, &ctx).await.unwrap();
    h.advance(Duration::from_secs(30));
    assert_eq!(s.join(&p, a).await.unwrap(), Admission::Admitted);
}
