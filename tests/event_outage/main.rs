//! A scheduled sale through a Redis outage (found by review): the sale opens when the store
//! says it has, not when an instance's clock says so, so a store that is away at the opening
//! lets nobody in under any policy until it has recorded the opening and lets the registrants
//! in first; and a line the closing releases is over for those in it through an outage too.
//! (A pre-queue through an outage: `events.rs`.)

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use common::redis::RedisServer;
use common::*;
use serde_json::Value;

mod after_opening;
mod kept;

const TOKEN: &str = "admin-token-for-tests-0123456789";

const STATUS: &str = "/.anteroom/status?room=sale";

/// An RFC 3339 time `secs` from now (negative: ago).
fn at(secs: i64) -> String {
    utc_in(secs)
}

fn config(origin: std::net::SocketAddr, redis: &RedisServer, room: &str, event: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[draw]
secret = "draw-secret-for-the-tests-0123456789abcdef"

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
claim-ttl = "60s"
{room}

{event}
"#,
        base = base_config(origin),
        redis = redis.url()
    )
}

/// A request for a room page: the origin's answer, or the state the room answered with.
async fn visit(proxy: &Proxy, jar: &mut Jar) -> String {
    let mut req = client()
        .get(proxy.url("/products/1"))
        .header("accept", "application/json");
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    let resp = req.send().await.unwrap();
    jar.absorb(&resp);
    let text = resp.text().await.unwrap_or_default();
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["state"].as_str().map(String::from))
        .unwrap_or(text)
}

/// Waits until the instance's admission loop has told the store of the room's event.
async fn ticked(redis: &RedisServer, field: &str) {
    eventually(Duration::from_secs(10), field, || async {
        common::redis::raw(
            redis.port,
            &format!("HEXISTS {{anteroom:sale}}:room {field}"),
        )
        .filter(|r| r.starts_with(":1"))
    })
    .await;
}

/// Redis paused across a drawn opening: by this instance's clock the sale is open, but the
/// store has not recorded it, so nobody is let in, whatever `on-store-error` says. Before,
/// the default `local` admitted newcomers on the instance's own rate, ahead of every
/// registrant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opening_the_store_has_not_recorded_lets_nobody_in() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let event = format!(
        "[[room.event]]\nname = \"drop\"\nprequeue-from = \"{}\"\nopens-at = \"{}\"\ndraw = true\n",
        at(-1),
        at(4)
    );
    let room = "admit-per-second = 100\nmax-active = 100\non-store-error = \"local\"";
    let proxy = Proxy::start(&config(origin.addr, &redis, room, &event));
    let mut registrant = Jar::default();
    let s = get_json(&proxy, STATUS, &mut registrant).await.unwrap();
    assert_eq!(s["state"], "prequeue", "{s}");
    ticked(&redis, "in_pre").await;
    redis.signal(true);
    // Past the opening by the instance's clock, with the breaker open: held.
    eventually(Duration::from_secs(15), "the opening, held", || {
        let proxy = &proxy;
        async move {
            let state = visit(proxy, &mut Jar::default()).await;
            assert!(!state.starts_with("origin"), "let in at the opening");
            (state == "paused").then_some(())
        }
    })
    .await;
    for _ in 0..5 {
        let state = visit(&proxy, &mut Jar::default()).await;
        assert_eq!(
            state, "paused",
            "a newcomer at an opening the store has not seen"
        );
        let state = visit(&proxy, &mut registrant).await;
        assert_eq!(state, "paused", "the registrant too");
    }
    assert!(origin.requests().is_empty(), "{:?}", origin.requests());
    // The store back: it records the opening and lets the registrant in.
    redis.signal(false);
    eventually(Duration::from_secs(15), "the registrant let in", || {
        let (proxy, mut jar) = (&proxy, registrant.clone());
        async move {
            visit(proxy, &mut jar)
                .await
                .starts_with("origin")
                .then_some(())
        }
    })
    .await;
}

