//! The process under operators' hands: live reload on SIGHUP, graceful shutdown on SIGTERM and
//! SIGINT.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

mod reloads;

const TOKEN: &str = "admin-token-for-tests-0123456789";

fn config(origin: std::net::SocketAddr, paths: &str, extra: &str) -> String {
    format!(
        r#"{base}
[server]
grace-period = "3s"
shutdown-timeout = "5s"

[[room]]
name = "sale"
paths = [{paths}]
admit-per-second = 100
max-active = 1
{extra}
"#,
        base = base_config(origin)
    )
}

async fn state(client: &reqwest::Client, proxy: &Proxy, path: &str) -> String {
    let resp = client
        .get(proxy.url(path))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["state"].as_str().map(String::from))
        .unwrap_or(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_a_good_config_and_refuses_a_bad_one() {
    let origin = Origin::start().await;
    let mut proxy = Proxy::start_with(
        &config(origin.addr, "\"/products\"", ""),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    let c = client();
    assert_eq!(
        state(&c, &proxy, "/products").await,
        "origin GET /products",
        "first visitor enters"
    );
    assert_eq!(state(&c, &proxy, "/products").await, "waiting");
    assert_eq!(
        state(&c, &proxy, "/cart").await,
        "origin GET /cart",
        "/cart is not protected yet"
    );

    // Protect /cart too, and change the listen address (which needs a restart).
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    let good = text
        .replace(
            "paths = [\"/products\"]",
            "paths = [\"/products\", \"/cart\"]",
        )
        .replace(
            &format!("http = \"{}\"", proxy.addr),
            "http = \"127.0.0.1:1\"",
        );
    std::fs::write(proxy.config_path(), good).unwrap();
    proxy.signal("HUP");
    eventually(Duration::from_secs(5), "/cart to be protected", || async {
        (state(&c, &proxy, "/cart").await == "waiting").then_some(())
    })
    .await;
    assert!(proxy.alive());
    assert_eq!(
        state(&c, &proxy, "/products").await,
        "waiting",
        "the line survived the reload"
    );
    let logs = proxy.stderr();
    assert!(logs.contains("configuration reloaded"), "{logs}");
    assert!(
        logs.contains("listen.http"),
        "a restart-only change is named: {logs}"
    );

    // A broken file is refused; the running configuration stays.
    let broken = std::fs::read_to_string(proxy.config_path())
        .unwrap()
        .replace("admit-per-second = 100", "admit-per-second = -1");
    std::fs::write(proxy.config_path(), broken).unwrap();
    proxy.signal("HUP");
    let logs = eventually(Duration::from_secs(5), "the refusal in the log", || async {
        let logs = proxy.stderr();
        logs.contains("reload refused").then_some(logs)
    })
    .await;
    assert!(
        logs.contains("room[0].admit-per-second"),
        "the key is named: {logs}"
    );
    assert!(
        logs.contains("line=") || logs.contains("line: "),
        "the line is given: {logs}"
    );
    assert!(proxy.alive());
    assert_eq!(
        state(&c, &proxy, "/cart").await,
        "waiting",
        "still the last good configuration"
    );
}

async fn graceful(signal: &str) {
    let origin = Origin::start().await;
    let mut proxy = Proxy::start(&config(origin.addr, "\"/products\"", ""));
    let url = proxy.url("/slow/page");
    let inflight =
        tokio::spawn(async move { client().get(url).send().await.map(|r| r.status().as_u16()) });
    eventually(
        Duration::from_secs(5),
        "the slow request to reach the origin",
        || async { (origin.count("/slow") == 1).then_some(()) },
    )
    .await;
    let sent = Instant::now();
    proxy.signal(signal);
    let status = inflight.await.unwrap();
    assert_eq!(status.ok(), Some(200), "the in-flight request finished");
    let code = tokio::task::spawn_blocking(move || proxy.wait_exit(Duration::from_secs(15)))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "exit 0 after SIG{signal}");
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "within the configured bound"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_requests_and_exits_0() {
    graceful("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_is_graceful_too() {
    graceful("INT").await;
}

/// A reload that changes a restart-only setting (`[server]` here) still applies the rest of
/// `[listen]`. Before, the whole of `[listen]` was kept from the running configuration, so
/// `other-hosts` changed from "pass" to "refuse" silently stayed "pass": another host went on
/// past the line (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_a_restart_only_change_applies_the_rest_of_listen() {
    use common::raw::{get, raw};
    let origin = Origin::start().await;
    let cfg = format!(
        "other-hosts = \"pass\"\n{base}\n[server]\nclient-timeout = \"60s\"\n\n[[room]]\nname = \"sale\"\nhosts = [\"shop.test\"]\npaths = [\"/products\"]\nadmit-per-second = 100\nmax-active = 1\n",
        base = base_config(origin.addr)
    );
    let proxy = Proxy::start_with(&cfg, &[("ANTEROOM_LOG", "info")], &[]);
    let request = get("/products/1", "evil.test", "");
    let other_host = || raw(&proxy, &request);
    assert!(other_host().await.reached_origin(), "passed, as configured");
    let text = std::fs::read_to_string(proxy.config_path())
        .unwrap()
        .replace("other-hosts = \"pass\"", "other-hosts = \"refuse\"")
        .replace("client-timeout = \"60s\"", "client-timeout = \"30s\"");
    std::fs::write(proxy.config_path(), text).unwrap();
    proxy.signal("HUP");
    eventually(
        Duration::from_secs(5),
        "other-hosts = refuse applied",
        || async { (other_host().await.status == 400).then_some(()) },
    )
    .await;
    let logs = proxy.stderr();
    assert!(
        logs.contains("[server]") && logs.contains("configuration reloaded"),
        "the restart-only change is named, the rest reloaded: {logs}"
    );
}

/// A reload that removes or renames a room while people wait in its line is refused (the store
/// keys a line by the room's name: they would lose their place, and its paths open); one that
/// renames a room whose line is empty goes through, and the log names the rooms it removed and
/// added (found by review: the line was dropped silently and newcomers walked in).
/// A SIGHUP sent while the process starts (a config run right after a restart): it neither
/// ends the process (the signal's default action, before the reloader listens) nor is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_while_starting_is_applied_not_fatal() {
    let origin = Origin::start().await;
    let mut proxy = Proxy::launch(
        &config(origin.addr, "\"/products\"", ""),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    // The file read and the start logged: the moment the process builds its services.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !proxy.stderr().contains("starting") {
        assert!(proxy.alive(), "exited: {}", proxy.stderr());
        assert!(
            Instant::now() < deadline,
            "never started: {}",
            proxy.stderr()
        );
        std::thread::park_timeout(Duration::from_millis(2));
    }
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    let good = text.replace(
        "paths = [\"/products\"]",
        "paths = [\"/products\", \"/cart\"]",
    );
    std::fs::write(proxy.config_path(), good).unwrap();
    proxy.signal("HUP");
    proxy
        .wait_ready()
        .unwrap_or_else(|e| panic!("a SIGHUP while starting ended the process: {e}"));
    let c = client();
    assert_eq!(state(&c, &proxy, "/products").await, "origin GET /products");
    eventually(
        Duration::from_secs(5),
        "/cart protected by the reload",
        || async { (state(&c, &proxy, "/cart").await == "waiting").then_some(()) },
    )
    .await;
    assert!(proxy.alive());
}

/// A reload that changes `listen.http` alone tells that it applies at a restart, and names
/// nothing else (found by review: `[server]` was named too, its default upgrade socket being
/// derived from `listen.http`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_names_only_the_fixed_settings_it_changes() {
    let origin = Origin::start().await;
    let proxy = Proxy::start_with(
        &config(origin.addr, "\"/products\"", ""),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    let moved = text.replace(
        &format!("http = \"{}\"", proxy.addr),
        &format!("http = \"127.0.0.1:{}\"", common::free_port()),
    );
    assert_ne!(moved, text);
    std::fs::write(proxy.config_path(), moved).unwrap();
    proxy.signal("HUP");
    let line = eventually(Duration::from_secs(5), "the warning in the log", || async {
        proxy
            .stderr()
            .lines()
            .find(|l| l.contains("settings="))
            .map(str::to_string)
    })
    .await;
    assert!(
        line.contains("settings=\"listen.http\"") || line.contains("settings=listen.http"),
        "{line}"
    );
}

/// A reload that points the upstream at a listener still running (the file moved
/// `listen.http`, which applies only at a restart, and named the old port as the shop) is
/// refused, naming the key: every request would come back to anteroom. Before (found by
/// review), it was applied and the instance sent itself thousands of requests a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_cannot_point_the_upstream_at_a_running_listener() {
    let origin = Origin::start().await;
    let proxy = Proxy::start_with(
        &config(origin.addr, "\"/products\"", ""),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    let looped = text
        .replace(
            &format!("http = \"{}\"", proxy.addr),
            "http = \"127.0.0.1:1\"",
        )
        .replace(
            &format!("addr = \"{}\"", origin.addr),
            &format!("addr = \"{}\"", proxy.addr),
        );
    assert_ne!(looped, text);
    std::fs::write(proxy.config_path(), looped).unwrap();
    proxy.signal("HUP");
    let logs = eventually(Duration::from_secs(5), "the refusal in the log", || async {
        let logs = proxy.stderr();
        logs.contains("reload refused").then_some(logs)
    })
    .await;
    assert!(
        logs.contains("upstream[0].addr") && logs.contains("running listeners"),
        "{logs}"
    );
    assert_eq!(
        state(&client(), &proxy, "/cart").await,
        "origin GET /cart",
        "the shop is still the upstream"
    );
}
