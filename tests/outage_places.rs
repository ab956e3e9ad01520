//! Visitors in line while Redis is away, under `on-store-error = "closed"`: each is shown the
//! place their queue ticket last told, on hold, held by the store, with no ETA — the head of the
//! line as well as those behind it (found by review: the first in line, whom the line's
//! snapshot sends to the store, was told "on hold" with no place, and those behind were told
//! "waiting" with an ETA that did not move).

mod common;

use std::time::Duration;

use common::redis::RedisServer;
use common::*;
use serde_json::Value;

async fn status(proxy: &Proxy, jar: &mut Jar) -> Value {
    get_json(proxy, "/.anteroom/status?room=sale", jar)
        .await
        .expect("a status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_visitor_in_line_keeps_their_place_on_hold_while_the_store_is_away() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[store]
backend = "redis"
redis-url = "{url}"
timeout = "200ms"
breaker-failures = 3
breaker-cooldown = "1s"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 50
max-active = 1
tick = "100ms"
on-store-error = "closed"
"#,
        base = base_config(origin.addr),
        url = redis.url()
    ));
    let resp = client().get(proxy.url("/products")).send().await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "origin GET /products");
    let mut jars = vec![Jar::default(); 4];
    for (i, jar) in jars.iter_mut().enumerate() {
        let s = status(&proxy, jar).await;
        assert_eq!(
            (&s["state"], &s["position"]),
            (&Value::from("waiting"), &Value::from(i + 1)),
            "{s}"
        );
    }
    redis.signal(true);
    eventually(Duration::from_secs(10), "the store seen away", || async {
        let r = client().get(proxy.admin_url("/readyz")).send().await.ok()?;
        (r.status() != 200).then_some(())
    })
    .await;
    for _ in 0..3 {
        for (i, jar) in jars.iter_mut().enumerate() {
            let s = status(&proxy, jar).await;
            assert_eq!(
                (&s["state"], &s["position"], &s["held_by"]),
                (
                    &Value::from("paused"),
                    &Value::from(i + 1),
                    &Value::from("store")
                ),
                "visitor {}: {s}",
                i + 1
            );
            assert!(s["eta_seconds"].is_null(), "{s}");
        }
    }
    // The admin view says what the visitors are told (found by review: `rate`).
    let v = admin_json(&proxy, "/rooms/sale", TOKEN)
        .await
        .expect("the room");
    assert_eq!(
        (&v["stale"], &v["held_by"]),
        (&Value::from(true), &Value::from("store")),
        "{v}"
    );
    redis.signal(false);
}

const TOKEN: &str = "admin-token-for-tests-0123456789";
