//! Orders and time on every backend: a cookie judged by the store's clock, a wall clock stepped
//! back, consumed markers that outlive every cookie of their admission, and claims and orders
//! that outlive a pause of the store.

use std::time::Duration;

use anteroom::store::{
    Admission, Consumed, Order, Queueing, RoomParams, Settle, Settled, VisitorId,
};

use super::integrity::{busy, order, take, GRACE};
use super::{live_for, occupy, room, waiting_pos, Harness};

/// A cookie that has expired by the store's clock vouches for nothing, whatever the proxy that
/// read it thought (an instance whose clock is behind, before it has learned the store's: found
/// by re-review, a consumed admission ordered again once its marker was gone). One that has
/// not vouches as before, and its order's marker outlives it.
pub async fn a_cookie_expired_by_the_stores_clock_vouches_for_nothing(h: &dyn Harness) {
    let s = h.store();
    let p = room("expired", 100.0, 10);
    let v = occupy(&*s, &p).await;
    h.wipe();
    let expired = Order {
        cookie_expires: h.wall_secs() - 1,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(s.consume(&p, v, &expired).await.unwrap(), Consumed::Used);
    assert_eq!(
        s.stats(&p).await.unwrap().active,
        0,
        "nothing re-registered"
    );
    let valid = Order {
        cookie_expires: h.wall_secs() + 900,
        generation: None,
        events_version: None,
        cookie_life: Duration::from_secs(1),
        ..order()
    };
    assert_eq!(s.consume(&p, v, &valid).await.unwrap(), Consumed::Won);
    assert_eq!(
        s.settle(&p, v, &valid.request, Settle::Confirm)
            .await
            .unwrap(),
        Settled::Done
    );
    // The marker outlives the cookie's expiry (not only the life the proxy read).
    h.advance(Duration::from_secs(850));
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used, "a second order");
}

