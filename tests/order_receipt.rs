//! An order's receipt (`order-receipt`), black-box against the real proxy and a real origin:
//! the answer that uses an admission up carries a receipt, with which the visitor's `GET` and
//! `HEAD` requests in the room reach the shop (the confirmation page at `/orders/123`) and
//! nothing else does — no order, no method override, no tampered or expired receipt. A failed
//! or revoked order gets none, and a room without the setting gives none.

mod common;

use std::time::Duration;

use common::commands::*;
use common::*;

const RECEIPT: &str = "anteroom_r.sale";

fn receipt_of(resp: &reqwest::Response) -> Option<(String, String)> {
    set_cookies(resp)
        .into_iter()
        .find(|(k, v, _)| k == RECEIPT && !v.is_empty())
        .map(|(_, v, attrs)| (v, attrs))
}

/// A visitor let in who orders (`POST path`): the order's answer and their jar after it. The
/// room (`max-active = 1`) is then taken by someone else when the order freed it, so that a
/// request without an admission waits rather than being let in at once.
async fn ordered(proxy: &Proxy, path: &str) -> (reqwest::Response, Jar) {
    let mut jar = admitted(proxy).await;
    let resp = send(proxy, "POST", path, &jar).await;
    jar.absorb(&resp);
    if jar.get("anteroom_sale").is_none() {
        fill(proxy).await;
    }
    (resp, jar)
}

/// Someone takes the room's one slot: at once, or at a tick once the order that held it is
/// confirmed in the store (in the background, which may take a moment).
async fn fill(proxy: &Proxy) {
    let jar = tokio::sync::Mutex::new(Jar::default());
    eventually(Duration::from_secs(10), "the room taken", || async {
        let mut jar = jar.lock().await;
        let s = get_json(proxy, "/.anteroom/status?room=sale", &mut jar).await?;
        (s["state"] == "admitted").then_some(())
    })
    .await;
}

