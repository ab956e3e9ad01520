//! The store's side of a rolling change: two store clients (instances) on one Redis whose
//! clocks are frozen and stepped together, so that a pause of Redis (time with no call) is a
//! shift of both.

use super::*;
use anteroom::event::{AfterClose, Event};
use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::VisitorId;
use anteroom::store::{Admission, AdmitContext, EventsArg, JoinContext, RoomParams, Store};

struct Pair {
    _redis: RedisServer,
    a: RedisStore,
    b: RedisStore,
    p: RoomParams,
}

impl Pair {
    fn start(name: &str) -> Self {
        let redis = RedisServer::start();
        let store =
            || RedisStore::new(Target::Single(redis.url()), Duration::from_secs(2)).unwrap();
        let (a, b) = (store(), store());
        a.freeze_clock();
        b.freeze_clock();
        let p = room(name);
        Pair {
            _redis: redis,
            a,
            b,
            p,
        }
    }

    /// Both clocks on by `by` (no call between: a pause of Redis when long).
    fn step(&self, by: Duration) {
        self.a.shift_clock(by);
        self.b.shift_clock(by);
    }
}

/// The room every test here runs.
fn room(name: &str) -> RoomParams {
    RoomParams {
        name: name.into(),
        admit_per_second: 10.0,
        max_active: 10,
        max_waiting: 1000,
        session_ttl: Duration::from_secs(600),
        claim_ttl: Duration::from_secs(60),
        abandon_after: Duration::from_secs(60),
        tick: Duration::from_millis(100),
        queueing: Default::default(),
    }
}

/// This host's clock now, unix µs (a frozen store's clock starts there).
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// The event "drop": its pre-queue began a second before `now`, it opens at `opens_at`.
fn drop_event(now: u64, opens_at: u64, draw: bool) -> Event {
    Event {
        name: "drop".into(),
        prequeue_from: now - 1_000_000,
        opens_at,
        closes_at: None,
        draw,
        after_close: AfterClose::Keep,
        admit_per_second: None,
        max_active: None,
        utc_offset: 0,
    }
}

/// A newcomer through `s`, whose events are `events` (none of them drawn).
async fn newcomer(s: &RedisStore, p: &RoomParams, events: &EventsArg) -> Admission {
    let ctx = JoinContext {
        gate: None,
        events: Some(events),
        draws: &[],
        events_version: None,
        ..Default::default()
    };
    s.join_with(p, VisitorId::random(), &ctx).await.unwrap()
}

fn ctx(digest: &str, events: Option<EventsArg>) -> AdmitContext {
    AdmitContext {
        config: "c".into(),
        events_config: digest.into(),
        events,
        ..AdmitContext::default()
    }
}

/// Two instances whose events differ, then a pause of the store longer than a heartbeat's life
/// (nobody could tick). The first step after it still finds the other instance live and the
/// events mixed, whatever instance takes it; an instance that really stopped is gone after its
/// life of steps. Before (found by re-review), heartbeats were stamped on TIME: the first step
/// after a pause found the other gone, judged the events agreed and stepped them (an opening
/// the other had moved later was recorded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_of_the_store_is_no_silence_of_an_instance() {
    let Pair { a, b, p, .. } = &Pair::start("paused");
    let step = |by| {
        a.shift_clock(by);
        b.shift_clock(by);
    };
    for _ in 0..3 {
        step(Duration::from_millis(100));
        a.admit_with(p, &ctx("e1", None)).await.unwrap();
        b.admit_with(p, &ctx("e2", None)).await.unwrap();
    }
    assert!(
        a.admit_with(p, &ctx("e1", None))
            .await
            .unwrap()
            .events_mixed
    );
    // Twenty seconds with no call (Redis paused): four times a heartbeat's life of 5 s.
    step(Duration::from_secs(20));
    let r = a.admit_with(p, &ctx("e1", None)).await.unwrap();
    assert!(r.events_mixed, "the other instance is not gone by a pause");
    assert_eq!(r.instances, 2);
    // B stopped for good: gone after its life of A's steps.
    let mut gone_after = None;
    for i in 1..=100 {
        step(Duration::from_millis(100));
        if !a
            .admit_with(p, &ctx("e1", None))
            .await
            .unwrap()
            .events_mixed
        {
            gone_after = Some(i);
            break;
        }
    }
    let n = gone_after.expect("B judged gone");
    // A life of 5 s on the liveness clock, the pause counting as one cap (a second).
    assert!((35..=50).contains(&n), "after about 4 s of steps: {n}");
}

