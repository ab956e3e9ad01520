//! Abuse resistance: per-client join limits, trusted proxies, Secure cookies behind TLS
//! termination, oversized headers and idle connections.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn config(
    origin: std::net::SocketAddr,
    listen_extra: &str,
    server_extra: &str,
    cookie_extra: &str,
) -> String {
    format!(
        r#"{listen_extra}
[cookie]
keys = ["{KEY}"]
{cookie_extra}

[server]
{server_extra}

[[upstream]]
name = "shop"
addr = "{origin}"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 100
max-active = 1
join-limit = {{ per-ip = 3, per = "1m" }}
"#
    )
}

/// A `[listen]` addition must sit inside the table `Proxy::start` writes first.
fn trusted(cidr: &str) -> String {
    format!("# appended to [listen]\ntrusted-proxies = [\"{cidr}\"]")
}

async fn join(proxy: &Proxy, xff: Option<&str>, accept_json: bool) -> reqwest::Response {
    let mut req = client().get(proxy.url("/products"));
    if let Some(x) = xff {
        req = req.header("x-forwarded-for", x);
    }
    if accept_json {
        req = req.header("accept", "application/json");
    }
    req.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_join_limit_counts_new_identities_per_client() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", "", ""));
    // The first walks in (a new identity, counted); two more wait; the fourth is refused.
    let mut jars = Vec::new();
    for _ in 0..3 {
        let resp = join(&proxy, None, true).await;
        assert!(resp.status().is_success());
        let mut jar = Jar::default();
        jar.absorb(&resp);
        jars.push(jar);
    }
    let resp = join(&proxy, None, true).await;
    assert_eq!(resp.status(), 429);
    let retry: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["state"], "limited");
    let resp = join(&proxy, None, false).await;
    assert_eq!(resp.status(), 429);
    assert!(resp.text().await.unwrap().contains("Too many new visitors"));
    // Visitors already known keep polling freely.
    for jar in &jars[1..] {
        for _ in 0..5 {
            let resp = client()
                .get(proxy.url("/.anteroom/status?room=sale"))
                .header("cookie", jar.header())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
        }
    }
    // A forged X-Forwarded-For from an untrusted peer changes nothing.
    let resp = join(&proxy, Some("198.51.100.99"), true).await;
    assert_eq!(resp.status(), 429, "spoofed header ignored");
    let metrics = client()
        .get(proxy.admin_url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_forwarded_address_counts() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, &trusted("127.0.0.1/32"), "", ""));
    // Four clients behind the load balancer, three new visitors each: none refused.
    for client_ip in ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"] {
        for _ in 0..3 {
            let resp = join(&proxy, Some(&format!("{client_ip}, 127.0.0.1")), true).await;
            assert!(resp.status().is_success(), "{client_ip}: {}", resp.status());
        }
    }
    // The fourth from one of them is.
    let resp = join(&proxy, Some("203.0.113.2"), true).await;
    assert_eq!(resp.status(), 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_are_secure_behind_tls_termination_and_on_request() {
    let origin = Origin::start().await;
    let behind_lb = Proxy::start(&config(origin.addr, &trusted("127.0.0.1/32"), "", ""));
    let resp = client()
        .get(behind_lb.url("/products"))
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    let cookies = set_cookies(&resp);
    assert!(
        cookies
            .iter()
            .any(|(k, _, a)| k == "anteroom_sale" && a.contains("Secure")),
        "{cookies:?}"
    );
    assert!(cookies
        .iter()
        .all(|(k, _, a)| !k.starts_with("anteroom_") || a.contains("Secure")));

    // From an untrusted peer the header means nothing.
    let direct = Proxy::start(&config(origin.addr, "", "", ""));
    let resp = client()
        .get(direct.url("/products"))
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    assert!(set_cookies(&resp)
        .iter()
        .all(|(_, _, a)| !a.contains("Secure")));

    // cookie.secure = true forces it.
    let forced = Proxy::start(&config(origin.addr, "", "", "secure = true"));
    let resp = client().get(forced.url("/products")).send().await.unwrap();
    assert!(set_cookies(&resp)
        .iter()
        .filter(|(k, _, _)| k.starts_with("anteroom_"))
        .all(|(_, _, a)| a.contains("Secure")));
}

fn raw_request(addr: std::net::SocketAddr, request: &[u8]) -> (String, TcpStream) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = s.read(&mut buf).unwrap_or(0);
    (String::from_utf8_lossy(&buf[..n]).into_owned(), s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_get_a_4xx_and_idle_connections_close() {
    let origin = Origin::start().await;
    let mut proxy = Proxy::start(&config(
        origin.addr,
        "",
        "client-timeout = \"1s\"\nmax-header-bytes = 8192",
        "",
    ));
    let addr = proxy.addr;
    let big = "x".repeat(16 * 1024);
    let (head, _) = tokio::task::spawn_blocking(move || {
        raw_request(
            addr,
            format!("GET /products HTTP/1.1\r\nHost: a\r\nX-Big: {big}\r\n\r\n").as_bytes(),
        )
    })
    .await
    .unwrap();
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    let huge = "y".repeat(2 * 1024 * 1024);
    let (head, _) = tokio::task::spawn_blocking(move || {
        raw_request(
            addr,
            format!("GET / HTTP/1.1\r\nHost: a\r\nX-Huge: {huge}\r\n\r\n").as_bytes(),
        )
    })
    .await
    .unwrap();
    assert!(
        head.is_empty() || head.starts_with("HTTP/1.1 4"),
        "{}",
        &head[..head.len().min(200)]
    );
    assert!(proxy.alive());
    assert_eq!(
        origin.requests().len(),
        0,
        "nothing oversized reached the origin"
    );

    // A keep-alive connection left idle is closed after client-timeout.
    let closed_after = tokio::task::spawn_blocking(move || {
        let (head, mut s) = raw_request(addr, b"GET /home HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let started = Instant::now();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        (n, started.elapsed())
    })
    .await
    .unwrap();
    assert_eq!(closed_after.0, 0, "the server closed the idle connection");
    assert!(
        closed_after.1 < Duration::from_secs(5),
        "after about 1 s: {:?}",
        closed_after.1
    );
    assert!(proxy.alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_keep_old_admissions_valid_and_sign_with_the_new_one() {
    use anteroom::cookie::{self, CookieKey};
    use anteroom::store::VisitorId;
    let origin = Origin::start().await;
    let rotated = config(origin.addr, "", "", "").replace(
        &format!("keys = [\"{KEY}\"]"),
        &format!("keys = [\"{OTHER_KEY}\", \"{KEY}\"]"),
    );
    let proxy = Proxy::start(&rotated);
    // Somebody holds the only slot, so a visitor without a valid admission must wait.
    let holder = client()
        .get(proxy.url("/.anteroom/status?room=sale"))
        .send()
        .await
        .unwrap();
    let (_, value, _) = set_cookies(&holder)
        .into_iter()
        .find(|(k, _, _)| k == "anteroom_sale")
        .unwrap_or_default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let old = CookieKey::new(KEY.as_bytes()).unwrap();
    let new = CookieKey::new(OTHER_KEY.as_bytes()).unwrap();
    let retired = CookieKey::new(b"retired-key-retired-key-retired-key-!!").unwrap();
    let admission = |k: &CookieKey| {
        cookie::sign(
            std::slice::from_ref(k),
            "sale",
            VisitorId::random(),
            now + 600,
        )
        .unwrap()
    };
    for (what, value, opens) in [
        ("old key", admission(&old), true),
        ("new key", admission(&new), true),
        ("retired key", admission(&retired), false),
    ] {
        let resp = client()
            .get(proxy.url("/products/1"))
            .header("cookie", format!("anteroom_sale={value}"))
            .send()
            .await
            .unwrap();
        assert!(resp.status().as_u16() < 500, "{what}");
        let text = resp.text().await.unwrap();
        assert_eq!(text == "origin GET /products/1", opens, "{what}: {text}");
    }
    // New admissions are signed with the first key.
    assert!(value.contains(new.id()), "{value}");
}
