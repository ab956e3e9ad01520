//! The `local` store-error policy on a real Redis: it admits on its own only while the circuit
//! breaker is open, never through a held line, never before the instance has heard from the
//! store, and never past its share of max-active. And `open`, which forwards orders unconfirmed
//! while the store is down, but never through a held line.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::local::*;
use common::redis::{raw, RedisServer};
use common::*;
use serde_json::Value;

mod identities;
mod kept;
mod told;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_line_stays_held_through_a_redis_outage() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 100";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 3, room));
    admission_loop_ran(&redis).await;
    hold_the_line(&proxy).await;
    redis.kill();
    breaker_open(&proxy).await;
    let (admitted, states) = newcomers(&proxy, 6, 8).await;
    assert_eq!(admitted, 0, "nobody passes a held line: {states:?}");
    assert!(states.iter().all(|s| s == "paused"), "{states:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_policy_places_no_order_through_a_held_line() {
    // `open` forwards unconfirmed orders while the store is down, but a held line stays held
    // for them as for newcomers: an admission (even a used one) must not buy orders then.
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 100\nconsume = [\"POST /products/order\"]";
    let conf = config(origin.addr, &redis.url(), 3, room)
        .replace("on-store-error = \"local\"", "on-store-error = \"open\"");
    let proxy = Proxy::start(&conf);
    admission_loop_ran(&redis).await;
    let (admitted, _, jars) = newcomers_kept(&proxy, 1, 5).await;
    assert_eq!(admitted, 1, "the visitor is let in before the line is held");
    hold_the_line(&proxy).await;
    redis.kill();
    breaker_open(&proxy).await;
    for _ in 0..3 {
        let resp = client()
            .post(proxy.url("/products/order"))
            .header("cookie", jars[0].header())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 503, "an order through a held line");
    }
    let orders = origin
        .requests()
        .iter()
        .filter(|s| s.method == "POST")
        .count();
    assert_eq!(orders, 0, "no order reached the origin");
}

