//! An admitted visitor keeps browsing through an outage of any length.

use super::*;

/// An admission whose sliding renewal the store cannot make while it is away is kept running
/// by the instance, its cookie given a new life, and the store is told of it once it answers
/// (found by review r95b: the cookie ran out during an outage longer than half a session, and
/// the visitor was sent to the line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admitted_visitor_browses_through_an_outage_longer_than_the_session() {
    const PAUSE_MS: u64 = 7000;
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 10\nsession-ttl = \"4s\"\nclaim-ttl = \"4s\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 3, room));
    admission_loop_ran(&redis).await;
    let (admitted, states, jars) = newcomers_kept(&proxy, 1, 3).await;
    assert_eq!(admitted, 1, "let in through the store: {states:?}");
    let mut jar = jars.into_iter().next().unwrap_or_default();
    let (_, state) = visit(&proxy, &mut jar).await;
    assert!(state.starts_with("origin GET"), "{state}");
    let paused_at = Instant::now();
    let pause = format!("CLIENT PAUSE {PAUSE_MS} ALL");
    assert!(raw(redis.port, &pause).is_some_and(|r| r.starts_with("+OK")));
    breaker_open(&proxy).await;
    // Longer than the session, all of it while the store is away.
    while paused_at.elapsed() < Duration::from_millis(PAUSE_MS - 500) {
        let (_, state) = visit(&proxy, &mut jar).await;
        assert!(
            state.starts_with("origin GET"),
            "{:?} into the outage: {state}",
            paused_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Back: the store counts the session kept, and the visitor browses on.
    eventually(Duration::from_secs(15), "the kept session counted", || {
        let (proxy, mut jar) = (&proxy, jar.clone());
        async move {
            let (_, state) = visit(proxy, &mut jar).await;
            assert!(state.starts_with("origin GET"), "{state}");
            let active = raw(redis.port, "ZCARD {anteroom:sale}:active")?;
            (active.trim() == ":1").then_some(())
        }
    })
    .await;
}
