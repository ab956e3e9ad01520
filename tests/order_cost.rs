//! What an order costs in Redis calls: two (consume, then the settle of the origin's answer),
//! whether the order goes through or fails and gives the admission back.

mod common;

use std::time::{Duration, Instant};

use common::redis::RedisServer;
use common::shop::{Answer, Shop};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_costs_two_store_calls() {
    let redis = RedisServer::start();
    let shop = Shop::start().await;
    // A long tick keeps the admission loop out of the counts.
    let cfg = format!(
        r#"{base}
[store]
backend = "redis"
redis-url = "{url}"

[[room]]
name = "sale"
paths = ["/products", "/orders"]
consume = ["POST /orders"]
admit-per-second = 100
max-active = 10
tick = "10s"
"#,
        base = base_config(shop.addr),
        url = redis.url()
    );
    let proxy = Proxy::start(&cfg);
    let mut conn = ::redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let admitted = || async {
        let mut jar = Jar::default();
        let resp = client()
            .get(proxy.url("/.anteroom/status?room=sale"))
            .send()
            .await
            .unwrap();
        jar.absorb(&resp);
        jar
    };
    // A first order loads the scripts (EVALSHA, NOSCRIPT, EVAL: calls that are not the order's).
    let warm = admitted().await;
    let resp = client()
        .post(proxy.url("/orders"))
        .header("cookie", warm.header())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let jar = admitted().await;
    let marker = format!(
        "{{anteroom:sale}}:consumed:{}",
        warm.get("anteroom_vid").unwrap()
    );
    eventually(Duration::from_secs(5), "the warm-up confirmed", || {
        let (mut c, key) = (conn.clone(), marker.clone());
        async move {
            let v: Option<String> = ::redis::cmd("GET")
                .arg(key)
                .query_async(&mut c)
                .await
                .unwrap();
            v.is_some_and(|v| v.starts_with("c ")).then_some(())
        }
    })
    .await;
    shop.script(&[Answer::Status(500)]);
    for expected in [500, 200] {
        // Counted from a moment when nothing else calls the store: the instance's calls as it
        // starts (its first admission tick among them) came into the count of a loaded CI run
        // (4 calls for the order answered 500).
        let mut last = (common::redis::script_calls(&mut conn).await, Instant::now());
        let deadline = Instant::now() + Duration::from_secs(15);
        let before = loop {
            assert!(Instant::now() < deadline, "store calls did not stop");
            tokio::time::sleep(Duration::from_millis(50)).await;
            let n = common::redis::script_calls(&mut conn).await;
            if n != last.0 {
                last = (n, Instant::now());
            } else if last.1.elapsed() >= Duration::from_millis(500) {
                break n;
            }
        };
        let resp = client()
            .post(proxy.url("/orders"))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), expected);
        // The confirm goes in the background: wait for it, then make sure nothing else came.
        let calls = eventually(Duration::from_secs(5), "the settle", || {
            let mut c = conn.clone();
            async move {
                let n = common::redis::script_calls(&mut c).await - before;
                (n >= 2).then_some(n)
            }
        })
        .await;
        println!("an order answered {expected}: {calls} store calls");
        assert_eq!(calls, 2, "consume + settle (answered {expected})");
    }
}
