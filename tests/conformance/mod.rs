//! The store conformance suite: the semantics every backend must have, written against the
//! `Store` trait and a harness that can move time. Each backend's test file runs every case
//! here (`store_memory.rs` for the memory store; the Redis backends reuse it unchanged).

pub mod autopilot;
pub mod draws;
pub mod edge;
pub mod events;
pub mod finish;
pub mod history;
pub mod integrity;
pub mod liveness;
pub mod properties;
pub mod queueing;
pub mod recovery;

pub use recovery::{
    a_loss_noticed_by_a_caller_that_knew_holds_the_line,
    a_reassertion_keeps_the_newest_change_whoever_writes_last,
    admit_reports_a_generation_and_a_new_one_after_a_wipe,
    an_admit_that_knew_another_generation_admits_nobody, hold_back_applies_to_the_fast_path_too,
    hold_back_keeps_slots_of_max_active_free,
    the_hold_a_loss_puts_on_the_line_ends_at_the_reassertion,
};

pub use autopilot::*;
pub use draws::*;
pub use edge::*;
pub use events::*;
pub use finish::*;
pub use history::*;
pub use integrity::*;
pub use liveness::*;
pub use queueing::*;

use std::sync::Arc;
use std::time::Duration;

use anteroom::store::{Admission, RoomParams, RoomPatch, Store, VisitorId};

/// A store under test plus control over its time.
pub trait Harness: Send + Sync {
    fn store(&self) -> Arc<dyn Store>;
    /// Moves the store's clock forward.
    fn advance(&self, by: Duration);
    /// Steps the store's wall clock back without time passing (NTP, a failover to a host whose
    /// clock is behind).
    fn step_back(&self, by: Duration);
    /// Loses all of the store's data, as a Redis restart without persistence does.
    fn wipe(&self);
    /// The store's wall clock, unix seconds (as a proxy reads cookie expiry).
    fn wall_secs(&self) -> u64;
}

/// A room with a unique name (so backends sharing one server do not collide).
pub fn room(tag: &str, rate: f64, max_active: u64) -> RoomParams {
    RoomParams {
        name: Arc::from(
            format!("{tag}-{}", VisitorId::random())
                .get(..24)
                .unwrap_or(tag),
        ),
        admit_per_second: rate,
        max_active,
        max_waiting: 1_000_000,
        session_ttl: Duration::from_secs(600),
        claim_ttl: Duration::from_secs(60),
        abandon_after: Duration::from_secs(60),
        tick: Duration::from_millis(100),
        queueing: Default::default(),
    }
}

/// Puts `n` visitors in line (holding the line meanwhile, so that none walks in).
pub async fn line_up(s: &dyn Store, p: &RoomParams, n: usize) -> Vec<VisitorId> {
    let hold = |on| RoomPatch {
        queue_all: Some(on),
        ..Default::default()
    };
    s.update_room_state(p, &hold(true)).await.unwrap();
    let vs: Vec<VisitorId> = (0..n).map(|_| VisitorId::random()).collect();
    for v in &vs {
        s.join(p, *v).await.unwrap();
    }
    s.update_room_state(p, &hold(false)).await.unwrap();
    vs
}

pub(crate) fn waiting_pos(a: &Admission) -> Option<u64> {
    match a {
        Admission::Waiting { position, .. } | Admission::Paused { position, .. } => Some(*position),
        _ => None,
    }
}

