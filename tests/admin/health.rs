use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_as_prometheus_text() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, ""));
    visitor_state(&proxy).await; // enters
    visitor_state(&proxy).await; // waits
    client().get(proxy.url("/elsewhere")).send().await.unwrap();
    client()
        .get(proxy.url("/.anteroom/status?room=nope"))
        .send()
        .await
        .unwrap();
    let text = eventually(
        Duration::from_secs(5),
        "the tick to report the line",
        || async {
            // Both gauges of one tick: the first visitor's admission and the second in line
            // (a CI run once scraped a tick with the line and not yet the admission).
            let t = metrics_text(&proxy, TOKEN).await;
            (t.contains("anteroom_waiting{room=\"sale\"} 1")
                && t.contains("anteroom_active{room=\"sale\"} 1"))
            .then_some(t)
        },
    )
    .await;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let value = |name: &str, labels: &[(&str, &str)]| -> f64 {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                prometheus_parse::Value::Histogram(ref h) => {
                    h.iter().map(|b| b.count).fold(0.0, f64::max)
                }
                _ => f64::NAN,
            })
            .unwrap_or_else(|| panic!("{name} {labels:?} missing"))
    };
    assert_eq!(value("anteroom_waiting", &[("room", "sale")]), 1.0);
    assert_eq!(value("anteroom_active", &[("room", "sale")]), 1.0);
    assert_eq!(value("anteroom_admitted_total", &[("room", "sale")]), 1.0);
    assert_eq!(value("anteroom_joined_total", &[("room", "sale")]), 2.0);
    assert_eq!(
        value(
            "anteroom_requests_total",
            &[("room", "sale"), ("outcome", "admit")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "anteroom_requests_total",
            &[("room", "sale"), ("outcome", "wait")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "anteroom_requests_total",
            &[("room", "-"), ("outcome", "pass")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "anteroom_rejected_total",
            &[("room", "-"), ("reason", "bad_request")]
        ),
        1.0
    );
    assert!(value("anteroom_request_duration_seconds", &[("outcome", "wait")]) >= 1.0);
    assert_eq!(value("anteroom_breaker_open", &[]), 0.0);
    for name in ["anteroom_wait_seconds", "anteroom_store_errors_total"] {
        assert!(text.contains(&format!("# TYPE {name}")), "{name} declared");
    }
}

/// A reload that removes a room takes its gauges out of the export: their last values stayed
/// and were summed with the other rooms' (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_rooms_gauges_leave_the_metrics() {
    let origin = Origin::start().await;
    let flash = "\n[[room]]\nname = \"flash\"\npaths = [\"/flash\"]\nadmit-per-second = 0.5\n\
                 max-active = 1\ntick = \"50ms\"\n";
    let proxy = Proxy::start(&format!("{}{flash}", config(origin.addr, "")));
    let resp = client().get(proxy.url("/flash")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "admitted in flash");
    let gauges = [
        "anteroom_active{room=\"flash\"}",
        "anteroom_waiting{room=\"flash\"}",
        "anteroom_admit_rate{room=\"flash\"}",
        "anteroom_origin_inflight{room=\"flash\"}",
    ];
    eventually(Duration::from_secs(5), "flash's gauges", || async {
        let t = metrics_text(&proxy, TOKEN).await;
        (t.contains("anteroom_active{room=\"flash\"} 1") && gauges.iter().all(|g| t.contains(g)))
            .then_some(())
    })
    .await;
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    std::fs::write(proxy.config_path(), text.replace(flash, "\n")).unwrap();
    reload_applied(&proxy).await;
    let t = metrics_text(&proxy, TOKEN).await;
    for g in gauges {
        assert!(!t.contains(g), "{g} still exported after flash was removed");
    }
    assert!(t.contains("anteroom_active{room=\"sale\"}"), "sale's stay");
}

/// A frozen Redis is not ready at any moment: not while the breaker is half open, trying
/// whether it is back (found by review: `/readyz` said ready for a moment each cooldown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_not_ready_all_the_while_redis_is_frozen() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, &redis_store(&redis.url())));
    let ready = || async {
        client()
            .get(proxy.admin_url("/readyz"))
            .send()
            .await
            .map(|r| r.status().as_u16())
    };
    eventually(Duration::from_secs(5), "ready on a live Redis", || async {
        (ready().await.ok()? == 200).then_some(())
    })
    .await;
    redis.signal(true);
    eventually(
        Duration::from_secs(10),
        "503 once Redis is frozen",
        || async { (ready().await.ok()? == 503).then_some(()) },
    )
    .await;
    // Several cooldowns (500 ms), each with a half-open try that waits out the timeout.
    let until = std::time::Instant::now() + Duration::from_secs(3);
    let mut seen = std::collections::BTreeMap::new();
    while std::time::Instant::now() < until {
        *seen.entry(ready().await.unwrap_or(0)).or_insert(0) += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    redis.signal(false);
    assert_eq!(
        seen.keys().copied().collect::<Vec<u16>>(),
        [503],
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_store() {
    let mut redis = RedisServer::start();
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, &redis_store(&redis.url())));
    let ready = |want: u16| {
        let proxy = &proxy;
        async move {
            let (s, v) = admin(proxy, reqwest::Method::GET, "/readyz", None, None).await;
            (s == want).then_some(v)
        }
    };
    eventually(Duration::from_secs(5), "ready on a live Redis", || {
        ready(200)
    })
    .await;
    redis.kill();
    let v = eventually(Duration::from_secs(10), "503 once Redis is gone", || {
        ready(503)
    })
    .await;
    assert_eq!(v["ready"], false);
    assert!(v["last_error"].as_str().is_some(), "{v}");
    let text = metrics_text(&proxy, TOKEN).await;
    assert!(
        text.contains("anteroom_breaker_open 1"),
        "the breaker opened"
    );
    assert!(
        text.contains("anteroom_store_errors_total{kind=\"breaker\",op=\"admit\"}"),
        "calls fail fast while open"
    );
    let room = || async {
        let (_, v) = admin(
            &proxy,
            reqwest::Method::GET,
            "/rooms/sale",
            Some(TOKEN),
            None,
        )
        .await;
        v["store"].clone()
    };
    let store = room().await;
    assert!(store["last_error"].as_str().is_some(), "{store}");
    redis.restart();
    eventually(
        Duration::from_secs(10),
        "ready again after Redis returns",
        || ready(200),
    )
    .await;
    // The room's view shows the error only while it stands, as /readyz (found by review: an
    // error of an outage long over stood beside "healthy": true).
    let store = eventually(
        Duration::from_secs(10),
        "healthy in the room's view",
        || async {
            let store = room().await;
            (store["healthy"] == true).then_some(store)
        },
    )
    .await;
    assert!(store["last_error"].is_null(), "{store}");
}
