//! Several origin servers behind one upstream: round robin or by visitor, a server killed
//! mid-run fails no request while another is up (the connection is tried on another, and the
//! health check takes it out), a server that stops passing its health check is taken out and
//! one that passes again is put back. Real origin servers on loopback ports, the real binary.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;

const TOKEN: &str = "origins-test-admin-token-0123456789";

fn config(addrs: &[SocketAddr], extra: &str) -> String {
    let list: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        r#"
[cookie]
keys = ["{KEY}"]

[admin]
token = "{TOKEN}"

[[upstream]]
name = "shop"
addrs = [{}]
connect-timeout = "500ms"
{extra}

[default]
upstream = "shop"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 1000
max-active = 1000
"#,
        list.join(", ")
    )
}

/// How many requests for `/p/` each origin has seen.
fn counts(origins: &[&Origin]) -> Vec<usize> {
    origins.iter().map(|o| o.count("/p/")).collect()
}

/// `n` GETs of `/p/N`, each with `cookie` when given; every one must be a 200 from an origin.
async fn send(proxy: &Proxy, n: usize, cookie: Option<&str>) {
    for i in 0..n {
        let mut req = client().get(proxy.url(&format!("/p/{i}")));
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "request {i}: {:?}", resp.headers());
        assert_eq!(resp.headers()["x-origin"], "yes");
    }
}

