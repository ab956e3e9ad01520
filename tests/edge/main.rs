//! Status polls answered at the edge, black-box on Redis: a visitor with a queue ticket polls
//! without a Redis call, learns of their turn through one, keeps a position that never goes up
//! across instances, and a tampered or foreign ticket costs nobody their place.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::{RoomParams, RoomPatch, Store};
use common::redis::RedisServer;
use common::*;
use serde_json::Value;

mod floods;
mod prequeue;

const TICKET: &str = "anteroom_q.sale";

const TOKEN: &str = "admin-token-for-tests-0123456789";

fn config(origin: std::net::SocketAddr, redis: &str, room: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[store]
backend = "redis"
redis-url = "{redis}"
timeout = "500ms"

[[room]]
name = "sale"
paths = ["/products"]
{room}

[[room]]
name = "other"
paths = ["/other"]
{room}
"#,
        base = base_config(origin)
    )
}

async fn json(proxy: &Proxy, path: &str, jar: &mut Jar) -> Value {
    get_json(proxy, path, jar).await.unwrap()
}

const STATUS: &str = "/.anteroom/status?room=sale";

/// One slot (taken by the first visitor), at a rate whose batch is one visitor: the second in
/// line is past what may have been admitted since a snapshot, so the snapshot answers them
/// (the first asks the store, as their turn may have come).
const SLOW_FULL_ROOM: &str = "admit-per-second = 0.2\nmax-active = 1\ntick = \"1s\"";

