//! Scheduled sales in a real browser (issue 17, item 8; headless Chromium over chromedriver): a
//! visitor registers during a drawn event's pre-queue and sees the countdown (no place, the
//! draw's commitment, its own ticket); at the opening its page, left alone, takes it through the
//! draw to the URL it asked for. The countdown in Korean on a phone; without JavaScript its meta
//! refresh gets there too. Screenshots land in `target/screenshots/`.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anteroom::event::{draw, time};
use common::browser::{Browser, Driver};
use common::*;
use serde_json::Value;

const TOKEN: &str = "admin-token-for-tests-0123456789";
const SECRET: &str = "draw-secret-for-the-tests-0123456789abcdef";
const STATUS: &str = "/.anteroom/status?room=sale";
const EVENT: &str = "/.anteroom/event?room=sale";
const WANTED: &str = "/products/3?color=red";

/// An RFC 3339 time `secs` from now (negative: ago), in +09:00 as an operator in Seoul writes.
fn at(secs: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    time::format(now.saturating_add_signed(secs * 1_000_000), 9 * 3600)
}

/// A drawn event whose pre-queue began a second ago and that opens `opens_in` seconds from now.
/// Slots to spare: once drawn, everyone is let in within a tick or two of the opening, so the
/// test waits on the draw and the page, not on a line.
fn config(origin: std::net::SocketAddr, opens_in: i64) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[draw]
secret = "{SECRET}"

[[room]]
name = "sale"
paths = ["/products", "/orders"]
admit-per-second = 10
max-active = 100
tick = "100ms"

[[room.event]]
name = "spring-drop"
prequeue-from = "{from}"
opens-at = "{opens}"
draw = true
"#,
        base = base_config(origin),
        from = at(-1),
        opens = at(opens_in),
    )
}

