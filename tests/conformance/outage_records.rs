//! Orders across outages longer than a marker's life: the used admission, the order in flight
//! and the visitor admitted again, recorded on the room's liveness clock (the Redis store's
//! `{anteroom:R}:used`, the memory store's `marks::Used`).

use std::time::Duration;

use anteroom::store::{Admission, Consumed, Order, Settle, Settled, Touched};

use super::integrity::{busy, order, take, GRACE};
use super::order_clocks::ordered;
use super::{occupy, room, Harness};

/// A used admission stays used through an outage however long: a kept copy of its cookie (an
/// instance gave it a new life while the store was away), told to the store once it answers,
/// is not taken back and does not order, though the order's marker ran out meanwhile (found by
/// re-review r98a: the marker's life runs on the store's own clock, outage or not; the record
/// of the admission used runs on the liveness clock, which stands still while no call comes).
/// So too when only the instance that kept the copy was cut off, the others keeping the room's
/// clock running: the record outlives the marker by the longest an instance keeps a session on
/// its own (found by review r99a). It is not kept for ever: once the clock has run past the
/// kept copy's life, the margin and that bound, a cookie of the visitor vouches again (the
/// store may have lost the session).
pub async fn a_used_admission_stays_used_through_an_outage_longer_than_its_marker(h: &dyn Harness) {
    let s = h.store();
    for cut_off_alone in [false, true] {
        let mut p = room("used-outage", 100.0, 10);
        p.session_ttl = Duration::from_secs(100);
        // The liveness clock's cap: 120 s a step.
        p.tick = Duration::from_secs(30);
        let v = ordered(&*s, &p, Duration::from_secs(100)).await;
        // Ten minutes: past the marker's life (100 + 60 s).
        if cut_off_alone {
            for _ in 0..10 {
                h.let_time_pass(Duration::from_secs(60));
                s.admit(&p).await.unwrap();
            }
        } else {
            h.let_time_pass(Duration::from_secs(600));
        }
        let kept_until = h.wall_secs() + 1000;
        let told = s.register_local(&p, v, None, kept_until).await.unwrap();
        assert!(
            !told.held(),
            "a used admission is taken back (cut off alone: {cut_off_alone}): {told:?}"
        );
        let replay = Order {
            cookie_life: Duration::from_secs(1000),
            cookie_expires: kept_until,
            generation: None,
            events_version: None,
            ..order()
        };
        assert_eq!(
            s.consume(&p, v, &replay).await.unwrap(),
            Consumed::Used,
            "the kept copy orders again (cut off alone: {cut_off_alone})"
        );
        // The room's clock runs (admit steps) past the kept copy's life, the margin and the
        // bound on keeping (1,000 + 60 + 3,600 s).
        for _ in 0..40 {
            h.let_time_pass(Duration::from_secs(120));
            s.admit(&p).await.unwrap();
        }
        let fresh = h.wall_secs() + 100;
        let told = s.register_local(&p, v, None, fresh).await.unwrap();
        assert!(told.held(), "the record outlived its end: {told:?}");
    }
}

/// An admission an instance gave on its own while the store was away (the `local` policy),
/// which orders through another instance before its own tells the store (the store takes the
/// cookie's word), is used up: once told, the session is not taken back and the cookie does not
/// order again (found by re-review r101a: told as a new admission, it dropped the record of
/// its own order and ordered a second time; so the instance tells it as a session it kept).
pub async fn a_local_admission_that_ordered_before_it_was_told_orders_once(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("local-once", 100.0, 10);
    p.session_ttl = Duration::from_secs(100);
    let v = anteroom::store::VisitorId::random();
    let until = h.wall_secs() + 100;
    let o = Order {
        cookie_expires: until,
        ..order()
    };
    assert_eq!(s.consume(&p, v, &o).await.unwrap(), Consumed::Won);
    let done = s.settle(&p, v, &o.request, Settle::Confirm).await.unwrap();
    assert_eq!(done, Settled::Done);
    let told = s.register_local(&p, v, None, until).await.unwrap();
    assert!(!told.held(), "a used local admission taken back: {told:?}");
    let again = Order {
        cookie_expires: until,
        ..order()
    };
    assert_eq!(s.consume(&p, v, &again).await.unwrap(), Consumed::Used);
}

