//! Black-box tests of the proxy: the real binary, a real origin, real HTTP.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anteroom::cookie::{self, CookieKey};
use anteroom::store::VisitorId;
use common::*;
use serde_json::Value;

mod cookies;
mod waiting;

/// Two rooms: `sale` (one shopper at a time, consume on POST /orders) and `vip`.
fn config(origin: std::net::SocketAddr, extra: &str) -> String {
    format!(
        r#"{base}
[[room]]
name = "sale"
paths = ["/products", "/cart", "/orders"]
admit-per-second = 50
max-active = 1
tick = "50ms"
consume = ["POST /orders"]
{extra}

[[room]]
name = "vip"
paths = ["/vip"]
admit-per-second = 50
max-active = 100
"#,
        base = base_config(origin)
    )
}

async fn setup(extra: &str) -> (Origin, Proxy) {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, extra));
    (origin, proxy)
}

async fn get(proxy: &Proxy, path: &str, jar: &Jar, accept: Option<&str>) -> reqwest::Response {
    let mut req = client().get(proxy.url(path));
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    req.send().await.unwrap()
}

/// A visitor who got in through the fast path and holds the only slot of `sale`.
async fn admitted_visitor(proxy: &Proxy) -> Jar {
    let mut jar = Jar::default();
    let resp = get(proxy, "/products", &jar, None).await;
    assert_eq!(resp.status(), 200);
    jar.absorb(&resp);
    assert!(
        jar.get("anteroom_sale").is_some(),
        "fast path sets the admission cookie"
    );
    assert_eq!(resp.text().await.unwrap(), "origin GET /products");
    jar
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_outside_rooms_pass_through_unchanged() {
    let (origin, proxy) = setup("").await;
    let resp = client()
        .get(proxy.url("/home/page?x=1&y=%20z"))
        .header("x-custom", "kept")
        .header(
            "cookie",
            "shop=1; anteroom_vid=0123456789abcdef0123456789abcdef; other=2",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-origin"], "yes");
    assert_eq!(
        set_cookies(&resp)[0].0,
        "shop_session",
        "the origin's cookies reach the visitor"
    );
    assert_eq!(
        resp.text().await.unwrap(),
        "origin GET /home/page?x=1&y=%20z"
    );
    let seen = origin.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/home/page?x=1&y=%20z");
    assert_eq!(seen[0].header("x-custom").as_deref(), Some("kept"));
    assert_eq!(
        seen[0].header("cookie").as_deref(),
        Some("shop=1; other=2"),
        "our cookies are stripped"
    );

    // A 1 MiB body out and a 2 MiB body back, byte for byte.
    let body: Vec<u8> = (0..1024 * 1024u32).map(|i| (i * 7 % 256) as u8).collect();
    let resp = client()
        .post(proxy.url("/api/echo"))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.bytes().await.unwrap().to_vec(), body);
    let resp = client().get(proxy.url("/big")).send().await.unwrap();
    assert_eq!(resp.bytes().await.unwrap().to_vec(), big_body());
    assert_eq!(origin.requests()[1].body, body);
}

/// `Accept` sent in several field lines is one list (RFC 9110), and a parameter's name is
/// read without case (found by review: only the first line was read, and `Q=` was not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_in_several_lines_and_any_case_chooses_the_answer() {
    let (_origin, proxy) = setup("").await;
    let _holder = admitted_visitor(&proxy).await;
    let kind = |accept: &'static [&'static str]| {
        let proxy = &proxy;
        async move {
            let mut req = client().get(proxy.url("/products/1"));
            for a in accept {
                req = req.header("accept", *a);
            }
            let resp = req.send().await.unwrap();
            let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
            ct.split(';').next().unwrap().to_string()
        }
    };
    assert_eq!(
        kind(&["text/html;q=0.1", "application/json"]).await,
        "application/json"
    );
    assert_eq!(
        kind(&["application/json;q=0.1", "text/html"]).await,
        "text/html"
    );
    assert_eq!(
        kind(&["application/json;Q=0.1, text/html;q=0.5"]).await,
        "text/html"
    );
    assert_eq!(kind(&["application/json"]).await, "application/json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_line_answers_503() {
    let (_origin, proxy) = setup("max-waiting = 1").await;
    let _holder = admitted_visitor(&proxy).await;
    let resp = get(
        &proxy,
        "/products",
        &Jar::default(),
        Some("application/json"),
    )
    .await;
    assert_eq!(resp.json::<Value>().await.unwrap()["state"], "waiting");
    let resp = get(
        &proxy,
        "/products",
        &Jar::default(),
        Some("application/json"),
    )
    .await;
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["state"], "full");
    assert_eq!(v["position"], Value::Null);
    let resp = get(&proxy, "/products", &Jar::default(), None).await;
    assert_eq!(resp.status(), 503);
    assert!(resp.text().await.unwrap().contains("full"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reserved_prefix_is_never_forwarded() {
    let (origin, proxy) = setup("").await;
    for (path, status) in [
        ("/.anteroom/", 404),
        ("/.anteroom/admin", 404),
        ("/.anteroom/status", 404),
        ("/.anteroom/status?room=nope", 404),
        ("/x/../.anteroom/secret", 404),
        ("/%2Eanteroom/status?room=sale", 200),
        ("/.anteroom/status?room=sale", 200),
    ] {
        let resp = get(&proxy, path, &Jar::default(), None).await;
        assert_eq!(resp.status(), status, "{path}");
        assert_eq!(resp.headers()["content-type"], "application/json", "{path}");
    }
    let resp = client()
        .post(proxy.url("/.anteroom/status?room=sale"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "GET, HEAD");
    assert_eq!(origin.requests().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_tricks_meet_the_same_room() {
    let (origin, proxy) = setup("").await;
    let _holder = admitted_visitor(&proxy).await;
    let before = origin.requests().len();
    for path in ["/x/../products", "//products", "/%70roducts/1", "/./cart"] {
        let resp = get(&proxy, path, &Jar::default(), Some("application/json")).await;
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["state"], "waiting", "{path}");
    }
    assert_eq!(origin.requests().len(), before);
    // A different room is unaffected by sale's line.
    let resp = get(&proxy, "/vip/lounge", &Jar::default(), None).await;
    assert_eq!(resp.text().await.unwrap(), "origin GET /vip/lounge");
}
