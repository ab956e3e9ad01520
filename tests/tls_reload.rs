//! Reloads of an HTTPS edge (review 34b): a file without `https` and `[[tls]]` keeps the
//! running listener's certificates until the restart it needs (before, the table was emptied
//! and every handshake failed while the log said the listener stays), and a certificate or key
//! path that is no regular file (a FIFO) refuses the reload instead of blocking it and every
//! reload after it.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::tls::*;
use common::*;

/// An HTTPS edge for shop.test with the pair `cert`, `key`, listening: it and its port.
fn serving(origin: &Origin, cert: &std::path::Path, key: &std::path::Path) -> (Proxy, u16) {
    let port = free_port();
    let proxy = Proxy::start(&config(
        origin.addr,
        port,
        false,
        &entry(r#"["shop.test"]"#, cert, key),
    ));
    wait_listening(port);
    (proxy, port)
}

/// Polls `done` every 50 ms until it holds, for at most ten seconds.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_without_https_keeps_the_running_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (cert, key) = ca.issue("first", &["DNS:shop.test"]);
    let origin = Origin::start().await;
    let (proxy, port) = serving(&origin, &cert, &key);
    let (ca_pem, url) = (ca.ca(), format!("https://shop.test:{port}/"));
    let subject = || curl(&ca_pem, "shop.test", port, &url, &[]).map(|g| g.subject());
    assert!(subject().unwrap().contains("CN=first"));
    // The file as it runs, without `https` and its certificates.
    let running = std::fs::read_to_string(proxy.config_path()).unwrap();
    let without = running
        .lines()
        .filter(|l| !l.starts_with("https = "))
        .collect::<Vec<_>>()
        .join("\n");
    let without = without[..without.find("[[tls]]").unwrap()].to_string();
    std::fs::write(proxy.config_path(), without).unwrap();
    proxy.signal("HUP");
    let applied = eventually(Duration::from_secs(10), "the reload's outcome", || async {
        let ready = admin_json(&proxy, "/readyz", "").await?;
        let last = ready["last_reload"].clone();
        (!last.is_null()).then_some(last)
    })
    .await;
    assert_eq!(applied["applied"], true, "{applied}");
    assert!(
        proxy.stderr().contains("listen.https"),
        "{}",
        proxy.stderr()
    );
    let got = subject();
    assert!(
        got.as_ref().is_ok_and(|s| s.contains("CN=first")),
        "the listener runs on with its certificate: {got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_is_no_regular_file_refuses_the_reload_and_blocks_none_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (first_cert, first_key) = ca.issue("first", &["DNS:shop.test"]);
    let (second_cert, second_key) = ca.issue("second", &["DNS:shop.test"]);
    let (cert, key) = (dir.path().join("live.pem"), dir.path().join("live.key"));
    std::fs::copy(&first_cert, &cert).unwrap();
    std::fs::copy(&first_key, &key).unwrap();
    let origin = Origin::start().await;
    let (proxy, port) = serving(&origin, &cert, &key);
    let (ca_pem, url) = (ca.ca(), format!("https://shop.test:{port}/"));
    let subject = || {
        curl(&ca_pem, "shop.test", port, &url, &[])
            .map(|g| g.subject())
            .unwrap_or_default()
    };
    assert!(subject().contains("CN=first"));
    std::fs::remove_file(&key).unwrap();
    let made = Command::new("mkfifo").arg(&key).status().unwrap();
    assert!(made.success());
    proxy.signal("HUP");
    until("the refusal", || proxy.stderr().contains("reload refused"));
    assert!(
        proxy.stderr().contains("not a regular file"),
        "{}",
        proxy.stderr()
    );
    // A later reload is not blocked behind it: the renewed pair is served.
    std::fs::remove_file(&key).unwrap();
    std::fs::copy(&second_cert, &cert).unwrap();
    std::fs::copy(&second_key, &key).unwrap();
    proxy.signal("HUP");
    until("the renewed certificate served", || {
        subject().contains("CN=second")
    });
}
