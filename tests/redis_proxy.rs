//! The proxy on Redis: several instances sharing one line and one rate, the cost in Redis calls
//! of each kind of request, and admitted visitors untouched by a Redis outage.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ::redis::AsyncCommands;
use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::{RoomParams, RoomPatch, Store, VisitorId};
use common::redis::RedisServer;
use common::*;
use serde_json::Value;

fn config(origin: std::net::SocketAddr, redis: &str, room: &str) -> String {
    format!(
        r#"{base}
[store]
backend = "redis"
redis-url = "{redis}"
timeout = "500ms"

[[room]]
name = "sale"
paths = ["/products", "/orders"]
consume = ["POST /orders"]
{room}
"#,
        base = base_config(origin)
    )
}

async fn json(proxy: &Proxy, path: &str, jar: &mut Jar) -> Value {
    let mut req = client()
        .get(proxy.url(path))
        .header("accept", "application/json");
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    let resp = req.send().await.unwrap();
    jar.absorb(&resp);
    resp.json().await.unwrap()
}

/// The room's parameters as the proxies use them, for calling the store from the test.
fn params(rate: f64) -> RoomParams {
    RoomParams {
        name: "sale".into(),
        admit_per_second: rate,
        max_active: 1000,
        max_waiting: 1_000_000,
        session_ttl: Duration::from_secs(600),
        claim_ttl: Duration::from_secs(600),
        abandon_after: Duration::from_secs(600),
        tick: Duration::from_millis(100),
        queueing: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_admit_at_one_global_rate_in_order() {
    const VISITORS: usize = 210;
    const RATE: f64 = 20.0;
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = format!(
        "admit-per-second = {RATE}\nmax-active = 1000\nsession-ttl = \"10m\"\nclaim-ttl = \"10m\"\nabandon-after = \"10m\"\ntick = \"100ms\""
    );
    let cfg = config(origin.addr, &redis.url(), &room);
    let proxies: Vec<Proxy> = (0..3).map(|_| Proxy::start(&cfg)).collect();
    let store = RedisStore::new(Target::Single(redis.url()), Duration::from_secs(2)).unwrap();
    let p = params(RATE);

    // Hold the line so that every visitor joins before the doors open, in a known order,
    // through the three instances in turn.
    store
        .update_room_state(
            &p,
            &RoomPatch {
                queue_all: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut order = Vec::new();
    for i in 0..VISITORS {
        let mut jar = Jar::default();
        let v = json(&proxies[i % 3], "/products", &mut jar).await;
        assert_eq!(v["state"], "paused", "{v}");
        assert_eq!(v["position"], i as u64 + 1, "{v}");
        order.push(VisitorId::parse(jar.get("anteroom_vid").unwrap()).unwrap());
    }

    store
        .update_room_state(
            &p,
            &RoomPatch {
                queue_all: Some(false),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut conn = common::redis::connect(&redis.url()).await;
    let limit = Duration::from_secs_f64(VISITORS as f64 / RATE * 3.0);
    eventually(limit, "the line to empty", || {
        let mut c = conn.clone();
        async move { (c.zcard::<_, u64>("{anteroom:sale}:waiting").await.unwrap() == 0).then_some(()) }
    })
    .await;

    // Each active score is Redis TIME at admission + claim-ttl: the exact admission time.
    let active: Vec<(Vec<u8>, f64)> = conn
        .zrange_withscores("{anteroom:sale}:active", 0, -1)
        .await
        .unwrap();
    let claim_us = 600.0 * 1e6;
    let admitted_at: HashMap<Vec<u8>, f64> = active
        .into_iter()
        .map(|(m, s)| (m, (s - claim_us) / 1e6))
        .collect();
    let times: Vec<f64> = order
        .iter()
        .map(|v| {
            *admitted_at
                .get(v.as_bytes().as_slice())
                .expect("every visitor admitted")
        })
        .collect();
    let total: u64 = conn.hget("{anteroom:sale}:room", "admitted").await.unwrap();
    assert_eq!(total, VISITORS as u64, "nobody admitted twice");
    for w in times.windows(2) {
        assert!(w[0] <= w[1], "FIFO inversion: {} after {}", w[0], w[1]);
    }
    // The global rate, from the first batch to the last admission.
    let first = times[0];
    let after_first = times.iter().filter(|t| **t > first).count() as f64;
    let span = times[VISITORS - 1] - first;
    let rate = after_first / span;
    println!("global rate {rate:.2}/s over {span:.2} s with 3 instances (configured {RATE}/s)");
    assert!(
        (rate - RATE).abs() <= RATE * 0.10,
        "global rate {rate:.2}/s, configured {RATE}/s"
    );
    // No window of 100 ms holds more than rate × 0.1 s + burst (= 2 + 2).
    let mut max_window = 0;
    for (i, t) in times.iter().enumerate() {
        let n = times[i..].iter().take_while(|u| **u - t < 0.1).count();
        max_window = max_window.max(n);
    }
    println!("largest count in a 100 ms window: {max_window}");
    assert!(max_window <= 4, "{max_window} admissions within 100 ms");
    for mut p in proxies {
        assert!(p.alive());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_calls_per_request_and_an_outage_on_the_admitted_path() {
    const POLLS: u64 = 10;
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    // A long tick keeps the admission loop out of the counts.
    let room =
        "admit-per-second = 100\nmax-active = 1\ntick = \"10s\"\non-store-error = \"closed\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let mut conn = common::redis::connect(&redis.url()).await;

    let mut holder = Jar::default();
    let v = json(&proxy, "/.anteroom/status?room=sale", &mut holder).await;
    assert_eq!(v["state"], "admitted", "fast path: {v}");
    let mut waiter = Jar::default();
    assert_eq!(
        json(&proxy, "/products", &mut waiter).await["state"],
        "waiting"
    );
    // The first return renews the fast-path cookie (claim-ttl) to a session: one call, once.
    let resp = client()
        .get(proxy.url("/products/1"))
        .header("cookie", holder.header())
        .send()
        .await
        .unwrap();
    holder.absorb(&resp);

    // Measure twice and keep the quieter run, in case an admission tick fell inside one.
    let mut costs = Vec::new();
    for _ in 0..2 {
        let before = common::redis::script_calls(&mut conn).await;
        for _ in 0..20 {
            let resp = client()
                .get(proxy.url("/products/1"))
                .header("cookie", holder.header())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.text().await.unwrap(), "origin GET /products/1");
        }
        let admitted = common::redis::script_calls(&mut conn).await - before;
        let before = common::redis::script_calls(&mut conn).await;
        // Within the ticket's own quota of store asks (forty, the join's among them): past
        // it, a poll is refused without a call.
        for _ in 0..POLLS {
            assert_eq!(
                json(&proxy, "/.anteroom/status?room=sale", &mut waiter).await["state"],
                "waiting"
            );
        }
        let polls = common::redis::script_calls(&mut conn).await - before;
        costs.push((admitted, polls));
    }
    let (admitted, polls) = costs.into_iter().min().unwrap();
    println!(
        "Redis script calls: 20 admitted requests -> {admitted}, {POLLS} status polls -> {polls}"
    );
    assert_eq!(admitted, 0, "the admitted path makes no Redis call");
    assert_eq!(
        polls, POLLS,
        "a poll at the head of the line is one Redis call (its turn is next: the store decides)"
    );

    // Redis dies: admitted visitors do not notice.
    redis.kill();
    let started = Instant::now();
    for i in 0..20 {
        let resp = client()
            .get(proxy.url(&format!("/products/{i}")))
            .header("cookie", holder.header())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.text().await.unwrap(),
            format!("origin GET /products/{i}")
        );
    }
    println!(
        "20 admitted requests during the outage took {:?}",
        started.elapsed()
    );
    // A newcomer gets an answer (the room's policy), not a hang or a 5xx.
    let started = Instant::now();
    let resp = client()
        .get(proxy.url("/products"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert!(resp.status().as_u16() < 500, "{}", resp.status());
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "answered in {:?}",
        started.elapsed()
    );
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["state"], "paused", "{v}");
}

/// A CA and a server certificate for `localhost` (`server.pem`, `server.key`).
fn certificates(dir: &std::path::Path) {
    common::tls::TestCa::new(dir).issue("server", &["DNS:localhost", "IP:127.0.0.1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_over_tls_with_a_verified_certificate() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let tls_port = free_port();
    let p = |f: &str| certs.path().join(f).display().to_string();
    let redis = RedisServer::start_with(&[
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cert-file",
        &p("server.pem"),
        "--tls-key-file",
        &p("server.key"),
        "--tls-ca-cert-file",
        &p("ca.pem"),
        "--tls-auth-clients",
        "no",
    ]);
    let origin = Origin::start().await;
    let url = format!("rediss://localhost:{tls_port}");
    let room = "admit-per-second = 100\nmax-active = 1\non-store-error = \"closed\"";
    let cfg = config(origin.addr, &url, room);
    let ca = p("ca.pem");
    let proxy = Proxy::start_with(
        &cfg,
        &[("ANTEROOM_LOG", "warn"), ("SSL_CERT_FILE", ca.as_str())],
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut first = Jar::default();
    while json(&proxy, "/.anteroom/status?room=sale", &mut first).await["state"] != "admitted" {
        assert!(
            Instant::now() < deadline,
            "the first visitor walks in over TLS"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let v = json(&proxy, "/.anteroom/status?room=sale", &mut Jar::default()).await;
    assert_eq!(v["state"], "waiting", "{v}");
    assert_eq!(v["position"], 1);
    let mut conn = common::redis::connect(&redis.url()).await;
    let waiting: u64 = conn.zcard("{anteroom:sale}:waiting").await.unwrap();
    assert_eq!(waiting, 1, "the line lives in the TLS Redis");

    // Without the CA the certificate is refused: the store is unreachable, the room holds.
    let untrusting = Proxy::start_with(
        &cfg,
        &[("ANTEROOM_LOG", "warn"), ("SSL_CERT_FILE", "/nonexistent")],
        &[],
    );
    let v = json(
        &untrusting,
        "/.anteroom/status?room=sale",
        &mut Jar::default(),
    )
    .await;
    assert_eq!(v["state"], "paused", "{v}");
}
