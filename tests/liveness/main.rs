//! A waiting visitor's place survives a store outage longer than `abandon-after`, black-box:
//! the real binary on a real Redis that is paused (`DEBUG SLEEP`) or killed and restarted from
//! its AOF for twice `abandon-after`, with the visitors polling through it.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::redis::{raw, RedisServer};
use common::*;
use serde_json::Value;

mod late;

const ABANDON_SECS: u64 = 6;

fn config(origin: std::net::SocketAddr, redis: &str) -> String {
    config_with(origin, redis, "closed")
}

fn config_with(origin: std::net::SocketAddr, redis: &str, policy: &str) -> String {
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
admit-per-second = 10
max-active = 1
tick = "100ms"
on-store-error = "{policy}"
poll = [ {{ every = "1s" }} ]
throttled-poll = "1s"
abandon-after = "{ABANDON_SECS}s"
"#,
        base = base_config(origin)
    )
}

async fn status(proxy: &Proxy, jar: &mut Jar) -> Option<Value> {
    let mut req = client().get(proxy.url("/.anteroom/status?room=sale"));
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    let resp = req.send().await.ok()?;
    jar.absorb(&resp);
    resp.json().await.ok()
}

const TOKEN: &str = "admin-token-for-tests-0123456789";

/// Holds the line (`queue_all`) or lets it go, through the admin API (`TOKEN`).
async fn hold(proxy: &Proxy, on: bool) -> reqwest::Result<reqwest::Response> {
    client()
        .patch(proxy.admin_url("/rooms/sale"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({ "queue_all": on }))
        .send()
        .await
}

/// How many waiting visitors the store has counted as abandoned.
fn abandoned(redis: &RedisServer) -> u64 {
    let reply = raw(redis.port, "HGET {anteroom:sale}:room abandoned").unwrap_or_default();
    reply
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0)
}

/// A holder in the only slot and six visitors in line, polling about every 700 ms (back of the
/// line first, so that a line emptied and joined again would come back reversed) while
/// `outage` makes the store unreachable for twice abandon-after; afterwards every place is
/// kept, in the same order.
async fn the_line_survives(redis: RedisServer, outage: impl FnOnce(&mut RedisServer)) {
    let url = redis.url();
    the_line_survives_at(redis, &url, "closed", outage).await;
}

