//! Redis restarts empty (no persistence) in the middle of a sale: a visitor holding a valid
//! admission still places the order — once. The consumed marker written by that order is the
//! guard against a replay of the kept cookie.

mod common;

use std::time::Duration;

use common::redis::RedisServer;
use common::shop::Shop;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_orders_once_after_redis_lost_its_data() {
    let mut redis = RedisServer::start();
    let shop = Shop::start().await;
    let cfg = format!(
        r#"{base}
[store]
backend = "redis"
redis-url = "{url}"
timeout = "500ms"

[[room]]
name = "sale"
paths = ["/products", "/orders"]
consume = ["POST /orders"]
admit-per-second = 100
max-active = 10
"#,
        base = base_config(shop.addr),
        url = redis.url()
    );
    let proxy = Proxy::start(&cfg);
    let mut jar = Jar::default();
    let resp = client()
        .get(proxy.url("/.anteroom/status?room=sale"))
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    assert!(jar.get("anteroom_sale").is_some());

    redis.kill();
    redis.restart();

    // The store is back, empty. The first calls may meet the old connection; the visitor
    // retries on a 503 as the page tells them to.
    let kept = jar.clone();
    let code = eventually(Duration::from_secs(10), "the order placed", || {
        let (url, cookie) = (proxy.url("/orders"), jar.header());
        async move {
            let resp = client()
                .post(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            match resp.status().as_u16() {
                503 => None,
                code => Some(code),
            }
        }
    })
    .await;
    assert_eq!(code, 200, "a valid admission orders after the data loss");
    let replay = eventually(Duration::from_secs(5), "the replay answered", || {
        let (url, cookie) = (proxy.url("/orders"), kept.header());
        async move {
            let resp = client()
                .post(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            (resp.status() != 503).then(|| resp.status().as_u16())
        }
    })
    .await;
    assert_eq!(replay, 409, "and only once");
    assert_eq!(shop.placed(), 1);
}