/// Lets one visitor in through the fast path, so that the next ones must wait.
pub(crate) async fn occupy(s: &dyn Store, p: &RoomParams) -> VisitorId {
    let v = VisitorId::random();
    assert_eq!(s.join(p, v).await.unwrap(), Admission::Entered);
    v
}

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
        assert!(
            matches!(a, Admission::Waiting { joined: true, .. }),
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

/// Runs every case against a fresh harness from `make`.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        conformance_suite!(@cases $make;
            fast_path_admits_when_nobody_waits,
            join_is_idempotent_and_fifo,
            admission_follows_the_line,
            admit_keeps_the_rate_and_the_burst,
            no_tick_window_holds_more_than_a_burst,
            max_active_is_never_exceeded,
            unclaimed_admissions_return_their_slot,
            silent_waiters_lose_their_place,
            sessions_expire_and_are_counted_exactly,
            consume_wins_exactly_once,
            a_full_line_turns_newcomers_away,
            queue_all_holds_the_line_and_releases_it_in_order,
            a_disabled_room_lets_everyone_pass,
            overrides_change_rate_and_cap,
            clearing_the_line,
            eta_rate_follows_measured_admissions,
            the_measured_rate_counts_only_time_with_a_line,
            join_limit_counts_new_visitors_not_polls,
            an_outage_abandons_nobody,
            polling_just_within_abandon_after_keeps_the_place,
            a_clock_step_back_sweeps_nobody_and_admission_goes_on,
            a_step_not_heard_gives_no_turn_and_keeps_the_ones_it_gave,
            an_empty_line_forgets_its_measured_rate,
            an_outage_does_not_count_as_a_line_that_stood_still,
            a_consumed_admission_is_not_renewed,
            a_used_visitor_can_be_admitted_again,
            a_confirmed_order_uses_the_admission_up,
            a_failed_order_gives_the_admission_back,
            a_give_back_is_not_blocked_by_max_active,
            an_unsettled_order_comes_back_after_its_deadline,
            a_late_confirm_still_uses_the_admission_up,
            an_order_in_flight_is_kept_pending_by_its_heartbeat,
            a_pending_order_outlives_a_pause_of_the_store,
            an_unsettled_order_comes_back_after_a_pause_once_its_grace_has_run,
            a_session_is_not_also_a_place_in_line,
            an_order_takes_its_visitor_out_of_the_line,
            a_marker_outlives_the_cookie_that_ordered,
            a_marker_outlives_every_cookie_of_the_admission,
            settling_twice_changes_nothing,
            a_confirm_of_an_order_the_store_never_saw_uses_the_admission_up,
            a_heartbeat_does_not_shorten_the_marker,
            a_resent_consume_is_recognised,
            an_admission_survives_the_store_losing_its_data,
            a_cookie_expired_by_the_stores_clock_vouches_for_nothing,
            a_wall_clock_stepped_back_after_an_order_buys_no_second,
            a_fast_path_entry_holds_its_slot_for_claim_ttl,
            a_claim_outlives_a_pause_of_the_store,
            admit_reports_a_generation_and_a_new_one_after_a_wipe,
            an_admit_that_knew_another_generation_admits_nobody,
            hold_back_keeps_slots_of_max_active_free,
            hold_back_applies_to_the_fast_path_too,
            a_loss_noticed_by_a_caller_that_knew_holds_the_line,
            a_reassertion_keeps_the_newest_change_whoever_writes_last,
            the_hold_a_loss_puts_on_the_line_ends_at_the_reassertion,
            the_sampled_line_places_everyone_within_a_batch_or_one_percent,
            a_second_admit_within_half_a_tick_samples_the_line_after_its_batch,
            the_liveness_batch_keeps_places_and_only_the_named_ones,
            a_place_of_an_emptied_line_names_no_place_in_the_next,
            the_autopilot_keeps_one_rate_that_admits,
            every_change_is_recorded_once_with_before_and_after,
            the_history_keeps_the_newest,
            a_change_to_the_same_value_is_no_change,
            a_resent_clear_keeps_who_joined_since,
            completing_frees_the_slot_and_nothing_renews_it,
            an_order_in_flight_is_settled_by_the_origins_word,
            a_revocation_is_handed_back_once_per_number,
            revocations_expire_with_their_cookies,
            a_store_that_lost_its_revocations_is_read_from_the_start,
            a_caller_of_an_earlier_generation_reads_the_revocations_from_the_start,
            revocations_are_numbered_by_the_store_clock,
            an_ending_outlasts_a_session_renewed_for_longer_elsewhere,
            random_admits_anyone_in_line_at_the_rate_each_once,
            a_random_draw_is_told_to_every_caller_until_its_claims_run_out,
            a_room_that_rejects_admits_nobody_of_the_line_left,
            passthrough_lets_everyone_in_and_counts_who_would_have_queued,
            a_line_that_never_empties_stays_in_order_past_its_offsets_time_range,
            a_prequeue_registers_and_admits_nobody_until_the_opening,
            a_passthrough_room_lets_nobody_past_a_hold_or_through_an_event,
            a_draw_places_registrants_by_their_keys_ahead_of_later_arrivals,
            registrations_outlast_abandon_after_and_are_silent_from_the_opening,
            after_the_closing_newcomers_are_turned_away_and_the_line_is_kept_or_released,
            an_events_rate_and_cap_sit_between_an_override_and_the_autopilot,
            a_renewal_keeps_to_an_events_cap,
            the_store_clock_decides_and_a_step_back_does_not_reopen_registration,
            runtime_event_changes_are_versioned_and_recorded,
            a_join_by_events_older_than_the_stores_places_nobody_new,
            registrants_with_one_key_keep_two_places_in_the_order_of_their_ids,
            a_line_holds_one_draw_and_a_second_queues_first_come_first_served,
            an_admit_with_events_older_than_the_stores_makes_no_irreversible_step,
            a_prequeue_ends_the_sessions_admitted_before_it,
            an_opening_seen_without_its_prequeue_ends_the_sessions_before_it,
            a_cancelled_draw_is_out_and_places_nobody_again,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let h = $make;
                conformance::$case(&h).await;
            }
        )*
    };
}
