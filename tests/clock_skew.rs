//! Instances whose clocks disagree, black-box on Redis: an admission cookie is written and
//! read on the store's clock, so it lives session-ttl on every instance whatever that
//! instance's own clock says (found by review: a cookie issued by an instance ahead, or read
//! by one behind, outlived the consumed marker by the difference, and the admission ordered
//! twice). Each instance's wall clock is moved by the test hook `ANTEROOM_TEST_WALL_SHIFT_SECS`.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anteroom::cookie::{self, CookieKey};
use anteroom::store::VisitorId;
use common::redis::RedisServer;
use common::*;

/// Ten minutes.
const SKEW: i64 = 600;
const TTL: u64 = 60;

const TOKEN: &str = "admin-token-for-tests-0123456789";

fn config(origin: std::net::SocketAddr, redis: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[store]
backend = "redis"
redis-url = "{redis}"
timeout = "500ms"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 50
max-active = 1
session-ttl = "{TTL}s"
tick = "100ms"
origin-commands = true

[[room]]
name = "other"
paths = ["/other"]
admit-per-second = 50
max-active = 1000
session-ttl = "{TTL}s"
tick = "100ms"

[[room]]
name = "slow"
paths = ["/slow"]
admit-per-second = 0.5
max-active = 1000
tick = "100ms"
"#,
        base = base_config(origin)
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn skewed(config: &str, by: i64) -> Proxy {
    let shift = by.to_string();
    Proxy::start_with(
        config,
        &[
            ("ANTEROOM_LOG", "warn"),
            ("ANTEROOM_TEST_WALL_SHIFT_SECS", shift.as_str()),
        ],
        &[],
    )
}

/// The expiry written in a new visitor's admission cookie for room `other` on `proxy`.
async fn issued_expiry(proxy: &Proxy) -> u64 {
    let mut jar = Jar::default();
    let resp = client().get(proxy.url("/other")).send().await.unwrap();
    jar.absorb(&resp);
    let value = jar.get("anteroom_other").expect("an admission cookie");
    value.split('.').nth(2).unwrap().parse().unwrap()
}

/// A GET of `/products` with only `cookie`: the origin's page (`true`) or the waiting flow.
async fn lets_in(proxy: &Proxy, cookie: &str) -> bool {
    let resp = client()
        .get(proxy.url("/products"))
        .header("accept", "application/json")
        .header("cookie", format!("anteroom_sale={cookie}"))
        .send()
        .await
        .unwrap();
    resp.text().await.unwrap() == "origin GET /products"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookie_lives_session_ttl_on_every_instance_whatever_its_clock() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let cfg = config(origin.addr, &redis.url());
    let ahead = skewed(&cfg, SKEW);
    let behind = skewed(&cfg, -SKEW);

    // The one slot of `sale` is taken: a visitor whose cookie is refused waits.
    let resp = client().get(ahead.url("/products")).send().await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "origin GET /products");

    // Written on the store's clock by both (once each has heard it from a tick): the expiry
    // is now + session-ttl, not ten minutes off either way.
    for proxy in [&ahead, &behind] {
        eventually(
            Duration::from_secs(10),
            "a cookie's expiry on the store's clock",
            || async move {
                let e = issued_expiry(proxy).await;
                let want = now() + TTL;
                (e.abs_diff(want) <= 5).then_some(())
            },
        )
        .await;
    }

    // Read on the store's clock: a cookie a second past its expiry lets nobody in on the
    // instance behind, and one valid for half a minute more is not refused by the one ahead.
    let key = CookieKey::new(KEY.as_bytes()).unwrap();
    let keys = std::slice::from_ref(&key);
    let vid = VisitorId::random();
    let expired = cookie::sign(keys, "sale", vid, now() - 1).unwrap();
    let valid = cookie::sign(keys, "sale", VisitorId::random(), now() + 30).unwrap();
    eventually(
        Duration::from_secs(10),
        "cookies read on the store's clock",
        || async {
            (!lets_in(&behind, &expired).await && lets_in(&ahead, &valid).await).then_some(())
        },
    )
    .await;
}

/// A revocation made before an instance whose clock is ahead started holds there too: its
/// first tick learns the store's clock before it judges which revocations have run out (found
/// by re-review: it dropped them as expired by its own clock and let the revoked cookie in
/// until it ran out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_holds_on_an_instance_started_after_it_whose_clock_is_ahead() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let cfg = config(origin.addr, &redis.url());
    let on_time = skewed(&cfg, 0);
    let mut jar = Jar::default();
    let resp = client().get(on_time.url("/products")).send().await.unwrap();
    jar.absorb(&resp);
    assert_eq!(resp.text().await.unwrap(), "origin GET /products");
    // The line held: a refused cookie shows as a wait, not as a new admission.
    let (code, body) = admin_call(
        &on_time,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(serde_json::json!({ "queue_all": true })),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let revoke = client()
        .get(on_time.url("/products/command-revoke"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), 200);
    let cookie = jar.get("anteroom_sale").unwrap().to_string();
    assert!(!lets_in(&on_time, &cookie).await, "refused where revoked");

    let ahead = skewed(&cfg, SKEW);
    // Its first ticks behind it (it writes cookies on the store's clock)...
    eventually(
        Duration::from_secs(10),
        "the store's clock learned",
        || async {
            let e = issued_expiry(&ahead).await;
            (e.abs_diff(now() + TTL) <= 5).then_some(())
        },
    )
    .await;
    // ... the revoked cookie is refused there, for good.
    for _ in 0..5 {
        assert!(
            !lets_in(&ahead, &cookie).await,
            "a revoked cookie let in by an instance started after the revocation"
        );
    }
}

/// A wait told by one instance and measured by another whose clock is ten minutes ahead is
/// measured on the store's clock, as it was told: honest (found by re-review r86b: an instance
/// two minutes ahead read honest waits as nine times what was told, and told every newcomer a
/// range up to twenty times its estimate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_is_measured_on_the_stores_clock_whatever_the_instances() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let cfg = config(origin.addr, &redis.url());
    let (on_time, ahead) = (skewed(&cfg, 0), skewed(&cfg, SKEW));
    let status = "/.anteroom/status?room=slow";
    // The first walks in (once the loop has heard from the store); the next waits its turn,
    // told two seconds or so by the instance on time.
    eventually(Duration::from_secs(10), "a walk-in", || async {
        let v = get_json(&on_time, status, &mut Jar::default()).await?;
        (v["state"] == "admitted").then_some(())
    })
    .await;
    let mut jar = Jar::default();
    let v = get_json(&on_time, status, &mut jar).await.unwrap();
    assert_eq!(v["state"], "waiting", "{v}");
    assert!(v["eta_seconds"].as_u64() >= Some(1), "{v}");
    // Its turn, learnt from the instance ahead.
    until_all_admitted(
        &ahead,
        "slow",
        std::slice::from_mut(&mut jar),
        Duration::from_secs(20),
    )
    .await;
    let label = "room=\"slow\"";
    let count = metric(&ahead, TOKEN, "anteroom_eta_error_count", label).await;
    let sum = metric(&ahead, TOKEN, "anteroom_eta_error_sum", label).await;
    assert_eq!(count, 1, "measured where it was admitted");
    assert!(sum < 5, "actual ÷ told read as {sum}");
}
