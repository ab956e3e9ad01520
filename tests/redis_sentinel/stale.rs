use super::*;

/// A sentinel that names an old primary (cut off with it, or lagging) beside two that name the
/// current one does not move the proxy: only a node a majority of the listed sentinels names
/// is used (found by re-review: taking the fastest answer, the proxy moved between the two
/// every second and wrote the room to both; choosing by epoch among the first answers, it
/// started on the stale one half the time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_sentinel_does_not_move_the_proxy() {
    let setup = tokio::task::block_in_place(|| SentinelSetup::start(1000));
    // The stale one names a standalone node that says it is a primary, at the same epoch (0)
    // as the others' primary: no epoch tells them apart, only how many name each.
    let old = common::redis::RedisServer::start();
    let stale = common::sentinel::SentinelProcess::start(old.port, 60_000, "");
    // Listed with two of the three that name the current primary: one stale of three, so an
    // answer of the first two alone can be a tie.
    let mut urls = setup.urls();
    urls.truncate(2);
    urls.insert(0, stale.url());
    let origin = Origin::start().await;
    let c = client();
    // Which sentinel answers first is a race: several starts, each on the sentinels' primary.
    let primary = format!("primary=127.0.0.1:{}", setup.primary.port);
    for start in 0..4 {
        let proxy = Proxy::start_with(
            &config(origin.addr, &urls),
            &[("ANTEROOM_LOG", "info")],
            &[],
        );
        let base = proxy.url("");
        let mut jar = Jar::default();
        assert!(status(&c, &base, &mut jar).await.is_some());
        if start == 0 {
            // Several of the proxy's once-a-second checks of the primary, with calls meanwhile.
            let until = Instant::now() + Duration::from_secs(4);
            while Instant::now() < until {
                assert!(status(&c, &base, &mut jar).await.is_some());
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let logs = proxy.stderr();
        assert!(!logs.contains("moving to it"), "{logs}");
        let connected: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("connected to the Redis primary"))
            .collect();
        assert!(
            !connected.is_empty() && connected.iter().all(|l| l.contains(&primary)),
            "start {start}: {connected:?}"
        );
    }
    let mut on_old = ::redis::Client::open(old.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg("*anteroom*")
        .query_async(&mut on_old)
        .await
        .unwrap();
    assert!(
        keys.is_empty(),
        "the room written to the stale primary: {keys:?}"
    );
    drop(stale);
}

/// A node demoted to a replica refuses a write script with `READONLY`: that reply must send the
/// store back to the sentinels, not count as an ordinary script error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_refusing_a_write_script_is_a_sign_of_failover() {
    let primary = common::redis::RedisServer::start();
    let replica = common::redis::RedisServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &primary.port.to_string(),
    ]);
    let mut c = ::redis::Client::open(replica.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let script = ::redis::Script::new("redis.call('SET', KEYS[1], ARGV[1]) return 1");
    let err = script
        .key("{anteroom:sale}:probe")
        .arg(1)
        .invoke_async::<i64>(&mut c)
        .await
        .expect_err("a replica refuses writes");
    assert!(
        anteroom::store::sentinel::no_longer_primary(&err),
        "{err:?} must be read as a failover"
    );
    let harmless = ::redis::Script::new("return redis.call('GET', KEYS[1])")
        .key("{anteroom:sale}:probe")
        .invoke_async::<Option<String>>(&mut c)
        .await;
    assert!(
        harmless.is_ok(),
        "reads still work on a replica: {harmless:?}"
    );
}