/// One slot, taken; two visitors in line (the second is the one measured: the head asks the
/// store, as its turn is next).
async fn a_line(proxy: &Proxy) -> (Jar, Jar, Jar) {
    let mut holder = Jar::default();
    assert_eq!(json(proxy, STATUS, &mut holder).await["state"], "admitted");
    let mut head = Jar::default();
    assert_eq!(json(proxy, "/products", &mut head).await["position"], 1);
    let mut second = Jar::default();
    let v = json(proxy, "/products", &mut second).await;
    assert_eq!(v["position"], 2, "{v}");
    assert!(second.get(TICKET).is_some(), "a ticket with the place");
    (holder, head, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_with_a_ticket_costs_redis_nothing_and_without_one_a_call() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = SLOW_FULL_ROOM;
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let mut conn = common::redis::connect(&redis.url()).await;
    let (_holder, _head, mut second) = a_line(&proxy).await;
    // Until a tick has sampled the line with the visitor in it, the store answers.
    snapshot_answers(&proxy, &redis.url(), &second).await;

    // Measure three times and keep the quietest run (an admission tick may fall inside one).
    let mut costs = Vec::new();
    for _ in 0..3 {
        let before = common::redis::script_calls(&mut conn).await;
        for _ in 0..20 {
            let v = json(&proxy, STATUS, &mut second).await;
            assert_eq!(
                (v["state"].as_str(), v["position"].as_u64()),
                (Some("waiting"), Some(2))
            );
        }
        let with_ticket = common::redis::script_calls(&mut conn).await - before;
        let mut no_ticket = second.clone();
        no_ticket.0.retain(|(k, _)| k != TICKET);
        let before = common::redis::script_calls(&mut conn).await;
        for _ in 0..20 {
            let mut jar = no_ticket.clone();
            let v = json(&proxy, STATUS, &mut jar).await;
            assert_eq!(v["position"], 2, "the same place: {v}");
        }
        let without = common::redis::script_calls(&mut conn).await - before;
        costs.push((with_ticket, without));
    }
    let (with_ticket, without) = costs.into_iter().min().unwrap();
    println!("Redis script calls: 20 polls with a ticket -> {with_ticket}, without -> {without}");
    assert_eq!(with_ticket, 0, "a poll with a ticket makes no Redis call");
    assert_eq!(without, 20, "a poll without one is one join");
}

/// Waits until a poll of `jar` is answered without a Redis call (a tick has sampled the line).
async fn snapshot_answers(proxy: &Proxy, url: &str, jar: &Jar) {
    eventually(
        Duration::from_secs(10),
        "an answer from the snapshot",
        || {
            let mut jar = jar.clone();
            async move {
                let mut conn = common::redis::connect(url).await;
                let before = common::redis::script_calls(&mut conn).await;
                let v = json(proxy, STATUS, &mut jar).await;
                let after = common::redis::script_calls(&mut conn).await;
                (after == before && v["state"] == "waiting").then_some(())
            }
        },
    )
    .await;
}

/// A counter of an instance's `/metrics`, summed over the series whose labels contain `labels`.
async fn counter(proxy: &Proxy, name: &str, labels: &str) -> f64 {
    let text = metrics_text(proxy, TOKEN).await;
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn params() -> RoomParams {
    RoomParams {
        name: "sale".into(),
        admit_per_second: 4.0,
        max_active: 1000,
        max_waiting: 1_000_000,
        session_ttl: Duration::from_secs(600),
        claim_ttl: Duration::from_secs(600),
        abandon_after: Duration::from_secs(600),
        tick: Duration::from_millis(100),
        queueing: Default::default(),
    }
}

/// Visitors poll through two instances in turn, as a browser behind a load balancer would.
/// Each learns of their turn (the store is asked once the head has passed their place) and is
/// admitted in the order of the line; nobody's position ever goes up; almost every answer to a
/// visitor in line came from an instance's snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_come_through_two_instances_in_order_and_positions_never_go_up() {
    const VISITORS: usize = 12;
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 4\nmax-active = 1000\nsession-ttl = \"10m\"\nclaim-ttl = \"10m\"\nabandon-after = \"10m\"\ntick = \"100ms\"";
    let cfg = config(origin.addr, &redis.url(), room);
    let proxies = [Proxy::start(&cfg), Proxy::start(&cfg)];
    let store = RedisStore::new(Target::Single(redis.url()), Duration::from_secs(2)).unwrap();
    let hold = |on| RoomPatch {
        queue_all: Some(on),
        ..Default::default()
    };
    store
        .update_room_state(&params(), &hold(true))
        .await
        .unwrap();
    let mut jars = Vec::new();
    for i in 0..VISITORS {
        let mut jar = Jar::default();
        let v = json(&proxies[i % 2], "/products", &mut jar).await;
        assert_eq!(v["position"], i as u64 + 1, "{v}");
        jars.push(jar);
    }
    store
        .update_room_state(&params(), &hold(false))
        .await
        .unwrap();

    let mut last = [u64::MAX; VISITORS];
    let mut admitted_at: Vec<Option<usize>> = vec![None; VISITORS];
    let mut round = 0usize;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while admitted_at.iter().any(Option::is_none) {
        assert!(
            std::time::Instant::now() < deadline,
            "admitted: {admitted_at:?}"
        );
        round += 1;
        for (i, jar) in jars.iter_mut().enumerate() {
            if admitted_at[i].is_some() {
                continue;
            }
            let v = json(&proxies[(i + round) % 2], STATUS, jar).await;
            match v["state"].as_str() {
                Some("admitted") => {
                    admitted_at[i] = Some(round);
                    assert!(jar.get("anteroom_sale").is_some(), "the admission cookie");
                    assert!(jar.get(TICKET).is_none(), "the ticket is taken back");
                }
                Some("waiting") | Some("paused") => {
                    let pos = v["position"].as_u64().unwrap();
                    assert!(
                        pos <= last[i],
                        "visitor {i}: position {} then {pos}",
                        last[i]
                    );
                    last[i] = pos;
                }
                other => panic!("{other:?}: {v}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rounds: Vec<usize> = admitted_at
        .iter()
        .map(|r| r.unwrap_or(usize::MAX))
        .collect();
    assert!(
        rounds.windows(2).all(|w| w[0] <= w[1]),
        "in the order of the line: {rounds:?}"
    );
    let mut edge = 0.0;
    let mut store_answers = 0.0;
    for p in &proxies {
        edge += counter(p, "anteroom_polls_total", "answered=\"edge\"").await;
        store_answers += counter(p, "anteroom_polls_total", "answered=\"store\"").await;
    }
    println!("answers to visitors in line: {edge} from snapshots, {store_answers} from the store");
    assert!(
        edge > 2.0 * store_answers,
        "{edge} at the edge, {store_answers} by the store"
    );
}

/// A ticket edited in any byte, or one of another room, is no ticket: the visitor is answered
/// by the store, at their place, and gets a good ticket back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_or_foreign_ticket_costs_nobody_their_place() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = SLOW_FULL_ROOM;
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let mut conn = common::redis::connect(&redis.url()).await;
    let (_holder, _head, second) = a_line(&proxy).await;
    snapshot_answers(&proxy, &redis.url(), &second).await;
    let good = second.get(TICKET).unwrap().to_string();

    // A place moved forward by hand: the payload's last bytes edited.
    let mut forged = good.clone().into_bytes();
    let i = good.find('.').unwrap() + 40;
    forged[i] = if forged[i] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    // The ticket of another room, for the same visitor.
    let mut other_holder = Jar::default();
    json(&proxy, "/.anteroom/status?room=other", &mut other_holder).await;
    let mut elsewhere = second.clone();
    elsewhere.0.retain(|(k, _)| k != TICKET);
    let v = json(&proxy, "/other", &mut elsewhere).await;
    assert_eq!(v["state"], "waiting", "{v}");
    let foreign = elsewhere.get("anteroom_q.other").unwrap().to_string();

    for bad in [forged, foreign, "garbage".to_string()] {
        let mut jar = second.clone();
        jar.set(TICKET, &bad);
        let before = common::redis::script_calls(&mut conn).await;
        let v = json(&proxy, STATUS, &mut jar).await;
        let calls = common::redis::script_calls(&mut conn).await - before;
        assert_eq!(
            (v["state"].as_str(), v["position"].as_u64()),
            (Some("waiting"), Some(2)),
            "{v}"
        );
        assert!(calls >= 1, "the store answered a bad ticket");
        let renewed = jar.get(TICKET).unwrap();
        assert_ne!(renewed, bad, "a good ticket is given back");
    }
}

/// An admission removes the room's ticket cookie also when this instance could not read it
/// (signed under a key it does not hold, mid key rotation; or tampered): the admission replaced
/// it (found by review r83c: such a ticket was left in the browser).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_removes_a_ticket_this_instance_cannot_read() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 10";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    for bad in ["1.unreadable", "garbage"] {
        let mut jar = Jar::default();
        jar.set(TICKET, bad);
        let v = eventually(Duration::from_secs(10), "a walk-in", || {
            let mut jar = jar.clone();
            let proxy = &proxy;
            async move {
                let v = json(proxy, STATUS, &mut jar).await;
                (v["state"] == "admitted").then_some((v, jar))
            }
        })
        .await;
        assert_eq!(v.0["state"], "admitted");
        assert_eq!(v.1.get(TICKET), None, "the ticket {bad:?} was left");
    }
}

/// With Redis gone, polls with a ticket are still answered from the last snapshot (places kept,
/// nobody admitted by it); the line moves again when Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_snapshot_answers_but_admits_nobody() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room =
        "admit-per-second = 0.2\nmax-active = 1\ntick = \"100ms\"\non-store-error = \"closed\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let (_holder, _head, mut second) = a_line(&proxy).await;
    snapshot_answers(&proxy, &redis.url(), &second).await;
    redis.kill();
    // The place stays: waiting until the instance knows the store is away, then on hold, held
    // by the store (`closed` lets nobody in, so no ETA).
    for _ in 0..10 {
        let v = json(&proxy, STATUS, &mut second).await;
        assert_eq!(v["position"].as_u64(), Some(2), "{v}");
        match v["state"].as_str() {
            Some("waiting") => {}
            Some("paused") => assert_eq!(v["held_by"], "store", "{v}"),
            _ => panic!("{v}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(second.get("anteroom_sale").is_none());
}

/// A visitor answered at the edge who then goes silent keeps the place for all of
/// `abandon-after`: such polls note the visitor to the store only every quarter of it, so the
/// store sweeps a quarter later (found by review: a visitor who polled until they went silent
/// was swept after three quarters of `abandon-after`, and came back at the end of the line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_answered_at_the_edge_keeps_the_place_for_all_of_abandon_after() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = format!("{SLOW_FULL_ROOM}\nabandon-after = \"16s\"");
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), &room));
    let (_holder, head, mut second) = a_line(&proxy).await;
    let mut third = Jar::default();
    assert_eq!(json(&proxy, "/products", &mut third).await["position"], 3);
    // The others poll on; the second polls too, until a poll is answered at the edge: the
    // last time the store heard of it is then just behind.
    let others = {
        let (addr, jars) = (proxy.addr, [head.clone(), third.clone()]);
        tokio::spawn(async move {
            loop {
                for jar in &jars {
                    let _ = client()
                        .get(format!("http://{addr}{STATUS}"))
                        .header("cookie", jar.header())
                        .send()
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    snapshot_answers(&proxy, &redis.url(), &second).await;
    // 2.5 s of polls answered at the edge (under a quarter of abandon-after: no note), then
    // silence for 15 s, under abandon-after.
    let polled = Instant::now();
    while polled.elapsed() < Duration::from_millis(2500) {
        let v = json(&proxy, STATUS, &mut second).await;
        assert_eq!(v["position"], 2, "{v}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_secs(15)).await;
    let v = json(&proxy, STATUS, &mut second).await;
    others.abort();
    assert_eq!(
        (v["position"].as_u64(), v["waiting"].as_u64()),
        (Some(2), Some(3)),
        "the place after 15 s of silence, abandon-after 16 s: {v}"
    );
}