/// A rolling reload that adds a drawn pre-queue: A runs it, B not yet. While they disagree a
/// newcomer through B is placed by nobody (B would place them first come, first served, ahead
/// of the draw), and a pause of the store longer than a heartbeat's life changes nothing: the
/// first calls after it (B's step, then B's newcomer, before A has ticked again) still hold
/// the newcomer. Before (found on reading the diff), A's word that the room is drawn ran out
/// on Redis TIME while the heartbeats ran on the liveness clock: after the pause B placed the
/// newcomer first come, first served until A's next step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_of_the_store_keeps_newcomers_out_of_a_draw_in_rollout() {
    let pair = Pair::start("rollout-draw");
    let (a, b, p) = (&pair.a, &pair.b, &pair.p);
    let now = now_us();
    let drop = drop_event(now, now + 600_000_000, true);
    let drawn = EventsArg::of(std::slice::from_ref(&drop));
    let none = EventsArg::of(&[]);
    for _ in 0..3 {
        pair.step(Duration::from_millis(100));
        a.admit_with(p, &ctx("drawn", Some(drawn.clone())))
            .await
            .unwrap();
        b.admit_with(p, &ctx("none", Some(none.clone())))
            .await
            .unwrap();
    }
    let held = |a: &Admission| matches!(a, Admission::Unplaced { .. });
    let before = newcomer(b, p, &none).await;
    assert!(held(&before), "placed while they disagree: {before:?}");
    // Twenty seconds with no call (Redis paused), then B first.
    pair.step(Duration::from_secs(20));
    let r = b
        .admit_with(p, &ctx("none", Some(none.clone())))
        .await
        .unwrap();
    assert!(r.events_mixed, "A is not gone by a pause");
    let after = newcomer(b, p, &none).await;
    assert!(held(&after), "placed after a pause: {after:?}");
}

/// A call that runs long after its caller gave up on it decides nothing by the events it
/// carries. An instance's admit call, sent as Redis pauses, waits in the connection; the file
/// moves the opening later meanwhile (a reload during the outage); Redis resumes after the old
/// opening and runs the old call first. Before (found by review), that call recorded the
/// opening at the old time, the registrants went in four minutes early and the seed was
/// published. Now it is late by the deadline the call carries (twice the store's timeout), and
/// the opening is recorded by no call until one that carries it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_run_after_its_caller_gave_up_records_no_opening() {
    let redis = RedisServer::start();
    let a = RedisStore::new(Target::Single(redis.url()), Duration::from_millis(200)).unwrap();
    let p = room("late");
    let now = now_us();
    let drop_at = |opens_at: u64| drop_event(now, opens_at, false);
    let old = EventsArg::of(&[drop_at(now + 2_000_000)]);
    let moved = EventsArg::of(&[drop_at(now + 600_000_000)]);
    for _ in 0..3 {
        let r = a
            .admit_with(&p, &ctx("old", Some(old.clone())))
            .await
            .unwrap();
        assert!(r.event.is_some(), "in the pre-queue: {r:?}");
    }
    let opened = || common::redis::raw(redis.port, "HGET {anteroom:late}:room opened");
    assert_eq!(
        opened().as_deref().map(str::trim),
        Some("$-1"),
        "not opened yet"
    );
    redis.signal(true);
    let sent = a.admit_with(&p, &ctx("old", Some(old.clone()))).await;
    assert!(sent.is_err(), "Redis is paused: {sent:?}");
    // The old opening passes while Redis is paused (a wait for the clock, not a condition).
    let past = Duration::from_micros(now + 2_500_000)
        .saturating_sub(SystemTime::now().duration_since(UNIX_EPOCH).unwrap());
    tokio::time::sleep(past).await;
    redis.signal(false);
    // The call that carries the moved opening, after the old one ran.
    let r = a
        .admit_with(&p, &ctx("old", Some(moved.clone())))
        .await
        .unwrap();
    let opened = opened().unwrap_or_default();
    assert!(
        opened.trim() == "$-1",
        "the opening recorded by a call run late: {opened:?}, {:?}",
        r.event
    );
}

