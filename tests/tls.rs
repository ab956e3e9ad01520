//! anteroom alone at the edge over HTTPS: certificates by SNI (a default for clients without
//! it), HTTP/2 and HTTP/1.1 by ALPN, `Secure` cookies without any setting, certificates swapped
//! on SIGHUP while a request is in flight (a broken pair refused, the old one kept), plain HTTP
//! sent to HTTPS with a 308, TLS 1.1 and 1.0 refused, and `check` refusing a broken or mismatched
//! pair with file:line.
//! The client is curl (OpenSSL, nghttp2), trusting only the CA the test made; `openssl s_client`
//! offers the old protocol versions.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::tls::*;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_by_sni_with_http2_and_secure_cookies() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (shop_cert, shop_key) = ca.issue("shop", &["DNS:shop.test", "DNS:www.shop.test"]);
    let (other_cert, other_key) = ca.issue("other", &["DNS:*.other.test"]);
    let origin = Origin::start().await;
    let port = free_port();
    let tls = entry(r#"["shop.test", "www.shop.test"]"#, &shop_cert, &shop_key)
        + &entry(r#"["*.other.test"]"#, &other_cert, &other_key);
    let proxy = Proxy::start(&config(origin.addr, port, false, &tls));
    wait_listening(port);
    let ca_pem = ca.ca();

    // HTTP/2 by ALPN, the certificate for the name asked (curl verifies it against the CA).
    let got = curl(
        &ca_pem,
        "shop.test",
        port,
        &format!("https://shop.test:{port}/products"),
        &["--http2"],
    )
    .unwrap();
    assert_eq!((got.status, got.version.as_str()), (200, "2"), "{got:?}");
    assert!(got.subject().contains("CN=shop"), "{}", got.subject());
    // Over TLS our cookies are Secure without any setting.
    let cookies = got.header("set-cookie");
    assert!(
        cookies.iter().any(|c| c.starts_with("anteroom_sale=")),
        "{cookies:?}"
    );
    for c in cookies.iter().filter(|c| c.starts_with("anteroom_")) {
        assert!(c.contains("; Secure"), "{c}");
    }
    // What the origin saw: the room's host, HTTPS, a request like any other.
    let seen = origin.requests();
    let last = seen.last().expect("the origin was asked");
    assert_eq!(last.uri, "/products");
    assert_eq!(
        last.header("host").as_deref(),
        Some(&*format!("shop.test:{port}"))
    );

    // HTTP/1.1 when the client asks for it.
    let got = curl(
        &ca_pem,
        "www.shop.test",
        port,
        &format!("https://www.shop.test:{port}/"),
        &["--http1.1"],
    )
    .unwrap();
    assert_eq!((got.status, got.version.as_str()), (200, "1.1"), "{got:?}");

    // The wildcard entry for one more label; the first entry for a name none lists and for a
    // client without SNI (an IP address).
    let got = curl(
        &ca_pem,
        "api.other.test",
        port,
        &format!("https://api.other.test:{port}/"),
        &[],
    )
    .unwrap();
    assert!(got.subject().contains("CN=other"), "{}", got.subject());
    let got = curl(
        &ca_pem,
        "nobody.test",
        port,
        &format!("https://nobody.test:{port}/"),
        &["--insecure"],
    )
    .unwrap();
    assert!(
        got.subject().contains("CN=shop"),
        "the default: {}",
        got.subject()
    );
    let unverified = curl(
        &ca_pem,
        "nobody.test",
        port,
        &format!("https://nobody.test:{port}/"),
        &[],
    );
    assert!(
        unverified.is_err(),
        "the default is not valid for a name it does not list"
    );
    let got = curl(
        &ca_pem,
        "x",
        1,
        &format!("https://127.0.0.1:{port}/"),
        &["--insecure"],
    )
    .unwrap();
    assert!(got.subject().contains("CN=shop"), "{}", got.subject());

    // TLS 1.2 is served; older is not (below).
    let got = curl(
        &ca_pem,
        "shop.test",
        port,
        &format!("https://shop.test:{port}/"),
        &["--tlsv1.2", "--tls-max", "1.2"],
    )
    .unwrap();
    assert_eq!(got.status, 200);
    // TLS 1.1 and 1.0 are refused by anteroom, not given up by the client: the same command
    // completes TLS 1.2, and for the older ones the server's answer is an alert (rustls sends
    // handshake_failure, 40: a TLS 1.0/1.1 hello has no signature_algorithms extension).
    let (ok, text) = s_client(port, "-tls1_2");
    assert!(ok && text.contains("Protocol  : TLSv1.2"), "{text}");
    for v in ["-tls1_1", "-tls1"] {
        let (ok, text) = s_client(port, v);
        assert!(
            !ok && text.contains("SSL alert number"),
            "{v}: refused by the server: {text}"
        );
    }

    // Plain HTTP is still served as before (no redirect asked for).
    let plain = client().get(proxy.url("/")).send().await.unwrap();
    assert_eq!(plain.status(), 200);
    assert!(set_cookies(&plain)
        .iter()
        .filter(|(k, _, _)| k.starts_with("anteroom_"))
        .all(|(_, _, attrs)| !attrs.contains("Secure")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_swaps_the_certificate_and_keeps_it_when_the_new_one_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (first_cert, first_key) = ca.issue("first", &["DNS:shop.test"]);
    let (second_cert, second_key) = ca.issue("second", &["DNS:shop.test"]);
    let (stranger_cert, _) = ca.issue("stranger", &["DNS:shop.test"]);
    // The files the config names; replaced below as an operator renews a certificate.
    let (cert, key) = (dir.path().join("live.pem"), dir.path().join("live.key"));
    std::fs::copy(&first_cert, &cert).unwrap();
    std::fs::copy(&first_key, &key).unwrap();
    let origin = Origin::start().await;
    let port = free_port();
    let proxy = Proxy::start(&config(
        origin.addr,
        port,
        false,
        &entry(r#"["shop.test"]"#, &cert, &key),
    ));
    wait_listening(port);
    let ca_pem = ca.ca();
    let url = format!("https://shop.test:{port}/slow");
    let subject = || {
        curl(&ca_pem, "shop.test", port, &url.replace("/slow", "/"), &[])
            .unwrap()
            .subject()
    };
    assert!(subject().contains("CN=first"));

    // A request in flight over the old certificate finishes after the swap.
    origin.set_delay(1500);
    let in_flight = {
        let (ca_pem, url) = (ca_pem.clone(), url.clone());
        std::thread::spawn(move || curl(&ca_pem, "shop.test", port, &url, &["--http2"]))
    };
    std::thread::park_timeout(Duration::from_millis(300));
    std::fs::copy(&second_cert, &cert).unwrap();
    std::fs::copy(&second_key, &key).unwrap();
    proxy.signal("HUP");
    let got = in_flight
        .join()
        .unwrap()
        .expect("the request in flight finished");
    assert_eq!(got.status, 200, "{got:?}");
    assert!(got.subject().contains("CN=first"));
    origin.set_delay(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !subject().contains("CN=second") {
        assert!(
            Instant::now() < deadline,
            "the new certificate is served after SIGHUP"
        );
        std::thread::park_timeout(Duration::from_millis(50));
    }

    // A certificate whose key is another's: the reload is refused and the running one stays.
    std::fs::copy(&stranger_cert, &cert).unwrap();
    proxy.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !proxy.stderr().contains("reload refused") {
        assert!(
            Instant::now() < deadline,
            "the refusal is logged: {}",
            proxy.stderr()
        );
        std::thread::park_timeout(Duration::from_millis(50));
    }
    assert!(proxy.stderr().contains("tls[0].key"), "{}", proxy.stderr());
    assert!(subject().contains("CN=second"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_sent_to_https_with_a_308() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (cert, key) = ca.issue("shop", &["DNS:shop.test"]);
    let origin = Origin::start().await;
    let port = free_port();
    let proxy = Proxy::start(&config(
        origin.addr,
        port,
        true,
        &entry(r#"["shop.test"]"#, &cert, &key),
    ));
    wait_listening(port);
    for (method, path) in [("GET", "/products?id=7"), ("POST", "/orders")] {
        let resp = client()
            .request(method.parse().unwrap(), proxy.url(path))
            .header("host", "shop.test")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 308, "{method} {path}");
        assert_eq!(
            resp.headers()["location"],
            format!("https://shop.test:{port}{path}").as_str()
        );
        assert!(
            set_cookies(&resp).is_empty(),
            "no place taken over plain HTTP"
        );
        // An answer of ours: the headers of every one (found by review: none on the 308).
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        assert_eq!(resp.headers()["x-frame-options"], "SAMEORIGIN");
    }
    // A host anteroom cannot use is not made into a redirect.
    let resp = client()
        .get(proxy.url("/"))
        .header("host", "a b")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(origin.count("/"), 0, "nothing plain reached the origin");
    // Followed, it lands in the room over HTTPS.
    let got = curl(
        &ca.ca(),
        "shop.test",
        port,
        &format!("https://shop.test:{port}/products?id=7"),
        &[],
    )
    .unwrap();
    assert_eq!(got.status, 200);
    assert_eq!(origin.count("/products?id=7"), 1);
}

/// `anteroom check` on a config in `dir`; (success, output).
fn check(dir: &Path, text: &str) -> (bool, String) {
    let path = dir.join("anteroom.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(binary())
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn check_refuses_a_broken_or_mismatched_pair_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (cert, key) = ca.issue("shop", &["DNS:shop.test"]);
    let (_, other_key) = ca.issue("other", &["DNS:other.test"]);
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let origin: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let good = config(origin, 8443, true, &entry(r#"["shop.test"]"#, &cert, &key));
    let (ok, out) = check(dir.path(), &format!("[listen]\n{good}"));
    assert!(ok, "{out}");
    // The summary names the listener and each certificate with its expiry.
    assert!(
        out.contains("https 127.0.0.1:8443 (plain HTTP redirected)"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "tls       shop.test -> {} (expires ",
            cert.display()
        )),
        "{out}"
    );
    for (tls, key_named, words) in [
        (
            entry(r#"["shop.test"]"#, &cert, &other_key),
            "tls[0].key",
            "is not the key of",
        ),
        (
            entry(r#"["shop.test"]"#, &garbage, &key),
            "tls[0].cert",
            "holds no certificate",
        ),
        (
            entry(r#"["shop.test"]"#, &dir.path().join("missing.pem"), &key),
            "tls[0].cert",
            "cannot read",
        ),
        (
            entry(r#"["other.test"]"#, &cert, &key),
            "tls[0].hosts",
            "not valid for other.test",
        ),
        (
            entry(r#"["*.shop.test"]"#, &cert, &key),
            "tls[0].hosts",
            "not valid for *.shop.test",
        ),
        (
            entry(r#"["shop.test"]"#, &cert, &key) + &entry(r#"["shop.test"]"#, &cert, &key),
            "tls[1].hosts[0]",
            "earlier [[tls]] entry",
        ),
        (String::new(), "listen.https", "needs a certificate"),
    ] {
        let text = format!("[listen]\n{}", config(origin, 8443, true, &tls));
        let (ok, out) = check(dir.path(), &text);
        assert!(!ok, "{key_named}: {out}");
        assert!(
            out.contains(key_named) && out.contains(words),
            "{key_named}: {out}"
        );
        // file:line of the key.
        assert!(out.contains("anteroom.toml:"), "{out}");
    }
    // A certificate past its date (made with -days 0: expired a second later).
    let (old_cert, old_key) = ca.issue_for("old", &["DNS:shop.test"], 0);
    let text = format!(
        "[listen]\n{}",
        config(
            origin,
            8443,
            true,
            &entry(r#"["shop.test"]"#, &old_cert, &old_key)
        )
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (ok, out) = check(dir.path(), &text);
        if !ok {
            assert!(
                out.contains("tls[0].cert") && out.contains("expired on"),
                "{out}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "an expired certificate passed: {out}"
        );
        std::thread::park_timeout(Duration::from_millis(200));
    }
    // redirect-http without HTTPS, certificates without a listener.
    let text = format!(
        "[listen]\nredirect-http = true\n{}\n{}",
        base_config(origin),
        entry(r#"["shop.test"]"#, &cert, &key)
    );
    let (ok, out) = check(dir.path(), &text);
    assert!(!ok);
    assert!(
        out.contains("listen.redirect-http") && out.contains("no HTTPS listener"),
        "{out}"
    );
}

#[test]
fn check_refuses_an_upstream_client_pair_that_does_not_match_or_tls_settings_on_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (cert, key) = ca.issue("client", &["DNS:anteroom.test"]);
    let (_, other_key) = ca.issue("other", &["DNS:other.test"]);
    let upstream = |tls: bool, key: &Path| {
        format!(
            "[cookie]\nkeys = [\"{KEY}\"]\n[[upstream]]\nname = \"shop\"\naddr = \"127.0.0.1:9\"\ntls = {tls}\nca = \"{}\"\nclient-cert = {{ cert = \"{}\", key = \"{}\" }}\n",
            ca.ca().display(),
            cert.display(),
            key.display()
        )
    };
    let (ok, out) = check(dir.path(), &upstream(true, &key));
    assert!(ok, "{out}");
    let (ok, out) = check(dir.path(), &upstream(true, &other_key));
    assert!(!ok);
    assert!(
        out.contains("upstream[0].client-cert.key") && out.contains("is not the key of"),
        "{out}"
    );
    let (ok, out) = check(dir.path(), &upstream(false, &key));
    assert!(!ok);
    assert!(
        out.contains("upstream[0].ca") && out.contains("upstream[0].client-cert"),
        "{out}"
    );
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "nothing\n").unwrap();
    let text = upstream(true, &key).replace(
        &ca.ca().display().to_string(),
        &garbage.display().to_string(),
    );
    let (ok, out) = check(dir.path(), &text);
    assert!(!ok);
    assert!(
        out.contains("upstream[0].ca") && out.contains("holds no certificate"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_that_terminated_tls_is_not_redirected() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let (cert, key) = ca.issue("shop", &["DNS:shop.test"]);
    let origin = Origin::start().await;
    let port = free_port();
    let text = config(
        origin.addr,
        port,
        true,
        &entry(r#"["shop.test"]"#, &cert, &key),
    )
    .replacen(
        "redirect-http = true",
        "redirect-http = true\ntrusted-proxies = [\"127.0.0.1/32\"]",
        1,
    );
    let proxy = Proxy::start(&text);
    wait_listening(port);
    let get = |proto: Option<&'static str>| {
        let mut req = client().get(proxy.url("/p")).header("host", "shop.test");
        if let Some(p) = proto {
            req = req.header("x-forwarded-proto", p);
        }
        req.send()
    };
    // The load balancer in front says the visitor came over HTTPS: served, cookies Secure.
    let resp = get(Some("https")).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-origin"], "yes");
    // Plain HTTP through it, or no word about it: sent to HTTPS.
    for proto in [Some("http"), None] {
        let resp = get(proto).await.unwrap();
        assert_eq!(resp.status(), 308, "{proto:?}");
    }
}
