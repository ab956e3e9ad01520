//! The first call after Redis restarted is answered.

use super::*;

/// Found by review r95a: after Redis was killed and started again, the first call (the breaker's
/// probe) failed on the connection Redis had dropped, and the breaker stayed open another
/// cooldown: an instance that had admitted on its own was away twice as long as it needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_call_after_a_restart_is_answered() {
    let mut server = RedisServer::start();
    let store = RedisStore::new(Target::Single(server.url()), Duration::from_secs(2)).unwrap();
    let p = conformance::room("restart", 10.0, 3);
    store.admit(&p).await.unwrap();
    server.kill();
    assert!(store.admit(&p).await.is_err(), "Redis is down");
    // The timeline of an open breaker (not a wait for a condition): no call for a cooldown,
    // then a probe while Redis is still down, then Redis back a while before the next probe.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(store.admit(&p).await.is_err(), "Redis is down");
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let first = store.admit(&p).await;
    assert!(first.is_ok(), "the first call after the restart: {first:?}");
}
