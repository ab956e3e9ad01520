//! The basic cases: the line, the rate, `max-active`, sessions, orders, the admin's state.

use std::time::Duration;

use anteroom::store::{Admission, RoomParams, RoomPatch, Store, VisitorId};

use super::{occupy, room, waiting_pos, Harness};

pub async fn fast_path_admits_when_nobody_waits(h: &dyn Harness) {
    let s = h.store();
    let p = room("fast", 100.0, 10);
    for _ in 0..3 {
        assert_eq!(
            s.join(&p, VisitorId::random()).await.unwrap(),
            Admission::Entered
        );
    }
    assert_eq!(s.stats(&p).await.unwrap().active, 3);
}

pub async fn join_is_idempotent_and_fifo(h: &dyn Harness) {
    let s = h.store();
    let p = room("fifo", 100.0, 1);
    occupy(&*s, &p).await;
    let vs: Vec<VisitorId> = (0..5).map(|_| VisitorId::random()).collect();
    for (i, v) in vs.iter().enumerate() {
        let a = s.join(&p, *v).await.unwrap();
        assert_eq!(waiting_pos(&a), Some(i as u64 + 1), "{a:?}");
        // Placed while the one slot is taken: the answer says the shop is full.
        assert!(
            matches!(
                a,
                Admission::Waiting {
                    joined: true,
                    full: true,
                    ..
                }
            ),
            "{a:?}"
        );
    }
    // Refreshing keeps the place, in any order.
    for (i, v) in vs.iter().enumerate().rev() {
        let a = s.join(&p, *v).await.unwrap();
        assert_eq!(waiting_pos(&a), Some(i as u64 + 1));
        match a {
            Admission::Waiting {
                waiting, joined, ..
            } => {
                assert_eq!(waiting, 5);
                assert!(!joined, "a poll is not a new join");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(s.stats(&p).await.unwrap().joined_total, 6);
}

pub async fn admission_follows_the_line(h: &dyn Harness) {
    let s = h.store();
    let p = room("order", 100.0, 100);
    let mut p = p;
    p.max_active = 1;
    let first = occupy(&*s, &p).await;
    let vs: Vec<VisitorId> = (0..4).map(|_| VisitorId::random()).collect();
    for v in &vs {
        s.join(&p, *v).await.unwrap();
    }
    assert!(s.use_up(&p, first).await.unwrap());
    for expected in &vs {
        h.advance(Duration::from_millis(100));
        let r = s.admit(&p).await.unwrap();
        assert_eq!(
            r.admitted_visitors
                .iter()
                .map(|a| a.vid)
                .collect::<Vec<_>>(),
            vec![*expected]
        );
        assert_eq!(
            s.join(&p, *expected).await.unwrap(),
            Admission::Admitted,
            "claimed"
        );
        assert!(s.use_up(&p, *expected).await.unwrap());
    }
}

pub async fn admit_keeps_the_rate_and_the_burst(h: &dyn Harness) {
    let s = h.store();
    // 20/s with a 100 ms tick: 2 per tick, burst 2.
    let p = room("rate", 20.0, 10_000);
    s.update_room_state(
        &p,
        &RoomPatch {
            queue_all: Some(true),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for _ in 0..100 {
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
    h.advance(Duration::from_secs(30));
    // After a long pause the bucket holds one burst, not 30 s worth.
    assert_eq!(s.admit(&p).await.unwrap().admitted, 2);
    let mut total = 0;
    for _ in 0..20 {
        h.advance(Duration::from_millis(100));
        let n = s.admit(&p).await.unwrap().admitted;
        assert!(n <= 2, "{n} in one tick");
        total += n;
    }
    assert_eq!(total, 40, "2 s at 20/s");
}

/// No window of one tick lets in more than a burst, however close together the admit calls come
/// (a late tick and the next one, several instances, fast-path joins), and the rate still holds.
pub async fn no_tick_window_holds_more_than_a_burst(h: &dyn Harness) {
    let s = h.store();
    // 100/s with a 100 ms tick: burst 10.
    let p = room("window", 100.0, 10_000);
    let held = |queue_all| RoomPatch {
        queue_all: Some(queue_all),
        ..Default::default()
    };
    s.update_room_state(&p, &held(true)).await.unwrap();
    for _ in 0..800 {
        s.join(&p, VisitorId::random()).await.unwrap();
    }
    s.update_room_state(&p, &held(false)).await.unwrap();
    h.advance(Duration::from_secs(1));
    // (elapsed ms, admitted) of every call. One instance with late ticks (never closer than a
    // tick: the admission loop spaces its calls), then three instances 30–40 ms apart, then the
    // worst case, a late call and an early one.
    let late = [100u64, 130, 110, 140, 100, 120];
    let three = [30u64, 40, 30];
    let mut steps: Vec<u64> = (0..30).map(|i| late[i % late.len()]).collect();
    steps.extend((0..60).map(|i| three[i % three.len()]));
    let rated = steps.len();
    steps.extend((0..20).map(|i| if i % 2 == 0 { 130 } else { 70 }));
    let mut events = Vec::new();
    let mut now = 0u64;
    for step in steps {
        h.advance(Duration::from_millis(step));
        now += step;
        events.push((now, s.admit(&p).await.unwrap().admitted));
    }
    for (i, (t, _)) in events.iter().enumerate() {
        let in_window: u64 = events[..=i]
            .iter()
            .filter(|(u, _)| t - u < 100)
            .map(|(_, n)| n)
            .sum();
        assert!(
            in_window <= 10,
            "{in_window} admitted in the tick before {t} ms: {events:?}"
        );
    }
    // The rate holds: calls a tick or more apart each get a full burst; three instances
    // sharing the bucket admit 100/s together (2 s of them here).
    assert!(events[..30].iter().all(|(_, n)| *n == 10), "{events:?}");
    let shared: u64 = events[30..rated].iter().map(|(_, n)| n).sum();
    assert!(
        (190..=200).contains(&shared),
        "{shared} in 2 s at 100/s: {events:?}"
    );
}

pub async fn max_active_is_never_exceeded(h: &dyn Harness) {
    let s = h.store();
    let p = room("cap", 1000.0, 3);
    let mut admitted = Vec::new();
    for _ in 0..3 {
        admitted.push(occupy(&*s, &p).await);
    }
    let late = VisitorId::random();
    assert_eq!(waiting_pos(&s.join(&p, late).await.unwrap()), Some(1));
    h.advance(Duration::from_millis(100));
    assert_eq!(s.admit(&p).await.unwrap().admitted, 0);
    assert!(s.use_up(&p, admitted[0]).await.unwrap());
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert_eq!(r.admitted, 1);
    assert_eq!(r.active, 3);
    assert_eq!(s.join(&p, late).await.unwrap(), Admission::Admitted);
}

pub async fn unclaimed_admissions_return_their_slot(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("claim", 100.0, 1);
    p.claim_ttl = Duration::from_secs(5);
    let first = occupy(&*s, &p).await;
    let absent = VisitorId::random();
    let next = VisitorId::random();
    s.join(&p, absent).await.unwrap();
    s.join(&p, next).await.unwrap();
    s.use_up(&p, first).await.unwrap();
    h.advance(Duration::from_millis(100));
    assert_eq!(s.admit(&p).await.unwrap().admitted_visitors[0].vid, absent);
    // `absent` never comes back; `next` keeps polling.
    for _ in 0..6 {
        h.advance(Duration::from_secs(1));
        s.join(&p, next).await.unwrap();
        s.admit(&p).await.unwrap();
    }
    assert_eq!(s.join(&p, next).await.unwrap(), Admission::Admitted);
    // Coming back after the claim expired means joining again, at the back.
    assert!(waiting_pos(&s.join(&p, absent).await.unwrap()).is_some());
}

pub async fn silent_waiters_lose_their_place(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("abandon", 100.0, 1);
    p.abandon_after = Duration::from_secs(10);
    let first = occupy(&*s, &p).await;
    let silent = VisitorId::random();
    let polling = VisitorId::random();
    s.join(&p, silent).await.unwrap();
    s.join(&p, polling).await.unwrap();
    for _ in 0..11 {
        h.advance(Duration::from_secs(1));
        s.join(&p, polling).await.unwrap();
    }
    // The silent visitor is gone by the next admission tick at the latest (the memory store
    // drops them at once; Redis sweeps the line in slices, one per tick).
    assert_eq!(
        s.admit(&p).await.unwrap().admitted,
        0,
        "the only slot is still taken"
    );
    assert_eq!(waiting_pos(&s.join(&p, polling).await.unwrap()), Some(1));
    assert_eq!(s.stats(&p).await.unwrap().waiting, 1);
    s.use_up(&p, first).await.unwrap();
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert_eq!(
        r.admitted_visitors
            .iter()
            .map(|a| a.vid)
            .collect::<Vec<_>>(),
        vec![polling],
        "the silent one cost no admission"
    );
    assert!(s.stats(&p).await.unwrap().abandoned_total >= 1);
}

/// Lets `d` pass with the store reachable: an admission tick every second, as running
/// instances make. (Time in which no call reaches the store at all is a gap, which costs no
/// claim its deadline: see `liveness::forgiven`.)
pub async fn live_for(h: &dyn Harness, s: &dyn Store, p: &RoomParams, d: Duration) {
    let mut left = d;
    while !left.is_zero() {
        let step = left.min(Duration::from_secs(1));
        h.advance(step);
        s.admit(p).await.unwrap();
        left -= step;
    }
}

pub async fn sessions_expire_and_are_counted_exactly(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("ttl", 100.0, 10);
    p.session_ttl = Duration::from_secs(30);
    let a = occupy(&*s, &p).await;
    let b = occupy(&*s, &p).await;
    live_for(h, &*s, &p, Duration::from_secs(20)).await;
    assert!(s.touch(&p, a).await.unwrap(), "sliding expiry");
    live_for(h, &*s, &p, Duration::from_secs(15)).await;
    let st = s.stats(&p).await.unwrap();
    assert_eq!(st.active, 1, "b expired, a was extended");
    assert!(!s.use_up(&p, b).await.unwrap());
    assert!(s.use_up(&p, a).await.unwrap());
    assert_eq!(s.stats(&p).await.unwrap().active, 0);
}

pub async fn consume_wins_exactly_once(h: &dyn Harness) {
    let s = h.store();
    let p = room("consume", 100.0, 10);
    let v = occupy(&*s, &p).await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (s, p) = (s.clone(), p.clone());
        tasks.push(tokio::spawn(async move { s.use_up(&p, v).await.unwrap() }));
    }
    let mut wins = 0;
    for t in tasks {
        if t.await.unwrap() {
            wins += 1;
        }
    }
    assert_eq!(wins, 1);
}
