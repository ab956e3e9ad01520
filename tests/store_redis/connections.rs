use super::*;

/// A connection whose calls only time out is made again: the client reconnects after an I/O
/// error but never after a timeout, so a connection a middlebox swallowed (or an address that
/// failed over without resetting it) stayed in use for good, every call timing out, while a new
/// connection worked (found by review). Here a forwarder swallows whatever arrives on the
/// connections open when it is cut, and forwards new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_only_times_out_is_made_again() {
    use std::sync::atomic::Ordering;
    let server = RedisServer::start();
    // Connections numbered below `swallow_below` lose what they are sent.
    let front = common::faults::Front::start(server.port);
    let (next, swallow_below) = (front.connections.clone(), front.swallow_below.clone());
    let store = RedisStore::new(Target::Single(front.url()), Duration::from_millis(300)).unwrap();
    let p = conformance::room("swallowed", 10.0, 10);
    store.stats(&p).await.expect("through the forwarder");
    swallow_below.store(next.load(Ordering::SeqCst), Ordering::SeqCst);
    assert!(
        store.stats(&p).await.is_err(),
        "the cut connection times out"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut calls = 1;
    loop {
        calls += 1;
        if store.stats(&p).await.is_ok() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still timing out after {calls} calls"
        );
    }
    assert!(
        calls <= 5,
        "a new connection after a few timeouts, not {calls} calls"
    );
}

/// The same on a Redis Cluster, for one node: a middlebox swallows what goes to it, its
/// rooms' calls only time out while the other nodes' rooms are answered. The connection is
/// made again beside the one in use, and the other rooms' calls go on meanwhile (found by
/// re-review: never made again while other rooms were answered, the node's rooms stayed down
/// until a restart; made again in place, the healthy rooms' calls waited with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_nodes_swallowed_connection_is_made_again_while_the_others_answer() {
    use common::redis::raw;
    use std::sync::atomic::Ordering;
    let cluster = RedisCluster::start_with(&["--cluster-require-full-coverage", "no"]);
    // Node 2 reached through a forwarder: the cluster tells its clients the forwarder's port.
    let front = common::faults::Front::start(cluster.nodes[2].port);
    let port = front.addr.port().to_string();
    raw(
        cluster.nodes[2].port,
        &format!("CONFIG SET cluster-announce-port {port}"),
    )
    .expect("announced");
    common::eventually(Duration::from_secs(10), "the forwarder announced", || {
        let port = port.clone();
        let seed = cluster.nodes[0].port;
        async move {
            raw(seed, "CLUSTER SLOTS")
                .filter(|r| r.contains(&format!("\r\n:{port}\r\n")))
                .map(|_| ())
        }
    })
    .await;
    let node_of = |name: &str| {
        let slot = raw(
            cluster.nodes[0].port,
            &format!("CLUSTER KEYSLOT {{anteroom:{name}}}:room"),
        )
        .and_then(|r| r.trim_start_matches(':').trim().parse::<u64>().ok())
        .expect("a slot");
        (slot * 3 / 16384) as usize
    };
    let room_on = |node: usize| {
        let name = (0..100)
            .map(|i| format!("swallowed{i}"))
            .find(|n| node_of(n) == node)
            .expect("a room there");
        let mut p = conformance::room("x", 10.0, 10);
        p.name = Arc::from(name.as_str());
        p
    };
    let (far, near) = (room_on(2), room_on(0));
    let seeds = vec![cluster.nodes[0].url(), cluster.nodes[1].url()];
    let store = RedisStore::new(Target::Cluster(seeds), Duration::from_millis(300)).unwrap();
    store.stats(&far).await.expect("through the forwarder");
    store.stats(&near).await.expect("straight");
    front
        .swallow_below
        .store(front.connections.load(Ordering::SeqCst), Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut near_failed = 0;
    loop {
        if store.stats(&near).await.is_err() {
            near_failed += 1;
        }
        if store.stats(&far).await.is_ok() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the swallowed node's room still timing out"
        );
    }
    assert_eq!(
        near_failed, 0,
        "the other node's room was answered throughout"
    );
}