async fn requests_counted(proxy: &Proxy, outcome: &str) -> u64 {
    metrics_text(proxy, TOKEN)
        .await
        .lines()
        .filter(|l| l.starts_with("anteroom_requests_total") && l.contains("room=\"sale\""))
        .filter(|l| l.contains(&format!("outcome=\"{outcome}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_opens_the_pages_after_an_order_and_orders_nothing() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", "order-receipt = \"1m\""));
    let (order, mut a) = ordered(&proxy, "/orders").await;
    assert_eq!(order.status(), 200);
    assert!(cleared(&order), "the order's answer clears the admission");
    let (value, attrs) = receipt_of(&order).expect("a receipt with the order's answer");
    let max_age: u64 = attrs
        .split("Max-Age=")
        .nth(1)
        .and_then(|s| s.split(';').next()?.trim().parse().ok())
        .expect("a Max-Age");
    assert!((1..=60).contains(&max_age), "{attrs}");
    assert!(
        attrs.contains("HttpOnly") && attrs.contains("SameSite=Lax"),
        "{attrs}"
    );
    assert!(a.get("anteroom_sale").is_none(), "no admission left");

    // The confirmation page inside the room's paths reaches the shop, without our cookies.
    assert!(reaches_origin(&proxy, "/orders/123", &a).await);
    let seen = origin.requests();
    let page = seen.iter().rev().find(|s| s.uri == "/orders/123").unwrap();
    let cookies: Vec<String> = page
        .headers
        .iter()
        .filter(|(k, _)| k == "cookie")
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert!(
        cookies.iter().all(|c| !c.contains("anteroom_")),
        "{cookies:?}"
    );
    let head = send(&proxy, "HEAD", "/orders/123", &a).await;
    assert_eq!(head.headers().get("x-origin").unwrap(), "yes");
    // Counted as the request ends, which may be just after its answer is read.
    eventually(Duration::from_secs(5), "two reads counted", || async {
        (requests_counted(&proxy, "receipt").await >= 2).then_some(())
    })
    .await;
    let room = admin_json(&proxy, "/rooms/sale", TOKEN).await.unwrap();
    assert_eq!(room["config"]["order_receipt_seconds"], 60, "{room}");

    // The room is someone else's now; the receipt orders nothing, however it is spelled.
    let again = send(&proxy, "POST", "/orders", &a).await;
    assert!(!again.text().await.unwrap().starts_with("origin "));
    assert_eq!(
        origin
            .requests()
            .iter()
            .filter(|s| s.method == "POST")
            .count(),
        1,
        "one admission, one order"
    );
    let overridden = client()
        .get(proxy.url("/orders/123"))
        .header("cookie", a.header())
        .header("x-http-method-override", "POST")
        .send()
        .await
        .unwrap();
    assert!(!overridden.text().await.unwrap().starts_with("origin "));
    // Nor anything but a read: a receipt is for looking at the order, not for changing things.
    for method in ["PUT", "DELETE", "PATCH"] {
        let other = send(&proxy, method, "/products/1", &a).await;
        assert!(
            !other.text().await.unwrap().starts_with("origin "),
            "{method}"
        );
    }

    // A receipt changed in any byte, or of another room, opens nothing.
    let mut forged = a.clone();
    let mut bytes = value.clone().into_bytes();
    let i = bytes.len() - 3;
    bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
    forged.set(RECEIPT, &String::from_utf8(bytes).unwrap());
    assert!(!reaches_origin(&proxy, "/orders/123", &forged).await);
    let mut moved = Jar::default();
    moved.set("anteroom_r.other", &value);
    assert!(!reaches_origin(&proxy, "/orders/123", &moved).await);
    // Nor does an admission's cookie slot: the receipt is no admission.
    let mut as_admission = Jar::default();
    as_admission.set("anteroom_sale", &value);
    assert!(!reaches_origin(&proxy, "/orders/123", &as_admission).await);
    a.set(RECEIPT, &value);
    assert!(reaches_origin(&proxy, "/orders/124", &a).await);
    // Nor a protocol switch, which would outlive it (found by review).
    let upgrade = client()
        .get(proxy.url("/orders/123"))
        .header("cookie", a.header())
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .send()
        .await
        .unwrap();
    assert!(!upgrade.text().await.unwrap().starts_with("origin "));
}

/// A visitor let in by the order itself (the room had a free slot) gets the receipt too (found
/// by review: the admission granted in that request was taken to end at once, and the receipt,
/// which lives no longer, was never given).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_let_in_on_the_order_gets_a_receipt() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", "order-receipt = \"1m\""));
    let mut jar = Jar::default();
    let order = send(&proxy, "POST", "/orders", &jar).await;
    jar.absorb(&order);
    assert!(receipt_of(&order).is_some(), "{:?}", set_cookies(&order));
    assert!(order
        .text()
        .await
        .unwrap()
        .starts_with("origin POST /orders"));
    fill(&proxy).await;
    assert!(reaches_origin(&proxy, "/orders/123", &jar).await);
}

