//! A Redis that comes back with older data (restarted from a snapshot taken before the last
//! writes, a replica promoted without them): the store's record of an instance's last admit
//! step is then older than one whose answer the instance received, and the room's generation
//! is made anew, so the instances re-assert the room's state as after data lost whole (found
//! by review: the generation came back with the snapshot, nothing was noticed, and an
//! operator's pause made after the snapshot was undone — the sale opened). The room's own count
//! of admit calls tells it too, whichever instances made them: after a rolling restart of every
//! instance none has a step of its own in the snapshot (found by review).

mod common;

use std::time::Duration;

use common::local::*;
use common::redis::{raw, RedisServer};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_made_after_the_snapshot_redis_comes_back_from_is_kept() {
    pause_after_a_snapshot(Restart::No, false).await;
}

/// The same after every instance was restarted since the snapshot (a rolling deploy): the
/// instance running now has no step of its own in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_after_a_snapshot_and_a_restart_of_every_instance_is_kept() {
    pause_after_a_snapshot(Restart::BeforeThePause, false).await;
}

/// The same when the snapshot holds an operator's earlier change (a rate) and the instance
/// is restarted after the pause: it learned the pause, and when it was made, from its ticks,
/// and re-asserts it as
/// newer than the snapshot's (found by review: its ticks told no time, its re-assertion lost
/// to the snapshot's change, and the loss's hold was lifted: the sale opened).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_after_a_snapshot_of_an_earlier_change_and_a_restart_is_kept() {
    pause_after_a_snapshot(Restart::AfterThePause, true).await;
}

/// When the instance is stopped and started anew.
#[derive(PartialEq)]
enum Restart {
    No,
    BeforeThePause,
    AfterThePause,
}

/// A sale open (`changed`: with a rate an operator set), a snapshot, a pause (the instance
/// restarted before or after it), and Redis back from the snapshot: the pause stands.
async fn pause_after_a_snapshot(restart: Restart, changed: bool) {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 100\nmax-active = 100";
    let cfg = config(origin.addr, &redis.url(), 3, room).replace("\"local\"", "\"closed\"");
    let mut proxy = Proxy::start(&cfg);
    admission_loop_ran(&redis).await;
    let (admitted, _) = visit(&proxy, &mut Jar::default()).await;
    assert!(admitted, "the room is open");
    if changed {
        let resp = client()
            .patch(proxy.admin_url("/rooms/sale"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"admit_per_second": 50}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    // A snapshot, then the operator pauses the sale (seen by a tick after it).
    assert!(raw(redis.port, "SAVE").is_some_and(|r| r.starts_with("+OK")));
    let at_save = field(redis.port, "admits");
    if restart == Restart::BeforeThePause {
        drop(proxy);
        proxy = Proxy::start(&cfg);
    }
    hold_the_line(&proxy).await;
    if restart == Restart::AfterThePause {
        drop(proxy);
        proxy = Proxy::start(&cfg);
        // Ticks of the new process: it knows the room's state from them alone.
        let at = field(redis.port, "admits");
        eventually(
            Duration::from_secs(10),
            "ticks of the new process",
            || async { (field(redis.port, "admits") >= at + 3).then_some(()) },
        )
        .await;
    }
    // Admit steps answered since: what the rollback takes back (a step is a tick).
    eventually(Duration::from_secs(10), "ticks after the pause", || async {
        (field(redis.port, "admits") >= at_save + 3).then_some(())
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

/// An operator's release made before the snapshot (kept in it) stands after Redis comes back
/// from it: the hold the rollback puts on the line until the instance re-asserts its state
/// ends though that state is no newer than the store's (found by review: after a Sentinel
/// switchover the line stayed held for good, `/readyz` ready, nothing in the history).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_before_the_snapshot_lets_the_line_move_after_the_rollback() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 100\nmax-active = 100";
    let cfg = config(origin.addr, &redis.url(), 3, room).replace("\"local\"", "\"closed\"");
    let proxy = Proxy::start(&cfg);
    admission_loop_ran(&redis).await;
    hold_the_line(&proxy).await;
    let resp = client()
        .patch(proxy.admin_url("/rooms/sale"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"queue_all": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    eventually(Duration::from_secs(5), "the release seen", || async {
        visit(&proxy, &mut Jar::default()).await.0.then_some(())
    })
    .await;
    assert!(raw(redis.port, "SAVE").is_some_and(|r| r.starts_with("+OK")));
    let at_save = field(redis.port, "admits");
    eventually(
        Duration::from_secs(10),
        "ticks after the snapshot",
        || async { (field(redis.port, "admits") >= at_save + 3).then_some(()) },
    )
    .await;
    redis.kill();
    redis.restart();
    eventually(Duration::from_secs(15), "the rollback noticed", || async {
        proxy
            .stderr()
            .contains("the store lost this room's data")
            .then_some(())
    })
    .await;
    eventually(Duration::from_secs(10), "a newcomer let in", || async {
        visit(&proxy, &mut Jar::default()).await.0.then_some(())
    })
    .await;
}

/// A number field of the room's hash.
fn field(port: u16, name: &str) -> u64 {
    let reply = raw(port, &format!("HGET {{anteroom:sale}}:room {name}")).unwrap_or_default();
    reply
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0)
}
