//! The operator's dashboard (`GET /` of the admin listener) in headless Chromium: sign in with
//! a token, watch the figures move while a crowd joins, pause the room through a confirmation
//! and see it take effect, read-only tokens refused a change, at desktop and phone width, with
//! no console error. Screenshots land in `target/screenshots/`.

mod common;

use std::time::Duration;

use common::browser::{Browser, Driver};
use common::*;
use serde_json::Value;

const OPERATE: &str = "dashboard-operate-token-0123456789";
const READ: &str = "dashboard-read-token-0123456789";

fn config(origin: std::net::SocketAddr) -> String {
    format!(
        r#"{base}
[admin]
tokens = [
  {{ label = "oncall", value = "{OPERATE}", role = "operate" }},
  {{ label = "wallboard", value = "{READ}", role = "read" }},
]

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 1
max-active = 1
claim-ttl = "30s"
tick = "100ms"
"#,
        base = base_config(origin)
    )
}

/// `n` new visitors join the line (each without a cookie: a new identity).
async fn join(proxy: &Proxy, n: usize) {
    for _ in 0..n {
        let resp = client()
            .get(proxy.url("/.anteroom/status?room=sale"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
}

/// The text of the figure labelled `label` in the room's card.
async fn figure(b: &Browser, label: &str) -> String {
    let script = format!(
        "const f = [...document.querySelectorAll('[data-room=\"sale\"] .figure')]\
           .find(f => f.querySelector('.k').textContent === {label:?});\
         return f ? f.querySelector('.v').textContent : null;"
    );
    b.run(&script).await.as_str().unwrap_or("").to_string()
}

async fn click(b: &Browser, action: &str) {
    let script = format!(
        "const e = document.querySelector('[data-room=\"sale\"] [data-action=\"{action}\"]');\
         if (!e) return false; e.click(); return true;"
    );
    assert_eq!(
        b.run(&script).await,
        Value::Bool(true),
        "no {action} button"
    );
}

async fn sign_in(b: &Browser, token: &str) {
    let script = format!(
        "document.getElementById('token').value = {token:?};\
         document.querySelector('#signin-form button').click(); return true;"
    );
    b.run(&script).await;
    eventually(Duration::from_secs(10), "the room's card", || async {
        (!figure(b, "waiting").await.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_signs_in_watches_the_line_and_pauses_it() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr));
    let driver = Driver::start().await;
    let b = driver.browser(1280, 1000, true, "en").await;

    b.goto(&proxy.admin_url("/")).await;
    let text = b.text().await;
    assert!(text.contains("Sign in with an admin token"), "{text}");
    sign_in(&b, OPERATE).await;
    // The token stays in the tab: not in the URL, not in a cookie.
    assert!(!b.url().await.contains(OPERATE));
    assert_eq!(
        b.run("return document.cookie").await,
        Value::String(String::new())
    );

    // A crowd joins: the one slot is taken, the rest wait, and the figures follow.
    join(&proxy, 1).await;
    join(&proxy, 12).await;
    eventually(
        Duration::from_secs(10),
        "the line on the dashboard",
        || async {
            let w: u64 = figure(&b, "waiting").await.parse().unwrap_or(0);
            (w >= 8).then_some(())
        },
    )
    .await;
    join(&proxy, 10).await;
    let before: u64 = figure(&b, "waiting").await.parse().unwrap_or(0);
    eventually(Duration::from_secs(10), "the line growing", || async {
        let w: u64 = figure(&b, "waiting").await.parse().unwrap_or(0);
        (w > before).then_some(())
    })
    .await;
    assert!(figure(&b, "active / max-active").await.ends_with("/ 1"));

    // Pause, through the confirmation; the store and the page agree.
    click(&b, "pause").await;
    let confirm = b.text().await;
    assert!(confirm.contains("Room sale: pause the line"), "{confirm}");
    assert_eq!(
        admin_json(&proxy, "/rooms/sale", OPERATE).await.unwrap()["queue_all"],
        false,
        "nothing happens before the confirmation"
    );
    click(&b, "confirm").await;
    let gone = b
        .run("return document.querySelector('[data-room=\"sale\"] .confirm').offsetParent === null")
        .await;
    assert_eq!(gone, Value::Bool(true), "the confirmation closes");
    eventually(Duration::from_secs(10), "the room paused", || async {
        let v = admin_json(&proxy, "/rooms/sale", OPERATE).await?;
        let page = b.text().await;
        (v["queue_all"] == true && page.contains("paused") && page.contains("Resume")).then_some(())
    })
    .await;
    // The rate and the line, the same way.
    b.run("document.querySelector('[data-room=\"sale\"] [aria-label=\"admit per second\"]').value = '5'; return true;")
        .await;
    click(&b, "rate").await;
    click(&b, "confirm").await;
    eventually(Duration::from_secs(10), "the rate set", || async {
        let v = admin_json(&proxy, "/rooms/sale", OPERATE).await?;
        (v["overrides"]["admit_per_second"] == 5.0).then_some(())
    })
    .await;
    // A rate that is not finite is refused on the page: JSON has no Infinity, and the
    // `null` it would become puts the configured rate back (found by review).
    for bad in ["Infinity", "1e400"] {
        b.run(&format!(
            "document.querySelector('[data-room=\"sale\"] [aria-label=\"admit per second\"]').value = '{bad}'; return true;"
        ))
        .await;
        click(&b, "rate").await;
        eventually(
            Duration::from_secs(5),
            "the page refuses the rate",
            || async { b.text().await.contains("give a rate above 0").then_some(()) },
        )
        .await;
        let hidden = b
            .run("return document.querySelector('[data-room=\"sale\"] .confirm').hidden")
            .await;
        assert_eq!(hidden, Value::Bool(true), "{bad}: no confirmation asked");
    }
    assert_eq!(
        admin_json(&proxy, "/rooms/sale", OPERATE).await.unwrap()["overrides"]["admit_per_second"],
        5.0
    );
    click(&b, "empty").await;
    click(&b, "confirm").await;
    eventually(Duration::from_secs(10), "the line emptied", || async {
        let v = admin_json(&proxy, "/rooms/sale", OPERATE).await?;
        (v["waiting"] == 0 && b.text().await.contains("removed)")).then_some(())
    })
    .await;
    // The history says who did it.
    let changes = admin_json(&proxy, "/rooms/sale/changes", READ)
        .await
        .unwrap();
    let fields: Vec<&str> = changes["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["changes"][0]["field"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        fields,
        ["waiting", "admit_per_second", "queue_all"],
        "{changes}"
    );
    assert_eq!(changes["changes"][0]["by"], "oncall", "{changes}");

    // The charts have points once the series has a few samples.
    eventually(Duration::from_secs(15), "points in the charts", || async {
        let n = b
            .run(
                "return [...document.querySelectorAll('[data-room=\"sale\"] polyline')]\
                    .filter(p => (p.getAttribute('points') || '').split(' ').length > 2).length",
            )
            .await;
        (n.as_u64().unwrap_or(0) >= 2).then_some(())
    })
    .await;
    b.screenshot("dashboard-desktop.png").await;
    let severe = b.severe_logs().await;
    assert!(severe.is_empty(), "console errors: {severe:?}");
    b.close().await;

    // A read token sees the same and is refused a change, said on the page.
    let phone = driver.browser(390, 844, true, "en").await;
    phone.goto(&proxy.admin_url("/")).await;
    sign_in(&phone, READ).await;
    click(&phone, "pause").await;
    click(&phone, "confirm").await;
    eventually(
        Duration::from_secs(10),
        "the refusal on the page",
        || async { phone.text().await.contains("refused (403)").then_some(()) },
    )
    .await;
    assert_eq!(
        admin_json(&proxy, "/rooms/sale", READ).await.unwrap()["queue_all"],
        true,
        "still paused"
    );
    // Phone width: nothing wider than the screen.
    let overflow = phone
        .run("return document.documentElement.scrollWidth - window.innerWidth")
        .await;
    assert!(
        overflow.as_i64().unwrap_or(1) <= 0,
        "wider than a phone by {overflow}"
    );
    phone.screenshot("dashboard-phone.png").await;
    // A 403 is an answer, not a page error: the console stays clean.
    let severe: Vec<Value> = phone
        .severe_logs()
        .await
        .into_iter()
        .filter(|e| !e["message"].as_str().unwrap_or("").contains("403"))
        .collect();
    assert!(severe.is_empty(), "console errors: {severe:?}");
    phone.close().await;
}

/// Visitors who waited and got in: the dashboard says how far their waits were from what they
/// were told, and charts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eta_error_of_admitted_visitors_is_shown() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        r#"{base}
[admin]
token = "{OPERATE}"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 10
max-active = 1000
tick = "100ms"
"#,
        base = base_config(origin.addr)
    ));
    let driver = Driver::start().await;
    let b = driver.browser(1280, 1000, true, "en").await;
    b.goto(&proxy.admin_url("/")).await;
    sign_in(&b, OPERATE).await;
    const LABEL: &str = "ETA error, median / p90 (this instance)";
    assert_eq!(figure(&b, LABEL).await, "–", "nobody admitted yet");
    let mut jars = Vec::new();
    for _ in 0..40 {
        let mut jar = Jar::default();
        get_json(&proxy, "/.anteroom/status?room=sale", &mut jar).await;
        jars.push(jar);
    }
    until_all_admitted(&proxy, "sale", &mut jars, Duration::from_secs(30)).await;
    // Everyone is in: the figure settles on the admin API's count.
    let measured = admin_json(&proxy, "/rooms/sale", OPERATE).await.unwrap()["this_instance"]
        ["eta_accuracy"]["measured"]
        .as_u64()
        .unwrap();
    assert!(measured >= 20, "{measured}");
    let shown = eventually(Duration::from_secs(10), "the ETA error", || async {
        let f = figure(&b, LABEL).await;
        f.ends_with(&format!("({measured})")).then_some(f)
    })
    .await;
    assert!(shown.contains(" % / "), "{shown}");
    eventually(Duration::from_secs(10), "the ETA error charted", || async {
        let n = b
            .run(
                "return [...document.querySelectorAll('[data-room=\"sale\"] svg[aria-label^=\"ETA\"] polyline')]\
                    .filter(p => (p.getAttribute('points') || '').split(' ').length > 1).length",
            )
            .await;
        (n.as_u64().unwrap_or(0) == 2).then_some(())
    })
    .await;
    let severe = b.severe_logs().await;
    assert!(severe.is_empty(), "console errors: {severe:?}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_self_contained_and_refuses_to_be_framed() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr));
    let resp = client().get(proxy.admin_url("/")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    let csp = h["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["cache-control"], "no-store");
    let body = resp.text().await.unwrap();
    for external in ["src=\"http", "href=\"http", "@import", "url(http", "<link"] {
        assert!(!body.contains(external), "an external asset: {external}");
    }
    // The data behind it needs a token.
    let series = client()
        .get(proxy.admin_url("/rooms/sale/series"))
        .send()
        .await
        .unwrap();
    assert_eq!(series.status(), 401);
    let v = admin_json(&proxy, "/rooms/sale/series", READ)
        .await
        .unwrap();
    assert_eq!(v["fields"][1], "waiting", "{v}");
    // Every value of a sample is named (found by review: two were not).
    let named = v["fields"].as_array().map_or(0, Vec::len);
    let sample = eventually(Duration::from_secs(10), "a sample", || async {
        let v = admin_json(&proxy, "/rooms/sale/series", READ).await?;
        v["samples"][0].as_array().map(Vec::len)
    })
    .await;
    assert_eq!(sample, named, "{v}");
}

/// A reload (SIGHUP, a certificate's renewal too) keeps the room's charts: before (found by
/// review), every reload started the 15 minutes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_charts() {
    let origin = Origin::start().await;
    // At `info`, which logs the reload.
    let proxy = Proxy::start_with(&config(origin.addr), &[("ANTEROOM_LOG", "info")], &[]);
    let samples = || async {
        admin_json(&proxy, "/rooms/sale/series", READ)
            .await
            .unwrap()["samples"]
            .as_array()
            .map_or(0, |a| a.len())
    };
    eventually(Duration::from_secs(10), "three samples", || async {
        (samples().await >= 3).then_some(())
    })
    .await;
    let before = samples().await;
    proxy.signal("HUP");
    eventually(Duration::from_secs(10), "the reload", || async {
        proxy
            .stderr()
            .contains("configuration reloaded")
            .then_some(())
    })
    .await;
    assert!(samples().await >= before, "the samples were dropped");
}

/// A room a reload removes leaves the page too (found by review: its card stayed, "on", beside
/// a fresh "updated" time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_a_reload_removes_leaves_the_page() {
    let origin = Origin::start().await;
    let flash = "\n[[room]]\nname = \"flash\"\npaths = [\"/flash\"]\nadmit-per-second = 1\n\
                 max-active = 1\n";
    let proxy = Proxy::start(&format!("{}{flash}", config(origin.addr)));
    let driver = Driver::start().await;
    let b = driver.browser(1280, 900, true, "en-US,en").await;
    b.goto(&proxy.admin_url("/")).await;
    sign_in(&b, READ).await;
    let shown = || async {
        b.run("return !!document.querySelector('[data-room=\"flash\"]')")
            .await
    };
    eventually(Duration::from_secs(10), "flash's card", || async {
        (shown().await == Value::Bool(true)).then_some(())
    })
    .await;
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    std::fs::write(proxy.config_path(), text.replace(flash, "\n")).unwrap();
    proxy.signal("HUP");
    eventually(Duration::from_secs(10), "flash's card gone", || async {
        (shown().await == Value::Bool(false)).then_some(())
    })
    .await;
    assert!(!figure(&b, "waiting").await.is_empty(), "sale's card stays");
    b.close().await;
}
