//! Events and what was let in before them: an admit that knew older events makes no step it
//! cannot take back; a pre-queue, or an opening seen without it, ends the sessions before it.

use std::time::Duration;

use anteroom::event::{Event, Phase};
use anteroom::store::history::Actor;
use anteroom::store::{
    Admission, Consumed, EventChange, EventsArg, RoomParams, Settle, Settled, Store, VisitorId,
};

use super::events::{admit, admit_all, event, join, S};
use super::integrity::order;
use super::{occupy, room, Harness};

pub async fn an_admit_with_events_older_than_the_stores_makes_no_irreversible_step(
    h: &dyn Harness,
) {
    let s = h.store();
    let p = room("stale-events", 100.0, 1000);
    let e = event(h, "postponed", 2, true);
    let by = Actor {
        id: "postpone".into(),
        by: "ops".into(),
        client: "-".into(),
    };
    let mut later = e.clone();
    later.opens_at += 60 * S;
    let rt = anteroom::event::schedule::Runtime {
        event: Some(later.clone()),
        cancelled: false,
    };
    assert_eq!(
        s.change_event(&p, "postponed", &rt, 0, &serde_json::Value::Null, &by)
            .await
            .unwrap(),
        EventChange::Done(1)
    );
    let v = VisitorId::random();
    join(&*s, &p, &EventsArg::at(&[later.clone()], 1), v).await;
    h.advance(Duration::from_secs(3));
    // An instance that has not read the change yet passes the old opening, at version 0.
    let r = admit(&*s, &p, &EventsArg::at(std::slice::from_ref(&e), 0)).await;
    assert_eq!(r.admitted, 0, "nobody let in by an old schedule");
    assert!(
        r.event.and_then(|e| e.opened_at).is_none(),
        "no opening recorded"
    );
    // With the change, the event is still in its pre-queue.
    let r = admit(&*s, &p, &EventsArg::at(&[later], 1)).await;
    assert_eq!(r.event.map(|e| e.phase), Some(Phase::Prequeue));
    assert!(matches!(
        join(
            &*s,
            &p,
            &EventsArg::at(std::slice::from_ref(&e), 1),
            VisitorId::random()
        )
        .await,
        Admission::Registered { .. } | Admission::Waiting { .. }
    ));
}

