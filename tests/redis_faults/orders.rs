use super::*;

/// A renewal the store failed to make (its breaker still closed: the call only failed) with
/// more than a quarter of the session left is postponed: the current cookie serves on, and a
/// later request renews it once the store is back. (With the breaker open the session is kept
/// instead: the next test. With the default breaker this test raced the breaker's probe and
/// failed in CI: found at the thirty-second session.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_during_an_outage_is_postponed_not_refused() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 10\nsession-ttl = \"6s\"";
    // The breaker never opens in this test: every call tries the store.
    let proxy = Proxy::start(&config_breaker(origin.addr, &redis.url(), 1000, room));
    let mut jar = Jar::default();
    assert_eq!(status(&proxy, &mut jar).await["state"], "admitted");
    let admitted = Instant::now();
    redis.kill();
    // Past half the session's life, the cookie would be renewed; the store cannot answer.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let resp = client()
        .get(proxy.url("/products/a"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "served on the current cookie");
    assert!(
        set_cookies(&resp)
            .iter()
            .all(|(k, _, _)| k != "anteroom_sale"),
        "renewal postponed"
    );
    redis.restart();
    // Redis is back (empty) before the cookie runs out: a request renews it, once the store's
    // new generation is older than a breaker's cooldown, a call's timeout and two ticks (an
    // order of this admission could be in flight elsewhere: `Proxy::seen_generation`).
    let renewed = eventually(Duration::from_millis(2500), "a renewed cookie", || {
        let (proxy, jar) = (&proxy, jar.clone());
        async move {
            let resp = client()
                .get(proxy.url("/products/b"))
                .header("cookie", jar.header())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            set_cookies(&resp)
                .into_iter()
                .find(|(k, _, _)| k == "anteroom_sale")
                .map(|(_, v, _)| v)
        }
    })
    .await;
    assert!(
        admitted.elapsed() < Duration::from_secs(6),
        "renewed before the old cookie expired"
    );
    jar.set("anteroom_sale", &renewed);
    tokio::time::sleep(
        Duration::from_secs(6).saturating_sub(admitted.elapsed()) + Duration::from_millis(200),
    )
    .await;
    let resp = client()
        .get(proxy.url("/products/c"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.text().await.unwrap(),
        "origin GET /products/c",
        "the renewed cookie outlives the first"
    );
}

/// A renewal due while the store is away (its breaker open) keeps the session on the instance
/// and gives the cookie a new life: the visitor browses on past the first cookie's end with
/// Redis still down, and after Redis comes back empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_while_the_store_is_away_keeps_the_session() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 10\nsession-ttl = \"4s\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let mut jar = Jar::default();
    assert_eq!(status(&proxy, &mut jar).await["state"], "admitted");
    let first = jar.get("anteroom_sale").unwrap_or_default().to_string();
    let admitted = Instant::now();
    redis.kill();
    common::local::breaker_open(&proxy).await;
    // Past the first cookie's end, all of it with the store away.
    let mut n = 0;
    while admitted.elapsed() < Duration::from_millis(5000) {
        n += 1;
        let path = format!("/products/{n}");
        let resp = client()
            .get(proxy.url(&path))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        jar.absorb(&resp);
        assert_eq!(
            resp.text().await.unwrap(),
            format!("origin GET {path}"),
            "{:?} after the admission, the store away",
            admitted.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_ne!(
        jar.get("anteroom_sale").unwrap_or_default(),
        first,
        "kept: a new life"
    );
    redis.restart();
    let resp = client()
        .get(proxy.url("/products/back"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "origin GET /products/back");
}

/// An order goes through while Redis is down, and stays down past the order's grace period:
/// the confirm could not land, and the store (back from its AOF) still holds the order as
/// pending, past its deadline — a consume now would give the admission back. The instance owes
/// the confirm: it refuses the kept cookie's second order itself, and keeps trying until the
/// confirm lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_that_cannot_land_is_owed_until_the_store_is_back() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let origin = Origin::start().await;
    // The test origin takes 1.5 s on `/slow...`; grace = 1 + 1 + 2 + 5 = 9 s.
    let room = "admit-per-second = 50\nmax-active = 10\nconsume = [\"POST /slow/order\"]";
    let conf = config(origin.addr, &redis.url(), room)
        .replace("paths = [\"/products\"]", "paths = [\"/slow\"]")
        .replace(
            "[[upstream]]\nname = \"shop\"",
            "[[upstream]]\nname = \"shop\"\nconnect-timeout = \"1s\"\nwrite-timeout = \"1s\"\nread-timeout = \"2s\"",
        );
    let proxy = Proxy::start(&conf);
    let mut jar = Jar::default();
    assert_eq!(status(&proxy, &mut jar).await["state"], "admitted");
    let order = || {
        client()
            .post(proxy.url("/slow/order"))
            .header("cookie", jar.header())
            .send()
    };
    let first = tokio::spawn(order());
    let posts = |o: &Origin| o.requests().iter().filter(|s| s.method == "POST").count();
    eventually(
        Duration::from_secs(5),
        "the order at the origin",
        || async { (posts(&origin) == 1).then_some(()) },
    )
    .await;
    // Down while the origin takes the order: its answer cannot be told to the store.
    redis.kill();
    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), 200, "the order went through");
    // Past the order's grace period (a duration that must pass, not a condition).
    tokio::time::sleep(Duration::from_secs(10)).await;
    redis.restart();
    // Asked until the store can answer (503 while the breaker is still open).
    let again = eventually(
        Duration::from_secs(10),
        "an answer past the breaker",
        || async {
            let s = order().await.unwrap().status();
            (s != 503).then_some(s)
        },
    )
    .await;
    assert_eq!(again, 409, "the kept cookie orders again");
    // The owed confirm lands: the order is used up in the store too.
    let marker = format!(
        "GET {{anteroom:sale}}:consumed:{}",
        jar.get("anteroom_vid").unwrap()
    );
    eventually(Duration::from_secs(10), "the confirm in the store", || {
        let m = common::redis::raw(redis.port, &marker);
        async move { m.filter(|m| m.contains("c ")).map(|_| ()) }
    })
    .await;
    let again = order().await.unwrap();
    assert_eq!(again.status(), 409);
    assert_eq!(posts(&origin), 1, "one admission, one order");
}