/// A store that refuses the room's keys (another key layout: a rolling upgrade across an
/// incompatible one) is not an outage the policy opens the doors for: under `open` and `local`
/// newcomers are held and orders without a cookie are refused, for as long as it lasts. Before,
/// `open` passed everyone, orders with no cookie at all included (found by review). Nor does it
/// open another room: a refusal is an answer, not a failure for the circuit breaker (found by
/// review: the one breaker opened, and an `open` room in good order passed everyone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_in_another_key_layout_is_held_whatever_the_policy() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 100\nconsume = [\"POST /products/order\"]";
    let calm = "\n[[room]]\nname = \"calm\"\npaths = [\"/calm\"]\ntick = \"100ms\"\nadmit-per-second = 1\nmax-active = 1\non-store-error = \"open\"\n";
    let state = |proxy: &Proxy, method: reqwest::Method, path: &str| {
        let req = client()
            .request(method, proxy.url(path))
            .header("accept", "application/json");
        async move {
            let text = req.send().await.unwrap().text().await.unwrap_or_default();
            serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["state"].as_str().map(String::from))
                .unwrap_or(text)
        }
    };
    for policy in ["open", "local"] {
        let conf = config(origin.addr, &redis.url(), 3, room).replace(
            "on-store-error = \"local\"",
            &format!("on-store-error = \"{policy}\""),
        ) + calm;
        let proxy = Proxy::start(&conf);
        admission_loop_ran(&redis).await;
        raw(
            redis.port,
            "DEL {anteroom:calm}:active {anteroom:calm}:waiting",
        )
        .unwrap();
        let first = state(&proxy, reqwest::Method::GET, "/calm").await;
        assert!(first.starts_with("origin"), "the first into calm: {first}");
        raw(redis.port, "HSET {anteroom:sale}:room layout 1").unwrap();
        eventually(Duration::from_secs(5), "the refused room held", || async {
            (state(&proxy, reqwest::Method::GET, "/products").await == "paused").then_some(())
        })
        .await;
        // Long enough for the refused room's ticks to open a breaker that counted them.
        for _ in 0..10 {
            let (admitted, states) = newcomers(&proxy, 2, 1).await;
            assert_eq!(admitted, 0, "{policy}: {states:?}");
            assert!(states.iter().all(|s| s == "paused"), "{policy}: {states:?}");
            let order = state(&proxy, reqwest::Method::POST, "/products/order").await;
            assert_eq!(order, "paused", "{policy}: an order with no cookie");
            let other = state(&proxy, reqwest::Method::GET, "/calm").await;
            assert_eq!(other, "waiting", "{policy}: the other room keeps its line");
        }
        raw(redis.port, "HSET {anteroom:sale}:room layout 2").unwrap();
    }
    let through = origin
        .requests()
        .iter()
        .filter(|s| s.uri.starts_with("/products") || s.uri == "/calm")
        .count();
    assert_eq!(through, 2, "only the first into calm, once per policy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_while_redis_is_down_admits_nobody() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    redis.kill();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 100";
    let proxy = Proxy::start(&config(origin.addr, &url, 3, room));
    breaker_open(&proxy).await;
    let (admitted, states) = newcomers(&proxy, 6, 8).await;
    assert_eq!(
        admitted, 0,
        "an instance that never heard from the store knows nothing of the room: {states:?}"
    );
    assert!(states.iter().all(|s| s == "paused"), "{states:?}");
    // Held by the store's absence: said so, not `null` as for someone not in line.
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut Jar::default())
        .await
        .expect("a status");
    assert_eq!(
        (&v["state"], &v["held_by"]),
        (&"paused".into(), &"store".into()),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_redis_does_not_admit_locally() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    // Many failures before the breaker opens: a pause of Redis shorter than that is "slow",
    // not "down".
    let room = "admit-per-second = 50\nmax-active = 100";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 1000, room));
    admission_loop_ran(&redis).await;
    // Someone is in line, so that the store itself admits nobody new at once.
    let mut first = Jar::default();
    assert!(visit(&proxy, &mut first).await.0, "the first walks in");
    let paused_at = Instant::now();
    assert!(raw(redis.port, "CLIENT PAUSE 1500 ALL").is_some_and(|r| r.starts_with("+OK")));
    let mut jars = vec![Jar::default(); 4];
    let mut admitted = 0;
    let mut states = Vec::new();
    for jar in jars.iter_mut() {
        let (a, state) = visit(&proxy, jar).await;
        admitted += usize::from(a);
        states.push(state);
    }
    assert!(
        paused_at.elapsed() < Duration::from_millis(1500),
        "the requests came while Redis was paused"
    );
    assert_eq!(admitted, 0, "a slow store is not a dead one: {states:?}");
    assert!(states.iter().all(|s| s == "paused"), "{states:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_admissions_stop_at_the_instances_share_of_max_active() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 100\nmax-active = 3\nsession-ttl = \"10m\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 3, room));
    admission_loop_ran(&redis).await;
    redis.kill();
    breaker_open(&proxy).await;
    let (admitted, states) = newcomers(&proxy, 12, 6).await;
    assert_eq!(
        admitted, 3,
        "one instance alone: all of max-active, no more: {states:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_admitted_locally_are_counted_once_the_store_answers() {
    const PAUSE_MS: u64 = 4000;
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 100\nsession-ttl = \"10m\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 3, room));
    admission_loop_ran(&redis).await;
    // Down without losing data: a paused Redis (or a partition).
    let paused_at = Instant::now();
    let pause = format!("CLIENT PAUSE {PAUSE_MS} ALL");
    assert!(raw(redis.port, &pause).is_some_and(|r| r.starts_with("+OK")));
    breaker_open(&proxy).await;
    let (admitted, states, jars) = newcomers_kept(&proxy, 4, 6).await;
    assert!(
        paused_at.elapsed() < Duration::from_millis(PAUSE_MS),
        "admitted while Redis was still paused"
    );
    assert!(admitted > 0, "the local policy admitted: {states:?}");
    // Redis answers again; the visitors admitted locally browse on, and the store counts them.
    let mut i = 0;
    eventually(
        Duration::from_secs(15),
        "the local sessions counted by the store",
        || {
            i += 1;
            let (proxy, jars) = (&proxy, jars.clone());
            async move {
                for mut jar in jars {
                    let (_, state) = visit(proxy, &mut jar).await;
                    assert!(state.starts_with("origin GET"), "{state}");
                }
                let v = admin_json(proxy, "/rooms/sale", TOKEN).await?;
                (v["stale"] != true && v["active"].as_u64() == Some(admitted as u64)).then_some(())
            }
        },
    )
    .await;
}

/// The instance that admitted visitors locally tells the store of them once it answers, whether
/// or not they come back through it: behind a load balancer that spreads requests, another
/// instance cannot know a cookie was a local admission (found by review: the sessions were never
/// counted, and the store let max-active more in beside them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_admitted_locally_are_counted_without_coming_back_here() {
    const PAUSE_MS: u64 = 3000;
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 100\nsession-ttl = \"10m\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 3, room));
    admission_loop_ran(&redis).await;
    let pause = format!("CLIENT PAUSE {PAUSE_MS} ALL");
    assert!(raw(redis.port, &pause).is_some_and(|r| r.starts_with("+OK")));
    breaker_open(&proxy).await;
    let (admitted, states) = newcomers(&proxy, 4, 4).await;
    assert!(admitted > 0, "the local policy admitted: {states:?}");
    let active = || raw(redis.port, "ZCARD {anteroom:sale}:active");
    eventually(
        Duration::from_secs(15),
        "the local sessions counted by the store, none of them back",
        || async {
            (active().as_deref().map(str::trim) == Some(&format!(":{admitted}")[..])).then_some(())
        },
    )
    .await;
}