/// A pre-queue ends the sessions admitted before it: their holders register like everyone
/// else, and until those sessions' cookies can have expired a cookie of theirs without a
/// session is no proof of one (no renewal, no order by it), and an order in flight at the
/// transition does not bring its session back when it fails. Other visitors are not touched:
/// one with no store session vouches as before (the local policy admitted them after the
/// opening), and one of the ended who is admitted again orders and is given back as anyone.
/// Before, a session admitted while the room was quiet renewed and ordered through the
/// pre-queue, ahead of every registrant (found by review).
pub async fn a_prequeue_ends_the_sessions_admitted_before_it(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("ends", 100.0, 10);
    p.tick = Duration::from_secs(30);
    let early = occupy(&*s, &p).await;
    assert!(
        s.touch(&p, early).await.unwrap(),
        "a session before the event"
    );
    let quiet = occupy(&*s, &p).await;
    let buying = occupy(&*s, &p).await;
    let in_flight = order();
    assert_eq!(
        s.consume(&p, buying, &in_flight).await.unwrap(),
        Consumed::Won
    );
    assert_eq!(s.stats(&p).await.unwrap().active, 3);
    let a = EventsArg::of(&[event(h, "drop", 30, false)]);
    assert!(
        matches!(
            join(&*s, &p, &a, early).await,
            Admission::Registered { joined: true, .. }
        ),
        "a session from before the pre-queue registers"
    );
    assert_eq!(s.stats(&p).await.unwrap().active, 0, "the sessions ended");
    assert!(
        !s.touch(&p, quiet).await.unwrap(),
        "renewed in the pre-queue"
    );
    // Told apart from a used admission: the proxy sends its holder to the line (review 45).
    assert_eq!(
        s.consume(&p, quiet, &order()).await.unwrap(),
        Consumed::Ended,
        "an order in the pre-queue"
    );
    // The order in flight beats on, then fails: given back, but its session stays ended.
    let beat = s.settle(
        &p,
        buying,
        &in_flight.request,
        Settle::Extend(in_flight.grace),
    );
    assert_eq!(beat.await.unwrap(), Settled::Done);
    let back = s.settle(&p, buying, &in_flight.request, Settle::GiveBack);
    assert_eq!(back.await.unwrap(), Settled::Done);
    assert_eq!(s.stats(&p).await.unwrap().active, 0, "no session came back");
    // The opening: registrants are admitted; the kept cookies still order nothing.
    h.advance(Duration::from_secs(31));
    assert_eq!(admit_all(h, &p, &a, 1, 20).await, vec![early]);
    assert_eq!(join(&*s, &p, &a, early).await, Admission::Admitted);
    for v in [quiet, buying] {
        assert_eq!(
            s.consume(&p, v, &order()).await.unwrap(),
            Consumed::Ended,
            "an order after the opening with a cookie from before the pre-queue"
        );
        assert!(!s.touch(&p, v).await.unwrap());
    }
    // A visitor let in after the opening without a store session (the local policy during
    // an outage) vouches; one of the ended, admitted again, orders and is given back.
    let local = VisitorId::random();
    assert_eq!(s.consume(&p, local, &order()).await.unwrap(), Consumed::Won);
    let failed = order();
    assert_eq!(s.consume(&p, early, &failed).await.unwrap(), Consumed::Won);
    let back = s.settle(&p, early, &failed.request, Settle::GiveBack);
    assert_eq!(back.await.unwrap(), Settled::Done);
    assert_eq!(s.consume(&p, early, &order()).await.unwrap(), Consumed::Won);
    // Once every cookie of the ended sessions has expired, and the longest an instance keeps
    // one running on its own since (an hour), on the store's clock and on the room's (which
    // moves only with calls: admit steps, by the clock's cap of 120 s at a 30 s tick), theirs
    // vouch again.
    for _ in 0..40 {
        h.advance(Duration::from_secs(120));
        admit(&*s, &p, &a).await;
    }
    assert_eq!(s.consume(&p, quiet, &order()).await.unwrap(), Consumed::Won);
}

/// A session a pre-queue ended stays ended through an outage longer than its cookies' life: a
/// copy of its cookie that an instance kept running meanwhile (a renewal kept while the store
/// was away), told to the store once it answers, is not taken back in the pre-queue, and does
/// not order (found beside re-review r98a: the 'ended' set runs out on the store's own clock, outage
/// or not; its record on the liveness clock stands still while no call comes).
pub async fn a_session_a_prequeue_ended_stays_ended_through_an_outage(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("ended-outage", 100.0, 10);
    p.session_ttl = Duration::from_secs(100);
    p.tick = Duration::from_secs(30);
    let early = occupy(&*s, &p).await;
    assert!(
        s.touch(&p, early).await.unwrap(),
        "a session before the event"
    );
    let a = EventsArg::of(&[event(h, "late-drop", 3600, false)]);
    let other = VisitorId::random();
    assert!(matches!(
        join(&*s, &p, &a, other).await,
        Admission::Registered { .. }
    ));
    assert_eq!(s.stats(&p).await.unwrap().active, 0, "the session ended");
    // Ten minutes in which nothing reaches the store: past the session and its margin.
    h.let_time_pass(Duration::from_secs(600));
    let kept_until = h.wall_secs() + 1000;
    let told = s.register_local(&p, early, None, kept_until).await.unwrap();
    assert!(!told.held(), "taken back in the pre-queue: {told:?}");
    let kept = anteroom::store::Order {
        cookie_life: Duration::from_secs(1000),
        cookie_expires: kept_until,
        ..order()
    };
    assert_eq!(
        s.consume(&p, early, &kept).await.unwrap(),
        Consumed::Ended,
        "an order in the pre-queue by a kept cookie"
    );
    // The copy, kept again and again through blips, is told with a life past the record's
    // first (its session, the margin and the bound on keeping): the record is stretched to
    // outlive it, as the used record is (found by review r99b).
    let kept_until = h.wall_secs() + 6000;
    let told = s.register_local(&p, early, None, kept_until).await.unwrap();
    assert!(!told.held(), "taken back: {told:?}");
    for _ in 0..40 {
        h.let_time_pass(Duration::from_secs(120));
        admit(&*s, &p, &a).await;
    }
    let told = s.register_local(&p, early, None, kept_until).await.unwrap();
    assert!(
        !told.held(),
        "taken back past the record's first life: {told:?}"
    );
}

