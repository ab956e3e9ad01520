//! After an outage: the sessions an instance admitted on its own are in the shop before the
//! store hears of them, and nobody takes their slots meanwhile.

use super::*;

/// How the store goes away.
#[derive(Clone, Copy, Debug)]
enum Away {
    /// Paused, its data kept (or a partition of every instance).
    Paused,
    /// Killed and started again empty.
    Emptied,
}

/// Once Redis answers again, nobody walks into the slots of the sessions an instance admitted
/// on its own, through any instance, until that instance has told the store of them; then the
/// line moves into the slots left (found by review r94a: newcomers through the other instance
/// walked in at once, five in for a cap of three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_walks_into_the_slots_of_local_admissions_before_the_store_is_told() {
    slots_of_local_admissions_kept(Away::Paused).await;
}

/// The same when Redis comes back empty: the store lost its record of the instances and of
/// what they told, and waits for as many as the instance that finds the loss knew (found by
/// review r95a: newcomers walked in at once, six in for a cap of four), for as long as the
/// one with the longest heartbeat may be away (re-review r96a).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_walks_into_the_slots_of_local_admissions_after_redis_comes_back_empty() {
    slots_of_local_admissions_kept(Away::Emptied).await;
}

async fn slots_of_local_admissions_kept(away: Away) {
    const PAUSE_MS: u64 = 2500;
    const MAX_ACTIVE: usize = 4;
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 100\nmax-active = 4\nsession-ttl = \"10m\"";
    let cfg = config(origin.addr, &redis.url(), 3, room);
    // The first instance tries the store again later than the other: the other's newcomers
    // reach the store before it can tell of its own admissions. After an empty restart, later
    // than the other's heartbeat's five seconds: the other, finding the loss, has the store
    // wait as long as the first may be away (found by re-review r96a: the wait ended with the
    // finder's own heartbeat's life, and the line moved beside the first's sessions).
    let cooldown = match away {
        Away::Paused => "breaker-cooldown = \"2500ms\"",
        Away::Emptied => "breaker-cooldown = \"10s\"",
    };
    let slow = cfg.replace("breaker-cooldown = \"500ms\"", cooldown);
    assert_ne!(slow, cfg);
    let proxies = [Proxy::start(&slow), Proxy::start(&cfg)];
    both_instances_known(&redis).await;
    let paused_at = Instant::now();
    match away {
        Away::Paused => {
            let pause = format!("CLIENT PAUSE {PAUSE_MS} ALL");
            assert!(raw(redis.port, &pause).is_some_and(|r| r.starts_with("+OK")));
        }
        Away::Emptied => redis.kill(),
    }
    for p in &proxies {
        breaker_open(p).await;
    }
    // Through the first instance only: its share of max-active, on its own.
    let (local, states) = newcomers(&proxies[0], 4, 6).await;
    assert!(
        matches!(away, Away::Emptied) || paused_at.elapsed() < Duration::from_millis(PAUSE_MS),
        "admitted while Redis was still paused"
    );
    assert_eq!(
        local,
        MAX_ACTIVE / 2,
        "the first instance's share: {states:?}"
    );
    if let Away::Emptied = away {
        redis.restart();
    }
    // Newcomers through the other one from the moment it hears Redis again, polling on.
    eventually(
        Duration::from_secs(10),
        "the other's breaker closed",
        || async {
            let r = client()
                .get(proxies[1].admin_url("/readyz"))
                .send()
                .await
                .ok()?;
            (r.status() == 200).then_some(())
        },
    )
    .await;
    let mut jars = vec![Jar::default(); 6];
    let mut through_other = 0;
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Until the line has taken the slots left, and a second past that.
    let mut settled_at = None;
    // What the waiting visitors and the admin API are told holds the line before anyone moves.
    let mut told_held_by = std::collections::BTreeSet::new();
    while settled_at.is_none_or(|t: Instant| t.elapsed() < Duration::from_secs(1)) {
        assert!(
            Instant::now() < deadline,
            "the line never took the slots left: {through_other} in, {seen:?}"
        );
        for jar in jars.iter_mut() {
            if jar.get("anteroom_sale").is_some() {
                continue;
            }
            let (admitted, state) = visit(&proxies[1], jar).await;
            through_other += usize::from(admitted);
            seen.push(state);
        }
        if through_other == 0 {
            told_held_by.extend(held_by(&proxies[1], &jars[0]).await);
        }
        assert!(
            local + through_other <= MAX_ACTIVE,
            "{local} admitted locally and {through_other} through the other instance, for a \
             max-active of {MAX_ACTIVE}: {seen:?}"
        );
        if through_other == MAX_ACTIVE - local && settled_at.is_none() {
            settled_at = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // After an empty restart the first instance is away for seconds: the line stands still
    // for the store, not for the rate (found by review r95a: both said `rate`).
    if let Away::Emptied = away {
        assert!(
            told_held_by.contains("visitor: store") && told_held_by.contains("admin: store"),
            "{told_held_by:?}"
        );
    }
    let active = raw(redis.port, "ZCARD {anteroom:sale}:active").unwrap_or_default();
    assert_eq!(
        active.trim(),
        format!(":{MAX_ACTIVE}"),
        "the store counts all of them"
    );
}

/// An order from the line through an instance that has not yet heard the room was switched off
/// through another (the store tells it so at the join) takes the place as one through an
/// instance that knows does (found by re-review r96a: within that instance's tick, the place
/// was kept and bought a second order once the room was back on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_from_the_line_just_after_the_room_is_switched_off_takes_the_place() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 50\nmax-active = 1\nsession-ttl = \"10m\"\n\
                consume = [\"POST /products/order\"]";
    let cfg = config(origin.addr, &redis.url(), 3, room);
    let slow = cfg.replace("tick = \"100ms\"", "tick = \"3s\"");
    assert_ne!(slow, cfg);
    let (told, late) = (Proxy::start(&cfg), Proxy::start(&slow));
    both_instances_known(&redis).await;
    let (inside, _) = newcomers(&told, 1, 3).await;
    assert_eq!(inside, 1);
    let (mut first, mut second) = (Jar::default(), Jar::default());
    for jar in [&mut first, &mut second] {
        let (admitted, state) = visit(&told, jar).await;
        assert!(!admitted && state == "waiting", "{state}");
    }
    switch_room(&told, TOKEN, "sale", false).await;
    let resp = client()
        .post(late.url("/products/order"))
        .header("cookie", first.header())
        .send()
        .await
        .unwrap();
    first.absorb(&resp);
    let text = resp.text().await.unwrap_or_default();
    assert!(text.starts_with("origin POST"), "everyone passes: {text}");
    switch_room(&told, TOKEN, "sale", true).await;
    eventually(Duration::from_secs(10), "the order settled", || {
        let (told, mut second) = (&told, second.clone());
        async move {
            let v = get_json(told, "/.anteroom/status?room=sale", &mut second).await?;
            (v["position"] == 1).then_some(())
        }
    })
    .await;
    let v = get_json(&told, "/.anteroom/status?room=sale", &mut first)
        .await
        .unwrap();
    assert_ne!(v["position"], 1, "the place that bought the order: {v}");
}

/// What a visitor in line (`jar`) and the admin API are told holds the room's line, as
/// "visitor: X" and "admin: X".
async fn held_by(proxy: &Proxy, jar: &Jar) -> Vec<String> {
    let mut told = Vec::new();
    let status = client()
        .get(proxy.url("/.anteroom/status?room=sale"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    if let Ok(v) = status.json::<Value>().await {
        if v["state"] == "waiting" {
            told.push(format!("visitor: {}", v["held_by"].as_str().unwrap_or("")));
        }
    }
    let room = client()
        .get(proxy.admin_url("/rooms/sale"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    if let Ok(v) = room.json::<Value>().await {
        told.push(format!("admin: {}", v["held_by"].as_str().unwrap_or("")));
    }
    told
}

/// An instance whose admission steps all reach Redis late (past their deadline: they run,
/// their answers never come in time) says nothing by them: the line goes on through the other
/// instance (found by re-review r98a: each late step, saying its instance was cut off, started
/// the wait for every instance to tell again, and its own "told" was never written, so the
/// line stood still for every instance as long as the fault lasted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_steps_all_come_late_does_not_hold_the_line() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let slow = common::faults::SlowRequests::start(redis.port, &[b"}:configs"], Duration::ZERO);
    let room = "admit-per-second = 50\nmax-active = 100\nsession-ttl = \"10m\"";
    let cfg = |url: &str| {
        config(origin.addr, url, 3, room)
            .replace("on-store-error = \"local\"", "on-store-error = \"closed\"")
    };
    let (on_time, late) = (
        Proxy::start(&cfg(&redis.url())),
        Proxy::start(&cfg(&format!("redis://{}", slow.addr))),
    );
    both_instances_known(&redis).await;
    // From now on the second instance's steps reach Redis past their deadline (twice the
    // 200 ms timeout).
    slow.set_delay(Duration::from_millis(600));
    breaker_open(&late).await;
    // A newcomer every half second for eight seconds (the late steps keep coming meanwhile),
    // each let in within three.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        let mut jar = Jar::default();
        let came = Instant::now();
        loop {
            let (admitted, state) = visit(&on_time, &mut jar).await;
            if admitted {
                break;
            }
            assert!(
                came.elapsed() < Duration::from_secs(3),
                "a newcomer {:?} in still waits: {state}",
                started.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(late);
}
