//! A room with scheduled sales and a draw, for the black-box tests of events
//! (`tests/events/`, `tests/cancelled_draw.rs`): its config, the published event, and
//! `anteroom verify-draw`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anteroom::event::time;
use serde_json::Value;

use super::redis::RedisServer;
use super::*;

pub const TOKEN: &str = "admin-token-for-tests-0123456789";
pub const SECRET: &str = "draw-secret-for-the-tests-0123456789abcdef";
pub const STATUS: &str = "/.anteroom/status?room=sale";
pub const EVENT: &str = "/.anteroom/event?room=sale";

pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// An RFC 3339 time `secs` from now (negative: ago), in +09:00 as an operator in Seoul writes.
pub fn at(secs: i64) -> String {
    time::format(now_us().saturating_add_signed(secs * 1_000_000), 9 * 3600)
}

pub fn config(origin: std::net::SocketAddr, store: &str, room: &str, event: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[draw]
secret = "{SECRET}"

{store}

[[room]]
name = "sale"
paths = ["/products", "/orders"]
claim-ttl = "60s"
{room}

{event}
"#,
        base = base_config(origin)
    )
}

pub fn drawn_event(opens_in: i64) -> String {
    format!(
        "[[room.event]]\nname = \"spring-drop\"\nprequeue-from = \"{}\"\nopens-at = \"{}\"\ndraw = true\n",
        at(-1),
        at(opens_in)
    )
}

/// The `[store]` table for `redis`, with store calls timing out after `timeout`.
pub fn redis_store(redis: &RedisServer, timeout: &str) -> String {
    format!(
        "[store]\nbackend = \"redis\"\nredis-url = \"{}\"\ntimeout = \"{timeout}\"",
        redis.url()
    )
}

pub async fn status(proxy: &Proxy, jar: &mut Jar) -> Value {
    get_json(proxy, STATUS, jar).await.expect("a status")
}

pub async fn event_doc(proxy: &Proxy, query: &str) -> (u16, Value) {
    let resp = client()
        .get(proxy.url(&format!("{EVENT}{query}")))
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

/// Field `field` of what `proxy` publishes at `EVENT` + `query`, once it has it.
pub async fn published(proxy: &Proxy, query: &str, field: &str, limit: Duration) -> Value {
    eventually(limit, field, || async move {
        let (code, d) = event_doc(proxy, query).await;
        (code == 200 && !d[field].is_null()).then(|| d[field].clone())
    })
    .await
}

pub fn verify_draw(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(binary())
        .arg("verify-draw")
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Adds a runtime event to room `sale` through the admin API, and asserts it was created.
pub async fn post_event(proxy: &Proxy, body: Value) {
    let (code, answer) = admin_call(
        proxy,
        reqwest::Method::POST,
        "/rooms/sale/events",
        Some(TOKEN),
        Some(body),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
}
