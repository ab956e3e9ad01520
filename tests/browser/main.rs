//! The waiting page in a real browser: headless Chromium driven over WebDriver (chromedriver),
//! queued behind other visitors, watching its place go down, landing on exactly the URL it asked
//! for (its path and query; a fragment is not kept) — with JavaScript, and again without it
//! (meta refresh). Screenshots land in
//! `target/screenshots/`.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::browser::{Browser, Driver};
use common::*;
use serde_json::Value;

mod tabs;

fn config(origin: std::net::SocketAddr) -> String {
    format!(
        r#"{base}
[[room]]
name = "sale"
paths = ["/products", "/orders"]
admit-per-second = 10
max-active = 1
claim-ttl = "2s"
tick = "100ms"
consume = ["POST /orders"]
"#,
        base = base_config(origin)
    )
}

/// A holder in the only slot and two visitors ahead: the browser will be third in line.
async fn crowd(proxy: &Proxy) -> Jar {
    let mut holder = Jar::default();
    let resp = client()
        .get(proxy.url("/.anteroom/status?room=sale"))
        .send()
        .await
        .unwrap();
    holder.absorb(&resp);
    // The holder comes back with its cookie: a fast-path entry holds the slot for claim-ttl
    // only until then, a session after.
    let resp = client()
        .get(proxy.url("/products/1"))
        .header("cookie", holder.header())
        .send()
        .await
        .unwrap();
    holder.absorb(&resp);
    for expected in 1..=2u64 {
        let v: Value = client()
            .get(proxy.url("/.anteroom/status?room=sale"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["position"], expected);
    }
    holder
}

/// Over HTTPS: anteroom's own listener for `shop.test`, with a certificate from a CA the test
/// makes; the browser maps the name to loopback and trusts that one key.
struct Https {
    _dir: tempfile::TempDir,
    port: u16,
    args: Vec<String>,
}

impl Https {
    fn new() -> (Https, String) {
        let dir = tempfile::tempdir().unwrap();
        let ca = common::tls::TestCa::new(dir.path());
        let (cert, key) = ca.issue("shop", &["DNS:shop.test"]);
        let port = free_port();
        let listen = format!(
            "https = \"127.0.0.1:{port}\"\n[[tls]]\nhosts = [\"shop.test\"]\ncert = \"{}\"\nkey = \"{}\"\n",
            cert.display(),
            key.display()
        );
        let args = vec![
            "--host-resolver-rules=MAP shop.test 127.0.0.1".to_string(),
            format!(
                "--ignore-certificate-errors-spki-list={}",
                common::tls::spki_sha256(&cert)
            ),
        ];
        (
            Https {
                _dir: dir,
                port,
                args,
            },
            listen,
        )
    }
}

async fn queued_then_admitted(javascript: bool, https: bool) {
    let origin = Origin::start().await;
    let tls = https.then(Https::new);
    // The [listen] lines first (they continue the harness' [listen] table), then [[tls]] last.
    let text = match &tls {
        Some((_, listen)) => {
            let (head, tail) = listen.split_once("[[tls]]").unwrap();
            format!("{head}{}\n[[tls]]{tail}", config(origin.addr))
        }
        None => config(origin.addr),
    };
    let proxy = Proxy::start(&text);
    let holder = crowd(&proxy).await;
    let driver = Driver::start().await;
    let extra = tls
        .as_ref()
        .map(|(t, _)| t.args.clone())
        .unwrap_or_default();
    let browser = driver
        .browser_with(1280, 900, javascript, "en-US,en", &extra)
        .await;
    let wanted = match &tls {
        Some((t, _)) => format!("https://shop.test:{}/products/3?color=red&size=m", t.port),
        None => proxy.url("/products/3?color=red&size=m"),
    };
    // The address with a fragment: the page's refresh must still load it again, not only
    // scroll (found by review: without JavaScript a visitor on `#reviews` never polled again
    // and lost the place). The fragment itself is not kept on landing.
    browser.goto(&format!("{wanted}#reviews")).await;
    let first = browser
        .run("var e = document.getElementById('position'); return e ? e.textContent : null")
        .await;
    assert_eq!(first, "3", "third in line: {}", browser.text().await);
    let eta = browser
        .run("var e = document.getElementById('eta'); return e ? e.textContent : ''")
        .await;
    // The only slot is held and nobody leaves until the holder orders: once a tick has seen
    // that, the page says when the line moves instead of a time from the rate.
    assert!(
        eta.as_str()
            .is_some_and(|s| s.contains("minute") || s == "when someone leaves the shop"),
        "an ETA or its reason is shown: {eta}"
    );
    if https {
        let protocol = browser
            .run("return performance.getEntriesByType('navigation')[0].nextHopProtocol")
            .await;
        assert_eq!(protocol, "h2", "HTTP/2 by ALPN");
    }
    let suffix = match (javascript, https) {
        (true, false) => "js",
        (false, false) => "nojs",
        (true, true) => "https",
        (false, true) => "https-nojs",
    };
    browser
        .screenshot(&format!("waiting-desktop-{suffix}.png"))
        .await;

    // The holder orders and leaves; the two ahead never come back (their claims lapse).
    client()
        .post(proxy.url("/orders"))
        .header("cookie", holder.header())
        .send()
        .await
        .unwrap();
    let mut seen = vec![3u64];
    let deadline = Instant::now() + Duration::from_secs(20);
    let expected_text = "origin GET /products/3?color=red&size=m";
    loop {
        let text = browser.text().await;
        if text.trim() == expected_text {
            break;
        }
        if let Some(p) = browser
            .run("var e = document.getElementById('position'); return e ? e.textContent : null")
            .await
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
        {
            if seen.last() != Some(&p) {
                seen.push(p);
            }
        }
        assert!(
            Instant::now() < deadline,
            "not admitted in time; positions seen {seen:?}; page: {text}"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(
        browser.url().await,
        wanted,
        "lands on exactly the URL it asked for"
    );
    assert!(
        seen.windows(2).all(|w| w[1] < w[0]),
        "the place only goes down: {seen:?}"
    );
    if javascript {
        assert!(
            seen.len() >= 2,
            "the script updated the place while waiting: {seen:?}"
        );
        let errors = browser.severe_logs().await;
        assert!(errors.is_empty(), "console errors: {errors:?}");
    }
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_waits_its_turn_and_lands_on_its_url() {
    queued_then_admitted(true, false).await;
}

/// The same over anteroom's own HTTPS listener (HTTP/2 in Chromium), cookies `Secure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_too() {
    queued_then_admitted(true, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_javascript_the_meta_refresh_gets_there_too() {
    queued_then_admitted(false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_on_a_phone_and_in_korean() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr));
    crowd(&proxy).await;
    let driver = Driver::start().await;
    let phone = driver.browser(320, 640, true, "en-US,en").await;
    // A real phone's screen: headless Chromium never makes a window narrower than 500 px, so
    // the window size alone was no phone (the fits-320 check below passed at 500).
    phone.phone_screen(320, 640).await;
    phone.goto(&proxy.url("/products")).await;
    assert_eq!(
        phone.run("return window.innerWidth").await,
        320,
        "a 320 px screen"
    );
    // Nothing wider than the screen, nothing fetched from elsewhere.
    let overflow = phone
        .run("return document.documentElement.scrollWidth > window.innerWidth")
        .await;
    assert_eq!(overflow, false, "fits 320 px");
    let resources = phone
        .run("return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
        .await;
    let base = proxy.url("/");
    for r in resources.as_array().unwrap() {
        assert!(
            r.as_str().unwrap().starts_with(&base),
            "external request: {r}"
        );
    }
    // The style file was served and applied (the page's own CSS sets no margin on the body).
    let margin = phone
        .run("return getComputedStyle(document.body).marginTop")
        .await;
    assert_eq!(margin, "0px", "waiting.css applied");
    // The script and style are files of the room's own, cached by their version.
    for file in [
        "/.anteroom/waiting.js?room=sale&lang=en&v=",
        "/.anteroom/waiting.css?v=",
    ] {
        assert!(
            resources
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r.as_str().unwrap_or("").contains(file)),
            "{file} in {resources}"
        );
    }
    let live = phone
        .run("var e = document.querySelector('[aria-live]'); return e ? e.textContent : null")
        .await;
    assert!(
        live.as_str().unwrap_or("").contains('3'),
        "the place is in the live region: {live}"
    );
    let shot = phone.screenshot("waiting-phone.png").await;
    assert!(std::fs::metadata(shot).unwrap().len() > 1000);
    phone.close().await;

    let korean = driver.browser(360, 740, true, "ko-KR,ko").await;
    korean.phone_screen(360, 740).await;
    korean.goto(&proxy.url("/products")).await;
    assert_eq!(korean.run("return window.innerWidth").await, 360);
    assert_eq!(
        korean.run("return document.documentElement.lang").await,
        "ko"
    );
    assert!(
        korean.text().await.contains("내 대기 순서"),
        "{}",
        korean.text().await
    );
    korean.screenshot("waiting-phone-ko.png").await;
    korean.close().await;
}

/// A browser that refuses cookies comes back as a new visitor with every request: each of its
/// page's polls joined the line again at its end (a place nobody holds, which later takes a
/// turn) and spent its network's join-limit, while the page showed a place that grew. Its
/// page's poll is now told `cookies_required` (it came back without the visitor-id cookie the
/// page set): the page says why it cannot wait, and asks nothing more (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_that_refuses_cookies_is_told_and_takes_no_more_places() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        r#"{base}
[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 10
max-active = 1
tick = "100ms"
poll = [ {{ every = "1s" }} ]
"#,
        base = base_config(origin.addr)
    ));
    let holder = crowd(&proxy).await;
    let waiting = || async {
        let mut jar = holder.clone();
        get_json(&proxy, "/.anteroom/status?room=sale", &mut jar)
            .await
            .and_then(|v| v["waiting"].as_u64())
    };
    let driver = Driver::start().await;
    let browser = driver.browser_refusing_cookies(true).await;
    browser.goto(&proxy.url("/products/3")).await;
    // Its first visit joined (nothing can tell a refusing browser before its second request);
    // its first poll (after a second) comes back without the cookie and is told.
    browser.cookies_note_shown().await;
    let text = browser.text().await;
    assert!(
        text.contains("refusing cookies"),
        "the page says why: {text}"
    );
    assert_eq!(
        waiting().await,
        Some(3),
        "the visit joined, the poll did not"
    );
    browser.screenshot("waiting-cookies-refused.png").await;
    let asked = polls(&browser).await;
    assert_eq!(asked, 1, "told at the first poll");
    // Without the answer the page polls every second here, and each poll is one more place at
    // the end. Watched for 3.5 s.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(polls(&browser).await, asked, "the page asked nothing more");
    assert_eq!(waiting().await, Some(3), "and took no more places");
    let errors = browser.severe_logs().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    browser.close().await;
}

/// How many status polls the page has made (resource timing sees every `fetch`).
const STATUS_POLLS: &str = "return performance.getEntriesByType('resource').filter(function (e) { return e.name.indexOf('/.anteroom/status') >= 0; }).length";

async fn polls(b: &Browser) -> u64 {
    b.run(STATUS_POLLS).await.as_u64().unwrap_or(0)
}
