//! The `[draw] secret` over a reload (review 44): a draw's seed, commitment and list are made
//! with it, so a reload may not change it while a draw is under way — also a draw whose event
//! was cancelled and whose places the line still holds (its draw published for checking), and
//! one added through another instance a moment before the SIGHUP (the reload reads the store's
//! runtime events, not the last tick's). Before, both reloads applied, and the published draw
//! no longer checked against the commitment shown before.

mod common;

use std::time::Duration;

use common::redis::RedisServer;
use common::sale::*;
use common::*;

const OTHER_SECRET: &str = "another-draw-secret-for-the-tests-0123456789";

/// Writes the proxy's file with the other secret, sends SIGHUP, and asserts it was refused at
/// `draw.secret` for the reason `why`.
async fn secret_change_refused(proxy: &Proxy, why: &str) {
    let cfg = std::fs::read_to_string(proxy.config_path()).unwrap();
    std::fs::write(proxy.config_path(), cfg.replace(SECRET, OTHER_SECRET)).unwrap();
    let outcome = reload_outcome(proxy).await;
    let error = outcome["error"].as_str().unwrap_or_default();
    assert!(
        outcome["applied"] == false && error.contains("draw.secret") && error.contains(why),
        "the secret changed under a draw: {outcome}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_stays_while_a_cancelled_draw_orders_the_line() {
    let origin = Origin::start().await;
    // One slot and a long claim: the registrants stay in line after the cancel.
    let proxy = Proxy::start(&config(
        origin.addr,
        "",
        "admit-per-second = 10\nmax-active = 1",
        &drawn_event(120),
    ));
    let commitment = published(&proxy, "", "commitment", Duration::from_secs(10)).await;
    for _ in 0..4 {
        let s = status(&proxy, &mut Jar::default()).await;
        assert_eq!(s["state"], "prequeue", "{s}");
    }
    let (code, body) = admin_call(
        &proxy,
        reqwest::Method::DELETE,
        "/rooms/sale/events/spring-drop",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // The draw orders the line, published under its commitment.
    let seed = published(&proxy, "", "seed", Duration::from_secs(10)).await;
    secret_change_refused(&proxy, "spring-drop").await;
    let (_, doc) = event_doc(&proxy, "").await;
    assert_eq!(
        (&doc["commitment"], &doc["seed"]),
        (&commitment, &seed),
        "{doc}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_added_through_another_instance_keeps_the_secret_at_once() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    // A long tick: the instance reloaded has not heard of the event from its own ticks.
    let cfg = config(
        origin.addr,
        &redis_store(&redis, "500ms"),
        "admit-per-second = 10\nmax-active = 1\ntick = \"10s\"",
        "",
    );
    let one = Proxy::start(&cfg);
    let two = Proxy::start(&cfg);
    post_event(
        &two,
        serde_json::json!({ "name": "flash", "opens_at": at(120), "draw": true }),
    )
    .await;
    secret_change_refused(&one, "flash").await;
    // Both instances commit to one seed.
    let a = published(&one, "", "commitment", Duration::from_secs(30)).await;
    let b = published(&two, "", "commitment", Duration::from_secs(10)).await;
    assert_eq!(a, b);
}

/// Nor when the store has just lost its data: the runtime event this instance knows counts
/// until it has written it back (found by re-review: a FLUSHALL, then a SIGHUP within the
/// tick, changed the secret and the commitment of a begun pre-queue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_the_store_just_lost_keeps_the_secret() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(
        origin.addr,
        &redis_store(&redis, "500ms"),
        "admit-per-second = 10\nmax-active = 1\ntick = \"10s\"",
        "",
    ));
    post_event(
        &proxy,
        serde_json::json!({ "name": "flash", "opens_at": at(120), "draw": true }),
    )
    .await;
    let commitment = published(&proxy, "", "commitment", Duration::from_secs(10)).await;
    assert!(common::redis::raw(redis.port, "FLUSHALL").is_some_and(|r| r.starts_with("+OK")));
    secret_change_refused(&proxy, "flash").await;
    let (_, doc) = event_doc(&proxy, "").await;
    assert_eq!(doc["commitment"], commitment, "{doc}");
}
