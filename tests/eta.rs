//! ETA accuracy: every admitted visitor's wait is compared with the first wait they were told
//! (carried in their queue ticket), exported as `anteroom_eta_error`, summed up in the admin
//! API, and an estimate with no evidence behind it (the start of a sale, a rate just changed)
//! is told as a range, with a note that it is an estimate.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const TOKEN: &str = "admin-token-for-tests-0123456789";

fn config(origin: std::net::SocketAddr, rate: u32) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = {rate}
max-active = 1000
session-ttl = "10m"
tick = "100ms"
"#,
        base = base_config(origin)
    )
}

/// `name{room="sale"}` from an instance's metrics (0 when absent).
async fn metric(proxy: &Proxy, name: &str) -> f64 {
    let text = metrics_text(proxy, TOKEN).await;
    let prefix = format!("{name}{{room=\"sale\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admitted_wait_is_measured_against_the_first_one_told() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, 5));
    let pause = |on: bool| {
        admin_call(
            &proxy,
            reqwest::Method::PATCH,
            "/rooms/sale",
            Some(TOKEN),
            Some(json!({ "queue_all": on })),
        )
    };
    // A held line: 10 visitors join and are told no wait at all (nobody moves while held).
    assert_eq!(pause(true).await.0, 200);
    let mut held = Vec::new();
    for _ in 0..10 {
        let mut jar = Jar::default();
        let s = get_json(&proxy, "/.anteroom/status?room=sale", &mut jar)
            .await
            .expect("a status");
        assert_eq!(s["state"], "paused", "{s}");
        assert!(s["eta_seconds"].is_null(), "{s}");
        held.push(jar);
    }
    assert_eq!(pause(false).await.0, 200);
    // 20 more join the moving line at 5/s. Nothing has been measured yet: the estimate is a
    // range around the number, and the page says it is an estimate.
    let mut moving = Vec::new();
    let mut told = Vec::new();
    for _ in 0..20 {
        let mut jar = Jar::default();
        let s: Value = get_json(&proxy, "/.anteroom/status?room=sale", &mut jar)
            .await
            .expect("a status");
        if s["state"] == "waiting" {
            told.push(s.clone());
        }
        moving.push(jar);
    }
    let last = told.last().expect("some wait in line").clone();
    let (eta, lo, hi) = (
        last["eta_seconds"].as_u64().expect("an eta"),
        last["eta_low_seconds"].as_u64(),
        last["eta_high_seconds"].as_u64(),
    );
    assert!(eta >= 4, "{last}");
    let (lo, hi) = (lo.expect("a range"), hi.expect("a range"));
    assert!(lo < eta && eta < hi, "the range holds the estimate: {last}");
    let page = client()
        .get(proxy.url("/products"))
        .header("accept", "text/html")
        .header("cookie", moving.last().expect("a visitor").header())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // A range under a minute is worded "less than a minute", no range: the note on ranges
    // stays hidden beside it (found by review in a browser); the script shows it for a range
    // it words as one.
    assert!(hi < 60, "{last}");
    assert!(
        page.contains("id=\"eta-note\" hidden>") && page.contains("less than a minute"),
        "the note is hidden: {page}"
    );
    assert!(
        page.contains("data-eta=\"") && !page.contains("data-eta=\"null\""),
        "the script starts from the estimate: {page}"
    );
    // A ticket kept from before the admission, to replay after it.
    let kept = moving.last().cloned().expect("a visitor");
    let mut jars = held;
    jars.append(&mut moving);
    until_all_admitted(&proxy, "sale", &mut jars, Duration::from_secs(30)).await;

    // Every visitor who waited a second or more was measured: the ten who joined a held line
    // from the first wait told after it moved (their first poll told one), the others from
    // their first answer. Those told under a second (the head of the line) are not.
    let count = metric(&proxy, "anteroom_eta_error_count").await;
    let sum = metric(&proxy, "anteroom_eta_error_sum").await;
    assert!(
        (20.0..=30.0).contains(&count),
        "{count} of 30 measured (the first few were told under a second)"
    );
    let mean = sum / count;
    assert!(
        (0.5..2.0).contains(&mean),
        "at a steady 5/s the waits are about what was told: mean ratio {mean}"
    );
    let v = admin_json(&proxy, "/rooms/sale", TOKEN).await.unwrap();
    let acc = &v["this_instance"]["eta_accuracy"];
    assert_eq!(acc["measured"].as_f64(), Some(count), "{v}");
    assert!(acc["median_abs_error"].as_f64().is_some(), "{v}");
    assert!(
        acc["p90_abs_error"].as_f64() >= acc["median_abs_error"].as_f64(),
        "{v}"
    );
    // A second admission of the same visitor (their ticket is gone) measures nothing again.
    let mut again = jars.swap_remove(0);
    let s = get_json(&proxy, "/.anteroom/status?room=sale", &mut again).await;
    assert!(s.is_none_or(|s| s["state"] == "admitted"));
    assert_eq!(metric(&proxy, "anteroom_eta_error_count").await, count);
    // Nor does a ticket kept from before the admission and replayed after it, which is
    // answered `admitted` again (found by review r85c: each replay counted its wait again).
    for _ in 0..10 {
        let s = get_json(&proxy, "/.anteroom/status?room=sale", &mut kept.clone()).await;
        assert!(s.is_some_and(|s| s["state"] == "admitted"));
    }
    assert_eq!(metric(&proxy, "anteroom_eta_error_count").await, count);
}

/// A rate cut while people wait: they wait longer than they were told, and the measure shows
/// it. (That the estimates told right after a change are a range is `band`'s unit test: here
/// they would be one anyway, for want of evidence so early.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_cut_shows_in_the_error() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, 20));
    let mut jars = Vec::new();
    for _ in 0..60 {
        let mut jar = Jar::default();
        get_json(&proxy, "/.anteroom/status?room=sale", &mut jar).await;
        jars.push(jar);
    }
    // Once the line has moved a second at 20/s, the rate is cut to 5/s.
    eventually(
        Duration::from_secs(10),
        "a second of admissions",
        || async {
            let v = admin_json(&proxy, "/rooms/sale", TOKEN).await?;
            (v["admitted_total"].as_u64()? >= 20).then_some(())
        },
    )
    .await;
    let (status, body) = admin_call(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({ "admit_per_second": 5 })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    until_all_admitted(&proxy, "sale", &mut jars, Duration::from_secs(40)).await;
    let count = metric(&proxy, "anteroom_eta_error_count").await;
    assert!(count >= 30.0, "{count} measured");
    let v = admin_json(&proxy, "/rooms/sale", TOKEN).await.unwrap();
    let acc = &v["this_instance"]["eta_accuracy"];
    let median = acc["median_ratio"].as_f64().expect("a median");
    assert!(
        median > 1.3,
        "told at 20/s, admitted at 5/s: waits well over what was told ({v})"
    );
}