/// The store's wall clock stepped back after an order (NTP, a VM restored): the cookie that
/// ordered stays valid that much longer, and its marker must too. The memory store's markers
/// lived by the monotonic clock alone: past it, the cookie ordered once more (found by
/// review of the clocks; the Redis store's markers expire by Redis's clock).
pub async fn a_wall_clock_stepped_back_after_an_order_buys_no_second(h: &dyn Harness) {
    let s = h.store();
    let p = room("stepped", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let cookie_expires = h.wall_secs() + 900;
    let first = Order {
        cookie_expires,
        cookie_life: Duration::from_secs(900),
        ..order()
    };
    assert_eq!(s.consume(&p, v, &first).await.unwrap(), Consumed::Won);
    assert_eq!(
        s.settle(&p, v, &first.request, Settle::Confirm)
            .await
            .unwrap(),
        Settled::Done
    );
    h.step_back(Duration::from_secs(3600));
    // Past the marker's life by elapsed time; the wall clock still before the cookie's expiry.
    h.advance(Duration::from_secs(3000));
    assert!(h.wall_secs() < cookie_expires);
    let again = Order {
        cookie_expires,
        cookie_life: Duration::from_secs(900),
        ..order()
    };
    assert_eq!(
        s.consume(&p, v, &again).await.unwrap(),
        Consumed::Used,
        "a second order"
    );
}

/// A visitor admitted in `p` whose order, vouched by a cookie with `cookie_life` left, was
/// taken and confirmed.
pub(crate) async fn ordered(
    s: &dyn anteroom::store::Store,
    p: &RoomParams,
    cookie_life: Duration,
) -> VisitorId {
    let v = occupy(s, p).await;
    let o = Order {
        cookie_life,
        cookie_expires: 0,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(s.consume(p, v, &o).await.unwrap(), Consumed::Won);
    let done = s.settle(p, v, &o.request, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    v
}

/// The marker of a used admission outlives the cookie that vouched for the order, also when
/// that cookie lives longer than today's `session-ttl` (a reload lowered it).
pub async fn a_marker_outlives_the_cookie_that_ordered(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("outlive", 100.0, 10);
    p.session_ttl = Duration::from_secs(300);
    let v = ordered(&*s, &p, Duration::from_secs(900)).await;
    // Past session-ttl + margin, still inside the cookie's life.
    h.advance(Duration::from_secs(600));
    assert!(!s.touch(&p, v).await.unwrap(), "not renewed");
    let replay = Order {
        cookie_life: Duration::from_secs(300),
        cookie_expires: 0,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(s.consume(&p, v, &replay).await.unwrap(), Consumed::Used);
}

/// The marker outlives every cookie of the admission, not only the one that ordered: a visitor
/// holds an older, shorter cookie and a renewed, longer one, and `session-ttl` was lowered by a
/// reload in between. The order made with the short cookie must leave the long one refused.
pub async fn a_marker_outlives_every_cookie_of_the_admission(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("every-cookie", 100.0, 10);
    p.session_ttl = Duration::from_secs(200);
    let v = occupy(&*s, &p).await;
    // The renewal: a cookie valid for 200 s, issued against the session's new deadline.
    assert!(s.touch(&p, v).await.unwrap(), "renewed");
    // A reload lowers session-ttl; the order comes with the older cookie (99 s left).
    p.session_ttl = Duration::from_secs(10);
    let o = Order {
        cookie_life: Duration::from_secs(99),
        cookie_expires: 0,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(s.consume(&p, v, &o).await.unwrap(), Consumed::Won);
    let done = s.settle(&p, v, &o.request, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    // Past both cookies' margins (10 + 60 s, 99 + 60 s), inside the renewed cookie's life.
    h.advance(Duration::from_secs(181));
    let replay = Order {
        cookie_life: Duration::from_secs(19),
        cookie_expires: 0,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(
        s.consume(&p, v, &replay).await.unwrap(),
        Consumed::Used,
        "the renewed cookie orders again"
    );
    assert!(!s.touch(&p, v).await.unwrap(), "not renewed");
}

/// A copy of a used admission's cookie that an instance gave a new life while the store was
/// away (a renewal kept it running) is told to the store with its expiry once it answers; the
/// order's marker is stretched to outlive it by the margin, so that the copy does not order
/// again once the marker's first life has run (found by review r97b: a second order of one
/// admission). (The Redis store's markers expire by Redis's own clock, which this suite does
/// not move; `store_redis::kept_marker` reads their life there.)
pub async fn a_used_admissions_cookie_given_a_new_life_is_outlived_by_its_marker(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("kept-copy", 100.0, 10);
    p.session_ttl = Duration::from_secs(100);
    let v = ordered(&*s, &p, Duration::from_secs(100)).await;
    // The kept copy: valid 1,000 s from now, told by its instance.
    let kept_until = h.wall_secs() + 1000;
    let told = s.register_local(&p, v, None, kept_until).await.unwrap();
    assert!(!told.held(), "a used admission is not taken back: {told:?}");
    // Past the marker's first life (100 + 60 s), inside the kept copy's.
    h.advance(Duration::from_secs(600));
    let replay = Order {
        cookie_life: Duration::from_secs(400),
        cookie_expires: kept_until,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(
        s.consume(&p, v, &replay).await.unwrap(),
        Consumed::Used,
        "the kept copy orders again"
    );
}

/// A renewal under a lower `session-ttl` never shortens the session: a cookie issued before it,
/// against the longer deadline, still finds the admission used once an order of a later cookie
/// has settled (found by review r89b: the renewal moved the store's deadline below the earlier
/// cookie's expiry, the order's marker was sized from it and ran out first, and the earlier
/// cookie ordered again).
pub async fn a_renewal_under_a_lower_session_ttl_never_shortens_the_session(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("shorter-renewal", 100.0, 10);
    p.session_ttl = Duration::from_secs(600);
    let v = occupy(&*s, &p).await;
    // A cookie valid for 600 s.
    assert!(s.touch(&p, v).await.unwrap(), "renewed");
    // A reload lowers session-ttl, and a renewal under it issues a cookie of 20 s.
    p.session_ttl = Duration::from_secs(20);
    assert!(s.touch(&p, v).await.unwrap(), "renewed");
    let o = Order {
        cookie_life: Duration::from_secs(20),
        cookie_expires: 0,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(s.consume(&p, v, &o).await.unwrap(), Consumed::Won);
    let done = s.settle(&p, v, &o.request, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    // Past the short cookie's life and margin, inside the first cookie's life.
    h.advance(Duration::from_secs(200));
    let replay = Order {
        cookie_life: Duration::from_secs(400),
        cookie_expires: 0,
        generation: None,
        events_version: None,
        ..order()
    };
    assert_eq!(
        s.consume(&p, v, &replay).await.unwrap(),
        Consumed::Used,
        "the first cookie orders again"
    );
}

/// A claim (the visitor's turn came, the admission not collected yet) is not lost to a pause
/// of the store: time in which no call could reach it does not count against `claim-ttl`.
/// Before, a Redis paused for longer than `claim-ttl` sent the visitor at the head of the
/// line to its back when it resumed.
pub async fn a_claim_outlives_a_pause_of_the_store(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("claim-pause", 100.0, 1);
    p.claim_ttl = Duration::from_secs(5);
    let first = occupy(&*s, &p).await;
    let (turn, next) = (VisitorId::random(), VisitorId::random());
    assert_eq!(waiting_pos(&s.join(&p, turn).await.unwrap()), Some(1));
    assert_eq!(waiting_pos(&s.join(&p, next).await.unwrap()), Some(2));
    assert!(s.use_up(&p, first).await.unwrap());
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert_eq!(r.admitted_visitors.first().map(|a| a.vid), Some(turn));
    // No call reaches the store for 12 s; then the others' polls and a tick come first.
    h.advance(Duration::from_secs(12));
    assert_eq!(
        s.stats(&p).await.unwrap().active,
        1,
        "the claim still counts"
    );
    assert_eq!(waiting_pos(&s.join(&p, next).await.unwrap()), Some(1));
    assert_eq!(
        s.admit(&p).await.unwrap().admitted,
        0,
        "the slot is the claim's"
    );
    assert_eq!(s.join(&p, turn).await.unwrap(), Admission::Admitted);
    // While the store can be reached, claim-ttl runs as before.
    let _ = next;
}

/// An order that went through while no call could reach the store (Redis paused or down for
/// longer than the grace period) keeps its admission pending until its confirm lands: that
/// time does not run the grace period down, so the kept cookie cannot order again through an
/// instance that never saw the order. Before, the deadline ran on the store's clock alone and
/// a second order won as soon as the store was back (found by review: a 20 s pause). While the
/// store can be reached, the grace period runs as before.
pub async fn a_pending_order_outlives_a_pause_of_the_store(h: &dyn Harness) {
    // The default tick, and a long one: the first call after the pause moves the liveness
    // clock by up to 4 ticks, which must not eat the grace period (found by review).
    for tick in [Duration::from_millis(100), Duration::from_secs(3)] {
        let mut p = room(&format!("order-pause-{}", tick.as_millis()), 100.0, 10);
        p.tick = tick;
        an_order_outlives_a_pause(h, &p).await;
    }
}

async fn an_order_outlives_a_pause(h: &dyn Harness, p: &RoomParams) {
    let s = h.store();
    let p = p.clone();
    let v = occupy(&*s, &p).await;
    let (first, c) = take(&*s, &p, v).await;
    assert_eq!(c, Consumed::Won);
    live_for(h, &*s, &p, Duration::from_secs(2)).await;
    // No call reaches the store for three grace periods; then another instance's order comes
    // first, before any tick.
    h.advance(3 * GRACE);
    assert!(
        busy(&take(&*s, &p, v).await.1),
        "a second order after the pause"
    );
    assert!(
        !s.touch(&p, v).await.unwrap(),
        "nor is the pending admission renewed"
    );
    live_for(h, &*s, &p, Duration::from_secs(3)).await;
    assert!(busy(&take(&*s, &p, v).await.1), "after a few ticks");
    // The confirm that was owed lands: used up.
    let done = s.settle(&p, v, &first.request, Settle::Confirm).await;
    assert_eq!(done.unwrap(), Settled::Done);
    assert_eq!(take(&*s, &p, v).await.1, Consumed::Used);
}

/// An order nobody settles (its instance died in the pause) still comes back once the store
/// has been reachable for the rest of its grace period, and a heartbeat after the pause keeps
/// it pending for a whole grace period more.
pub async fn an_unsettled_order_comes_back_after_a_pause_once_its_grace_has_run(h: &dyn Harness) {
    let s = h.store();
    let p = room("order-pause-back", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let (first, _) = take(&*s, &p, v).await;
    h.advance(3 * GRACE);
    live_for(h, &*s, &p, GRACE / 2).await;
    let beat = s.settle(&p, v, &first.request, Settle::Extend(GRACE)).await;
    assert_eq!(beat.unwrap(), Settled::Done, "the beat after the pause");
    live_for(h, &*s, &p, GRACE - Duration::from_secs(2)).await;
    assert!(busy(&take(&*s, &p, v).await.1), "within the beat's grace");
    live_for(h, &*s, &p, Duration::from_secs(4)).await;
    let (retry, c) = take(&*s, &p, v).await;
    assert_eq!(
        c,
        Consumed::Won,
        "its grace has run: given back, taken again"
    );
    let late = s.settle(&p, v, &first.request, Settle::Confirm).await;
    assert_eq!(late.unwrap(), Settled::Gone);
    let done = s.settle(&p, v, &retry.request, Settle::Confirm).await;
    assert_eq!(done.unwrap(), Settled::Done);
}

/// A visitor who asks while their order is in flight (a page or a poll just after the order's
/// answer cleared the cookie, before its confirm landed) is told to ask again, and given no
/// admission of the session the confirm ends: given one, every order on it was refused as used
/// for a whole session, while its holder could not rejoin the line (review r102b). Once the
/// order is settled: a newcomer after a confirm, the session again after a give-back.
pub async fn no_admission_is_given_on_a_session_whose_order_is_in_flight(h: &dyn Harness) {
    let s = h.store();
    let methods = [Queueing::Fifo, Queueing::Random, Queueing::Passthrough];
    for (confirmed, queueing) in [true, false]
        .into_iter()
        .flat_map(|c| methods.map(|q| (c, q)))
    {
        let mut p = room("settling", 100.0, 10);
        p.queueing = queueing;
        let v = occupy(&*s, &p).await;
        let (o, c) = take(&*s, &p, v).await;
        assert_eq!(c, Consumed::Won);
        assert!(
            matches!(s.join(&p, v).await.unwrap(), Admission::Settling { .. }),
            "asked while the order is in flight ({queueing:?})"
        );
        let settle = if confirmed {
            Settle::Confirm
        } else {
            Settle::GiveBack
        };
        assert_eq!(
            s.settle(&p, v, &o.request, settle).await.unwrap(),
            Settled::Done
        );
        let again = s.join(&p, v).await.unwrap();
        if confirmed {
            // A new admission (nobody waits): it orders.
            assert_eq!(
                again,
                Admission::Entered,
                "after the confirm ({queueing:?})"
            );
            let (_, c) = take(&*s, &p, v).await;
            assert_eq!(c, Consumed::Won, "the new admission's order");
        } else {
            assert_eq!(
                again,
                Admission::Admitted,
                "after the give-back ({queueing:?})"
            );
            let (_, c) = take(&*s, &p, v).await;
            assert_eq!(c, Consumed::Won, "the order again");
        }
    }
}

/// An order whose instance died, late in its session (the grace period outlives the session):
/// asked about meanwhile without the cookie, the visitor is held, and once the grace period has
/// run out they have their session back, not a newcomer's place (re-review r104a: the session
/// ran out a step of the clock before the record of the order, and the next join placed them
/// at the back of the line).
pub async fn a_session_whose_orders_instance_died_comes_back(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("settling-dead", 100.0, 10);
    p.claim_ttl = Duration::from_secs(2);
    let v = occupy(&*s, &p).await;
    let (_, c) = take(&*s, &p, v).await;
    assert_eq!(c, Consumed::Won);
    // Nobody settles it; the room's clock runs (admit steps), and the visitor asks every half
    // second until they are told something else than to wait for the order.
    let mut answer = Admission::Settling { waiting: 0 };
    for _ in 0..80 {
        h.advance(Duration::from_millis(500));
        s.admit(&p).await.unwrap();
        answer = s.join(&p, v).await.unwrap();
        if !matches!(answer, Admission::Settling { .. }) {
            break;
        }
    }
    assert_eq!(answer, Admission::Admitted, "the session back");
}
