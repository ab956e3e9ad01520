//! The line's limits and controls: a full line, a held line, a room switched off, overrides,
//! clearing the line, the measured rate, `join-limit`.

use std::time::Duration;

use anteroom::store::{Admission, RoomPatch, VisitorId};

use super::{occupy, room, waiting_pos, Harness};

pub async fn a_full_line_turns_newcomers_away(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("full", 100.0, 1);
    p.max_waiting = 2;
    occupy(&*s, &p).await;
    let a = VisitorId::random();
    s.join(&p, a).await.unwrap();
    s.join(&p, VisitorId::random()).await.unwrap();
    assert_eq!(
        s.join(&p, VisitorId::random()).await.unwrap(),
        Admission::Full { waiting: 2 }
    );
    // Those already in line keep polling normally.
    assert_eq!(waiting_pos(&s.join(&p, a).await.unwrap()), Some(1));
}

pub async fn queue_all_holds_the_line_and_releases_it_in_order(h: &dyn Harness) {
    let s = h.store();
    let p = room("hold", 100.0, 100);
    let st = s
        .update_room_state(
            &p,
            &RoomPatch {
                queue_all: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(st.queue_all);
    let vs: Vec<VisitorId> = (0..3).map(|_| VisitorId::random()).collect();
    for (i, v) in vs.iter().enumerate() {
        let a = s.join(&p, *v).await.unwrap();
        assert!(
            matches!(a, Admission::Paused { position, waiting, joined: true, .. }
                if position == i as u64 + 1 && waiting == i as u64 + 1),
            "{a:?}"
        );
    }
    h.advance(Duration::from_secs(1));
    assert_eq!(s.admit(&p).await.unwrap().admitted, 0);
    s.update_room_state(
        &p,
        &RoomPatch {
            queue_all: Some(false),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert_eq!(
        r.admitted_visitors
            .iter()
            .map(|a| a.vid)
            .collect::<Vec<_>>(),
        vs
    );
}

pub async fn a_disabled_room_lets_everyone_pass(h: &dyn Harness) {
    let s = h.store();
    let p = room("off", 1.0, 1);
    s.update_room_state(
        &p,
        &RoomPatch {
            enabled: Some(false),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for _ in 0..5 {
        assert_eq!(
            s.join(&p, VisitorId::random()).await.unwrap(),
            Admission::Open
        );
    }
    assert_eq!(s.stats(&p).await.unwrap().waiting, 0);
    let st = s.room_state(&p).await.unwrap();
    assert!(!st.enabled);
}

pub async fn overrides_change_rate_and_cap(h: &dyn Harness) {
    let s = h.store();
    let p = room("override", 10.0, 1);
    occupy(&*s, &p).await;
    for _ in 0..50 {
        s.join(&p, VisitorId::random()).await.unwrap();
    }
    s.update_room_state(
        &p,
        &RoomPatch {
            max_active: Some(Some(100)),
            admit_per_second: Some(Some(100.0)),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    h.advance(Duration::from_millis(100));
    assert_eq!(s.admit(&p).await.unwrap().admitted, 10, "100/s for 100 ms");
    s.update_room_state(
        &p,
        &RoomPatch {
            admit_per_second: Some(None),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    h.advance(Duration::from_millis(100));
    assert_eq!(s.admit(&p).await.unwrap().admitted, 1, "back to 10/s");
}

pub async fn clearing_the_line(h: &dyn Harness) {
    let s = h.store();
    let p = room("clear", 10.0, 1);
    occupy(&*s, &p).await;
    for _ in 0..7 {
        s.join(&p, VisitorId::random()).await.unwrap();
    }
    assert_eq!(s.clear_waiting(&p).await.unwrap(), 7);
    assert_eq!(s.stats(&p).await.unwrap().waiting, 0);
    assert_eq!(
        waiting_pos(&s.join(&p, VisitorId::random()).await.unwrap()),
        Some(1)
    );
}

pub async fn eta_rate_follows_measured_admissions(h: &dyn Harness) {
    let s = h.store();
    let p = room("eta", 10.0, 1_000_000);
    s.update_room_state(
        &p,
        &RoomPatch {
            queue_all: Some(true),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for _ in 0..400 {
        s.join(&p, VisitorId::random()).await.unwrap();
    }
    s.update_room_state(
        &p,
        &RoomPatch {
            queue_all: Some(false),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for _ in 0..300 {
        h.advance(Duration::from_millis(100));
        s.admit(&p).await.unwrap();
    }
    let st = s.stats(&p).await.unwrap();
    assert!(
        (st.measured_rate - 10.0).abs() < 1.0,
        "measured {}",
        st.measured_rate
    );
    let v = VisitorId::random();
    match s.join(&p, v).await.unwrap() {
        Admission::Waiting { eta_rate, .. } => assert!((eta_rate - 10.0).abs() < 1.0),
        other => panic!("{other:?}"),
    }
}

/// The admission rate is measured over time with a line only: ticks of an empty room before a
/// sale do not dilute the first sample (which seeds the average the ETAs and poll intervals use
/// for the next ten seconds). Measured from the start of the first second, a line that formed
/// 0.9 s into it reads as a tenth of the rate.
pub async fn the_measured_rate_counts_only_time_with_a_line(h: &dyn Harness) {
    let s = h.store();
    let p = room("rate-idle", 10.0, 1_000_000);
    for _ in 0..9 {
        s.admit(&p).await.unwrap();
        h.advance(Duration::from_millis(100));
    }
    occupy(&*s, &p).await;
    for _ in 0..100 {
        s.join(&p, VisitorId::random()).await.unwrap();
    }
    for _ in 0..21 {
        s.admit(&p).await.unwrap();
        h.advance(Duration::from_millis(100));
    }
    let st = s.stats(&p).await.unwrap();
    assert!(
        (st.measured_rate - 10.0).abs() < 1.5,
        "measured {} at 10/s with a line for 2 s after 0.9 s without one",
        st.measured_rate
    );
}

/// The order's record outlives its consumed marker: in a room whose `session-ttl` and a
/// minute end long before a queue ticket stops vouching (`abandon-after` after its last poll),
/// a ticket kept from before an order, or before the origin's `complete`, is still counted on
/// the way back once the marker is gone (found by review: the count read the marker, and past
/// it the kept ticket rejoined uncounted, once per order; a marker living `abandon-after`
/// instead refused, after a restore from an older snapshot, the order of the same visitor let
/// in again: re-review). Once per order: a place taken after it (that join counted, with or
/// without the ticket) whose turn lapses is not counted again, nor is the way back of an order
/// the shop failed and that was given back (re-reviews: a record of the order alone counted
/// both; telling tickets apart by their age read two instances' clocks).
pub async fn a_ticket_kept_past_the_orders_marker_is_still_counted(h: &dyn Harness) {
    use anteroom::store::finish::{Command, Ending};
    use anteroom::store::{Consumed, JoinGate, Order, RequestId, Settle, Settled};
    let s = h.store();
    let mut p = room("outlived", 100.0, 4);
    p.session_ttl = Duration::from_secs(1);
    p.abandon_after = Duration::from_secs(600);
    // Two addresses: four new visitors an hour from the first, two from the second; a ticket
    // that vouches for a place, or none.
    let gate = |client: &str, limit, vouched| JoinGate {
        client: client.to_string(),
        limit,
        per: Duration::from_secs(3600),
        known_only: false,
        vouched,
    };
    let a = |vouched| gate("192.0.2.7", 4, vouched);
    let b = |vouched| gate("192.0.2.8", 2, vouched);
    // Visitors let in at once: one orders, the origin completes the second, the shop fails the
    // third's order; and one from the second address orders.
    let (ordered, completed, failed, other) = (
        VisitorId::random(),
        VisitorId::random(),
        VisitorId::random(),
        VisitorId::random(),
    );
    for (v, g) in [
        (ordered, a(false)),
        (completed, a(false)),
        (failed, a(false)),
        (other, b(false)),
    ] {
        assert_eq!(
            s.join_from(&p, v, Some(&g)).await.unwrap(),
            Admission::Entered
        );
        assert_eq!(s.join(&p, v).await.unwrap(), Admission::Admitted);
    }
    assert!(s.use_up(&p, ordered).await.unwrap());
    assert!(s.use_up(&p, other).await.unwrap());
    let now = h.wall_secs();
    let ending = Ending::of(Command::Complete, now, now + 1, Duration::from_secs(1));
    s.finish(&p, completed, &ending).await.unwrap();
    let order = Order {
        request: RequestId::random(),
        grace: Duration::from_secs(60),
        vouched: false,
        cookie_life: Duration::ZERO,
        cookie_expires: 0,
        generation: None,
        events_version: None,
    };
    assert_eq!(s.consume(&p, failed, &order).await.unwrap(), Consumed::Won);
    let back = s.settle(&p, failed, &order.request, Settle::GiveBack).await;
    assert_eq!(back.unwrap(), Settled::Done);
    // Two minutes on: the markers are past (session-ttl and a minute), the tickets, last
    // polled before the orders, still vouch.
    h.advance(Duration::from_secs(120));
    // The failed order's visitor ordered nothing: back uncounted.
    let back = s.join_from(&p, failed, Some(&a(true))).await.unwrap();
    assert!(!matches!(back, Admission::Limited { .. }), "{back:?}");
    // Back with the ticket kept: the first address's fourth, then refused.
    let back = s.join_from(&p, ordered, Some(&a(true))).await.unwrap();
    assert!(
        !matches!(back, Admission::Limited { .. }),
        "the first way back is the address's fourth: {back:?}"
    );
    let again = s.join_from(&p, completed, Some(&a(true))).await.unwrap();
    assert!(
        matches!(again, Admission::Limited { .. }),
        "a ticket kept past the order's marker rejoined uncounted: {again:?}"
    );
    // The other comes back without a ticket: counted (the second address's second).
    let back = s.join_from(&p, other, Some(&b(false))).await.unwrap();
    assert!(!matches!(back, Admission::Limited { .. }), "{back:?}");
    // Both new turns (counted) lapse unclaimed; back with the tickets of them: placed anew
    // uncounted.
    h.advance(p.claim_ttl + Duration::from_secs(10));
    for (v, g) in [(ordered, a(true)), (other, b(true))] {
        let lapsed = s.join_from(&p, v, Some(&g)).await.unwrap();
        assert!(
            !matches!(lapsed, Admission::Limited { .. }),
            "a place taken after the order counted twice: {lapsed:?}"
        );
    }
}

/// A queue ticket that vouches for a place held lately spares its visitor the join-limit
/// count when the store places them anew (it lost the place, or their turn lapsed) — but not
/// when the store holds an order of theirs: let in, they ordered, and their way back into the
/// line with the ticket kept is counted as any newcomer's (found by review: any such ticket
/// was spared, and one kept after an order rejoined the line as often as its holder liked; a
/// first fix by the line's epoch counted people placed again after Redis came back from an
/// older snapshot, and spared a ticket of the line before it emptied: re-review).
pub async fn a_ticket_kept_after_an_order_is_counted_and_one_of_a_lost_place_is_not(
    h: &dyn Harness,
) {
    use anteroom::store::JoinGate;
    let s = h.store();
    let p = room("vouched", 100.0, 1);
    let gate = |c: &str, vouched| JoinGate {
        client: c.to_string(),
        limit: 2,
        per: Duration::from_secs(60),
        known_only: false,
        vouched,
    };
    // Let in at once (the room empty), and orders.
    let v = VisitorId::random();
    let a = gate("192.0.2.1", false);
    assert_eq!(
        s.join_from(&p, v, Some(&a)).await.unwrap(),
        Admission::Entered
    );
    assert_eq!(s.join(&p, v).await.unwrap(), Admission::Admitted);
    assert!(s.use_up(&p, v).await.unwrap());
    // Someone else takes the room, so the way back is into a line.
    occupy(&*s, &p).await;
    // Back with the ticket kept: placed, and counted (the second of client a's two), so the
    // next newcomer of a is refused.
    let back = s
        .join_from(&p, v, Some(&gate("192.0.2.1", true)))
        .await
        .unwrap();
    assert!(waiting_pos(&back).is_some(), "{back:?}");
    let next = s.join_from(&p, VisitorId::random(), Some(&a)).await;
    assert!(
        matches!(next.unwrap(), Admission::Limited { .. }),
        "a ticket kept after an order rejoined uncounted"
    );
    // Tickets of places the store no longer holds, and no order: placed anew, uncounted, so
    // client c's two new visitors are still to come.
    for _ in 0..3 {
        let lost = gate("192.0.2.3", true);
        let a = s
            .join_from(&p, VisitorId::random(), Some(&lost))
            .await
            .unwrap();
        assert!(waiting_pos(&a).is_some(), "{a:?}");
    }
    for _ in 0..2 {
        let c = gate("192.0.2.3", false);
        let a = s
            .join_from(&p, VisitorId::random(), Some(&c))
            .await
            .unwrap();
        assert!(waiting_pos(&a).is_some(), "{a:?}");
    }
}

pub async fn join_limit_counts_new_visitors_not_polls(h: &dyn Harness) {
    use anteroom::store::JoinGate;
    let s = h.store();
    let p = room("limit", 100.0, 1);
    occupy(&*s, &p).await;
    let gate = |c: &str| JoinGate {
        client: c.to_string(),
        limit: 3,
        per: Duration::from_secs(60),
        known_only: false,
        vouched: false,
    };
    let a = gate("192.0.2.1");
    let mut first = Vec::new();
    for _ in 0..3 {
        let v = VisitorId::random();
        assert!(waiting_pos(&s.join_from(&p, v, Some(&a)).await.unwrap()).is_some());
        first.push(v);
    }
    match s
        .join_from(&p, VisitorId::random(), Some(&a))
        .await
        .unwrap()
    {
        Admission::Limited { retry_after } => {
            assert!(
                retry_after <= Duration::from_secs(60) && retry_after >= Duration::from_secs(1),
                "{retry_after:?}"
            )
        }
        other => panic!("the fourth new visitor from one client: {other:?}"),
    }
    // Polls of those already in line never count, and other clients have their own budget.
    for v in &first {
        assert!(waiting_pos(&s.join_from(&p, *v, Some(&a)).await.unwrap()).is_some());
    }
    assert!(waiting_pos(
        &s.join_from(&p, VisitorId::random(), Some(&gate("192.0.2.2")))
            .await
            .unwrap()
    )
    .is_some());
    assert_eq!(s.stats(&p).await.unwrap().waiting, 4);
    // Past the limit on the calling instance (known visitors only): a visitor in line is
    // answered with the place, a newcomer refused and not counted (another client's budget,
    // 1 used of 3, is whole after it).
    let known = JoinGate {
        known_only: true,
        vouched: false,
        ..gate("192.0.2.2")
    };
    assert_eq!(
        waiting_pos(&s.join_from(&p, first[1], Some(&known)).await.unwrap()),
        Some(2)
    );
    let refused = s.join_from(&p, VisitorId::random(), Some(&known)).await;
    assert!(matches!(refused.unwrap(), Admission::Limited { .. }));
    for _ in 0..2 {
        let b = gate("192.0.2.2");
        let v = VisitorId::random();
        assert!(waiting_pos(&s.join_from(&p, v, Some(&b)).await.unwrap()).is_some());
    }
    assert_eq!(s.stats(&p).await.unwrap().waiting, 6);
}