/// A line the closing releases (`after-close = "release"`) is over for those in it when the
/// store is down at the closing too: under `open`, a visitor in line is told the sale ended,
/// not let through. Before, a queue ticket made the request fall through to the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_line_is_over_through_an_outage() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let event = format!(
        "[[room.event]]\nname = \"short\"\nprequeue-from = \"{}\"\nopens-at = \"{}\"\ncloses-at = \"{}\"\nafter-close = \"release\"\n",
        at(-2),
        at(-1),
        at(5)
    );
    let room = "admit-per-second = 0.1\nmax-active = 100\non-store-error = \"open\"";
    let proxy = Proxy::start(&config(origin.addr, &redis, room, &event));
    ticked(&redis, "opened").await;
    let mut jars = vec![Jar::default(); 4];
    for jar in jars.iter_mut() {
        visit(&proxy, jar).await;
    }
    let mut waiter = jars.pop().unwrap();
    assert_eq!(visit(&proxy, &mut waiter).await, "waiting");
    redis.kill();
    // The closing, while the store is down: a newcomer is told it ended (before it, `open`
    // lets newcomers through).
    eventually(Duration::from_secs(20), "the closing", || {
        let proxy = &proxy;
        async move { (visit(proxy, &mut Jar::default()).await == "ended").then_some(()) }
    })
    .await;
    let reached = origin.requests().len();
    for _ in 0..3 {
        let state = visit(&proxy, &mut waiter).await;
        assert_eq!(state, "ended", "a visitor of a released line");
    }
    assert_eq!(origin.requests().len(), reached);
}

/// An instance started while Redis is away (a restart, an upgrade) has never heard the store
/// record the opening either: it holds at it too, whatever the policy. Before (re-review),
/// under `open` it let everyone in at an opening the store had not recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_during_the_outage_holds_the_opening_too() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let event = format!(
        "[[room.event]]\nname = \"drop\"\nprequeue-from = \"{}\"\nopens-at = \"{}\"\ndraw = true\n",
        at(-1),
        at(4)
    );
    let room = "admit-per-second = 100\nmax-active = 100\non-store-error = \"open\"";
    let conf = config(origin.addr, &redis, room, &event);
    let first = Proxy::start(&conf);
    let s = get_json(&first, STATUS, &mut Jar::default()).await.unwrap();
    assert_eq!(s["state"], "prequeue", "{s}");
    ticked(&redis, "in_pre").await;
    redis.signal(true);
    let late = Proxy::start(&conf);
    eventually(Duration::from_secs(15), "the opening, held", || {
        let late = &late;
        async move {
            let state = visit(late, &mut Jar::default()).await;
            assert!(!state.starts_with("origin"), "let in at the opening");
            (state == "paused").then_some(())
        }
    })
    .await;
    for _ in 0..3 {
        assert_eq!(visit(&late, &mut Jar::default()).await, "paused");
    }
    assert!(origin.requests().is_empty(), "{:?}", origin.requests());
    redis.signal(false);
}

/// A closing postponed at run time holds on an instance that started while Redis was away and
/// so knows only the file's: it does not tell a line the store still holds that the sale ended
/// (re-review: it did, and the ended page does not poll again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closing_moved_at_run_time_ends_nobody_on_an_instance_that_never_heard_of_it() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let event = format!(
        "[[room.event]]\nname = \"short\"\nprequeue-from = \"{}\"\nopens-at = \"{}\"\ncloses-at = \"{}\"\nafter-close = \"release\"\n",
        at(-2),
        at(-1),
        at(5)
    );
    let closing = std::time::Instant::now() + Duration::from_secs(5);
    let room = "admit-per-second = 0.1\nmax-active = 100\non-store-error = \"local\"";
    let conf = config(origin.addr, &redis, room, &event);
    let first = Proxy::start(&conf);
    ticked(&redis, "opened").await;
    let mut jars = vec![Jar::default(); 3];
    for jar in jars.iter_mut() {
        visit(&first, jar).await;
    }
    let mut waiter = jars.pop().unwrap();
    assert_eq!(visit(&first, &mut waiter).await, "waiting");
    let (code, body) = admin_call(
        &first,
        reqwest::Method::PATCH,
        "/rooms/sale/events/short",
        Some(TOKEN),
        Some(serde_json::json!({ "closes_at": at(900) })),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    redis.signal(true);
    let late = Proxy::start(&conf);
    // Past the file's closing: held on the instance that knows only the file.
    eventually(Duration::from_secs(20), "the file's closing", || {
        let late = &late;
        async move {
            let past = std::time::Instant::now() > closing + Duration::from_secs(1);
            let s = get_json(late, STATUS, &mut Jar::default()).await?;
            assert_ne!(s["state"], "ended", "{s}");
            past.then_some(())
        }
    })
    .await;
    for _ in 0..3 {
        let state = visit(&late, &mut waiter).await;
        assert_eq!(state, "paused", "a visitor the store still holds in line");
    }
    redis.signal(false);
}

