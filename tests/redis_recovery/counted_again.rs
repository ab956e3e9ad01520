//! Sessions the store counted again after a loss (re-registered, taken back by a renewal, told
//! by `local`) and held back by the next loss before a tick counts them.

use super::*;

/// A second loss just after a forgotten session came back: that session, counted by the store
/// after the last tick, is held back again with the others (found by review r92a: a FLUSHALL
/// on the first re-registration held back only the sessions still out, and the line took the
/// slot of the one that had come back). A long tick keeps the second loss between two ticks;
/// had one run between the re-registration and the loss, its count would hold the session,
/// and the test would pass by that count alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_loss_as_a_session_comes_back_holds_it_back_again() {
    let redis = RedisServer::start();
    let url = redis.url();
    let origin = Origin::start().await;
    let room_cfg = "admit-per-second = 50\nmax-active = 3\ntick = \"1s\"\nsession-ttl = \"10m\"";
    let proxy = Proxy::start(&config(origin.addr, &url, room_cfg));
    a_tick_after(&url, 0).await;
    let mut buyers = [Jar::default(), Jar::default(), Jar::default()];
    for jar in buyers.iter_mut() {
        let (admitted, state) = visit(&proxy, jar, "/products").await;
        assert!(admitted, "{state}");
        // Back once: the fast path's short cookie renewed to a session's, so that the first
        // request after the loss is no renewal (which counts no session back).
        visit(&proxy, jar, "/products").await;
    }
    a_tick_after(&url, redis_now(&url).await).await;
    flushall(&url).await;
    eventually(Duration::from_secs(10), "the loss seen", || async {
        let view = room(&proxy).await?;
        (view["held_back"] == 3).then_some(())
    })
    .await;
    // The first buyer comes back (once the loss is old enough) and is counted again.
    let cookie = buyers[0].header();
    eventually(
        Duration::from_secs(10),
        "the first buyer counted again",
        || {
            let (proxy, url, cookie) = (&proxy, &url, cookie.clone());
            async move {
                client()
                    .get(proxy.url("/products"))
                    .header("cookie", cookie)
                    .send()
                    .await
                    .ok()?;
                (store_active(url).await == 1).then_some(())
            }
        },
    )
    .await;
    // Lost again at once, before a tick could count it.
    flushall(&url).await;
    a_tick_after(&url, 0).await;
    a_tick_after(&url, redis_now(&url).await).await;
    let view = room(&proxy).await.expect("the room's view");
    assert_eq!(view["held_back"], 3, "all three held back again: {view}");
    for _ in 0..3 {
        let (admitted, state) = visit(&proxy, &mut Jar::default(), "/products").await;
        assert!(
            !admitted,
            "a newcomer took a forgotten session's slot: {state}"
        );
    }
}

/// Sessions the `local` policy let in during an outage, registered by the tick after it, are
/// held back by a loss before the next tick, as walk-ins are (found by review r93a: a FLUSHALL
/// 40 ms after that tick held back only the session the tick had counted, and newcomers took
/// the local admissions' slots, five in for a cap of three). A long tick keeps the loss between
/// two ticks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_admissions_registered_since_the_last_count_are_held_back_after_a_loss() {
    let redis = RedisServer::start();
    let url = redis.url();
    let origin = Origin::start().await;
    let room_cfg = "admit-per-second = 50\nmax-active = 3\ntick = \"1s\"\nsession-ttl = \"60s\"";
    let text = config(origin.addr, &url, room_cfg)
        .replace("on-store-error = \"closed\"", "on-store-error = \"local\"");
    let proxy = Proxy::start(&text);
    a_tick_after(&url, 0).await;
    let mut first = Jar::default();
    let (admitted, state) = visit(&proxy, &mut first, "/products").await;
    assert!(admitted, "{state}");
    a_tick_after(&url, redis_now(&url).await).await;
    redis.signal(true);
    // Two let in on this instance's own while the store does not answer.
    let mut locals = 0;
    let until = Instant::now() + Duration::from_secs(10);
    while locals < 2 && Instant::now() < until {
        let (admitted, _) = visit(&proxy, &mut Jar::default(), "/products").await;
        locals += usize::from(admitted);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(locals, 2, "two local admissions");
    redis.signal(false);
    // The tick after the outage registers them; lost at once, before another tick counts them.
    eventually(
        Duration::from_secs(10),
        "the local admissions registered",
        || async {
            let n: u64 = ::redis::cmd("ZCARD")
                .arg("{anteroom:sale}:active")
                .query_async(&mut conn(&url).await)
                .await
                .ok()?;
            (n == 3).then_some(())
        },
    )
    .await;
    flushall(&url).await;
    a_tick_after(&url, 0).await;
    a_tick_after(&url, redis_now(&url).await).await;
    let view = room(&proxy).await.expect("the room's view");
    assert_eq!(view["held_back"], 3, "all three held back: {view}");
    for _ in 0..3 {
        let (admitted, state) = visit(&proxy, &mut Jar::default(), "/products").await;
        assert!(
            !admitted,
            "a newcomer took a local admission's slot: {state}"
        );
    }
}
