//! Redis dying and coming back, for real: kill -9 mid-flood, restart empty or from its AOF.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::redis::RedisServer;
use common::*;
use serde_json::Value;

fn config(origin: std::net::SocketAddr, redis: &str, room: &str) -> String {
    format!(
        r#"{base}
[store]
backend = "redis"
redis-url = "{redis}"
timeout = "200ms"
breaker-failures = 3
breaker-cooldown = "500ms"

[[room]]
name = "sale"
paths = ["/products"]
tick = "100ms"
{room}
"#,
        base = base_config(origin)
    )
}

async fn status(proxy: &Proxy, jar: &mut Jar) -> Value {
    let mut req = client().get(proxy.url("/.anteroom/status?room=sale"));
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    let resp = req.send().await.unwrap();
    jar.absorb(&resp);
    resp.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_flood_then_back_empty() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 20\nmax-active = 1000\non-store-error = \"local\"";
    let mut proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let proxy_url = proxy.url("");

    // Five admitted visitors.
    let mut admitted = Vec::new();
    for _ in 0..5 {
        let mut jar = Jar::default();
        let deadline = Instant::now() + Duration::from_secs(5);
        while status(&proxy, &mut jar).await["state"] != "admitted" {
            assert!(Instant::now() < deadline, "admitted within 5 s");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        admitted.push(jar);
    }

    // The flood: admitted visitors browse, newcomers arrive, for four seconds.
    let failures = Arc::new(AtomicU64::new(0));
    let slow = Arc::new(AtomicU64::new(0));
    let admitted_requests = Arc::new(AtomicU64::new(0));
    let newcomers = Arc::new(AtomicU64::new(0));
    let locally_admitted = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for jar in admitted.clone() {
        let (failures, count, base) = (
            failures.clone(),
            admitted_requests.clone(),
            proxy_url.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let c = client();
            let mut i = 0;
            while Instant::now() < stop {
                i += 1;
                let ok = match c
                    .get(format!("{base}/products/{i}"))
                    .header("cookie", jar.header())
                    .send()
                    .await
                {
                    Ok(r) if r.status() == 200 => r
                        .text()
                        .await
                        .map(|t| t == format!("origin GET /products/{i}"))
                        .unwrap_or(false),
                    _ => false,
                };
                if !ok {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Newcomers: each task is a stream of visitors; each visitor polls a few times with its
    // own cookie jar. An admission is "fresh" when the visitor held no admission cookie; a
    // visitor must never get two fresh admissions.
    let twice = Arc::new(AtomicU64::new(0));
    for _ in 0..2 {
        let (slow, count, local, twice, base) = (
            slow.clone(),
            newcomers.clone(),
            locally_admitted.clone(),
            twice.clone(),
            proxy_url.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let c = client();
            while Instant::now() < stop {
                let mut jar = Jar::default();
                let mut fresh = 0;
                for _ in 0..4 {
                    let started = Instant::now();
                    let had = jar.get("anteroom_sale").is_some();
                    let mut req = c
                        .get(format!("{base}/products"))
                        .header("accept", "application/json");
                    if !jar.0.is_empty() {
                        req = req.header("cookie", jar.header());
                    }
                    let fine = match req.send().await {
                        Ok(r) if r.status().as_u16() < 500 => {
                            if !had && set_cookies(&r).iter().any(|(k, _, _)| k == "anteroom_sale")
                            {
                                fresh += 1;
                                local.fetch_add(1, Ordering::Relaxed);
                            }
                            jar.absorb(&r);
                            true
                        }
                        _ => false,
                    };
                    if !fine || started.elapsed() > Duration::from_millis(1500) {
                        slow.fetch_add(1, Ordering::Relaxed);
                    }
                    count.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if fresh > 1 {
                    twice.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    redis.kill();
    let killed = Instant::now();
    let before_outage = locally_admitted.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during_outage = locally_admitted.load(Ordering::Relaxed) - before_outage;
    redis.restart();
    let restarted = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    println!(
        "{} admitted requests, {} newcomers ({} admitted during the {:?} outage)",
        admitted_requests.load(Ordering::Relaxed),
        newcomers.load(Ordering::Relaxed),
        during_outage,
        restarted - killed
    );
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "admitted visitors never noticed the outage"
    );
    assert_eq!(
        slow.load(Ordering::Relaxed),
        0,
        "every newcomer got an answer, under 1.5 s, never a 5xx"
    );
    assert!(
        during_outage > 0,
        "the local policy kept admitting at this instance's share"
    );
    assert!(
        during_outage <= 20 * 2 + 2,
        "and no more than the room's rate: {during_outage}"
    );

    // Back: scripts reloaded on the empty Redis, the room runs again.
    let mut conn = ::redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "the admission loop to run on the new Redis",
        || {
            let mut c = conn.clone();
            async move {
                let exists: bool = ::redis::cmd("EXISTS")
                    .arg("{anteroom:sale}:room")
                    .query_async(&mut c)
                    .await
                    .unwrap_or(false);
                exists.then_some(())
            }
        },
    )
    .await;
    println!(
        "running again {:?} after Redis came back",
        restarted.elapsed()
    );
    let ready = client()
        .get(proxy.admin_url("/readyz"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(ready, 200);
    let _: Option<String> = ::redis::cmd("PING").query_async(&mut conn).await.ok();
    assert!(proxy.alive());
}

/// With AOF persistence the line survives a crash of Redis; without it, waiting visitors join
/// again with their visitor id, in the order they come back.
async fn restart(persist: bool) -> Vec<Option<u64>> {
    let mut redis = if persist {
        RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
    } else {
        RedisServer::start()
    };
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 1\non-store-error = \"closed\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let mut holder = Jar::default();
    assert_eq!(status(&proxy, &mut holder).await["state"], "admitted");
    let mut waiters: Vec<Jar> = Vec::new();
    for i in 1..=4u64 {
        let mut jar = Jar::default();
        assert_eq!(status(&proxy, &mut jar).await["position"], i);
        waiters.push(jar);
    }
    redis.kill();
    redis.restart();
    // Once the store answers again, ask in reverse order.
    eventually(Duration::from_secs(10), "the store to answer", || async {
        let r = client()
            .get(proxy.admin_url("/readyz"))
            .send()
            .await
            .unwrap();
        (r.status() == 200).then_some(())
    })
    .await;
    if !persist {
        // The instance that knew the lost data holds the line (queue_all) until it has
        // re-asserted the room's state; a visitor who joins meanwhile queues. Wait for the
        // re-assertion, so that what the first visitor back meets does not depend on which
        // came first (this test passed or failed by that race).
        let url = redis.url();
        eventually(
            Duration::from_secs(10),
            "the room's state re-asserted",
            || {
                let url = url.clone();
                async move {
                    let mut c = common::redis::connect(&url).await;
                    let held: Option<String> = ::redis::cmd("HGET")
                        .arg("{anteroom:sale}:room")
                        .arg("queue_all")
                        .query_async(&mut c)
                        .await
                        .ok()
                        .flatten();
                    (held.as_deref() == Some("0")).then_some(())
                }
            },
        )
        .await;
    }
    // The first calls on a re-made connection can still fail (the room then shows "paused"
    // under the closed policy, and nobody joins): each visitor polls until the store answers.
    let mut positions = Vec::new();
    for jar in waiters.iter_mut().rev() {
        let deadline = Instant::now() + Duration::from_secs(5);
        let v = loop {
            let v = status(&proxy, jar).await;
            if v["state"] != "paused" {
                break v;
            }
            assert!(Instant::now() < deadline, "the store answers again");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        positions.push(v["position"].as_u64());
    }
    positions.reverse();
    // The admitted visitor kept going throughout.
    let resp = client()
        .get(proxy.url("/products/x"))
        .header("cookie", holder.header())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    positions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_aof_places_survive_a_redis_crash() {
    assert_eq!(
        restart(true).await,
        vec![Some(1), Some(2), Some(3), Some(4)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_persistence_visitors_join_again_in_the_order_they_return() {
    // Asked in reverse order after an empty restart: the empty Redis no longer knows the
    // admitted visitor, so the first to return walks in (fast path) and the rest queue in the
    // order they come back.
    assert_eq!(restart(false).await, vec![Some(3), Some(2), Some(1), None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_during_an_outage_is_postponed_not_refused() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 10\nsession-ttl = \"6s\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let mut jar = Jar::default();
    assert_eq!(status(&proxy, &mut jar).await["state"], "admitted");
    let admitted = Instant::now();
    redis.kill();
    // Past half the session's life, the cookie would be renewed; the store cannot answer.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let resp = client()
        .get(proxy.url("/products/a"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "served on the current cookie");
    assert!(
        set_cookies(&resp)
            .iter()
            .all(|(k, _, _)| k != "anteroom_sale"),
        "renewal postponed"
    );
    redis.restart();
    // Redis is back (empty) before the cookie runs out: a request renews it, once the store's
    // new generation is older than a breaker's cooldown, a call's timeout and two ticks (an
    // order of this admission could be in flight elsewhere: `Proxy::seen_generation`).
    let renewed = eventually(Duration::from_millis(2500), "a renewed cookie", || {
        let (proxy, jar) = (&proxy, jar.clone());
        async move {
            let resp = client()
                .get(proxy.url("/products/b"))
                .header("cookie", jar.header())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            set_cookies(&resp)
                .into_iter()
                .find(|(k, _, _)| k == "anteroom_sale")
                .map(|(_, v, _)| v)
        }
    })
    .await;
    assert!(
        admitted.elapsed() < Duration::from_secs(6),
        "renewed before the old cookie expired"
    );
    jar.set("anteroom_sale", &renewed);
    tokio::time::sleep(
        Duration::from_secs(6).saturating_sub(admitted.elapsed()) + Duration::from_millis(200),
    )
    .await;
    let resp = client()
        .get(proxy.url("/products/c"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.text().await.unwrap(),
        "origin GET /products/c",
        "the renewed cookie outlives the first"
    );
}

/// An order goes through while Redis is down, and stays down past the order's grace period:
/// the confirm could not land, and the store (back from its AOF) still holds the order as
/// pending, past its deadline — a consume now would give the admission back. The instance owes
/// the confirm: it refuses the kept cookie's second order itself, and keeps trying until the
/// confirm lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_that_cannot_land_is_owed_until_the_store_is_back() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let origin = Origin::start().await;
    // The test origin takes 1.5 s on `/slow...`; grace = 1 + 1 + 2 + 5 = 9 s.
    let room = "admit-per-second = 50\nmax-active = 10\nconsume = [\"POST /slow/order\"]";
    let conf = config(origin.addr, &redis.url(), room)
        .replace("paths = [\"/products\"]", "paths = [\"/slow\"]")
        .replace(
            "[[upstream]]\nname = \"shop\"",
            "[[upstream]]\nname = \"shop\"\nconnect-timeout = \"1s\"\nwrite-timeout = \"1s\"\nread-timeout = \"2s\"",
        );
    let proxy = Proxy::start(&conf);
    let mut jar = Jar::default();
    assert_eq!(status(&proxy, &mut jar).await["state"], "admitted");
    let order = || {
        client()
            .post(proxy.url("/slow/order"))
            .header("cookie", jar.header())
            .send()
    };
    let first = tokio::spawn(order());
    let posts = |o: &Origin| o.requests().iter().filter(|s| s.method == "POST").count();
    eventually(
        Duration::from_secs(5),
        "the order at the origin",
        || async { (posts(&origin) == 1).then_some(()) },
    )
    .await;
    // Down while the origin takes the order: its answer cannot be told to the store.
    redis.kill();
    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), 200, "the order went through");
    // Past the order's grace period (a duration that must pass, not a condition).
    tokio::time::sleep(Duration::from_secs(10)).await;
    redis.restart();
    // Asked until the store can answer (503 while the breaker is still open).
    let again = eventually(
        Duration::from_secs(10),
        "an answer past the breaker",
        || async {
            let s = order().await.unwrap().status();
            (s != 503).then_some(s)
        },
    )
    .await;
    assert_eq!(again, 409, "the kept cookie orders again");
    // The owed confirm lands: the order is used up in the store too.
    let marker = format!(
        "GET {{anteroom:sale}}:consumed:{}",
        jar.get("anteroom_vid").unwrap()
    );
    eventually(Duration::from_secs(10), "the confirm in the store", || {
        let m = common::redis::raw(redis.port, &marker);
        async move { m.filter(|m| m.contains("c ")).map(|_| ()) }
    })
    .await;
    let again = order().await.unwrap();
    assert_eq!(again.status(), 409);
    assert_eq!(posts(&origin), 1, "one admission, one order");
}

/// `on-store-error = "open"` lets an order through while Redis is away; once it is back, that
/// order's confirm uses the admission up although the store never saw the order. Before, the
/// confirm found no marker, changed nothing, and the kept cookie ordered a second time
/// (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_the_open_policy_let_through_is_used_up_once_the_store_is_back() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 10\non-store-error = \"open\"\nconsume = [\"POST /products/order\"]";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let mut jar = Jar::default();
    assert_eq!(status(&proxy, &mut jar).await["state"], "admitted");
    let order = || {
        client()
            .post(proxy.url("/products/order"))
            .header("cookie", jar.header())
            .send()
    };
    let posts = |o: &Origin| o.requests().iter().filter(|s| s.method == "POST").count();
    redis.kill();
    let first = order().await.unwrap();
    assert_eq!(
        first.status(),
        200,
        "through unconfirmed, as the policy says"
    );
    let cleared = set_cookies(&first)
        .iter()
        .any(|(name, value, _)| name == "anteroom_sale" && value.is_empty());
    assert!(cleared, "the used admission's cookie is cleared");
    assert_eq!(posts(&origin), 1);
    redis.restart();
    // The owed confirm lands: the order is used up in the store.
    let marker = format!(
        "GET {{anteroom:sale}}:consumed:{}",
        jar.get("anteroom_vid").unwrap()
    );
    eventually(Duration::from_secs(15), "the confirm in the store", || {
        let m = common::redis::raw(redis.port, &marker);
        async move { m.filter(|m| m.contains("c ")).map(|_| ()) }
    })
    .await;
    let again = order().await.unwrap();
    assert_eq!(again.status(), 409, "the kept cookie orders again");
    assert_eq!(posts(&origin), 1, "one admission, one order");
}