/// A rolling reload hidden by a pause: both instances run an opening at T+5 s; Redis pauses;
/// A reloads with the opening moved later; Redis resumes past the old opening and B, not
/// reloaded, steps first with the old one. The store has heard nothing of A's reload, but it
/// has not heard A at all since the stall either: it takes no event step until it has. Before
/// (found by review), B's step recorded the opening at the old time, and the registrants went
/// in minutes early once both files agreed on the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_pause_no_event_step_before_every_instance_is_heard() {
    let pair = Pair::start("hidden-reload");
    let (a, b, p) = (&pair.a, &pair.b, &pair.p);
    let now = now_us();
    let drop_at = |opens_at: u64| drop_event(now, opens_at, false);
    let old = EventsArg::of(&[drop_at(now + 5_000_000)]);
    let moved = EventsArg::of(&[drop_at(now + 600_000_000)]);
    for _ in 0..3 {
        pair.step(Duration::from_millis(100));
        a.admit_with(p, &ctx("old", Some(old.clone())))
            .await
            .unwrap();
        b.admit_with(p, &ctx("old", Some(old.clone())))
            .await
            .unwrap();
    }
    let opened = || {
        common::redis::raw(
            pair._redis.port,
            "HGET {anteroom:hidden-reload}:room opened",
        )
        .unwrap_or_default()
    };
    assert_eq!(opened().trim(), "$-1", "not opened yet");
    // Twenty seconds with no call (Redis paused), past the old opening.
    pair.step(Duration::from_secs(20));
    let r = b
        .admit_with(p, &ctx("old", Some(old.clone())))
        .await
        .unwrap();
    assert_eq!(
        opened().trim(),
        "$-1",
        "opened by B before A was heard: {:?}",
        r.event
    );
    assert_eq!(r.admitted, 0);
    // A, heard: its file moved the opening, and the instances disagree.
    pair.step(Duration::from_millis(100));
    a.admit_with(p, &ctx("moved", Some(moved.clone())))
        .await
        .unwrap();
    pair.step(Duration::from_millis(100));
    let r = b
        .admit_with(p, &ctx("old", Some(old.clone())))
        .await
        .unwrap();
    assert!(r.events_mixed, "they disagree");
    assert_eq!(opened().trim(), "$-1", "opened while they disagree");
    // B reloaded too: they agree on the later opening, and nothing opens now.
    for _ in 0..3 {
        pair.step(Duration::from_millis(100));
        a.admit_with(p, &ctx("moved", Some(moved.clone())))
            .await
            .unwrap();
        b.admit_with(p, &ctx("moved", Some(moved.clone())))
            .await
            .unwrap();
    }
    assert_eq!(opened().trim(), "$-1", "the opening is the moved one");
}

