//! The life of an admission from grant to order, on every backend: a used admission never comes
//! back (not through the sliding renewal either), a failed order's admission always does (given
//! back, or by itself after the grace period), settling is idempotent, an admission survives the
//! store losing its data, and a fast-path entry holds its slot for `claim-ttl` only. Orders and
//! the store's clock, and its pauses: `order_clocks.rs`.

use std::time::Duration;

use anteroom::store::{
    Admission, Consumed, Order, RequestId, RoomParams, RoomPatch, Settle, Settled, Store, VisitorId,
};

use super::{live_for, occupy, room, waiting_pos, Harness};

pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// An order with a 10 s grace and a cookie of 600 s (the other conformance files use it too).
pub(crate) fn order() -> Order {
    Order {
        request: RequestId::random(),
        grace: GRACE,
        vouched: true,
        cookie_life: Duration::from_secs(600),
        cookie_expires: 0,
        generation: None,
        events_version: None,
    }
}

pub(crate) async fn take(s: &dyn Store, p: &RoomParams, v: VisitorId) -> (Order, Consumed) {
    let o = order();
    let c = s.consume(p, v, &o).await.unwrap();
    (o, c)
}

/// Pending, until at most the grace period and the liveness clock's cap (4 ticks of at most
/// 3 s here) from now.
pub(crate) fn busy(c: &Consumed) -> bool {
    let most = GRACE + Duration::from_secs(12);
    matches!(c, Consumed::Busy { retry_after } if *retry_after <= most && !retry_after.is_zero())
}

pub async fn a_consumed_admission_is_not_renewed(h: &dyn Harness) {
    let s = h.store();
    let p = room("replay", 100.0, 10);
    let v = occupy(&*s, &p).await;
    assert!(
        s.touch(&p, v).await.unwrap(),
        "a fast-path entry is renewed"
    );
    assert!(s.use_up(&p, v).await.unwrap());
    // The cookie is kept and is past half its life: the renewal must not bring it back.
    h.advance(Duration::from_secs(400));
    assert!(
        !s.touch(&p, v).await.unwrap(),
        "renewal of a used admission"
    );
    assert_eq!(s.stats(&p).await.unwrap().active, 0);
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used, "a second order");
    assert!(!s.use_up(&p, v).await.unwrap());
}

pub async fn a_used_visitor_can_be_admitted_again(h: &dyn Harness) {
    let s = h.store();
    let p = room("again", 100.0, 10);
    let v = occupy(&*s, &p).await;
    assert!(s.use_up(&p, v).await.unwrap());
    // A new admission (here the fast path) is a new admission, marker or not.
    assert_eq!(s.join(&p, v).await.unwrap(), Admission::Entered);
    assert!(s.touch(&p, v).await.unwrap());
    assert!(s.use_up(&p, v).await.unwrap());
    assert!(!s.use_up(&p, v).await.unwrap());
}

