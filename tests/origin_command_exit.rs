//! An instance stopped while it owes the store an origin command: the exit's report. Apart
//! from `origin_command_elsewhere.rs`, whose race of an order through another instance is
//! timing-sensitive: this test's paused Redis and stopping process ran beside it there.

mod common;

use std::time::Duration;

use common::commands::*;
use common::redis::RedisServer;
use common::*;

/// An instance stopped while it owes the store a command (Redis paused when the shop said
/// `revoke`) says so at its exit, as a command and not as an order: the admission stands as if
/// the shop had not ended it (found by review: it was reported as an order the store would
/// give back after its grace period, which a revocation never is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_the_store_never_heard_is_reported_as_one_at_the_exit() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let store = format!(
        "[server]\nshutdown-timeout = \"1s\"\ngrace-period = \"0s\"\n[store]\nbackend = \"redis\"\nredis-url = \"{}\"\ntimeout = \"300ms\"",
        redis.url()
    );
    let mut one = Proxy::start(&config(origin.addr, &store, ON));
    let a = admitted(&one).await;
    redis.signal(true);
    let resp = send(&one, "GET", "/products/command-revoke", &a).await;
    assert!(cleared(&resp), "the shop's answer clears the admission");
    one.signal("TERM");
    let out = tokio::task::spawn_blocking(move || {
        let code = one.wait_exit(Duration::from_secs(20));
        (code, one.stderr())
    })
    .await
    .unwrap();
    redis.signal(false);
    assert_eq!(out.0, Some(0), "{}", out.1);
    assert!(
        out.1
            .contains("stopped with origin commands (complete, revoke) the store never heard")
            && !out.1.contains("stopped with orders"),
        "{}",
        out.1
    );
}