/// The same hidden reload with a data loss instead of a pause: Redis restarted empty (here a
/// `FLUSHALL`) past the old opening, B (not reloaded) steps first, then again once it knows the
/// new generation. The store knows nobody's file then: for a heartbeat's life it takes no event
/// step, and by then A has said its own. Before (found by review), B's first steps recorded the
/// opening at the old time, and the sale opened minutes early once both files agreed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_data_loss_no_event_step_before_the_instances_are_heard() {
    let pair = Pair::start("lost-reload");
    let (a, b, p) = (&pair.a, &pair.b, &pair.p);
    let now = now_us();
    let drop_at = |opens_at: u64| drop_event(now, opens_at, false);
    let old = EventsArg::of(&[drop_at(now + 5_000_000)]);
    let moved = EventsArg::of(&[drop_at(now + 600_000_000)]);
    let knowing = |digest: &str, events: &EventsArg, gen: &str| AdmitContext {
        known_generation: (!gen.is_empty()).then(|| gen.to_string()),
        ..ctx(digest, Some(events.clone()))
    };
    let mut gen = String::new();
    for _ in 0..3 {
        pair.step(Duration::from_millis(100));
        gen = a
            .admit_with(p, &knowing("old", &old, &gen))
            .await
            .unwrap()
            .generation;
        b.admit_with(p, &knowing("old", &old, &gen)).await.unwrap();
    }
    let opened = || {
        common::redis::raw(pair._redis.port, "HGET {anteroom:lost-reload}:room opened")
            .unwrap_or_default()
    };
    assert_eq!(opened().trim(), "$-1", "not opened yet");
    common::redis::raw(pair._redis.port, "FLUSHALL").expect("flushed");
    pair.step(Duration::from_secs(20));
    // B first, twice: the loss found, then the new generation known.
    let r = b.admit_with(p, &knowing("old", &old, &gen)).await.unwrap();
    assert_eq!(
        opened().trim(),
        "$-1",
        "opened by the step that found the loss"
    );
    let new_gen = r.generation;
    assert_ne!(new_gen, gen);
    pair.step(Duration::from_millis(100));
    b.admit_with(p, &knowing("old", &old, &new_gen))
        .await
        .unwrap();
    assert_eq!(opened().trim(), "$-1", "opened before A was heard");
    // A, heard within the life: they disagree; then B reloaded too.
    pair.step(Duration::from_millis(100));
    a.admit_with(p, &knowing("moved", &moved, &gen))
        .await
        .unwrap();
    pair.step(Duration::from_millis(100));
    let r = b
        .admit_with(p, &knowing("old", &old, &new_gen))
        .await
        .unwrap();
    assert!(r.events_mixed, "they disagree");
    for _ in 0..60 {
        pair.step(Duration::from_millis(100));
        a.admit_with(p, &knowing("moved", &moved, &new_gen))
            .await
            .unwrap();
        b.admit_with(p, &knowing("moved", &moved, &new_gen))
            .await
            .unwrap();
    }
    assert_eq!(opened().trim(), "$-1", "the opening is the moved one");
}

/// A room without events is not held after a stall: its newcomers are placed (here let in, the
/// room empty) while the store waits to hear the other instance again, which matters only for
/// events. Before (found by review), a restart of every instance kept newcomers unplaced ("on
/// hold") for the old processes' heartbeat life, then placed them in the order they polled again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_pause_a_room_without_events_places_newcomers() {
    let pair = Pair::start("no-events");
    let (a, b, p) = (&pair.a, &pair.b, &pair.p);
    let none = EventsArg::of(&[]);
    let digest = anteroom::room::events_digest(None, None);
    for _ in 0..3 {
        pair.step(Duration::from_millis(100));
        a.admit_with(p, &ctx(&digest, Some(none.clone())))
            .await
            .unwrap();
        b.admit_with(p, &ctx(&digest, Some(none.clone())))
            .await
            .unwrap();
    }
    pair.step(Duration::from_secs(20));
    b.admit_with(p, &ctx(&digest, Some(none.clone())))
        .await
        .unwrap();
    let joined = newcomer(b, p, &none).await;
    assert!(
        matches!(joined, Admission::Entered),
        "A not heard yet: {joined:?}"
    );
}