pub async fn a_confirmed_order_uses_the_admission_up(h: &dyn Harness) {
    let s = h.store();
    let p = room("confirm", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let (o, c) = take(&*s, &p, v).await;
    assert_eq!(c, Consumed::Won);
    assert_eq!(
        s.stats(&p).await.unwrap().active,
        1,
        "pending keeps its slot"
    );
    let done = s.settle(&p, v, &o.request, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    assert_eq!(s.stats(&p).await.unwrap().active, 0);
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
    assert!(!s.touch(&p, v).await.unwrap());
}

pub async fn a_failed_order_gives_the_admission_back(h: &dyn Harness) {
    let s = h.store();
    let p = room("giveback", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let (o, c) = take(&*s, &p, v).await;
    assert_eq!(c, Consumed::Won);
    let back = s.settle(&p, v, &o.request, Settle::GiveBack).await.unwrap();
    assert_eq!(back, Settled::Done);
    assert_eq!(s.stats(&p).await.unwrap().active, 1);
    assert!(
        s.touch(&p, v).await.unwrap(),
        "a given-back admission renews"
    );
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Won, "the retry");
}

pub async fn a_give_back_is_not_blocked_by_max_active(h: &dyn Harness) {
    let s = h.store();
    let p = room("giveback-full", 100.0, 1);
    let v = occupy(&*s, &p).await;
    let (o, _) = take(&*s, &p, v).await;
    // The slot never left the count: a newcomer waits while the order is pending.
    let other = VisitorId::random();
    assert_eq!(waiting_pos(&s.join(&p, other).await.unwrap()), Some(1));
    h.advance(Duration::from_millis(100));
    assert_eq!(s.admit(&p).await.unwrap().admitted, 0);
    // The room shrinks meanwhile: the give-back still brings that very admission back.
    let shrink = RoomPatch {
        max_active: Some(Some(0)),
        ..Default::default()
    };
    s.update_room_state(&p, &shrink).await.unwrap();
    let back = s.settle(&p, v, &o.request, Settle::GiveBack).await.unwrap();
    assert_eq!(back, Settled::Done);
    assert_eq!(s.stats(&p).await.unwrap().active, 1);
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Won);
}

pub async fn an_unsettled_order_comes_back_after_its_deadline(h: &dyn Harness) {
    let s = h.store();
    let p = room("deadline", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let (first, _) = take(&*s, &p, v).await;
    live_for(h, &*s, &p, GRACE / 2).await;
    assert!(busy(&take(&*s, &p, v).await.1), "still pending");
    assert!(
        !s.touch(&p, v).await.unwrap(),
        "touch does not extend a pending admission"
    );
    // The instance that took it died: nobody settles. Past the deadline it is back.
    live_for(h, &*s, &p, GRACE).await;
    let (retry, c) = take(&*s, &p, v).await;
    assert_eq!(c, Consumed::Won, "the retry through another instance");
    assert_eq!(
        s.settle(&p, v, &first.request, Settle::Confirm)
            .await
            .unwrap(),
        Settled::Gone,
        "a confirm later than the retry finds the admission taken again"
    );
    let done = s.settle(&p, v, &retry.request, Settle::Confirm).await;
    assert_eq!(done.unwrap(), Settled::Done);
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
}

/// A slow request body: the instance's heartbeat keeps the order pending past its first
/// deadline, so no second order takes the admission under it; once the beats stop (the
/// instance died) the grace period runs out and the admission comes back.
pub async fn an_order_in_flight_is_kept_pending_by_its_heartbeat(h: &dyn Harness) {
    let s = h.store();
    let p = room("beat", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let (first, _) = take(&*s, &p, v).await;
    for _ in 0..3 {
        live_for(h, &*s, &p, GRACE / 2).await;
        let beat = s.settle(&p, v, &first.request, Settle::Extend(GRACE)).await;
        assert_eq!(beat.unwrap(), Settled::Done);
    }
    assert!(
        busy(&take(&*s, &p, v).await.1),
        "past its first deadline, still pending under the heartbeat"
    );
    assert_eq!(
        s.stats(&p).await.unwrap().active,
        1,
        "its slot still counted"
    );
    // The beats stop: after a whole grace period (and the liveness clock's cap, 1 s) the
    // admission is back.
    live_for(h, &*s, &p, GRACE + Duration::from_secs(2)).await;
    let (retry, c) = take(&*s, &p, v).await;
    assert_eq!(c, Consumed::Won);
    let late = s.settle(&p, v, &first.request, Settle::Extend(GRACE)).await;
    assert_eq!(
        late.unwrap(),
        Settled::Gone,
        "a beat of the old order changes nothing"
    );
    let done = s.settle(&p, v, &retry.request, Settle::Confirm).await;
    assert_eq!(done.unwrap(), Settled::Done);
    let after = s.settle(&p, v, &retry.request, Settle::Extend(GRACE)).await;
    assert_eq!(
        after.unwrap(),
        Settled::Reversed,
        "a settled order is not extended"
    );
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
}

pub async fn a_late_confirm_still_uses_the_admission_up(h: &dyn Harness) {
    let s = h.store();
    let p = room("late", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let (o, _) = take(&*s, &p, v).await;
    live_for(h, &*s, &p, GRACE + Duration::from_secs(2)).await;
    // Seen past the deadline: given back and renewed.
    assert!(s.touch(&p, v).await.unwrap());
    // The order went through after all (its confirm was retried): used up.
    let done = s.settle(&p, v, &o.request, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    assert!(!s.touch(&p, v).await.unwrap());
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
}

/// An order the store never saw (let through while it was away, under `on-store-error =
/// open`) went through: its confirm uses the admission up, and the kept cookie orders no
/// more. Before, the confirm found no marker, answered "gone" and changed nothing: the next
/// order won (found by review).
pub async fn a_confirm_of_an_order_the_store_never_saw_uses_the_admission_up(h: &dyn Harness) {
    let s = h.store();
    let p = room("unseen", 100.0, 10);
    let v = occupy(&*s, &p).await;
    assert!(s.touch(&p, v).await.unwrap(), "a session");
    let unseen = RequestId::random();
    let done = s.settle(&p, v, &unseen, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    assert_eq!(
        s.settle(&p, v, &unseen, Settle::Confirm).await.unwrap(),
        Settled::Already,
        "a retried confirm"
    );
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used, "a second order");
    assert!(!s.touch(&p, v).await.unwrap(), "not renewed");
    assert_eq!(s.stats(&p).await.unwrap().active, 0, "its slot is free");
    // Past the session's end and the margin, the kept cookie still orders nothing.
    h.advance(Duration::from_secs(650));
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
    // A give-back of an unknown order changes nothing.
    let w = occupy(&*s, &p).await;
    let other = RequestId::random();
    let back = s.settle(&p, w, &other, Settle::GiveBack).await;
    assert_eq!(back.unwrap(), Settled::Gone);
    assert_eq!(take(&*s, &p, w).await.1, Consumed::Won);
    // A beat of an order the store does not know is an order in flight whose marker the store
    // lost (Redis restarted empty): its instance vouches for it, the marker is written again,
    // and a second order finds it pending (found by review: another instance took one).
    let x = occupy(&*s, &p).await;
    let lost = RequestId::random();
    let beat = s.settle(&p, x, &lost, Settle::Extend(GRACE)).await;
    assert_eq!(beat.unwrap(), Settled::Done);
    let second = take(&*s, &p, x).await.1;
    assert!(matches!(second, Consumed::Busy { .. }), "{second:?}");
    let done = s.settle(&p, x, &lost, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    assert_eq!(take(&*s, &p, x).await.1, Consumed::Used);
}

/// The heartbeat of an order in flight keeps the marker's life as the consume made it: past
/// every cookie of the admission, also one issued under a longer `session-ttl` than today's.
/// Before, a beat set it to today's `session-ttl` + margin, and the kept cookie ordered again
/// once that ran out (found by review).
pub async fn a_heartbeat_does_not_shorten_the_marker(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("beat-life", 100.0, 10);
    p.session_ttl = Duration::from_secs(60);
    let v = occupy(&*s, &p).await;
    let o = Order {
        cookie_life: Duration::from_secs(3600),
        cookie_expires: 0,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(s.consume(&p, v, &o).await.unwrap(), Consumed::Won);
    h.advance(GRACE / 2);
    let beat = s.settle(&p, v, &o.request, Settle::Extend(GRACE)).await;
    assert_eq!(beat.unwrap(), Settled::Done);
    let done = s.settle(&p, v, &o.request, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    // Past today's session-ttl + margin + grace, inside the cookie's life.
    h.advance(Duration::from_secs(600));
    let replay = Order {
        cookie_life: Duration::from_secs(2900),
        cookie_expires: 0,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(
        s.consume(&p, v, &replay).await.unwrap(),
        Consumed::Used,
        "the kept cookie ordered again"
    );
}

pub async fn settling_twice_changes_nothing(h: &dyn Harness) {
    let s = h.store();
    let p = room("settle2", 100.0, 10);
    let (a, b) = (occupy(&*s, &p).await, occupy(&*s, &p).await);
    let (oa, _) = take(&*s, &p, a).await;
    let (ob, _) = take(&*s, &p, b).await;
    let settle = |v, o: &Order, how| {
        let (s, p, r) = (s.clone(), p.clone(), o.request.clone());
        async move { s.settle(&p, v, &r, how).await.unwrap() }
    };
    assert_eq!(settle(a, &oa, Settle::Confirm).await, Settled::Done);
    assert_eq!(settle(a, &oa, Settle::Confirm).await, Settled::Already);
    assert_eq!(settle(a, &oa, Settle::GiveBack).await, Settled::Reversed);
    assert_eq!(settle(b, &ob, Settle::GiveBack).await, Settled::Done);
    assert_eq!(settle(b, &ob, Settle::GiveBack).await, Settled::Already);
    assert_eq!(
        s.stats(&p).await.unwrap().active,
        1,
        "a used, b given back once"
    );
    // While an order is pending, a confirm of another request changes nothing: the pending
    // one settles the admission.
    let c = occupy(&*s, &p).await;
    let (oc, _) = take(&*s, &p, c).await;
    assert_eq!(settle(c, &oa, Settle::Confirm).await, Settled::Gone);
    assert!(busy(&take(&*s, &p, c).await.1), "still pending");
    assert_eq!(settle(c, &oc, Settle::Confirm).await, Settled::Done);
    // After b's order was given back, a confirm of a request the store never saw is an order
    // let through while it was away (`open`): it uses the admission up. It changed nothing
    // before, and the kept cookie ordered again (found by a property test).
    assert_eq!(settle(b, &oa, Settle::Confirm).await, Settled::Done);
    assert_eq!(settle(b, &oa, Settle::Confirm).await, Settled::Already);
    assert_eq!(s.stats(&p).await.unwrap().active, 0, "every admission used");
    for v in [a, b, c] {
        assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
    }
}

pub async fn a_resent_consume_is_recognised(h: &dyn Harness) {
    let s = h.store();
    let p = room("resend", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let o = order();
    assert_eq!(s.consume(&p, v, &o).await.unwrap(), Consumed::Won);
    // The reply was lost: the same request id is sent again, and wins again.
    assert_eq!(s.consume(&p, v, &o).await.unwrap(), Consumed::Won);
    // Another request with the same cookie (a second tab) is refused while pending.
    assert!(busy(&take(&*s, &p, v).await.1));
    assert_eq!(s.stats(&p).await.unwrap().active, 1);
    let done = s.settle(&p, v, &o.request, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
}

pub async fn an_admission_survives_the_store_losing_its_data(h: &dyn Harness) {
    let s = h.store();
    let p = room("wipe", 100.0, 10);
    let v = occupy(&*s, &p).await;
    h.wipe();
    // Without a verified cookie, no session is no admission.
    assert!(!s.use_up(&p, v).await.unwrap());
    // With one, the order goes through, once.
    let (o, c) = take(&*s, &p, v).await;
    assert_eq!(c, Consumed::Won);
    assert_eq!(s.stats(&p).await.unwrap().active, 1, "re-registered");
    assert!(busy(&take(&*s, &p, v).await.1));
    assert_eq!(
        s.settle(&p, v, &o.request, Settle::Confirm).await.unwrap(),
        Settled::Done
    );
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
    assert!(!s.touch(&p, v).await.unwrap());
}

pub async fn a_fast_path_entry_holds_its_slot_for_claim_ttl(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("claimfast", 100.0, 10);
    p.claim_ttl = Duration::from_secs(5);
    let gone = occupy(&*s, &p).await;
    let back = occupy(&*s, &p).await;
    live_for(h, &*s, &p, Duration::from_secs(3)).await;
    // The visitor comes back with the cookie: renewed to a session.
    assert!(s.touch(&p, back).await.unwrap());
    live_for(h, &*s, &p, Duration::from_secs(3)).await;
    let st = s.stats(&p).await.unwrap();
    assert_eq!(st.active, 1, "the entry never seen again freed its slot");
    assert_eq!(s.join(&p, back).await.unwrap(), Admission::Admitted);
    h.advance(Duration::from_secs(60));
    assert_eq!(s.stats(&p).await.unwrap().active, 1);
    assert!(s.use_up(&p, back).await.unwrap());
    let _ = gone;
}

/// A session taken through touch (a local admission re-registered, a session the store forgot)
/// is not also a place in line: the visitor cannot be admitted a second time when the line
/// reaches them.
pub async fn a_session_is_not_also_a_place_in_line(h: &dyn Harness) {
    let s = h.store();
    let p = room("both", 100.0, 1);
    occupy(&*s, &p).await;
    let v = VisitorId::random();
    assert!(matches!(
        s.join(&p, v).await.unwrap(),
        Admission::Waiting { position: 1, .. }
    ));
    let patch = RoomPatch {
        max_active: Some(Some(2)),
        ..RoomPatch::default()
    };
    s.update_room_state(&p, &patch).await.unwrap();
    assert!(s.touch(&p, v).await.unwrap(), "taken as a session");
    assert_eq!(s.stats(&p).await.unwrap().waiting, 0, "and out of the line");
    assert_eq!(s.join(&p, v).await.unwrap(), Admission::Admitted);
}

/// One place in line buys one admission. A visitor still in line who orders on a cookie the
/// store never counted (let in by the `local` policy during an outage, or a session a failover
/// lost while the visitor stayed in line) leaves the line with that order; so does one whose
/// order the store never saw (let through under `open`: only its confirm arrives). Left in
/// line, their turn came and bought a second order (found by review, on Redis, a cluster
/// failover and two instances).
pub async fn an_order_takes_its_visitor_out_of_the_line(h: &dyn Harness) {
    let s = h.store();
    let p = room("order-leaves", 100.0, 1);
    occupy(&*s, &p).await;
    let (local, unseen, next) = (
        VisitorId::random(),
        VisitorId::random(),
        VisitorId::random(),
    );
    for v in [local, unseen, next] {
        assert!(waiting_pos(&s.join(&p, v).await.unwrap()).is_some());
    }
    let (o, c) = take(&*s, &p, local).await;
    assert_eq!(c, Consumed::Won, "the cookie vouches for the admission");
    let done = s.settle(&p, local, &o.request, Settle::Confirm).await;
    assert_eq!(done.unwrap(), Settled::Done);
    let done = s
        .settle(&p, unseen, &RequestId::random(), Settle::Confirm)
        .await;
    assert_eq!(done.unwrap(), Settled::Done);
    assert_eq!(s.stats(&p).await.unwrap().waiting, 1, "both left the line");
    assert_eq!(waiting_pos(&s.join(&p, next).await.unwrap()), Some(1));
    // Their next poll is a newcomer's: at the back, and the order they made stays made.
    assert_eq!(waiting_pos(&s.join(&p, local).await.unwrap()), Some(2));
    assert_eq!(waiting_pos(&s.join(&p, unseen).await.unwrap()), Some(3));
    // A confirm retried after the visitor took a new place (its reply was lost) finds the
    // order settled, and leaves the new place alone (found by re-review).
    let again = s.settle(&p, local, &o.request, Settle::Confirm).await;
    assert_eq!(again.unwrap(), Settled::Already);
    assert_eq!(waiting_pos(&s.join(&p, local).await.unwrap()), Some(2));
}