/// A pre-queue without a draw shows each registrant their place, also while the store is down
/// under a policy that lets people in elsewhere: nobody is let in during a pre-queue, so the
/// policy has nothing to decide, and the countdown is the ticket's (re-review: the place went
/// blank once the breaker opened under `local`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registrant_keeps_seeing_their_place_through_an_outage() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let event = format!(
        "[[room.event]]\nname = \"drop\"\nprequeue-from = \"{}\"\nopens-at = \"{}\"\n",
        at(-1),
        at(120)
    );
    let room = "admit-per-second = 100\nmax-active = 100\non-store-error = \"local\"";
    let proxy = Proxy::start(&config(origin.addr, &redis, room, &event));
    let mut jars = vec![Jar::default(); 3];
    for jar in jars.iter_mut() {
        let s = get_json(&proxy, STATUS, jar).await.unwrap();
        assert_eq!(s["state"], "prequeue", "{s}");
    }
    ticked(&redis, "in_pre").await;
    // A tick that counted the three (the one that recorded the pre-queue may have come before
    // them): the snapshot the outage leaves the instance with holds them. Twice under load the
    // outage began with only an earlier snapshot, which holds no registrant's place.
    eventually(
        Duration::from_secs(10),
        "a tick that counted them",
        || async {
            let v = admin_json(&proxy, "/rooms/sale", TOKEN).await?;
            (v["waiting"].as_u64()? >= 3).then_some(())
        },
    )
    .await;
    // The store's count comes from a call of its own: two more of the instance's ticks after
    // it, and its own snapshot holds them (a CI run under load began the outage between).
    let c = ::redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // When the instance last ticked (its score in the room's instances, the store's µs).
    let ticked_at = || {
        let mut c = c.clone();
        async move {
            let scores: Vec<(String, f64)> = ::redis::cmd("ZRANGE")
                .arg("{anteroom:sale}:instances")
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(&mut c)
                .await
                .ok()?;
            scores.into_iter().map(|(_, s)| s).reduce(f64::max)
        }
    };
    let mut last = eventually(Duration::from_secs(10), "a tick", &ticked_at).await;
    for _ in 0..2 {
        last = eventually(Duration::from_secs(10), "a later tick", || async {
            ticked_at().await.filter(|t| *t > last)
        })
        .await;
    }
    let before = get_json(&proxy, STATUS, &mut jars[2]).await.unwrap();
    assert_eq!(before["position"], 3, "{before}");
    redis.signal(true);
    eventually(Duration::from_secs(10), "the breaker to open", || async {
        let r = client().get(proxy.admin_url("/readyz")).send().await.ok()?;
        (r.status() != 200).then_some(())
    })
    .await;
    for _ in 0..3 {
        let s = get_json(&proxy, STATUS, &mut jars[2]).await.unwrap();
        assert_eq!(
            (&s["state"], &s["position"]),
            (&"prequeue".into(), &3.into()),
            "{s}"
        );
    }
    redis.signal(false);
}