/// The event document (`/.anteroom/event`), with `query` appended.
async fn event_doc(proxy: &Proxy, query: &str) -> (u16, Value) {
    let resp = client()
        .get(proxy.url(&format!("{EVENT}{query}")))
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

/// The text of the element with `id`, `None` when the page has none.
async fn text_of(browser: &Browser, id: &str) -> Option<String> {
    browser
        .run(&format!(
            "var e = document.getElementById('{id}'); return e ? e.textContent : null"
        ))
        .await
        .as_str()
        .map(str::to_string)
}

/// `00:00:SS`: seconds before the opening.
fn seconds_away(countdown: &str) -> bool {
    countdown
        .strip_prefix("00:00:")
        .is_some_and(|s| s.len() == 2 && s.parse::<u8>().is_ok_and(|s| s < 60))
}

/// Waits until the page is the origin's answer to `wanted`; then the address bar must say
/// exactly `wanted`. Returns the titles of the pages seen on the way.
async fn lands_on(proxy: &Proxy, browser: &Browser, wanted: &str, limit: Duration) -> Vec<String> {
    let expected = format!("origin GET {wanted}");
    let deadline = Instant::now() + limit;
    let mut titles: Vec<String> = Vec::new();
    loop {
        let text = browser.text().await;
        if text.trim() == expected {
            break;
        }
        let title = browser.run("return document.title").await;
        if let Some(t) = title.as_str().filter(|t| !t.is_empty()) {
            if titles.last().map(String::as_str) != Some(t) {
                titles.push(t.to_string());
            }
        }
        assert!(
            Instant::now() < deadline,
            "not at the origin in time; pages seen {titles:?}; page: {text}"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(
        browser.url().await,
        proxy.url(wanted),
        "lands on exactly the URL it asked for"
    );
    println!("pages on the way to {wanted}: {titles:?}");
    titles
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_registers_sees_the_countdown_is_drawn_and_lands_on_its_url() {
    // The browser first: the opening is counted from when the proxy starts, so a slow
    // chromedriver cannot eat the countdown. 12 s: on a loaded 2-core machine, 8 s left 2 by
    // the time of the screenshot.
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 1024, true, "en-US,en").await;
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, 12));
    let (_, doc) = event_doc(&proxy, "").await;
    let commitment = doc["commitment"]
        .as_str()
        .expect("a commitment")
        .to_string();
    // Others register too, so that the draw places the browser among them.
    for _ in 0..5 {
        let v = get_json(&proxy, STATUS, &mut Jar::default()).await.unwrap();
        assert_eq!(v["state"], "prequeue", "{v}");
    }

    browser.goto(&proxy.url(WANTED)).await;
    assert!(
        text_of(&browser, "ticket").await.is_some(),
        "registered: {}",
        browser.text().await
    );
    let h1 = browser
        .run("return document.querySelector('h1').textContent")
        .await;
    assert_eq!(h1, "You're registered");
    assert_eq!(
        browser.run("return document.title").await,
        "You're registered"
    );
    let countdown = text_of(&browser, "countdown").await.unwrap();
    assert!(seconds_away(&countdown), "a countdown: {countdown}");
    assert_eq!(
        text_of(&browser, "commitment").await.as_deref(),
        Some(commitment.as_str())
    );
    let ticket = text_of(&browser, "ticket").await.unwrap();
    assert!(
        ticket.len() == 32 && ticket.bytes().all(|b| b.is_ascii_hexdigit()),
        "a ticket: {ticket}"
    );
    assert_eq!(text_of(&browser, "position").await, None, "no place shown");
    let labels = browser
        .run("return Array.prototype.map.call(document.querySelectorAll('.label'), function (e) { return e.textContent; })")
        .await;
    assert!(
        !labels
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "Your place in line"),
        "no place shown: {labels}"
    );
    let text = browser.text().await;
    assert!(
        text_of(&browser, "registered")
            .await
            .is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n >= 6)),
        "the registrations so far: {text}"
    );
    // The script counts down (the server's figure is only where it starts).
    eventually(Duration::from_secs(5), "the countdown to tick", || {
        let (b, first) = (&browser, &countdown);
        async move {
            let now = text_of(b, "countdown").await?;
            (now != *first && seconds_away(&now)).then_some(())
        }
    })
    .await;
    browser.screenshot("countdown-en.png").await;
    let errors = browser.severe_logs().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");

    // Nobody touches the tab: its poll sees the opening and takes it through.
    let titles = lands_on(&proxy, &browser, WANTED, Duration::from_secs(40)).await;
    assert_eq!(
        titles.first().map(String::as_str),
        Some("You're registered"),
        "{titles:?}"
    );
    let errors = browser.severe_logs().await;
    assert!(errors.is_empty(), "console errors on the way: {errors:?}");

    // It was drawn: the seed matches the commitment, and its ticket is in the published list.
    let (_, doc) = event_doc(&proxy, "").await;
    let seed = draw::unhex::<32>(doc["seed"].as_str().expect("the seed revealed")).unwrap();
    assert_eq!(draw::commitment(&seed), commitment);
    let list = eventually(Duration::from_secs(10), "the list", || {
        let proxy = &proxy;
        async move {
            let (code, d) = event_doc(proxy, "&tickets=1").await;
            (code == 200).then_some(d)
        }
    })
    .await;
    let tickets = list["tickets"].as_array().unwrap();
    assert_eq!(tickets.len(), 6, "{list}");
    assert!(
        tickets.iter().any(|t| t == ticket.as_str()),
        "{ticket} in {list}"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_countdown_on_a_phone_in_korean() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, 600));
    let driver = Driver::start().await;
    let phone = driver.browser(390, 844, true, "ko-KR,ko").await;
    phone.phone_screen(390, 844).await;
    phone.goto(&proxy.url(WANTED)).await;
    assert_eq!(
        phone.run("return document.documentElement.lang").await,
        "ko"
    );
    let h1 = phone
        .run("return document.querySelector('h1').textContent")
        .await;
    let title = anteroom::texts::builtin("ko").unwrap()["title_prequeue"].clone();
    assert_eq!(h1, title.as_str(), "{}", phone.text().await);
    let countdown = text_of(&phone, "countdown").await.unwrap();
    assert!(
        countdown.starts_with("00:"),
        "ten minutes away: {countdown}"
    );
    assert!(text_of(&phone, "ticket").await.is_some());
    assert!(text_of(&phone, "commitment").await.is_some());
    assert_eq!(text_of(&phone, "position").await, None, "no place shown");
    let widths = phone
        .run("return [window.innerWidth, document.documentElement.scrollWidth]")
        .await;
    assert_eq!(
        widths,
        serde_json::json!([390, 390]),
        "nothing wider than the phone"
    );
    phone.screenshot("countdown-ko-phone.png").await;
    let errors = phone.severe_logs().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_javascript_the_countdown_refreshes_through_the_opening() {
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 900, false, "en-US,en").await;
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, 10));
    browser.goto(&proxy.url(WANTED)).await;
    let text = browser.text().await;
    assert!(text.contains("You're registered"), "the countdown: {text}");
    let countdown = text_of(&browser, "countdown").await.unwrap();
    assert!(
        seconds_away(&countdown),
        "the server's countdown: {countdown}"
    );
    assert!(text_of(&browser, "ticket").await.is_some(), "{text}");
    browser.screenshot("countdown-nojs.png").await;
    // Only the meta refresh moves it on.
    let titles = lands_on(&proxy, &browser, WANTED, Duration::from_secs(40)).await;
    assert_eq!(
        titles.first().map(String::as_str),
        Some("You're registered"),
        "{titles:?}"
    );
    browser.close().await;
}
