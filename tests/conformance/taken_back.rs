//! Sessions the store takes back on a cookie's word, on every backend: a `local` admission
//! counted past the cap, and a session taken back running as long as its cookie.

use std::time::Duration;

use anteroom::store::{Touched, VisitorId};

use super::{live_for, occupy, room, waiting_pos, Harness};

/// A session an instance admitted on its own while the store was away (the `local` policy) is
/// counted when it is reported, also past max-active: its visitor is in the shop on their
/// cookie whatever the store says. The line then waits until the count is below max-active
/// again (found by review r89c: two instances came back a moment apart, the first filled the
/// slots, and the other's local admissions were never counted, four in for a cap of three).
/// A session the store lost is still taken back only within the cap.
pub async fn a_local_admission_is_counted_past_the_cap(h: &dyn Harness) {
    let s = h.store();
    let p = room("local-past-cap", 100.0, 1);
    let first = occupy(&*s, &p).await;
    let local = VisitorId::random();
    assert!(
        s.register_local(&p, local, None, 0).await.unwrap().held(),
        "counted"
    );
    assert_eq!(s.stats(&p).await.unwrap().active, 2);
    assert!(
        !s.touch(&p, VisitorId::random()).await.unwrap(),
        "a lost session past the cap"
    );
    let next = VisitorId::random();
    assert_eq!(waiting_pos(&s.join(&p, next).await.unwrap()), Some(1));
    assert!(s.use_up(&p, first).await.unwrap());
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert!(r.admitted_visitors.is_empty(), "still full: {r:?}");
    assert!(s.use_up(&p, local).await.unwrap());
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert_eq!(r.admitted_visitors.first().map(|a| a.vid), Some(next));
}

/// A session the store does not hold, taken back on a cookie's word, runs as long as that
/// cookie at least, whatever `session-ttl` is in force; a cookie expired by the store's clock
/// takes nothing back (found by review r92a: after a reload lowered `session-ttl`, sessions
/// taken back after a loss ran out in the store while their cookies ran on, and the line took
/// their slots).
pub async fn a_session_taken_back_runs_as_long_as_its_cookie(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("taken-back", 100.0, 5);
    p.session_ttl = Duration::from_secs(10);
    p.claim_ttl = Duration::from_secs(5);
    let v = occupy(&*s, &p).await;
    // Its session runs out in the store (a session-ttl lowered after its cookie was issued).
    live_for(h, &*s, &p, Duration::from_secs(11)).await;
    assert_eq!(s.stats(&p).await.unwrap().active, 0);
    let cookie = h.wall_secs() + 60;
    assert_eq!(
        s.touch_seen(&p, v, None, cookie).await.unwrap(),
        Touched::TakenBack,
        "not held: taken back"
    );
    assert_eq!(
        s.touch_seen(&p, v, None, cookie).await.unwrap(),
        Touched::Held,
        "held: renewed"
    );
    live_for(h, &*s, &p, Duration::from_secs(30)).await;
    assert_eq!(
        s.stats(&p).await.unwrap().active,
        1,
        "counted while its cookie runs"
    );
    live_for(h, &*s, &p, Duration::from_secs(31)).await;
    assert_eq!(s.stats(&p).await.unwrap().active, 0, "not past it");
    // A cookie the store's clock has seen run out takes nothing back.
    let late = occupy(&*s, &p).await;
    live_for(h, &*s, &p, Duration::from_secs(11)).await;
    let expired = h.wall_secs() - 1;
    assert_eq!(
        s.touch_seen(&p, late, None, expired).await.unwrap(),
        Touched::Refused
    );
    assert_eq!(s.stats(&p).await.unwrap().active, 0);
}
