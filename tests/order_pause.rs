//! An order placed around a Redis pause longer than its grace period: the admission buys one
//! order, on any instance. Found by review: the grace period ran on Redis `TIME` alone, so when
//! Redis resumed the pending order was already given back, and the kept cookie ordered again —
//! through another instance before the first one's confirm landed, or on the same instance
//! while a slowly sent order was still in flight.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::raw::orders;
use common::redis::RedisServer;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Grace period: 1 + 2 + 2 + 5 = 10 s. The pause is longer.
const PAUSE: Duration = Duration::from_secs(13);

fn config(origin: SocketAddr, redis: &str) -> String {
    format!(
        r#"
[cookie]
keys = ["{KEY}"]

[[upstream]]
name = "shop"
addr = "{origin}"
connect-timeout = "1s"
read-timeout = "2s"
write-timeout = "2s"

[default]
upstream = "shop"

[store]
backend = "redis"
redis-url = "{redis}"
timeout = "200ms"
breaker-failures = 3
breaker-cooldown = "500ms"

[[room]]
name = "sale"
paths = ["/products"]
tick = "100ms"
admit-per-second = 50
max-active = 100
consume = ["POST /products/order"]
"#
    )
}

async fn admitted(proxy: &Proxy) -> Jar {
    let mut jar = Jar::default();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = client()
            .get(proxy.url("/.anteroom/status?room=sale"))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        jar.absorb(&resp);
        let v: serde_json::Value = resp.json().await.unwrap();
        if v["state"] == "admitted" {
            return jar;
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

/// Once Redis answers again, the first answer to the kept cookie that is not "try again".
async fn first_answer_after_the_pause(proxy: &Proxy, jar: &Jar) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = order(proxy, jar).await;
        if s != 503 && s != 0 {
            return s;
        }
        assert!(Instant::now() < deadline, "an answer past the breaker");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Until the visitor's order is pending in the store (asked of Redis: a second order to find
/// it out could take the admission first).
async fn pending_in_store(redis: &RedisServer, jar: &Jar) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !marker(redis, jar).is_some_and(|m| m.contains("p ")) {
        assert!(Instant::now() < deadline, "the first order pending");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn marker(redis: &RedisServer, jar: &Jar) -> Option<String> {
    let vid = jar.get("anteroom_vid")?;
    common::redis::raw(redis.port, &format!("GET {{anteroom:sale}}:consumed:{vid}"))
}

/// The order went through while Redis was paused; its confirm could not land. When Redis
/// resumes, the kept cookie is refused on the other instance too, and the confirm uses the
/// admission up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_answered_during_a_pause_is_not_bought_again_on_another_instance() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let cfg = config(origin.addr, &redis.url());
    let (first, second) = (Proxy::start(&cfg), Proxy::start(&cfg));
    let jar = admitted(&first).await;
    origin.set_delay(1500);
    let placed = {
        let (url, cookie) = (first.url("/products/order"), jar.header());
        tokio::spawn(async move {
            let r = client().post(url).header("cookie", cookie).send().await;
            r.map(|r| r.status().as_u16()).unwrap_or(0)
        })
    };
    // The consume is in the store (its marker pending) before Redis stops; the origin takes
    // 1.5 s to answer.
    pending_in_store(&redis, &jar).await;
    redis.signal(true);
    assert_eq!(placed.await.unwrap(), 200, "the order went through");
    origin.set_delay(0);
    // The length of the pause under test, not a wait for a condition.
    tokio::time::sleep(PAUSE).await;
    redis.signal(false);
    let again = first_answer_after_the_pause(&second, &jar).await;
    assert_eq!(
        again, 409,
        "the kept cookie ordered again on the other instance"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker(&redis, &jar).is_some_and(|m| m.contains("c ")) {
        assert!(Instant::now() < deadline, "the owed confirm lands");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(order(&second, &jar).await, 409);
    assert_eq!(order(&first, &jar).await, 409);
    assert_eq!(orders(&origin), 1, "one admission, one order");
}

/// An order whose body is still coming in when Redis pauses, and after it resumes: a second
/// order of the admission is refused on the instance that has the first in flight and on the
/// other one; the first then completes, and it is the only order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_in_flight_through_a_pause_keeps_its_admission() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let cfg = config(origin.addr, &redis.url());
    let (first, second) = (Proxy::start(&cfg), Proxy::start(&cfg));
    let jar = admitted(&first).await;
    let mut conn = tokio::net::TcpStream::connect(first.addr).await.unwrap();
    // A body too long to be read ahead (64 KiB and 20 bytes): the order goes on to the shop as
    // it comes, and is in flight while its last bytes trickle (a body of at most 64 KiB is read
    // whole before the admission is taken).
    let head = format!(
        "POST /products/order HTTP/1.1\r\nHost: shop.test\r\nCookie: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        jar.header(),
        64 * 1024 + 20
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&[b'x'; 64 * 1024 + 1]).await.unwrap();
    pending_in_store(&redis, &jar).await;
    // The body goes on coming, a byte a second, through the pause and after it.
    let trickle = tokio::spawn(async move {
        for _ in 0..19 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if conn.write_all(b"x").await.is_err() {
                return 0;
            }
        }
        let mut answer = Vec::new();
        let _ = conn.read_to_end(&mut answer).await;
        let text = String::from_utf8_lossy(&answer);
        text.split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    });
    redis.signal(true);
    // The length of the pause under test, not a wait for a condition.
    tokio::time::sleep(PAUSE).await;
    redis.signal(false);
    assert_eq!(
        first_answer_after_the_pause(&first, &jar).await,
        409,
        "a second order on the instance that has the first in flight"
    );
    assert_eq!(
        first_answer_after_the_pause(&second, &jar).await,
        409,
        "a second order on the other instance"
    );
    assert_eq!(trickle.await.unwrap(), 200, "the first order completes");
    assert_eq!(order(&second, &jar).await, 409);
    assert_eq!(orders(&origin), 1, "one admission, one order");
}