/// The same when Redis comes back empty: the store takes back no session it does not hold
/// while the loss is young, and the instance tells it again past that, rather than taking the
/// refusal for a full room (found by re-review: the local sessions were never counted, and
/// max-active more were let in beside them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_admitted_locally_are_counted_after_redis_comes_back_empty() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 100\nsession-ttl = \"10m\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 3, room));
    admission_loop_ran(&redis).await;
    redis.kill();
    breaker_open(&proxy).await;
    let (admitted, states) = newcomers(&proxy, 4, 4).await;
    assert!(admitted > 0, "the local policy admitted: {states:?}");
    redis.restart();
    let active = || raw(redis.port, "ZCARD {anteroom:sale}:active");
    eventually(
        Duration::from_secs(15),
        "the local sessions counted by the store, none of them back",
        || async {
            (active().as_deref().map(str::trim) == Some(&format!(":{admitted}")[..])).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_max_active_while_redis_is_down() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 100\nmax-active = 4\nsession-ttl = \"10m\"";
    let cfg = config(origin.addr, &redis.url(), 3, room);
    let proxies = [Proxy::start(&cfg), Proxy::start(&cfg)];
    // Both instances have ticked since both were alive, so each knows there are two.
    both_instances_known(&redis).await;
    redis.kill();
    for p in &proxies {
        breaker_open(p).await;
    }
    for (i, p) in proxies.iter().enumerate() {
        let (admitted, states) = newcomers(p, 8, 6).await;
        assert_eq!(admitted, 2, "instance {i}: half of max-active: {states:?}");
    }
}

/// While the store is down, a visitor in line with a queue ticket gets the room's policy as a
/// newcomer does: under `open` they go through. Before (found by review), ticket holders were
/// told their place from the snapshot for the whole outage (a poll with a ticket makes no store
/// call), while newcomers, who have none, walked in under `open` or took the `local` admissions:
/// those who had waited longest were the only ones kept out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_in_line_gets_the_policy_as_a_newcomer_does() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 0.1\nmax-active = 100";
    let conf = config(origin.addr, &redis.url(), 3, room)
        .replace("on-store-error = \"local\"", "on-store-error = \"open\"");
    let proxy = Proxy::start(&conf);
    admission_loop_ran(&redis).await;
    // A line: the first walks in, the others wait with a ticket. Those near the head ask the
    // store anyway (their turn may have come): the ones further back are answered at the edge.
    let mut jars = vec![Jar::default(); 6];
    let mut waiting = Vec::new();
    for jar in jars.iter_mut() {
        let (admitted, state) = visit(&proxy, jar).await;
        if !admitted {
            assert_eq!(state, "waiting");
            waiting.push(jar.clone());
        }
    }
    assert!(waiting.len() >= 4, "{} wait", waiting.len());
    waiting.drain(..2);
    let ticketed = |j: &Jar| j.0.iter().any(|(k, _)| k.starts_with("anteroom_q"));
    assert!(waiting.iter().all(ticketed), "{waiting:?}");
    // Answered from the snapshot (once a tick has seen them) while the store is up.
    eventually(
        Duration::from_secs(10),
        "a poll answered at the edge",
        || {
            let (proxy, mut jar) = (&proxy, waiting[0].clone());
            async move {
                assert_eq!(visit(proxy, &mut jar).await.1, "waiting");
                let edge = metric(proxy, TOKEN, "anteroom_polls_total", "answered=\"edge\"").await;
                (edge > 0).then_some(())
            }
        },
    )
    .await;
    redis.kill();
    breaker_open(&proxy).await;
    let before = origin.requests().len();
    for jar in waiting.iter_mut() {
        let (_, state) = visit(&proxy, jar).await;
        assert!(
            state.starts_with("origin"),
            "a visitor in line under `open` while the store is down: {state}"
        );
    }
    assert_eq!(origin.requests().len(), before + waiting.len());
}

/// A visitor in line who orders while `open` lets everyone through (the store away) has used
/// their place: once the store is back, the order's confirm takes them out of the line. Before
/// (found by re-review), nothing settled an order of a visitor without an admission cookie, the
/// place stayed, and their turn bought a second order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_placed_from_the_line_under_open_uses_the_place() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 0.01\nmax-active = 1\nconsume = [\"POST /products/order\"]";
    let conf = config(origin.addr, &redis.url(), 3, room)
        .replace("on-store-error = \"local\"", "on-store-error = \"open\"");
    let proxy = Proxy::start(&conf);
    admission_loop_ran(&redis).await;
    assert!(
        visit(&proxy, &mut Jar::default()).await.0,
        "the first walks in"
    );
    let mut jar = Jar::default();
    assert_eq!(visit(&proxy, &mut jar).await.1, "waiting");
    let waiting = || raw(redis.port, "ZCARD {anteroom:sale}:waiting").map(|r| r.trim().to_string());
    assert_eq!(waiting().as_deref(), Some(":1"));
    redis.signal(true);
    breaker_open(&proxy).await;
    let resp = client()
        .post(proxy.url("/products/order"))
        .header("cookie", jar.header())
        .body("item=1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "through to the shop under `open`");
    assert_eq!(origin.count("/products/order"), 1);
    redis.signal(false);
    eventually(Duration::from_secs(15), "the order's confirm", || async {
        (waiting().as_deref() == Some(":0")).then_some(())
    })
    .await;
}
