//! Redis dying and coming back, for real: kill -9 mid-flood, restart empty or from its AOF.

#[path = "../common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::redis::RedisServer;
use common::*;
use serde_json::Value;

mod orders;

fn config(origin: std::net::SocketAddr, redis: &str, room: &str) -> String {
    config_breaker(origin, redis, 3, room)
}

/// [`config`] with the breaker opening after `failures` consecutive failures.
fn config_breaker(origin: std::net::SocketAddr, redis: &str, failures: u32, room: &str) -> String {
    format!(
        r#"{base}
[store]
backend = "redis"
redis-url = "{redis}"
timeout = "200ms"
breaker-failures = {failures}
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
    // admitted visitor, whose slot is held back for them (they are still browsing on their
    // cookie), so nobody walks in, and all queue in the order they come back. Before (found on
    // re-review r89c), the first to return walked in past max-active: the call that found the
    // loss held nothing back, and the re-assertion ended the hold on the line before the next
    // tick did.
    assert_eq!(
        restart(false).await,
        vec![Some(4), Some(3), Some(2), Some(1)]
    );
}
