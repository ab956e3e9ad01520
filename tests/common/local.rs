//! The `local` store-error policy's room on Redis, for the black-box tests of the policy
//! (`tests/local_policy/`, `tests/local_policy_reload.rs`): the config, newcomers and their
//! visits, and waits for the admission loop and the breaker.

use std::time::Duration;

use serde_json::{json, Value};

use super::redis::{raw, RedisServer};
use super::*;

pub const TOKEN: &str = "admin-token-for-tests-0123456789";

pub fn config(origin: std::net::SocketAddr, redis: &str, failures: u32, room: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

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
on-store-error = "local"
{room}
"#,
        base = base_config(origin)
    )
}

/// One request of a newcomer (or a returning visitor with `jar`): `(admitted now, state)`.
pub async fn visit(proxy: &Proxy, jar: &mut Jar) -> (bool, String) {
    visit_from(proxy, jar, None).await
}

/// [`visit`] from the client address `xff` names (through a trusted proxy).
pub async fn visit_from(proxy: &Proxy, jar: &mut Jar, xff: Option<&str>) -> (bool, String) {
    let mut req = client()
        .get(proxy.url("/products"))
        .header("accept", "application/json");
    if let Some(ip) = xff {
        req = req.header("x-forwarded-for", ip);
    }
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
    let text = resp.text().await.unwrap_or_default();
    let state = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["state"].as_str().map(String::from))
        .unwrap_or(text);
    (admitted, state)
}

/// `visitors` newcomers, each polling `polls` times 100 ms apart; how many got an admission.
pub async fn newcomers(proxy: &Proxy, visitors: usize, polls: usize) -> (usize, Vec<String>) {
    let (admitted, states, _) = newcomers_kept(proxy, visitors, polls).await;
    (admitted, states)
}

/// [`newcomers`], also returning the cookie jars of those admitted.
pub async fn newcomers_kept(
    proxy: &Proxy,
    visitors: usize,
    polls: usize,
) -> (usize, Vec<String>, Vec<Jar>) {
    let mut jars = vec![Jar::default(); visitors];
    let mut admitted = 0;
    let mut states = Vec::new();
    for _ in 0..polls {
        for jar in jars.iter_mut() {
            if jar.get("anteroom_sale").is_some() {
                continue;
            }
            let (a, state) = visit(proxy, jar).await;
            admitted += usize::from(a);
            states.push(state);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    jars.retain(|j| j.get("anteroom_sale").is_some());
    (admitted, states, jars)
}

/// Waits until the instance's admission loop has run on Redis (it heard from the store).
pub async fn admission_loop_ran(redis: &RedisServer) {
    eventually(
        Duration::from_secs(10),
        "an admission tick on Redis",
        || async {
            raw(redis.port, "ZCARD {anteroom:sale}:instances")
                .filter(|r| r.starts_with(":") && !r.starts_with(":0"))
                .map(|_| ())
        },
    )
    .await;
}

/// Waits until the breaker is open (readyz says the store is not healthy): the admission
/// loop's failed ticks open it.
pub async fn breaker_open(proxy: &Proxy) {
    eventually(Duration::from_secs(10), "the breaker to open", || async {
        let r = client().get(proxy.admin_url("/readyz")).send().await.ok()?;
        (r.status() != 200).then_some(())
    })
    .await;
}

/// Holds the room's line through the admin API, and waits for a tick that saw it held (the
/// held state comes back from the store then too); nobody is let in meanwhile.
pub async fn hold_the_line(proxy: &Proxy) {
    let resp = client()
        .patch(proxy.admin_url("/rooms/sale"))
        .bearer_auth(TOKEN)
        .json(&json!({"queue_all": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    eventually(
        Duration::from_secs(5),
        "a tick that saw the held line",
        || async move {
            let (admitted, state) = visit(proxy, &mut Jar::default()).await;
            assert!(!admitted);
            (state == "paused").then_some(())
        },
    )
    .await;
}

/// Redis `TIME` in µs, from a raw reply.
fn redis_now(port: u16) -> u64 {
    let reply = raw(port, "TIME").unwrap_or_default();
    let nums: Vec<u64> = reply
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    nums.first().copied().unwrap_or(0) * 1_000_000 + nums.get(1).copied().unwrap_or(0)
}

/// Waits until two instances have ticked since both were alive, so each knows there are two.
pub async fn both_instances_known(redis: &RedisServer) {
    eventually(Duration::from_secs(10), "two instances seen", || async {
        raw(redis.port, "ZCARD {anteroom:sale}:instances")
            .filter(|r| r.starts_with(":2"))
            .map(|_| ())
    })
    .await;
    let seen_both = redis_now(redis.port);
    eventually(
        Duration::from_secs(10),
        "a tick of each after that",
        || async {
            let reply = raw(
                redis.port,
                "ZRANGE {anteroom:sale}:instances 0 -1 WITHSCORES",
            )?;
            let scores: Vec<u64> = reply
                .lines()
                .filter_map(|l| l.trim().parse::<f64>().ok())
                .map(|f| f as u64)
                .filter(|t| *t > 1_000_000_000)
                .collect();
            (scores.len() == 2 && scores.iter().all(|t| *t > seen_both)).then_some(())
        },
    )
    .await;
}