/// An order in flight when an outage longer than its marker's life begins holds its admission
/// until it is settled: once the store answers, a copy of the cookie neither orders nor is
/// taken back before the owed confirm lands, which then uses the admission up (found by
/// reviews r99a and r99b: the pending marker ran out on Redis's clock, and the copy ordered
/// through another instance first). Given back by its instance (the shop failed it), or once its
/// grace period has run on the room's clock with no beat, it is given back as before (found by
/// re-review r100a: the shop's failure left it busy until its grace had run).
pub async fn an_order_in_flight_holds_through_an_outage_longer_than_its_marker(h: &dyn Harness) {
    let s = h.store();
    for how in ["confirmed", "given back", "no beat"] {
        let mut p = room("pending-outage", 100.0, 10);
        p.session_ttl = Duration::from_secs(100);
        let v = occupy(&*s, &p).await;
        let (first, won) = take(&*s, &p, v).await;
        assert_eq!(won, Consumed::Won);
        // Twenty minutes in which nothing reaches the store: past the marker's life (the
        // ordering cookie's 600 s and the margin).
        h.let_time_pass(Duration::from_secs(1200));
        let copy = Order {
            cookie_expires: h.wall_secs() + 1000,
            ..order()
        };
        let c = s.consume(&p, v, &copy).await.unwrap();
        assert!(busy(&c), "the copy's order: {c:?}");
        let told = s
            .register_local(&p, v, None, h.wall_secs() + 1000)
            .await
            .unwrap();
        assert_eq!(
            told,
            Touched::Refused,
            "taken back while the order is in flight"
        );
        if how == "confirmed" {
            let done = s.settle(&p, v, &first.request, Settle::Confirm).await;
            assert_eq!(done.unwrap(), Settled::Done, "the owed confirm");
            assert_eq!(s.consume(&p, v, &copy).await.unwrap(), Consumed::Used);
        } else if how == "given back" {
            s.settle(&p, v, &first.request, Settle::GiveBack)
                .await
                .unwrap();
            assert_eq!(
                s.consume(&p, v, &copy).await.unwrap(),
                Consumed::Won,
                "the admission given back by the shop's failure"
            );
        } else {
            // No beat: the grace period runs out on the room's clock (admit steps).
            for _ in 0..(GRACE.as_secs() + 5) {
                h.let_time_pass(Duration::from_secs(1));
                s.admit(&p).await.unwrap();
            }
            assert_eq!(
                s.consume(&p, v, &copy).await.unwrap(),
                Consumed::Won,
                "given back once its grace has run"
            );
        }
    }
}

/// The record of a used admission speaks for that admission only: a visitor admitted again
/// (the line, the fast path) whose new session lapsed is taken back on a cookie's word as any
/// visitor is, however recent the earlier order on the room's clock.
pub async fn a_visitor_admitted_again_is_not_held_to_an_earlier_use(h: &dyn Harness) {
    let s = h.store();
    for through_line in [false, true] {
        let mut p = room("used-again", 100.0, 1);
        p.session_ttl = Duration::from_secs(100);
        p.claim_ttl = Duration::from_secs(5);
        let v = ordered(&*s, &p, Duration::from_secs(100)).await;
        if through_line {
            // Another visitor holds the one slot; v waits, and is let in once it is free.
            let w = occupy(&*s, &p).await;
            assert!(matches!(
                s.join(&p, v).await.unwrap(),
                Admission::Waiting { .. }
            ));
            assert!(s.use_up(&p, w).await.unwrap());
            h.advance(Duration::from_secs(1));
            let r = s.admit(&p).await.unwrap();
            assert_eq!(r.admitted_visitors.first().map(|a| a.vid), Some(v));
        } else {
            assert_eq!(s.join(&p, v).await.unwrap(), Admission::Entered);
        }
        // An outage outlasts the order's marker; the claim then runs out on the room's clock.
        h.let_time_pass(Duration::from_secs(600));
        for _ in 0..10 {
            h.let_time_pass(Duration::from_secs(1));
            s.admit(&p).await.unwrap();
        }
        let told = s
            .register_local(&p, v, None, h.wall_secs() + 100)
            .await
            .unwrap();
        assert_eq!(
            told,
            Touched::TakenBack,
            "held to the earlier order (through the line: {through_line})"
        );
    }
}