async fn until_logged(proxy: &Proxy, words: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !proxy.stderr().contains(words) {
        assert!(
            Instant::now() < deadline,
            "{words:?} not logged: {}",
            proxy.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_and_a_server_killed_mid_run_fails_nobody() {
    let (a, b, c) = (
        Origin::start().await,
        Origin::start().await,
        Origin::start().await,
    );
    let proxy = Proxy::start(&config(
        &[a.addr, b.addr, c.addr],
        r#"health-check = { path = "/health", every = "300ms" }"#,
    ));
    send(&proxy, 30, None).await;
    let spread = counts(&[&a, &b, &c]);
    assert!(spread.iter().all(|&n| n >= 5), "round robin: {spread:?}");
    assert_eq!(spread.iter().sum::<usize>(), 30);

    // Killed: the requests right after it (before any health check noticed) still succeed,
    // on the others.
    let b_addr = b.addr;
    let before = b.count("/p/");
    drop(b);
    send(&proxy, 30, None).await;
    until_logged(&proxy, "out of rotation").await;
    assert!(
        proxy.stderr().contains(&b_addr.to_string()),
        "{}",
        proxy.stderr()
    );
    let metrics = metrics_text(&proxy, TOKEN).await;
    for (addr, up) in [(a.addr, 1), (b_addr, 0), (c.addr, 1)] {
        let line = format!("anteroom_origin_server_up{{server=\"{addr}\",upstream=\"shop\"}} {up}");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    send(&proxy, 30, None).await;
    let now = counts(&[&a, &c]);
    assert_eq!(now.iter().sum::<usize>(), 30 - before + 60, "{now:?}");

    // Back on its port: it passes its health check and gets requests again.
    let b = Origin::start_on(b_addr).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while b.count("/p/") == 0 {
        assert!(
            Instant::now() < deadline,
            "the server never came back into rotation"
        );
        send(&proxy, 3, None).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_health_check_a_dead_server_is_still_passed_over() {
    // The dead server is a port held closed: an origin dropped here stops listening only
    // when its task ends, so a connection could still be taken and then cut (a 502 in CI).
    let (a, b) = (Origin::start().await, ClosedPort::new());
    let proxy = Proxy::start(&config(&[a.addr, b.addr()], ""));
    send(&proxy, 20, None).await;
    assert_eq!(a.count("/p/"), 20);
    // An order whose first server is the dead one reaches the live one whole: nothing of it
    // was sent before the connection failed.
    for i in 0..6 {
        let body = format!("order {i}: {}", "x".repeat(10_000));
        let resp = client()
            .post(proxy.url(&format!("/orders/{i}")))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "order {i}");
        let seen = a.requests();
        let last = seen.last().unwrap();
        assert_eq!(
            (last.method.as_str(), last.body.as_slice()),
            ("POST", body.as_bytes())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_its_health_check_is_taken_out() {
    let (a, b) = (Origin::start().await, Origin::start().await);
    let proxy = Proxy::start(&config(
        &[a.addr, b.addr],
        r#"health-check = { path = "/health", every = "300ms" }"#,
    ));
    // Alive, but slower than the check allows (connect-timeout, at least a second).
    b.set_delay(2500);
    until_logged(&proxy, "out of rotation").await;
    let before = b.count("/p/");
    let started = Instant::now();
    send(&proxy, 20, None).await;
    assert_eq!(b.count("/p/"), before, "the slow server gets nothing");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "nobody waited on it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balance_by_visitor_keeps_a_visitor_on_one_server() {
    let (a, b, c) = (
        Origin::start().await,
        Origin::start().await,
        Origin::start().await,
    );
    let proxy = Proxy::start(&config(&[a.addr, b.addr, c.addr], r#"balance = "visitor""#));
    let mut used = std::collections::HashSet::new();
    for v in 0..12 {
        let before = counts(&[&a, &b, &c]);
        let vid = format!("anteroom_vid=00000000-0000-4000-8000-0000000000{v:02}");
        send(&proxy, 5, Some(&vid)).await;
        let after = counts(&[&a, &b, &c]);
        let moved: Vec<usize> = (0..3).filter(|&i| after[i] != before[i]).collect();
        assert_eq!(
            moved.len(),
            1,
            "visitor {v} stayed on one server: {before:?} -> {after:?}"
        );
        used.insert(moved[0]);
    }
    assert!(
        used.len() >= 2,
        "visitors are spread over the servers: {used:?}"
    );
}

#[test]
fn check_refuses_addr_with_addrs_and_a_bad_balance_or_health_check() {
    let dir = tempfile::tempdir().unwrap();
    let run = |upstream: &str| {
        let path = dir.path().join("anteroom.toml");
        std::fs::write(
            &path,
            format!("[cookie]\nkeys = [\"{KEY}\"]\n[[upstream]]\nname = \"shop\"\n{upstream}\n"),
        )
        .unwrap();
        let out = std::process::Command::new(binary())
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, out) = run("addrs = [\"127.0.0.1:9001\", \"localhost:9002\"]\nbalance = \"visitor\"\nhealth-check = { path = \"/health\", every = \"2s\" }\nresolve-every = \"10s\"");
    assert!(ok, "{out}");
    for (upstream, key) in [
        (
            "addr = \"127.0.0.1:9001\"\naddrs = [\"127.0.0.1:9002\"]",
            "upstream[0].addrs",
        ),
        ("", "upstream[0].addr"),
        ("addrs = []", "upstream[0].addr"),
        (
            "addrs = [\"127.0.0.1:9001\", \"127.0.0.1:9001\"]",
            "upstream[0].addrs[1]",
        ),
        ("addrs = [\"nowhere.invalid:1\"]", "upstream[0].addrs[0]"),
        (
            "addr = \"127.0.0.1:9001\"\nbalance = \"random\"",
            "upstream[0].balance",
        ),
        (
            "addr = \"127.0.0.1:9001\"\nhealth-check = { path = \"health\" }",
            "upstream[0].health-check.path",
        ),
    ] {
        let (ok, out) = run(upstream);
        assert!(!ok, "{upstream}: {out}");
        assert!(out.contains(key), "{upstream}: {key} in {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_connect_reaches_every_server() {
    let live = Origin::start().await;
    let closed = ClosedPort::new();
    let dead = closed.addr();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anteroom.toml");
    std::fs::write(&path, config(&[live.addr, dead], "")).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(binary())
            .args(["check", "--connect", "--config"])
            .arg(&path)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "one server is down: {text}");
    let line = |addr: SocketAddr| {
        text.lines()
            .find(|l| {
                l.contains(&format!("upstream  shop {addr}"))
                    && (l.contains("ok") || l.contains("FAIL"))
            })
            .unwrap_or_else(|| panic!("{addr} in {text}"))
            .to_string()
    };
    assert!(line(live.addr).trim_start().starts_with("ok"), "{text}");
    assert!(line(dead).trim_start().starts_with("FAIL"), "{text}");
}