/// While the instances run the room with different events in their files (a rolling reload
/// that adds a drawn pre-queue), an order of a session from before it takes nothing through
/// the instance not yet reloaded: no tick enters the pre-queue until they agree, and the order
/// would reach the shop ahead of every registrant (found by re-review r107a: five orders went
/// through during the rollout). Once they agree, the pre-queue ends the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_instances_disagree_a_session_from_before_orders_nothing() {
    use anteroom::store::Consumed;
    let pair = Pair::start("rollout-order");
    let (a, b, p) = (&pair.a, &pair.b, &pair.p);
    let none = EventsArg::of(&[]);
    let early = VisitorId::random();
    let ctx_none = JoinContext {
        events: Some(&none),
        ..Default::default()
    };
    let first = b.join_with(p, early, &ctx_none).await.unwrap();
    assert_eq!(first, Admission::Entered);
    let now = now_us();
    let drawn = EventsArg::of(&[drop_event(now, now + 600_000_000, true)]);
    // B has told the store of its file before A steps by its own.
    for _ in 0..3 {
        pair.step(Duration::from_millis(100));
        b.admit_with(p, &ctx("none", Some(none.clone())))
            .await
            .unwrap();
        a.admit_with(p, &ctx("drawn", Some(drawn.clone())))
            .await
            .unwrap();
    }
    let order = || order_by(None);
    let c = b.consume(p, early, &order()).await.unwrap();
    assert!(
        matches!(c, Consumed::Busy { .. }),
        "while they disagree: {c:?}"
    );
    // B reloaded: they agree, the pre-queue begins and ends the session.
    for _ in 0..3 {
        pair.step(Duration::from_millis(100));
        for s in [a, b] {
            s.admit_with(p, &ctx("drawn", Some(drawn.clone())))
                .await
                .unwrap();
        }
    }
    let c = b.consume(p, early, &order()).await.unwrap();
    assert_eq!(c, Consumed::Ended, "in the pre-queue");
}

/// An instance whose events are older than the store's runtime changes (its first tick after a
/// start, or one whose reads of them fail) is not counted against the others' events: its
/// file-only digest set 'ev_mixed', and every order and newcomer through every instance was
/// held, for good through an instance that could not read the changes (found by re-review
/// r108a). Its own joins and orders are held by its version meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_behind_the_runtime_changes_holds_nobody_elsewhere() {
    use anteroom::store::history::Actor;
    use anteroom::store::{Consumed, EventChange};
    let pair = Pair::start("behind");
    let (a, b, p) = (&pair.a, &pair.b, &pair.p);
    let now = now_us();
    let mut later = drop_event(now, now + 5 * 3_600_000_000, false);
    later.prequeue_from = now + 4 * 3_600_000_000;
    let by = Actor {
        id: "behind-1".into(),
        by: "ops".into(),
        client: "127.0.0.1".into(),
    };
    let change = anteroom::event::schedule::Runtime {
        event: Some(later.clone()),
        cancelled: false,
    };
    let done = a.change_event(p, "drop", &change, 0, &serde_json::Value::Null, &by);
    assert_eq!(done.await.unwrap(), EventChange::Done(1));
    // A has read the change; B has not (its window is its file's alone, at version 0).
    let read = EventsArg::at(std::slice::from_ref(&later), 1);
    let behind = EventsArg::at(&[], 0);
    for _ in 0..3 {
        pair.step(Duration::from_millis(100));
        a.admit_with(p, &ctx("with-drop", Some(read.clone())))
            .await
            .unwrap();
        b.admit_with(p, &ctx("file-only", Some(behind.clone())))
            .await
            .unwrap();
    }
    let v = VisitorId::random();
    let through_a = JoinContext {
        events: Some(&read),
        events_version: Some(1),
        ..Default::default()
    };
    let joined = a.join_with(p, v, &through_a).await.unwrap();
    assert_eq!(joined, Admission::Entered, "a newcomer through A");
    let order = order_by(Some(1));
    assert_eq!(a.consume(p, v, &order).await.unwrap(), Consumed::Won);
}

/// A new order vouched by an admission cookie, by events of `events_version`.
fn order_by(events_version: Option<u64>) -> anteroom::store::Order {
    anteroom::store::Order {
        request: anteroom::store::RequestId::random(),
        grace: Duration::from_secs(30),
        vouched: true,
        cookie_life: Duration::from_secs(600),
        cookie_expires: 0,
        generation: None,
        events_version,
    }
}
