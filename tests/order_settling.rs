//! A visitor who asks while their order is in flight — a page or a status poll just after the
//! order's answer cleared the cookie, before its confirm landed — is given no admission of the
//! session that confirm ends (found by review r102b: the poll answered `admitted` with a new
//! cookie of the ordering session, the confirm then ended it, and every order on that cookie
//! was refused as used for a whole `session-ttl`, while its holder could not rejoin the line).
//! Once the order is settled, they come in anew and order again. On memory and on Redis.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::redis::RedisServer;
use common::*;

fn config(origin: SocketAddr, store: &str) -> String {
    format!(
        r#"{base}
{store}

[[room]]
name = "sale"
paths = ["/products"]
tick = "100ms"
admit-per-second = 50
max-active = 100
consume = ["POST /products/order"]
"#,
        base = base_config(origin)
    )
}

async fn status(proxy: &Proxy, jar: &mut Jar) -> serde_json::Value {
    let resp = client()
        .get(proxy.url("/.anteroom/status?room=sale"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    resp.json().await.unwrap()
}

async fn admitted(proxy: &Proxy, jar: &mut Jar) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = status(proxy, jar).await;
        if v["state"] == "admitted" {
            return;
        }
        assert!(Instant::now() < deadline, "admitted within 10 s: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn order(proxy: &Proxy, jar: &Jar) -> u16 {
    client()
        .post(proxy.url("/products/order"))
        .header("cookie", jar.header())
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

async fn asked_while_the_order_is_in_flight(store: &str) {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, store));
    let jar = admitted_at_once(&proxy, "sale").await;
    let vid = jar.get("anteroom_vid").expect("a visitor id").to_string();
    let before = origin.arrived();
    origin.set_delay(1500);
    let placed = {
        let (url, cookie) = (proxy.url("/products/order"), jar.header());
        tokio::spawn(async move {
            let r = client().post(url).header("cookie", cookie).send().await;
            r.map(|r| r.status().as_u16()).unwrap_or(0)
        })
    };
    // The order has reached the shop (its consume won); the shop takes 1.5 s to answer.
    let deadline = Instant::now() + Duration::from_secs(5);
    while origin.arrived() == before {
        assert!(Instant::now() < deadline, "the order at the shop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The visitor's other tab, or the page after the order's answer: the visitor id only.
    let mut asking = Jar::default();
    asking.set("anteroom_vid", &vid);
    let v = status(&proxy, &mut asking).await;
    assert_ne!(
        v["state"], "admitted",
        "asked while the order is in flight: {v}"
    );
    assert!(
        asking.get("anteroom_sale").is_none_or(str::is_empty),
        "no admission cookie given while the order is in flight"
    );
    assert_eq!(placed.await.unwrap(), 200, "the order went through");
    origin.set_delay(0);
    // Settled (the confirm lands in the background): the visitor comes in anew, and orders.
    admitted(&proxy, &mut asking).await;
    assert_eq!(
        order(&proxy, &asking).await,
        200,
        "the second order, on the new admission"
    );
    assert_eq!(
        origin.count("/products/order"),
        2,
        "two orders, two admissions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asked_while_the_order_is_in_flight_on_memory() {
    asked_while_the_order_is_in_flight("[store]\nbackend = \"memory\"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asked_while_the_order_is_in_flight_on_redis() {
    let redis = RedisServer::start();
    let store = format!(
        "[store]\nbackend = \"redis\"\nredis-url = \"{}\"",
        redis.url()
    );
    asked_while_the_order_is_in_flight(&store).await;
}

/// A used admission's cookie left in the browser (a renewal from another tab that landed after
/// the order's answer cleared it) is cleared by the `409` that refuses its order, so its
/// holder can join the line again as the page says: kept, it went on verifying, and they could
/// not until it ran out.
async fn a_used_cookie_is_cleared_by_its_refusal(store: &str) {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, store));
    let jar = admitted_at_once(&proxy, "sale").await;
    let mut other_tab = jar.clone();
    assert_eq!(order(&proxy, &jar).await, 200, "the order");
    // Until the order's confirm has landed (it is sent in the background), the copy is told
    // the admission may have an order on its way (`409`, try again), as any copy is.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = client()
            .post(proxy.url("/products/order"))
            .header("cookie", other_tab.header())
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status().as_u16(),
            409,
            "the used cookie orders nothing"
        );
        other_tab.absorb(&resp);
        if other_tab.get("anteroom_sale").is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "cleared by the refusal once used"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The line again (nobody waits: in at once), and a new order.
    admitted(&proxy, &mut other_tab).await;
    assert_eq!(
        order(&proxy, &other_tab).await,
        200,
        "an order on the new admission"
    );
    assert_eq!(origin.count("/products/order"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_cookie_is_cleared_by_its_refusal_on_memory() {
    a_used_cookie_is_cleared_by_its_refusal("[store]\nbackend = \"memory\"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_cookie_is_cleared_by_its_refusal_on_redis() {
    let redis = RedisServer::start();
    let store = format!(
        "[store]\nbackend = \"redis\"\nredis-url = \"{}\"",
        redis.url()
    );
    a_used_cookie_is_cleared_by_its_refusal(&store).await;
}