/// [`the_line_survives`] with the proxy on `url` (in front of `redis`) and `policy`.
async fn the_line_survives_at(
    mut redis: RedisServer,
    url: &str,
    policy: &str,
    outage: impl FnOnce(&mut RedisServer),
) {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config_with(origin.addr, url, policy));
    let mut holder = Jar::default();
    let v = status(&proxy, &mut holder).await.unwrap();
    assert_eq!(v["state"], "admitted", "{v}");
    let mut line: Vec<Jar> = Vec::new();
    for expected in 1..=6u64 {
        let mut jar = Jar::default();
        let v = status(&proxy, &mut jar).await.unwrap();
        assert_eq!(v["position"], expected, "{v}");
        line.push(jar);
    }

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (mut line, stop, base) = (line.clone(), stop.clone(), proxy.url(""));
        tokio::spawn(async move {
            let c = client();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for jar in line.iter_mut().rev() {
                    if let Ok(resp) = c
                        .get(format!("{base}/.anteroom/status?room=sale"))
                        .header("cookie", jar.header())
                        .send()
                        .await
                    {
                        jar.absorb(&resp);
                    }
                }
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
        })
    };
    // A few seconds of normal running first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(abandoned(&redis), 0);

    let outage_started = Instant::now();
    outage(&mut redis);
    assert!(
        outage_started.elapsed() >= Duration::from_secs(2 * ABANDON_SECS),
        "the outage lasted {:?}",
        outage_started.elapsed()
    );

    // The store answers again: everyone is waiting where they were.
    for (i, jar) in line.iter_mut().enumerate().rev() {
        let deadline = Instant::now() + Duration::from_secs(10);
        let v = loop {
            match status(&proxy, jar).await {
                Some(v) if v["state"] == "waiting" => break v,
                other => assert!(
                    Instant::now() < deadline,
                    "visitor {i}: the store did not answer again: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            v["position"],
            i as u64 + 1,
            "visitor {i} after the outage: {v}"
        );
    }
    // And stay so for a while, with the admission loop and its sweep running again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (i, jar) in line.iter_mut().enumerate() {
        let v = status(&proxy, jar).await.unwrap();
        assert_eq!(v["position"], i as u64 + 1, "visitor {i}, later: {v}");
    }
    assert_eq!(abandoned(&redis), 0, "nobody was counted as abandoned");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = poller.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_keeps_every_place() {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    the_line_survives(redis, |redis| {
        let secs = 2 * ABANDON_SECS + 1;
        // The reply comes only when Redis wakes up: do not wait for it here.
        let port = redis.port;
        let sleeper = std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            std::io::Write::write_all(&mut s, format!("DEBUG SLEEP {secs}\r\n").as_bytes())
                .unwrap();
            let mut buf = [0u8; 16];
            let _ = std::io::Read::read(&mut s, &mut buf);
        });
        let _ = sleeper.join();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_down_and_back_from_its_aof_keeps_every_place() {
    let redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    the_line_survives(redis, |redis| {
        redis.kill();
        let down = Instant::now();
        while down.elapsed() < Duration::from_secs(2 * ABANDON_SECS + 1) {
            std::thread::park_timeout(Duration::from_millis(100));
        }
        redis.restart();
    })
    .await;
}

/// A Redis slower than `store.timeout` (every answer late, every call still run) for twice
/// abandon-after, under the `local` policy: nobody who keeps polling is swept. The breaker's
/// probe was an `admit` whose late answer was thrown away: each one stepped the liveness clock,
/// swept and admitted in Redis, while the polls, answered by the policy, told the store nothing
/// (found by review: a line of eight swept and rejoined in another order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_slower_than_the_timeout_keeps_every_place() {
    let redis = RedisServer::start();
    let front = common::faults::Front::start(redis.port);
    let delay = front.delay_ms.clone();
    the_line_survives_at(redis, &front.url(), "local", move |_| {
        delay.store(400, std::sync::atomic::Ordering::SeqCst);
        let slow = Instant::now();
        while slow.elapsed() < Duration::from_secs(2 * ABANDON_SECS + 1) {
            std::thread::park_timeout(Duration::from_millis(100));
        }
        delay.store(0, std::sync::atomic::Ordering::SeqCst);
    })
    .await;
}

/// A visitor whose turn came just before Redis paused keeps it: the pause (longer than
/// `claim-ttl`) costs the claim nothing, and the visitor behind does not take the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_came_before_a_pause_is_kept() {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let origin = Origin::start().await;
    let conf = config(origin.addr, &redis.url())
        .replace("abandon-after = ", "claim-ttl = \"4s\"\nabandon-after = ")
        + &format!("\n[admin]\ntoken = \"{TOKEN}\"\n");
    let proxy = Proxy::start(&conf);
    assert_eq!(hold(&proxy, true).await.unwrap().status(), 200);
    let (mut turn, mut next) = (Jar::default(), Jar::default());
    assert_eq!(status(&proxy, &mut turn).await.unwrap()["state"], "paused");
    assert_eq!(status(&proxy, &mut next).await.unwrap()["state"], "paused");
    assert_eq!(hold(&proxy, false).await.unwrap().status(), 200);
    // The tick lets the first in: a claim in the store, not collected yet.
    eventually(Duration::from_secs(5), "the first visitor's turn", || {
        let r = raw(redis.port, "ZCARD {anteroom:sale}:active");
        async move { r.filter(|r| r.starts_with(":1")).map(|_| ()) }
    })
    .await;
    // Paused for 8 s, past claim-ttl; the reply comes only when Redis wakes up.
    let port = redis.port;
    std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        std::io::Write::write_all(&mut s, b"DEBUG SLEEP 8\r\n").unwrap();
        let mut buf = [0u8; 16];
        let _ = std::io::Read::read(&mut s, &mut buf);
    })
    .join()
    .unwrap();
    // The one behind polls first, and the admission loop runs again: the slot is still taken.
    let deadline = Instant::now() + Duration::from_secs(10);
    let v = loop {
        if let Some(v) = status(&proxy, &mut next).await {
            if v["state"] != "paused" {
                break v;
            }
        }
        assert!(Instant::now() < deadline, "the store did not answer again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(v["state"], "waiting", "{v}");
    // An admission tick after the gap was forgiven (the clock stepped past `forgave_at`).
    let field = |name: &str| -> Option<u64> {
        raw(redis.port, &format!("HGET {{anteroom:sale}}:room {name}"))?
            .lines()
            .nth(1)?
            .trim()
            .parse()
            .ok()
    };
    eventually(Duration::from_secs(5), "a tick after the pause", || {
        let ticked = field("forgave_at")
            .zip(field("live_at"))
            .filter(|(f, l)| l > f);
        async move { ticked.map(|_| ()) }
    })
    .await;
    let v = status(&proxy, &mut turn).await.unwrap();
    assert_eq!(
        v["state"], "admitted",
        "the turn that came before the pause: {v}"
    );
    let v = status(&proxy, &mut next).await.unwrap();
    assert_eq!(v["state"], "waiting", "{v}");
}

/// An instance restarted with a lower `abandon-after` sweeps nobody by it for as long as the
/// old value was, as a reload does: the store keeps the longest value an instance ran the room
/// with for that value's own length after its last report, not only while its heartbeat lasts.
/// Before (found by review), a restart from 2 min to 15 s swept the whole line once the old
/// process had been quiet for five seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_lowers_abandon_after_keeps_the_places() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let with = |secs: u64| {
        config(origin.addr, &redis.url()).replace(
            &format!("abandon-after = \"{ABANDON_SECS}s\""),
            &format!("abandon-after = \"{secs}s\""),
        )
    };
    let old = Proxy::start(&with(60));
    let mut holder = Jar::default();
    assert_eq!(
        status(&old, &mut holder).await.unwrap()["state"],
        "admitted"
    );
    let (mut first, mut second) = (Jar::default(), Jar::default());
    assert_eq!(status(&old, &mut first).await.unwrap()["position"], 1);
    assert_eq!(status(&old, &mut second).await.unwrap()["position"], 2);
    drop(old);
    // The new process runs 3 s; the first is silent for 10 s (well within the 60 s they
    // joined under), the second keeps polling.
    let new = Proxy::start(&with(3));
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        assert_eq!(status(&new, &mut second).await.unwrap()["state"], "waiting");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let v = status(&new, &mut first).await.unwrap();
    assert_eq!(
        (v["state"].as_str(), v["position"].as_u64()),
        (Some("waiting"), Some(1)),
        "the first keeps their place: {v}"
    );
    assert_eq!(abandoned(&redis), 0);
}
