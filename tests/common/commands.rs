//! A room that takes origin commands, for their black-box tests (`tests/origin_commands.rs`,
//! `tests/origin_command_elsewhere.rs`): its config, a visitor let in, and what an answer did.

use super::*;

pub const TOKEN: &str = "admin-token-for-tests-0123456789";

pub fn config(origin: std::net::SocketAddr, store: &str, extra: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"
{store}

[[room]]
name = "sale"
paths = ["/products", "/orders"]
admit-per-second = 50
max-active = 1
tick = "50ms"
consume = ["POST /orders"]
bypass = [{{ path = "/products/feed" }}]
{extra}
"#,
        base = base_config(origin)
    )
}

pub const ON: &str = "origin-commands = true";

pub async fn send(proxy: &Proxy, method: &str, path: &str, jar: &Jar) -> reqwest::Response {
    let mut req = client()
        .request(method.parse().unwrap(), proxy.url(path))
        .header("accept", "application/json");
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    req.send().await.unwrap()
}

/// A visitor let in through the fast path (the room is empty): their jar.
pub async fn admitted(proxy: &Proxy) -> Jar {
    let mut jar = Jar::default();
    let resp = send(proxy, "GET", "/products", &jar).await;
    assert_eq!(resp.status(), 200);
    jar.absorb(&resp);
    assert!(jar.get("anteroom_sale").is_some(), "admitted");
    jar
}

/// Whether the request reached the origin (its answers start with `origin `), and the jar.
pub async fn reaches_origin(proxy: &Proxy, path: &str, jar: &Jar) -> bool {
    let resp = send(proxy, "GET", path, jar).await;
    resp.text().await.unwrap().starts_with("origin ")
}

pub fn cleared(resp: &reqwest::Response) -> bool {
    set_cookies(resp)
        .iter()
        .any(|(k, v, attrs)| k == "anteroom_sale" && v.is_empty() && attrs.contains("Max-Age=0"))
}