/// The shop may end a receipt with `revoke` on a page the receipt opened (found by review: the
/// command was counted `unadmitted` and the receipt kept working).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_on_a_page_the_receipt_opened_ends_it() {
    let origin = Origin::start().await;
    let extra = format!("{ON}\norder-receipt = \"1m\"");
    let proxy = Proxy::start(&config(origin.addr, "", &extra));
    let (order, a) = ordered(&proxy, "/orders").await;
    assert!(receipt_of(&order).is_some());
    assert!(reaches_origin(&proxy, "/orders/123", &a).await);
    assert!(reaches_origin(&proxy, "/orders/123/command-revoke", &a).await);
    assert!(!reaches_origin(&proxy, "/orders/123", &a).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_runs_out() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", "order-receipt = \"1s\""));
    let (order, a) = ordered(&proxy, "/orders").await;
    assert!(receipt_of(&order).is_some());
    // Kept past its life (a browser drops it at its Max-Age; a script need not).
    eventually(Duration::from_secs(10), "the receipt refused", || {
        let (proxy, a) = (&proxy, &a);
        async move { (!reaches_origin(proxy, "/orders/123", a).await).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_receipt_without_the_setting_or_for_an_order_given_back_or_revoked() {
    let origin = Origin::start().await;
    let off = Proxy::start(&config(origin.addr, "", ""));
    let (order, a) = ordered(&off, "/orders").await;
    assert_eq!(order.status(), 200);
    assert!(receipt_of(&order).is_none(), "off by default");
    assert!(!reaches_origin(&off, "/orders/123", &a).await);
    drop(off);

    let extra = format!("{ON}\norder-receipt = \"1m\"");
    let proxy = Proxy::start(&config(origin.addr, "", &extra));
    // The shop failed the order: the admission is given back, and no receipt comes.
    let (failed, a) = ordered(&proxy, "/orders/fail").await;
    assert_eq!(failed.status(), 503);
    assert!(receipt_of(&failed).is_none());
    assert!(a.get("anteroom_sale").is_some(), "the admission kept");
    // The shop revoked the session with the order: no receipt either.
    let revoked = send(&proxy, "POST", "/orders/command-revoke", &a).await;
    assert_eq!(revoked.status(), 200);
    assert!(
        receipt_of(&revoked).is_none(),
        "{:?}",
        set_cookies(&revoked)
    );
    // The shop says the business is done with the order: the receipt comes with it.
    let (done, b) = ordered(&proxy, "/orders/command-complete").await;
    assert_eq!(done.status(), 200);
    assert!(receipt_of(&done).is_some(), "{:?}", set_cookies(&done));
    assert!(reaches_origin(&proxy, "/orders/123", &b).await);
}

/// A `complete` on a page a receipt opened has no admission to end: the visitor, back in line
/// under the same id, keeps their place (found by review: the command took them out of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_on_a_page_the_receipt_opened_ends_nothing() {
    let origin = Origin::start().await;
    let extra = format!("{ON}\norder-receipt = \"1m\"");
    let proxy = Proxy::start(&config(origin.addr, "", &extra));
    let (_, mut x) = ordered(&proxy, "/orders").await;
    let position = |s: serde_json::Value| (s["state"].clone(), s["position"].clone());
    let s = get_json(&proxy, "/.anteroom/status?room=sale", &mut x)
        .await
        .unwrap();
    assert_eq!(position(s), ("waiting".into(), 1.into()));
    let mut w = Jar::default();
    let s = get_json(&proxy, "/.anteroom/status?room=sale", &mut w)
        .await
        .unwrap();
    assert_eq!(position(s), ("waiting".into(), 2.into()));
    assert!(reaches_origin(&proxy, "/orders/1/command-complete", &x).await);
    let s = get_json(&proxy, "/.anteroom/status?room=sale", &mut x)
        .await
        .unwrap();
    assert_eq!(position(s), ("waiting".into(), 1.into()), "the place kept");
    // And the receipt still opens the order's pages.
    assert!(reaches_origin(&proxy, "/orders/1", &x).await);
}

/// A `revoke` on a page outside every room (a logout page) ends the receipt too, and clears it
/// (found by review: it was not read there, and went on working on every instance).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_outside_the_room_ends_the_receipt() {
    let origin = Origin::start().await;
    let extra = format!("{ON}\norder-receipt = \"1m\"");
    let proxy = Proxy::start(&config(origin.addr, "", &extra));
    let (_, x) = ordered(&proxy, "/orders").await;
    assert!(reaches_origin(&proxy, "/orders/1", &x).await);
    let out = send(&proxy, "GET", "/logout/command-revoke", &x).await;
    assert!(
        set_cookies(&out)
            .iter()
            .any(|(k, v, a)| k == RECEIPT && v.is_empty() && a.contains("Max-Age=0")),
        "{:?}",
        set_cookies(&out)
    );
    assert!(!reaches_origin(&proxy, "/orders/1", &x).await);
}
