//! Orders on sessions from before an event added at run time, and an instance that cannot
//! read such a change (its orders are held: it is not ready).

use super::*;

/// An order on an admission from before an event added at run time, whose pre-queue begins at
/// once, never reaches the shop in that pre-queue, also through an instance that has not yet
/// read the change: the store takes nothing by its older events and answers busy, and once the
/// instance has read them the session is over (found by review r104a: the order went straight
/// to consume, which read no events, and on to the shop ahead of every registrant). Ticks of
/// five seconds make the window between the change and the instance's next tick wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_from_before_an_event_added_at_run_time_waits_for_it() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let store = redis_store(&redis, "500ms");
    let room =
        "admit-per-second = 10\nmax-active = 10\ntick = \"5s\"\nconsume = [\"POST /orders\"]";
    let a = Proxy::start(&config(origin.addr, &store, room, ""));
    let b = Proxy::start(&config(origin.addr, &store, room, ""));
    let mut jar = Jar::default();
    eventually(Duration::from_secs(15), "admitted through b", || {
        let (b, mut jar) = (&b, jar.clone());
        async move { (status(b, &mut jar).await["state"] == "admitted").then_some(()) }
    })
    .await;
    assert_eq!(status(&b, &mut jar).await["state"], "admitted");
    post_event(
        &a,
        serde_json::json!({ "name": "drop", "opens_at": at(600), "draw": true }),
    )
    .await;
    let order = |proxy| {
        let cookies = jar.header();
        async move {
            let resp = client()
                .post(Proxy::url(proxy, "/orders"))
                .header("cookie", cookies)
                .send()
                .await
                .unwrap();
            resp.status().as_u16()
        }
    };
    let first = order(&b).await;
    // Until b has read the event (its next tick), and after.
    let mut answers = vec![first];
    eventually(Duration::from_secs(15), "b in the pre-queue", || {
        let (b, mut jar) = (&b, Jar::default());
        async move { (status(b, &mut jar).await["state"] == "prequeue").then_some(()) }
    })
    .await;
    answers.push(order(&b).await);
    answers.push(order(&a).await);
    let reached = origin
        .requests()
        .iter()
        .filter(|s| s.method == "POST")
        .count();
    // Busy (409) before b's tick; the pre-queue's page after it.
    assert_eq!(
        reached, 0,
        "orders in the pre-queue reached the shop: {answers:?}"
    );
}

/// An instance that cannot read the room's runtime event changes holds every order and
/// newcomer through it (its events are stale), so it says it is not ready for as long as
/// that lasts, and a load balancer takes it out (found by re-review r107a: it answered every
/// order "not just yet" for good while `/readyz` said ready). Here a Redis user that may not
/// read the room's events key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_cannot_read_the_events_is_not_ready() {
    let redis = RedisServer::start();
    let acl = "ACL SETUSER blind on >blind-pw +@all ~[^{]* ~{anteroom:sale}:[^e]* ~{anteroom:sale}:e[^v]* &*";
    let set = common::redis::raw(redis.port, acl).unwrap_or_default();
    assert!(set.starts_with("+OK"), "{set}");
    let origin = Origin::start().await;
    let room = "admit-per-second = 10\nmax-active = 10\ntick = \"500ms\"";
    let a = Proxy::start(&config(
        origin.addr,
        &redis_store(&redis, "500ms"),
        room,
        "",
    ));
    let blind_store = format!(
        "[store]\nbackend = \"redis\"\nredis-url = \"redis://blind:blind-pw@127.0.0.1:{}\"\ntimeout = \"500ms\"",
        redis.port
    );
    let b = Proxy::start(&config(origin.addr, &blind_store, room, ""));
    let ready = |proxy: &Proxy| {
        let url = proxy.admin_url("/readyz");
        async move {
            client()
                .get(url)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    };
    for p in [&a, &b] {
        eventually(Duration::from_secs(15), "ready", || async {
            (ready(p).await == 200).then_some(())
        })
        .await;
    }
    // An event a month away: every instance's events near now stay the same.
    post_event(
        &a,
        serde_json::json!({ "name": "later", "prequeue_from": at(30 * 86_400), "opens_at": at(30 * 86_400 + 600) }),
    )
    .await;
    eventually(Duration::from_secs(20), "b not ready", || async {
        (ready(&b).await == 503).then_some(())
    })
    .await;
    assert_eq!(ready(&a).await, 200, "the instance that reads them");
}
