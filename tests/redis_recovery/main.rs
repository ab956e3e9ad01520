//! Redis losing its data (killed and restarted empty on the same port): the room's runtime
//! state survives because the instances re-assert it, and admitted visitors' sessions are
//! counted again without a store call on every request.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::redis::RedisServer;
use common::*;
use serde_json::{json, Value};

mod counted_again;
mod held_back;
mod older_data;

const TOKEN: &str = "admin-token-for-tests-0123456789";

fn config(origin: std::net::SocketAddr, redis: &str, room: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[store]
backend = "redis"
redis-url = "{redis}"
timeout = "200ms"
breaker-failures = 3
breaker-cooldown = "300ms"

[[room]]
name = "sale"
paths = ["/products"]
on-store-error = "closed"
{room}
"#,
        base = base_config(origin)
    )
}

async fn conn(url: &str) -> ::redis::aio::MultiplexedConnection {
    ::redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Redis `TIME` in µs.
async fn redis_now(url: &str) -> u64 {
    let (s, us): (u64, u64) = ::redis::cmd("TIME")
        .query_async(&mut conn(url).await)
        .await
        .unwrap();
    s * 1_000_000 + us
}

/// Each instance's last admission tick (its heartbeat): its id and when (Redis time, µs).
async fn beats(url: &str) -> Option<Vec<(String, f64)>> {
    ::redis::cmd("ZRANGE")
        .arg("{anteroom:sale}:instances")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut conn(url).await)
        .await
        .ok()
}

/// Waits until an admission tick ran on Redis after `after` (Redis time, µs).
async fn a_tick_after(url: &str, after: u64) {
    eventually(
        Duration::from_secs(10),
        "an admission tick",
        || async move {
            let beats = beats(url).await?;
            beats.iter().any(|(_, at)| *at as u64 > after).then_some(())
        },
    )
    .await;
}