/// An order in flight when a pre-queue ends its session, beaten for and then failed after an
/// outage longer than the ended set's life, does not bring the session back: the record on the
/// room's liveness clock still stands (found by review r100b: the give-back re-added the
/// session, which ordered after the opening ahead of the registrants).
pub async fn an_order_failed_after_an_outage_does_not_bring_an_ended_session_back(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("ended-inflight", 100.0, 10);
    p.session_ttl = Duration::from_secs(60);
    let buying = occupy(&*s, &p).await;
    let in_flight = order();
    assert_eq!(
        s.consume(&p, buying, &in_flight).await.unwrap(),
        Consumed::Won
    );
    let a = EventsArg::of(&[event(h, "late-fail", 3600, false)]);
    assert!(matches!(
        join(&*s, &p, &a, VisitorId::random()).await,
        Admission::Registered { .. }
    ));
    assert_eq!(s.stats(&p).await.unwrap().active, 0, "the session ended");
    // Twenty minutes with no call: past the ended set's life and the order's marker.
    h.let_time_pass(Duration::from_secs(1200));
    let beat = s.settle(
        &p,
        buying,
        &in_flight.request,
        Settle::Extend(in_flight.grace),
    );
    assert_eq!(beat.await.unwrap(), Settled::Done);
    let back = s.settle(&p, buying, &in_flight.request, Settle::GiveBack);
    assert_eq!(back.await.unwrap(), Settled::Done);
    assert_eq!(
        s.stats(&p).await.unwrap().active,
        0,
        "the ended session came back"
    );
    let kept = anteroom::store::Order {
        cookie_expires: h.wall_secs() + 600,
        ..order()
    };
    assert_eq!(s.consume(&p, buying, &kept).await.unwrap(), Consumed::Ended);
}

/// An event whose pre-queue no call reached (Redis paused, or every instance stopped, for its
/// length) ends the sessions from before it when the store first sees it open: else their
/// cookies ordered after the opening (found by review).
pub async fn an_opening_seen_without_its_prequeue_ends_the_sessions_before_it(h: &dyn Harness) {
    let s = h.store();
    let p = room("unseen-pre", 100.0, 10);
    let early = occupy(&*s, &p).await;
    assert!(
        s.touch(&p, early).await.unwrap(),
        "a session before the event"
    );
    let a = EventsArg::of(&[event(h, "missed", 2, false)]);
    // No call during the pre-queue; the first after the opening is an admit.
    h.advance(Duration::from_secs(3));
    let r = admit(&*s, &p, &a).await;
    assert_eq!(r.event.as_ref().map(|e| e.phase), Some(Phase::Open));
    assert_eq!(s.stats(&p).await.unwrap().active, 0, "the session ended");
    assert_eq!(
        s.consume(&p, early, &order()).await.unwrap(),
        Consumed::Ended
    );
    // Seen once: a later tick ends nothing more.
    let fresh = VisitorId::random();
    assert_eq!(join(&*s, &p, &a, fresh).await, Admission::Entered);
    admit(&*s, &p, &a).await;
    assert_eq!(s.stats(&p).await.unwrap().active, 1);
}

