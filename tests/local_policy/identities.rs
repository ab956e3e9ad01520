use super::*;

/// One address sending visitor ids of its own making, past `join-limit` while Redis is down, is
/// let in by nobody: past this instance's per-client limit only the store could tell a visitor
/// in line from a newcomer (found by review: 100 of 100 made-up ids were admitted by `local`,
/// past join-limit and the challenge, taking the outage's admissions from the line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_ids_past_join_limit_get_no_local_admission() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room =
        "admit-per-second = 1000\nmax-active = 1000\njoin-limit = { per-ip = 4, per = \"1m\" }";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 3, room));
    admission_loop_ran(&redis).await;
    redis.kill();
    breaker_open(&proxy).await;
    let mut admitted = 0;
    for _ in 0..30 {
        let mut jar = Jar::default();
        jar.set(
            "anteroom_vid",
            &anteroom::store::VisitorId::random().to_string(),
        );
        admitted += usize::from(visit(&proxy, &mut jar).await.0);
    }
    assert!(
        admitted <= 4,
        "{admitted} of 30 made-up ids let in past a join-limit of 4 while the store was away"
    );
}

/// While Redis is down, a queue ticket is no claim on more than one local admission, nor past
/// the client's `join-limit`: one ticket replayed holds one session, given again to each
/// replay, and tickets brought from elsewhere to one address take that address's limit's worth
/// (found by review: one replayed ticket took 99 of an instance's 100 local admissions, and
/// skipped the per-client limit that made-up ids are held by).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_while_redis_is_down_take_one_local_admission_each_within_join_limit() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room =
        "admit-per-second = 1000\nmax-active = 1000\njoin-limit = { per-ip = 3, per = \"1h\" }";
    let conf = format!(
        "trusted-proxies = [\"127.0.0.1/32\"]\n{}",
        config(origin.addr, &redis.url(), 3, room)
    );
    let proxy = Proxy::start(&conf);
    admission_loop_ran(&redis).await;
    hold_the_line(&proxy).await;
    // Six tickets, each got from an address of its own.
    let mut jars = Vec::new();
    for i in 0..6 {
        let mut jar = Jar::default();
        let (admitted, state) = visit_from(&proxy, &mut jar, Some(&format!("10.0.0.{i}"))).await;
        assert!(!admitted && state == "paused", "{state}");
        assert!(
            jar.0.iter().any(|(k, _)| k.starts_with("anteroom_q")),
            "{jar:?}"
        );
        jars.push(jar);
    }
    // The line emptied and let go: the tickets hold no place.
    let admin = |req: reqwest::RequestBuilder| async move {
        let resp = req.bearer_auth(TOKEN).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    };
    admin(client().delete(proxy.admin_url("/rooms/sale/waiting"))).await;
    admin(
        client()
            .patch(proxy.admin_url("/rooms/sale"))
            .json(&serde_json::json!({"queue_all": false})),
    )
    .await;
    eventually(Duration::from_secs(5), "the line let go", || async {
        visit(&proxy, &mut Jar::default()).await.0.then_some(())
    })
    .await;
    redis.kill();
    breaker_open(&proxy).await;
    let admitted = || metric(&proxy, TOKEN, "anteroom_admitted_total", "room=\"sale\"");
    let before = admitted().await;
    let attacker = Some("10.9.9.9");
    // The outage's bucket starts empty (the store's let its burst in): a token within a
    // millisecond at this rate.
    eventually(Duration::from_secs(5), "a local admission", || async {
        visit_from(&proxy, &mut jars[0].clone(), attacker)
            .await
            .0
            .then_some(())
    })
    .await;
    for _ in 0..30 {
        let (again, state) = visit_from(&proxy, &mut jars[0].clone(), attacker).await;
        assert!(
            again,
            "the session the ticket holds is given again: {state}"
        );
    }
    assert_eq!(
        admitted().await - before,
        1,
        "one ticket, one local admission"
    );
    let mut let_in = 1;
    for jar in jars[1..].iter_mut() {
        let_in += usize::from(visit_from(&proxy, jar, attacker).await.0);
    }
    assert_eq!(
        let_in, 3,
        "the address's join-limit of 3 while the store is away"
    );
    assert!(
        visit_from(&proxy, &mut jars[5].clone(), Some("10.1.1.1"))
            .await
            .0,
        "another address is not held by it"
    );
}

/// A reload keeps the per-client counts of an unchanged `join-limit` on the instance: an address
/// past its limit before a SIGHUP is past it after, also while the store is away (before, found
/// by review, each reload gave every address a whole limit again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_per_client_counts() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room =
        "admit-per-second = 1000\nmax-active = 1000\njoin-limit = { per-ip = 3, per = \"1h\" }";
    let conf = format!(
        "trusted-proxies = [\"127.0.0.1/32\"]\n{}",
        config(origin.addr, &redis.url(), 3, room)
    );
    let proxy = Proxy::start(&conf);
    admission_loop_ran(&redis).await;
    let from = Some("10.7.7.7");
    for _ in 0..3 {
        assert!(visit_from(&proxy, &mut Jar::default(), from).await.0);
    }
    reload_applied(&proxy).await;
    redis.kill();
    breaker_open(&proxy).await;
    let mut jar = Jar::default();
    jar.set(
        "anteroom_vid",
        &anteroom::store::VisitorId::random().to_string(),
    );
    let (admitted, state) = visit_from(&proxy, &mut jar, from).await;
    assert!(
        !admitted,
        "past its limit before the reload, let in by `local` after it: {state}"
    );
}

/// A request whose tickets name two identities, while Redis is frozen, waits out one store
/// timeout, not one for the question about its identities and another for the join after it
/// (found by review: every such poll took two timeouts, and counted two failures towards the
/// room's breaker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tickets_while_redis_is_frozen_cost_one_store_call() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 1";
    // A breaker that stays closed through the test: every call reaches the frozen store.
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), 1000, room));
    admission_loop_ran(&redis).await;
    // The one place inside is taken: the next two wait in line.
    assert!(visit(&proxy, &mut Jar::default()).await.0);
    let (mut first, mut second) = (Jar::default(), Jar::default());
    for jar in [&mut first, &mut second] {
        let (admitted, state) = visit(&proxy, jar).await;
        assert!(!admitted && state == "waiting", "{state}");
    }
    let ticket = |jar: &Jar| jar.get("anteroom_q.sale").unwrap().to_string();
    let both = format!(
        "anteroom_q.sale={}; anteroom_q.sale={}",
        ticket(&first),
        ticket(&second)
    );
    // Failed joins, timed out or failed otherwise (the connection's own deadline).
    let failures = || async {
        let (e, t) = tokio::join!(
            metric(
                &proxy,
                TOKEN,
                "anteroom_store_errors_total",
                "kind=\"error\",op=\"join\""
            ),
            metric(
                &proxy,
                TOKEN,
                "anteroom_store_errors_total",
                "kind=\"timeout\",op=\"join\""
            ),
        );
        e + t
    };
    redis.signal(true);
    let before = failures().await;
    let resp = client()
        .get(proxy.url("/products"))
        .header("accept", "application/json")
        .header("cookie", &both)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let after = failures().await;
    redis.signal(false);
    assert_ne!(status, 500);
    assert_eq!(after - before, 1, "failed store calls for one request");
}
