//! A Redis that comes back with older data (restarted from a snapshot taken before the last
//! writes, a replica promoted without them): the store's record of an instance's last admit
//! step is then older than one whose answer the instance received, and the room's generation
//! is made anew, so the instances re-assert the room's state as after data lost whole (found
//! by review: the generation came back with the snapshot, nothing was noticed, and an
//! operator's pause made after the snapshot was undone — the sale opened).

mod common;

use std::time::Duration;

use common::local::*;
use common::redis::{raw, RedisServer};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_made_after_the_snapshot_redis_comes_back_from_is_kept() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 100\nmax-active = 100";
    let cfg = config(origin.addr, &redis.url(), 3, room).replace("\"local\"", "\"closed\"");
    let proxy = Proxy::start(&cfg);
    admission_loop_ran(&redis).await;
    let (admitted, _) = visit(&proxy, &mut Jar::default()).await;
    assert!(admitted, "the room is open");
    // A snapshot, then the operator pauses the sale (seen by a tick after it).
    assert!(raw(redis.port, "SAVE").is_some_and(|r| r.starts_with("+OK")));
    let at_save = step(redis.port);
    hold_the_line(&proxy).await;
    // Admit steps answered since: what the rollback takes back (a step is a tick).
    eventually(Duration::from_secs(10), "ticks after the pause", || async {
        (step(redis.port) >= at_save + 3).then_some(())
    })
    .await;
    // Redis restarts from the snapshot: the room's data as it was before the pause.
    redis.kill();
    redis.restart();
    eventually(Duration::from_secs(15), "the rollback noticed", || async {
        proxy
            .stderr()
            .contains("the store lost this room's data")
            .then_some(())
    })
    .await;
    // The pause stands: a newcomer waits.
    for _ in 0..5 {
        let (admitted, state) = visit(&proxy, &mut Jar::default()).await;
        assert!(
            !admitted,
            "a newcomer let in through a paused sale: {state}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The store's record of the instance's last admit step.
fn step(port: u16) -> u64 {
    let all = raw(port, "HGETALL {anteroom:sale}:room").unwrap_or_default();
    let parts: Vec<&str> = all.split("\r\n").collect();
    parts
        .iter()
        .position(|p| p.starts_with("step:"))
        .and_then(|i| parts.get(i + 2))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
