//! A drawn sale's opening moved by a rolling reload (found by review): the instance whose file
//! already has the opening behind it told every registrant their exact draw place (state,
//! position, ETA) while the store, with the instances disagreeing, had not recorded the
//! opening and kept the draw's order sealed. A drawn place is shown once the store has recorded
//! its draw's order as out, by the store's answer and at the edge alike.

use super::*;

const SECRET: &str = "[draw]\nsecret = \"the-draw-secret-0123456789abcdef0123456789\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drawn_place_is_shown_only_once_the_store_records_the_opening() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let from = at(-5);
    let drawn = |opens: &str| {
        let e = event(&from, opens);
        config(origin.addr, &redis, &format!("{e}draw = true\n\n{SECRET}"))
    };
    let later = drawn(&at(600));
    let (one, two) = (Proxy::start(&later), Proxy::start(&later));
    let mut jars = Vec::new();
    for proxy in [&one, &two, &one, &two, &one, &two] {
        let mut jar = Jar::default();
        let v: Value = get_json(proxy, STATUS, &mut jar).await.expect("a status");
        assert_eq!(v["state"], "prequeue", "{v}");
        assert!(v["position"].is_null(), "a drawn place shown: {v}");
        jars.push(jar);
    }

    // The opening moved to now, in one instance's file first.
    let now = drawn(&at(0));
    reload(&one, &now);
    configs_differ(&one, true).await;
    // An observation over ticks of both instances, polled through each: no place, no wait.
    let end = Instant::now() + Duration::from_secs(3);
    let mut polls = 0;
    while Instant::now() < end {
        for jar in jars.iter_mut() {
            for proxy in [&one, &two] {
                let v: Value = get_json(proxy, STATUS, jar).await.expect("a status");
                polls += 1;
                assert!(
                    v["position"].is_null() && v["eta_seconds"].is_null(),
                    "a drawn place shown before the store recorded the opening: {v}"
                );
                assert_ne!(v["state"], "admitted", "{v}");
                assert!(v["event"]["seed"].is_null(), "the seed shown: {v}");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(polls >= 24, "{polls} polls");
    assert_eq!(origin.count("/products"), 0, "nobody let in");

    // Both agree: the store records the opening, and every registrant is let in by the draw.
    reload(&two, &now);
    configs_differ(&one, false).await;
    for (i, jar) in jars.iter_mut().enumerate() {
        let proxy = if i % 2 == 0 { &one } else { &two };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v: Value = get_json(proxy, STATUS, jar).await.expect("a status");
            if v["state"] == "admitted" {
                break;
            }
            assert!(Instant::now() < deadline, "registrant {i} not let in: {v}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// An instance whose file no longer has the drawn event (reloaded first) tells a registrant no
/// place either: the store still answers a registration (found by review: every registrant
/// was told position 1 there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_without_the_drawn_event_tells_no_place() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let e = event(&at(-5), &at(600));
    let drawn = config(origin.addr, &redis, &format!("{e}draw = true\n\n{SECRET}"));
    let (one, two) = (Proxy::start(&drawn), Proxy::start(&drawn));
    let mut jars = Vec::new();
    for _ in 0..3 {
        let mut jar = Jar::default();
        let v: Value = get_json(&one, STATUS, &mut jar).await.expect("a status");
        assert_eq!(v["state"], "prequeue", "{v}");
        jars.push(jar);
    }
    reload(&two, &config(origin.addr, &redis, SECRET));
    configs_differ(&one, true).await;
    for jar in &mut jars {
        let v: Value = get_json(&two, STATUS, jar).await.expect("a status");
        assert!(v["position"].is_null(), "a place told: {v}");
        assert_ne!(v["state"], "admitted", "{v}");
    }
}
