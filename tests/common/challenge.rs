//! The join challenge's room for the black-box tests (`tests/join_challenge.rs`,
//! `tests/challenge_tickets.rs`): one slot taken so a line forms, the requests a client sends,
//! and the work done in Rust.

use std::time::Duration;

use anteroom::edge::challenge::{leading_zero_bits, work};
use serde_json::Value;

use super::*;

pub const TOKEN: &str = "admin-token-for-tests-0123456789";

/// One slot, held by the first visitor, so that a line forms; join-limit 8 a minute per
/// client, so 2 without a solution.
pub fn config(origin: std::net::SocketAddr) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 50
max-active = 1
tick = "50ms"
join-limit = {{ per-ip = 8, per = "1m" }}
join-challenge = {{ difficulty = 12 }}
"#,
        base = base_config(origin)
    )
}

pub async fn send(proxy: &Proxy, path: &str, jar: &Jar, json: bool) -> reqwest::Response {
    let mut req = client().get(proxy.url(path));
    if json {
        req = req.header("accept", "application/json");
    }
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    req.send().await.unwrap()
}

pub async fn status(proxy: &Proxy, jar: &mut Jar, pow: Option<&str>) -> (u16, Value) {
    let path = match pow {
        Some(p) => format!("/.anteroom/status?room=sale&pow={p}"),
        None => "/.anteroom/status?room=sale".to_string(),
    };
    let resp = send(proxy, &path, jar, true).await;
    jar.absorb(&resp);
    (resp.status().as_u16(), resp.json().await.unwrap())
}

/// Does the work for a puzzle `BUCKET.NONCE`: the solution `BUCKET.COUNTER`.
pub fn solve(puzzle: &str, difficulty: u32) -> String {
    let (bucket, nonce) = puzzle.split_once('.').unwrap();
    let c = (0u64..)
        .find(|c| leading_zero_bits(&work(nonce, *c)) >= difficulty)
        .unwrap();
    format!("{bucket}.{c}")
}

/// The room's `waiting` as the admin API tells it (asked again if one answer does not come:
/// one went missing in a clean-clone run on a loaded machine).
pub async fn waiting(proxy: &Proxy) -> u64 {
    eventually(Duration::from_secs(10), "the room's figures", || async {
        admin_json(proxy, "/rooms/sale", TOKEN).await?["waiting"].as_u64()
    })
    .await
}

pub async fn count(proxy: &Proxy, result: &str) -> u64 {
    let label = format!("result=\"{result}\"");
    metric(proxy, TOKEN, "anteroom_join_challenges_total", &label).await
}

/// The proxy with its only slot taken, once its admission loop has seen it (a line forms).
pub async fn full_room(origin: &Origin) -> Proxy {
    full_room_with(&config(origin.addr)).await
}

/// The same room, sweeping a silent visitor after 3 s.
pub async fn full_room_sweeping_fast(origin: &Origin) -> Proxy {
    let cfg = config(origin.addr).replace(
        "join-challenge",
        "abandon-after = \"3s\"\nthrottled-poll = \"1s\"\npoll = [ { every = \"1s\" } ]\njoin-challenge",
    );
    full_room_with(&cfg).await
}

pub async fn full_room_with(cfg: &str) -> Proxy {
    let proxy = Proxy::start(cfg);
    let resp = send(&proxy, "/products", &Jar::default(), false).await;
    assert_eq!(
        resp.text().await.unwrap(),
        "origin GET /products",
        "walks in"
    );
    eventually(
        Duration::from_secs(10),
        "the next newcomer is asked",
        || {
            let proxy = &proxy;
            async move {
                let (_, s) = status(proxy, &mut Jar::default(), None).await;
                (s["state"] == "challenge").then_some(())
            }
        },
    )
    .await;
    proxy
}
