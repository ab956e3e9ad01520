//! A session kept running by an instance cut off from the store alone, across a pre-queue.

use super::*;
use common::faults::Front;

/// An instance cut off from the store alone keeps its visitors' sessions running on its own
/// while the other instances keep the room going; the store's copy of such a session runs out
/// meanwhile, so the pre-queue that begins cannot end it. The instance does not keep it past the
/// pre-queue's start: after the opening, its cookie orders nothing through either instance
/// (found by review r100b: kept on, it ordered through the other instance after the opening,
/// ahead of everyone registered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_kept_alone_before_a_prequeue_orders_nothing_after_the_opening() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let front = Front::start_failing(redis.port, b"{anteroom:sale}");
    let started = std::time::Instant::now();
    let room = "admit-per-second = 100\nmax-active = 100\nsession-ttl = \"12s\"\n\
                on-store-error = \"local\"\nconsume = [\"POST /products/order\"]";
    // The event lets one in a hundred seconds: after the opening, a line (those registered)
    // that nobody walks past.
    let event = format!(
        "[[room.event]]\nname = \"drop\"\nprequeue-from = \"{}\"\nopens-at = \"{}\"\n\
         admit-per-second = 0.01\n",
        at(14),
        at(17)
    );
    let direct = config(origin.addr, &redis, room, &event);
    let cut = direct.replace(&redis.url(), &front.url());
    assert_ne!(cut, direct);
    let (alone, other) = (Proxy::start(&cut), Proxy::start(&direct));
    // Let in before the event through the instance about to be cut off, and renewed there.
    let mut v = Jar::default();
    eventually(Duration::from_secs(5), "let in", || {
        let (alone, mut jar) = (&alone, v.clone());
        async move {
            let state = visit(alone, &mut jar).await;
            state.starts_with("origin").then_some(jar)
        }
    })
    .await;
    v = eventually(Duration::from_secs(5), "let in", || {
        let (alone, mut jar) = (&alone, v.clone());
        async move {
            let state = visit(alone, &mut jar).await;
            state.starts_with("origin").then_some(jar)
        }
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "the machine is too slow for this test's timeline"
    );
    // Cut off alone; the visitor browses it until the pre-queue, the session kept there.
    front
        .fail_marked
        .store(true, std::sync::atomic::Ordering::SeqCst);
    while started.elapsed() < Duration::from_secs(15) {
        visit(&alone, &mut v).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Others register in the pre-queue through the other instance.
    for _ in 0..3 {
        let state = visit(&other, &mut Jar::default()).await;
        assert!(
            !state.starts_with("origin"),
            "let in during the pre-queue: {state}"
        );
    }
    // After the opening (recorded by the other instance's ticks), the kept cookie orders.
    eventually(Duration::from_secs(15), "the opening", || async {
        (started.elapsed() > Duration::from_secs(18)).then_some(())
    })
    .await;
    front
        .fail_marked
        .store(false, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..6 {
        for proxy in [&other, &alone] {
            let _ = client()
                .post(proxy.url("/products/order"))
                .header("cookie", v.header())
                .header("accept", "application/json")
                .send()
                .await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let orders: Vec<_> = origin
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert!(
        orders.is_empty(),
        "a session from before the pre-queue ordered after the opening: {orders:?}"
    );
}