/// The room's first runtime change (version 0 to 1), by an operator: event `name` added or
/// changed to `event`, or cancelled (`None`).
async fn first_change(s: &dyn Store, p: &RoomParams, name: &str, event: Option<Event>) {
    let by = Actor {
        id: format!("{}-{name}", p.name),
        by: "ops".into(),
        client: "127.0.0.1".into(),
    };
    let change = anteroom::event::schedule::Runtime {
        cancelled: event.is_none(),
        event,
    };
    let done = s.change_event(p, name, &change, 0, &serde_json::Value::Null, &by);
    assert_eq!(done.await.unwrap(), EventChange::Done(1));
}

/// An order by events older than the store's runtime changes takes nothing: its caller may not
/// yet have read a pre-queue that has begun, whose first tick ends the session the order would
/// use (found by review r104a: an order on a kept cookie through an instance that had not yet
/// read a pre-queue added at run time went to the shop in that pre-queue's first tick, ahead of
/// every registrant). It is busy, and asked again by the events read since.
pub async fn an_order_by_events_older_than_the_stores_takes_nothing(h: &dyn Harness) {
    let s = h.store();
    let p = room("stale-order", 100.0, 10);
    let early = occupy(&*s, &p).await;
    let other = occupy(&*s, &p).await;
    let e = event(h, "added-now", 3600, false);
    first_change(&*s, &p, "added-now", Some(e.clone())).await;
    let by_version = |v: u64| anteroom::store::Order {
        events_version: Some(v),
        ..order()
    };
    for v in [early, other] {
        let c = s.consume(&p, v, &by_version(0)).await.unwrap();
        assert!(
            matches!(c, Consumed::Busy { .. }),
            "by the events from before: {c:?}"
        );
    }
    // Nothing was taken: the admission is as free as before (a pending order would be busy).
    assert_eq!(
        s.consume(&p, other, &by_version(1)).await.unwrap(),
        Consumed::Won,
        "by the events read since"
    );
    // The pre-queue's first tick by the events read since ends the session from before it,
    // and the order the stale events would have let through is refused.
    admit(&*s, &p, &EventsArg::at(std::slice::from_ref(&e), 1)).await;
    let c = s.consume(&p, early, &by_version(1)).await.unwrap();
    assert!(
        matches!(c, Consumed::Ended | Consumed::Used),
        "an order in the pre-queue: {c:?}"
    );
}

/// A pre-queue cancelled at run time, passed as begun by an admit that has not read the
/// change, ends no session: a pre-queue entered ends every session, which no later tick gives
/// back (found by review r105a: a cancel a moment before the start ended every admitted
/// session, and the next tick gave their slots to the line).
pub async fn a_prequeue_cancelled_before_an_admit_read_it_ends_no_session(h: &dyn Harness) {
    let s = h.store();
    let p = room("stale-cancel", 100.0, 10);
    let early = occupy(&*s, &p).await;
    let e = event(h, "called-off", 600, false);
    first_change(&*s, &p, "called-off", None).await;
    // An instance still at version 0, by whose events the pre-queue has begun.
    let r = admit(&*s, &p, &EventsArg::at(std::slice::from_ref(&e), 0)).await;
    assert_eq!(r.admitted, 0);
    assert_eq!(s.stats(&p).await.unwrap().active, 1, "the session ended");
    assert!(s.touch(&p, early).await.unwrap(), "the session renews");
    // By the events read since (none), the session orders.
    admit(&*s, &p, &EventsArg::at(&[], 1)).await;
    let o = anteroom::store::Order {
        events_version: Some(1),
        ..order()
    };
    assert_eq!(s.consume(&p, early, &o).await.unwrap(), Consumed::Won);
}
