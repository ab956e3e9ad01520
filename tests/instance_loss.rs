//! A proxy instance killed mid-sale (`kill -9`, one of three on one Redis) loses nothing: every
//! waiting visitor keeps their place, every admitted visitor their admission, and an order the
//! killed instance had in flight (held by the shop when the instance died) comes back after its
//! grace period, so that the retry through another instance goes through — once.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::redis::RedisServer;
use common::shop::{Answer, Shop};
use common::*;
use serde_json::Value;

fn config(shop: SocketAddr, redis: &str) -> String {
    format!(
        r#"
[cookie]
keys = ["{KEY}"]

[store]
backend = "redis"
redis-url = "{redis}"
timeout = "500ms"

[[upstream]]
name = "shop"
addr = "{shop}"
connect-timeout = "500ms"
read-timeout = "4s"
write-timeout = "500ms"

[default]
upstream = "shop"

[[room]]
name = "sale"
paths = ["/products", "/orders"]
consume = ["POST /orders"]
admit-per-second = 100
max-active = 3
session-ttl = "10m"
claim-ttl = "30s"
abandon-after = "10m"
tick = "100ms"
"#
    )
}

async fn status(proxy: &Proxy, jar: &mut Jar) -> Value {
    let mut req = client()
        .get(proxy.url("/.anteroom/status?room=sale"))
        .header("accept", "application/json");
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    let resp = req.send().await.unwrap();
    jar.absorb(&resp);
    resp.json().await.unwrap()
}

/// An order; the status and, for anteroom's own refusals, the JSON state.
async fn order(proxy: &Proxy, jar: &mut Jar) -> (u16, String) {
    let resp = client()
        .post(proxy.url("/orders"))
        .header("cookie", jar.header())
        .header("accept", "application/json")
        .body("one item")
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    let code = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    let state = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["state"].as_str().map(str::to_string))
        .unwrap_or(body);
    (code, state)
}

async fn page(proxy: &Proxy, jar: &mut Jar) -> (u16, String) {
    let resp = client()
        .get(proxy.url("/products/1"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instance_loses_no_place_no_admission_and_no_order() {
    let redis = RedisServer::start();
    let shop = Shop::start().await;
    let cfg = config(shop.addr, &redis.url());
    let mut proxies: Vec<Proxy> = (0..3).map(|_| Proxy::start(&cfg)).collect();

    // Three admitted through the instance that will die (max-active 3), six in line behind them.
    let mut admitted = Vec::new();
    for _ in 0..3 {
        let mut jar = Jar::default();
        let v = status(&proxies[0], &mut jar).await;
        assert_eq!(v["state"], "admitted", "{v}");
        assert_eq!(page(&proxies[0], &mut jar).await.0, 200);
        admitted.push(jar);
    }
    let mut line = Vec::new();
    for i in 0..6u64 {
        let mut jar = Jar::default();
        let v = status(&proxies[0], &mut jar).await;
        assert_eq!(v["state"], "waiting", "{v}");
        assert_eq!(v["position"], i + 1, "{v}");
        line.push(jar);
    }

    // The first visitor orders through it; the shop holds the order; the instance dies.
    shop.script(&[Answer::Hold]);
    let in_flight = {
        let (url, cookie) = (proxies[0].url("/orders"), admitted[0].header());
        tokio::spawn(async move { client().post(url).header("cookie", cookie).send().await })
    };
    eventually(Duration::from_secs(10), "the order at the shop", || async {
        (shop.orders() == 1).then_some(())
    })
    .await;
    proxies[0].signal("KILL");
    eventually(Duration::from_secs(5), "the instance gone", || {
        let dead = !proxies[0].alive();
        async move { dead.then_some(()) }
    })
    .await;
    assert!(
        in_flight.await.unwrap().is_err(),
        "the visitor saw the line drop"
    );
    let others = &proxies[1..];

    // Everybody carries on through the other instances.
    for (i, jar) in admitted.iter_mut().enumerate().skip(1) {
        let (code, body) = page(&others[i % 2], jar).await;
        assert_eq!((code, body.as_str()), (200, "shop page"), "admitted {i}");
    }
    for (i, jar) in line.iter_mut().enumerate() {
        let v = status(&others[i % 2], jar).await;
        assert_eq!(v["state"], "waiting", "{v}");
        assert_eq!(v["position"], i as u64 + 1, "place {i} kept: {v}");
    }

    // The order the dead instance held is pending: a retry is refused for now (a second tab
    // must not order twice), and goes through once the grace period has passed.
    let mut jar = admitted[0].clone();
    let (code, state) = order(&others[0], &mut jar).await;
    assert_eq!((code, state.as_str()), (409, "pending"));
    let mut refused = 0;
    eventually(Duration::from_secs(30), "the retry to go through", || {
        refused += 1;
        let (proxy, mut jar) = (&others[refused % 2], admitted[0].clone());
        async move {
            let (code, state) = order(proxy, &mut jar).await;
            match (code, state.as_str()) {
                (200, _) => Some(()),
                (409, "pending") => None,
                other => panic!("the retry got {other:?}"),
            }
        }
    })
    .await;
    assert_eq!(shop.placed(), 1, "one order placed");
    let (code, _) = order(&others[1], &mut admitted[0].clone()).await;
    assert_eq!(code, 409, "and only one");

    // The slot the order used frees the head of the line.
    let head = line.remove(0);
    eventually(
        Duration::from_secs(10),
        "the head of the line admitted",
        || {
            let (proxy, mut jar) = (&others[0], head.clone());
            async move { (status(proxy, &mut jar).await["state"] == "admitted").then_some(()) }
        },
    )
    .await;
    // Each instance answers from its own snapshot of the line, up to a tick old: a place is
    // exact once both have seen the head leave, and never ahead of it meanwhile.
    for (i, jar) in line.iter_mut().enumerate() {
        let want = i as u64 + 1;
        eventually(Duration::from_secs(5), "the place, exact", || {
            let (proxy, mut j) = (&others[i % 2], jar.clone());
            async move {
                let v = status(proxy, &mut j).await;
                let pos = v["position"].as_u64().unwrap_or(0);
                assert!(
                    pos >= want,
                    "visitor {i} shown {pos}, ahead of the place {want}: {v}"
                );
                (pos == want).then_some(())
            }
        })
        .await;
    }
    for p in proxies.iter_mut().skip(1) {
        assert!(p.alive());
    }
}