/// `on-store-error = "open"` lets an order through while Redis is away; once it is back, that
/// order's confirm uses the admission up although the store never saw the order. Before, the
/// confirm found no marker, changed nothing, and the kept cookie ordered a second time
/// (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_the_open_policy_let_through_is_used_up_once_the_store_is_back() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 10\non-store-error = \"open\"\nconsume = [\"POST /products/order\"]";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let mut jar = Jar::default();
    assert_eq!(status(&proxy, &mut jar).await["state"], "admitted");
    let order = || {
        client()
            .post(proxy.url("/products/order"))
            .header("cookie", jar.header())
            .send()
    };
    let posts = |o: &Origin| o.requests().iter().filter(|s| s.method == "POST").count();
    redis.kill();
    let first = order().await.unwrap();
    assert_eq!(
        first.status(),
        200,
        "through unconfirmed, as the policy says"
    );
    let cleared = set_cookies(&first)
        .iter()
        .any(|(name, value, _)| name == "anteroom_sale" && value.is_empty());
    assert!(cleared, "the used admission's cookie is cleared");
    assert_eq!(posts(&origin), 1);
    redis.restart();
    // The owed confirm lands: the order is used up in the store.
    let marker = format!(
        "GET {{anteroom:sale}}:consumed:{}",
        jar.get("anteroom_vid").unwrap()
    );
    eventually(Duration::from_secs(15), "the confirm in the store", || {
        let m = common::redis::raw(redis.port, &marker);
        async move { m.filter(|m| m.contains("c ")).map(|_| ()) }
    })
    .await;
    let again = order().await.unwrap();
    assert_eq!(again.status(), 409, "the kept cookie orders again");
    assert_eq!(posts(&origin), 1, "one admission, one order");
}
