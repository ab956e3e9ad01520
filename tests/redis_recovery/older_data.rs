//! Redis back with an older copy of its data (a restart from an older dump, a failover that
//! dropped the newest writes): the line comes back in the same epoch without its newest places.
//! Their visitors hold tickets the edge could answer from the snapshot; they are the store's to
//! answer once, which places them again in the order they poll, ahead of anyone who comes
//! later. Before (found by review), they were told their lost places at the edge, later
//! arrivals went ahead of them, and the place shown went up when it neared the head.

use super::*;
use common::redis::raw;

const STATUS: &str = "/.anteroom/status?room=sale";

fn waiting(redis: &RedisServer) -> u64 {
    raw(redis.port, "ZCARD {anteroom:sale}:waiting")
        .and_then(|r| r.trim().trim_start_matches(':').parse().ok())
        .unwrap_or(0)
}

async fn position(proxy: &Proxy, jar: &mut Jar) -> Value {
    get_json(proxy, STATUS, jar).await.expect("a status")
}

/// The one admission the room has, then a line that does not move: three visitors in line
/// when Redis saves its dump (`kept`), three more after it (`lost` when it comes back from it).
async fn saved_after_three(proxy: &Proxy, redis: &RedisServer) -> (Jar, Vec<Jar>, Vec<Jar>) {
    let mut holder = Jar::default();
    assert_eq!(position(proxy, &mut holder).await["state"], "admitted");
    let mut kept = Vec::new();
    for expected in 1..=3u64 {
        let mut jar = Jar::default();
        assert_eq!(position(proxy, &mut jar).await["position"], expected);
        kept.push(jar);
    }
    assert!(raw(redis.port, "SAVE").is_some_and(|r| r.starts_with("+OK")));
    let mut lost = Vec::new();
    for expected in 4..=6u64 {
        let mut jar = Jar::default();
        assert_eq!(position(proxy, &mut jar).await["position"], expected);
        lost.push(jar);
    }
    (holder, kept, lost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_lost_to_an_older_copy_are_given_again_before_later_arrivals() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(
        origin.addr,
        &redis.url(),
        "admit-per-second = 1\nmax-active = 1\ntick = \"100ms\"\nabandon-after = \"60s\"",
    ));
    let (_holder, mut kept, mut lost) = saved_after_three(&proxy, &redis).await;
    // Their tickets are answered at the edge now (a snapshot that holds them).
    a_tick_after(&redis.url(), redis_now(&redis.url()).await).await;
    for jar in &mut lost {
        assert_eq!(position(&proxy, jar).await["state"], "waiting");
    }
    redis.kill();
    redis.restart();
    assert_eq!(waiting(&redis), 3, "the older copy holds the first three");
    eventually(Duration::from_secs(15), "the loss seen", || async {
        proxy
            .stderr()
            .contains("the store lost this room's data")
            .then_some(())
    })
    .await;
    // Each polls once: placed again, in the order they poll.
    for (i, jar) in lost.iter_mut().enumerate() {
        let v = position(&proxy, jar).await;
        assert_eq!(v["position"], 4 + i as u64, "lost visitor {i}: {v}");
    }
    assert_eq!(waiting(&redis), 6, "placed again in the store");
    let mut later = Jar::default();
    let v = position(&proxy, &mut later).await;
    assert_eq!(v["position"], 7, "a later arrival goes behind them: {v}");
    for (i, jar) in kept.iter_mut().enumerate() {
        assert_eq!(position(&proxy, jar).await["position"], 1 + i as u64);
    }
}

/// The same with the instance stopped along with Redis and started after it: it never saw the
/// old generation, so it cannot tell the loss; every ticket from before it started is the
/// store's to answer once (found by re-review: a restarted instance told the lost places, and
/// its renewals of the tickets made the others tell them too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_after_the_loss_gives_the_lost_places_again() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 1\nmax-active = 1\ntick = \"100ms\"\nabandon-after = \"60s\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let (_holder, _kept, mut lost) = saved_after_three(&proxy, &redis).await;
    drop(proxy);
    redis.kill();
    redis.restart();
    assert_eq!(waiting(&redis), 3, "the older copy holds the first three");
    // Tickets given in an earlier second than the new process's start.
    std::thread::sleep(Duration::from_millis(1100));
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    // Its snapshot holds the line (the edge would answer from it), and the store's hold of a
    // newly heard instance is over.
    a_tick_after(&redis.url(), redis_now(&redis.url()).await).await;
    for (i, jar) in lost.iter_mut().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(15);
        let v = loop {
            let v = position(&proxy, jar).await;
            if v["state"] == "waiting" {
                break v;
            }
            assert!(Instant::now() < deadline, "lost visitor {i}: {v}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(v["position"], 4 + i as u64, "lost visitor {i}: {v}");
    }
    assert_eq!(waiting(&redis), 6, "placed again in the store");
    let mut later = Jar::default();
    let v = position(&proxy, &mut later).await;
    assert_eq!(v["position"], 7, "a later arrival goes behind them: {v}");
}