async fn room(proxy: &Proxy) -> Option<Value> {
    let resp = client()
        .get(proxy.admin_url("/rooms/sale"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .ok()?;
    let v: Value = resp.json().await.ok()?;
    (v["stale"] != true).then_some(v)
}

/// Redis loses its data (the test's FLUSHALL).
async fn flushall(url: &str) {
    let _: () = ::redis::cmd("FLUSHALL")
        .query_async(&mut conn(url).await)
        .await
        .unwrap();
}

/// The store's count of active sessions.
async fn store_active(url: &str) -> u64 {
    ::redis::cmd("ZCARD")
        .arg("{anteroom:sale}:active")
        .query_async(&mut conn(url).await)
        .await
        .unwrap_or(0)
}

/// A newcomer's (or a visitor's) request: `(got an admission now, state)`.
async fn visit(proxy: &Proxy, jar: &mut Jar, path: &str) -> (bool, String) {
    let mut req = client()
        .get(proxy.url(path))
        .header("accept", "application/json");
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    let resp = req.send().await.unwrap();
    let had = jar.get("anteroom_sale").is_some();
    let admitted = !had
        && set_cookies(&resp)
            .iter()
            .any(|(k, v, _)| k == "anteroom_sale" && !v.is_empty());
    jar.absorb(&resp);
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let state = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["state"].as_str().map(String::from))
        .unwrap_or(format!("{status} {text}"));
    (admitted, state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_line_and_the_overrides_survive_an_empty_restart() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let origin = Origin::start().await;
    let room_cfg = "admit-per-second = 50\nmax-active = 100\ntick = \"100ms\"";
    let proxy = Proxy::start(&config(origin.addr, &url, room_cfg));
    a_tick_after(&url, 0).await;
    let resp = client()
        .patch(proxy.admin_url("/rooms/sale"))
        .bearer_auth(TOKEN)
        .json(&json!({"queue_all": true, "admit_per_second": 7.5, "max_active": 50}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // The instance learns the state from its next admission tick.
    a_tick_after(&url, redis_now(&url).await).await;

    redis.kill();
    redis.restart();

    // The instance that knew the lost data holds the line at once (queue_all alone) and then
    // re-asserts the whole state: wait for the overrides, not only for the hold, or the check
    // below races the re-assertion.
    let v = eventually(
        Duration::from_secs(10),
        "the held state back in the store",
        || async {
            let v = room(&proxy).await?;
            (v["queue_all"] == true && !v["overrides"]["admit_per_second"].is_null()).then_some(v)
        },
    )
    .await;
    assert_eq!(v["overrides"]["admit_per_second"], 7.5, "{v}");
    assert_eq!(v["overrides"]["max_active"], 50, "{v}");
    // Newcomers queue; nobody is admitted, for a while.
    let mut jars = vec![Jar::default(); 5];
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        for jar in jars.iter_mut() {
            let (admitted, state) = visit(&proxy, jar, "/products").await;
            assert!(!admitted, "nobody passes the held line");
            assert_eq!(state, "paused");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let v = room(&proxy).await.unwrap();
    assert_eq!(
        (v["waiting"].as_u64(), v["active"].as_u64()),
        (Some(5), Some(0)),
        "{v}"
    );
    assert!(
        proxy.stderr().contains("the store lost this room's data"),
        "logged at warn: {}",
        proxy.stderr()
    );
}

/// `cmdstat_evalsha` calls so far.
async fn script_calls(url: &str) -> u64 {
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn(url).await)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admitted_sessions_are_registered_again_after_an_empty_restart() {
    const ADMITTED: usize = 5;
    let mut redis = RedisServer::start();
    let url = redis.url();
    let origin = Origin::start().await;
    // A slow tick, so that admission ticks hardly count in the script calls measured below.
    let room_cfg = "admit-per-second = 50\nmax-active = 100\ntick = \"1s\"\nsession-ttl = \"10m\"";
    let proxy = Proxy::start(&config(origin.addr, &url, room_cfg));
    a_tick_after(&url, 0).await;
    let mut jars = vec![Jar::default(); ADMITTED];
    for jar in jars.iter_mut() {
        let (admitted, state) = visit(&proxy, jar, "/products").await;
        assert!(admitted, "{state}");
    }
    a_tick_after(&url, redis_now(&url).await).await;

    redis.kill();
    redis.restart();
    a_tick_after(&url, 0).await;

    // They keep browsing; within their next requests the store counts them again.
    let mut i = 0;
    eventually(
        Duration::from_secs(15),
        "every admitted visitor counted again",
        || {
            i += 1;
            let (proxy, jars) = (&proxy, jars.clone());
            async move {
                for mut jar in jars {
                    let (_, state) = visit(proxy, &mut jar, &format!("/products/{i}")).await;
                    assert!(state.starts_with("200 origin GET"), "{state}");
                }
                let v = room(proxy).await?;
                (v["active"].as_u64() == Some(ADMITTED as u64)).then_some(())
            }
        },
    )
    .await;

    // ... with one store call per visitor, not one per request.
    let before = script_calls(&url).await;
    let requests = 40 * ADMITTED;
    for round in 0..40 {
        for jar in jars.iter_mut() {
            let (_, state) = visit(&proxy, jar, &format!("/products/more/{round}")).await;
            assert!(state.starts_with("200 origin GET"), "{state}");
        }
    }
    let calls = script_calls(&url).await - before;
    println!("{calls} script calls during {requests} admitted requests");
    assert!(
        calls < requests as u64 / 4,
        "{calls} script calls for {requests} admitted requests"
    );
    let v = room(&proxy).await.unwrap();
    assert_eq!(v["active"].as_u64(), Some(ADMITTED as u64), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_room_stays_full_while_the_forgotten_sessions_come_back() {
    const MAX: usize = 3;
    let mut redis = RedisServer::start();
    let url = redis.url();
    let origin = Origin::start().await;
    let room_cfg = format!(
        "admit-per-second = 50\nmax-active = {MAX}\ntick = \"100ms\"\nsession-ttl = \"10m\""
    );
    let proxy = Proxy::start(&config(origin.addr, &url, &room_cfg));
    a_tick_after(&url, 0).await;
    let mut old = vec![Jar::default(); MAX];
    for jar in old.iter_mut() {
        let (admitted, state) = visit(&proxy, jar, "/products").await;
        assert!(admitted, "{state}");
    }
    a_tick_after(&url, redis_now(&url).await).await;

    redis.kill();
    redis.restart();
    // The instance saw the new generation and holds the forgotten sessions' slots back.
    eventually(Duration::from_secs(10), "slots held back", || async {
        let hold: Option<u64> = ::redis::cmd("HGET")
            .arg("{anteroom:sale}:room")
            .arg("hold_back")
            .query_async(&mut conn(&url).await)
            .await
            .ok()?;
        (hold == Some(MAX as u64)).then_some(())
    })
    .await;

    // Newcomers on the empty line do not take the slots of the sessions still out there ...
    let mut newcomers = vec![Jar::default(); MAX];
    for jar in newcomers.iter_mut() {
        let (admitted, state) = visit(&proxy, jar, "/products").await;
        assert!(
            !admitted,
            "a newcomer took a forgotten session's slot: {state}"
        );
    }
    // ... which come back and are counted again; the room is full, nobody else gets in.
    let mut i = 0;
    eventually(Duration::from_secs(10), "the old sessions counted", || {
        i += 1;
        let (proxy, old) = (&proxy, old.clone());
        async move {
            for mut jar in old {
                let (_, state) = visit(proxy, &mut jar, &format!("/products/{i}")).await;
                assert!(state.starts_with("200 origin GET"), "{state}");
            }
            let v = room(proxy).await?;
            (v["active"].as_u64() == Some(MAX as u64)).then_some(())
        }
    })
    .await;
    let until = Instant::now() + Duration::from_millis(800);
    while Instant::now() < until {
        for jar in newcomers.iter_mut() {
            let (admitted, state) = visit(&proxy, jar, "/products").await;
            assert!(!admitted, "past max-active: {state}");
            assert_eq!(state, "waiting");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
