//! Visitors learn of their turn about when it comes (issue 15): the next poll a visitor in line is
//! told aims at the soonest their turn can come, at the rate in force — not at a measured rate
//! that lags it. Measured with a line on three instances over Redis and on the memory store: a
//! rate raised mid-sale (the measurement then lags it for seconds, as it did at the start of
//! every sale) must not send the head of the line away for a whole poll tier.

mod common;

use std::time::{Duration, Instant};

use common::redis::RedisServer;
use common::*;
use serde_json::{json, Value};

const TOKEN: &str = "admin-token-for-tests-0123456789";
const STATUS: &str = "/.anteroom/status?room=sale";
/// The configured rate; the sale starts under an override of [`SLOW`].
const RATE: f64 = 50.0;
const SLOW: f64 = 2.0;

fn config(origin: std::net::SocketAddr, store: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

{store}

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = {RATE}
max-active = 100000
"#,
        base = base_config(origin)
    )
}

async fn poll(proxy: &Proxy, path: &str, jar: &mut Jar) -> Value {
    // The origin's own page for a visitor let in (the first, on the fast path): not JSON.
    get_json(proxy, path, jar).await.unwrap_or(Value::Null)
}

async fn admin(proxy: &Proxy, body: Option<Value>) -> Value {
    let url = proxy.admin_url("/rooms/sale");
    let req = match body {
        Some(b) => client().patch(url).json(&b),
        None => client().get(url),
    };
    let resp = req.bearer_auth(TOKEN).send().await.unwrap();
    assert!(resp.status().is_success(), "admin: {}", resp.status());
    resp.json().await.unwrap()
}

/// The longest a visitor at `position` may be told to wait at `rate`: just after the soonest
/// turn, or the floor (one tick of 100 ms), plus the jitter of 20 %.
fn soonest_ms(position: u64, rate: f64) -> u64 {
    (1200.0 * (position as f64 / rate).max(0.1)) as u64 + 10
}

async fn the_head_is_told_to_come_back_at_its_turn(proxies: &[Proxy]) {
    let first = &proxies[0];
    admin(first, Some(json!({ "admit_per_second": SLOW }))).await;
    let mut line: Vec<Jar> = Vec::new();
    for i in 0..300 {
        let mut jar = Jar::default();
        let v = poll(&proxies[i % proxies.len()], "/products", &mut jar).await;
        if v["state"] == "waiting" {
            line.push(jar);
        }
    }
    assert!(line.len() > 250, "{} of 300 in line", line.len());
    // A measurement of the slow rate, then the rate raised: the measurement now lags it.
    eventually(Duration::from_secs(5), "the slow rate measured", || async {
        let v = admin(first, None).await;
        (v["admitted_per_second"].as_f64().unwrap_or(0.0) > 0.0).then_some(())
    })
    .await;
    admin(first, Some(json!({ "admit_per_second": null }))).await;
    let measured = admin(first, None).await["admitted_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(measured < RATE / 4.0, "the measurement lags: {measured}");

    // Every instance, once it has ticked with the new rate, tells the head of the line to come
    // back at its turn at that rate (a poll timed by the measured rate: a whole tier, 0.8–1.2 s).
    for (k, proxy) in proxies.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let told = head_told(proxy, &mut line).await;
            let fine = told.len() >= 10
                && told
                    .iter()
                    .all(|&(p, ms)| p >= 1 && ms <= soonest_ms(p, RATE));
            if fine {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "instance {k} still tells the head of the line (position, ms) {told:?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// (position, retry_after_ms) of the visitors in line at positions up to 30, polled in order.
async fn head_told(proxy: &Proxy, line: &mut [Jar]) -> Vec<(u64, u64)> {
    let mut told = Vec::new();
    for jar in line.iter_mut() {
        let v = poll(proxy, STATUS, jar).await;
        if v["state"] != "waiting" {
            continue;
        }
        let position = v["position"].as_u64().unwrap_or(0);
        if position > 30 {
            break;
        }
        told.push((position, v["retry_after_ms"].as_u64().unwrap_or(0)));
    }
    told
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_redis_tell_the_head_its_turn() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let store = format!(
        "[store]\nbackend = \"redis\"\nredis-url = \"{}\"\ntimeout = \"500ms\"",
        redis.url()
    );
    let cfg = config(origin.addr, &store);
    let proxies: Vec<Proxy> = (0..3).map(|_| Proxy::start(&cfg)).collect();
    the_head_is_told_to_come_back_at_its_turn(&proxies).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_tells_the_head_its_turn() {
    let origin = Origin::start().await;
    let cfg = config(origin.addr, "[store]\nbackend = \"memory\"");
    the_head_is_told_to_come_back_at_its_turn(&[Proxy::start(&cfg)]).await;
}
