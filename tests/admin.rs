//! The admin API, metrics, logs and the operator CLI, against the real binary.

mod common;

use std::process::Command;
use std::time::Duration;

use common::redis::RedisServer;
use common::*;
use serde_json::{json, Value};

const TOKEN: &str = "admin-token-for-tests-0123456789";

fn config(origin: std::net::SocketAddr, store: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

{store}

[[room]]
name = "sale"
paths = ["/products", "/orders"]
admit-per-second = 100
max-active = 1
tick = "50ms"
consume = ["POST /orders"]
"#,
        base = base_config(origin)
    )
}

fn redis_store(url: &str) -> String {
    format!("[store]\nbackend = \"redis\"\nredis-url = \"{url}\"\ntimeout = \"300ms\"\nbreaker-failures = 3\nbreaker-cooldown = \"500ms\"")
}

async fn admin(
    proxy: &Proxy,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let (status, text) = admin_call(proxy, method, path, token, body).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn visitor_state(proxy: &Proxy) -> (u16, String) {
    let resp = client()
        .get(proxy.url("/products"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let state = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["state"].as_str().map(String::from))
        .unwrap_or(text);
    (status, state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_needs_the_token() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, ""));
    for (token, expected) in [
        (None, 401),
        (Some("wrong-token-wrong-token-wrong!!"), 401),
        (Some("x"), 401),
        (Some(TOKEN), 200),
    ] {
        for path in ["/rooms", "/rooms/sale", "/metrics"] {
            let resp = client().get(proxy.admin_url(path));
            let resp = match token {
                Some(t) => resp.bearer_auth(t),
                None => resp,
            };
            assert_eq!(
                resp.send().await.unwrap().status().as_u16(),
                expected,
                "{path} with {token:?}"
            );
        }
    }
    // The scheme in any case (RFC 9110), the token exactly.
    for (header, expected) in [
        (format!("bearer {TOKEN}"), 200),
        (format!("BEARER  {TOKEN}"), 200),
        (format!("Basic {TOKEN}"), 401),
        (format!("Bearer {}", TOKEN.to_uppercase()), 401),
    ] {
        let resp = client()
            .get(proxy.admin_url("/rooms"))
            .header("authorization", &header)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), expected, "{header}");
    }
    let (status, _) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        None,
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(
        visitor_state(&proxy).await.1,
        "origin GET /products",
        "the unauthorised PATCH changed nothing"
    );
    // Probes need no token.
    assert_eq!(
        admin(&proxy, reqwest::Method::GET, "/healthz", None, None)
            .await
            .0,
        200
    );
    assert_eq!(
        admin(&proxy, reqwest::Method::GET, "/readyz", None, None)
            .await
            .0,
        200
    );

    // Without a configured token, nothing but the probes answers.
    let bare = Proxy::start(
        &config(origin.addr, "").replace(&format!("[admin]\ntoken = \"{TOKEN}\""), ""),
    );
    assert_eq!(
        admin(&bare, reqwest::Method::GET, "/rooms", Some(TOKEN), None)
            .await
            .0,
        401
    );
    assert_eq!(
        admin(&bare, reqwest::Method::GET, "/healthz", None, None)
            .await
            .0,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rooms_are_shown_changed_and_cleared() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, ""));
    assert_eq!(
        visitor_state(&proxy).await.1,
        "origin GET /products",
        "the first visitor walks in"
    );
    for _ in 0..3 {
        assert_eq!(visitor_state(&proxy).await.1, "waiting");
    }
    let (status, v) = admin(
        &proxy,
        reqwest::Method::GET,
        "/rooms/sale",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["waiting"], 3);
    assert_eq!(v["active"], 1);
    assert_eq!(v["enabled"], true);
    assert_eq!(v["queue_all"], false);
    assert_eq!(v["admit_per_second"], 100.0);
    // max-active 1 is taken and that session does not end: the line is held by the cap, and
    // no wait follows from the rate (100/s would say a second).
    assert_eq!(v["held_by"], "max-active", "{v}");
    assert!(v["new_visitor_wait_seconds"].is_null(), "{v}");
    assert_eq!(v["config"]["paths"], json!(["/products", "/orders"]));
    assert_eq!(v["store"]["backend"], "memory");
    assert_eq!(v["store"]["healthy"], true);
    let (_, all) = admin(&proxy, reqwest::Method::GET, "/rooms", Some(TOKEN), None).await;
    assert_eq!(all.as_array().unwrap().len(), 1);

    // Overrides, then back to the configured values.
    let (status, v) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({"admit_per_second": 7.5, "max_active": 50})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["admit_per_second"], 7.5);
    assert_eq!(v["max_active"], 50);
    assert_eq!(v["overrides"]["max_active"], 50);
    let (_, v) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({"admit_per_second": null, "max_active": null})),
    )
    .await;
    assert_eq!(v["admit_per_second"], 100.0);
    assert_eq!(v["overrides"]["max_active"], Value::Null);
    // `null` is the configuration's for the switches too: on, not held.
    for (body, key, want) in [
        (
            json!({"queue_all": true, "enabled": false}),
            "queue_all",
            true,
        ),
        (json!({"queue_all": null}), "queue_all", false),
        (json!({"enabled": null}), "enabled", true),
    ] {
        let (status, v) = admin(
            &proxy,
            reqwest::Method::PATCH,
            "/rooms/sale",
            Some(TOKEN),
            Some(body.clone()),
        )
        .await;
        assert_eq!((status, &v[key]), (200, &Value::from(want)), "{body}: {v}");
    }

    // Bad requests say what is wrong, and change nothing. An array is not read as the fields
    // in order (found by review: `[null, true, 7.5, 3]` held the line and set the rate).
    let before = admin(
        &proxy,
        reqwest::Method::GET,
        "/rooms/sale",
        Some(TOKEN),
        None,
    )
    .await
    .1;
    for (body, expected) in [
        (json!([null, true, 7.5, 3]), 400),
        (json!([false]), 400),
        (json!([]), 400),
        (json!({"admit_per_second": 0}), 422),
        (json!({"admit_per_second": 1e-300}), 422),
        (json!({"max_active": 0}), 422),
        (json!({"rate": 5}), 400),
        (json!({"enabled": "yes"}), 400),
    ] {
        let (status, v) = admin(
            &proxy,
            reqwest::Method::PATCH,
            "/rooms/sale",
            Some(TOKEN),
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, expected, "{body}: {v}");
        assert!(v["error"].as_str().is_some());
    }
    // A repeated key is refused, not read as its last value (re-review: a trailing `null`
    // removed the pin the same body set).
    for raw in [
        r#"{"admit_per_second": 7, "admit_per_second": null}"#,
        r#" {"enabled": false, "enabled": null}"#,
    ] {
        let resp = client()
            .patch(proxy.admin_url("/rooms/sale"))
            .bearer_auth(TOKEN)
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{raw}");
    }
    let after = admin(
        &proxy,
        reqwest::Method::GET,
        "/rooms/sale",
        Some(TOKEN),
        None,
    )
    .await
    .1;
    for key in ["enabled", "queue_all", "admit_per_second", "overrides"] {
        assert_eq!(before[key], after[key], "{key}: {before} then {after}");
    }
    assert_eq!(
        admin(
            &proxy,
            reqwest::Method::GET,
            "/rooms/nope",
            Some(TOKEN),
            None
        )
        .await
        .0,
        404
    );

    // Clearing the line.
    let (status, v) = admin(
        &proxy,
        reqwest::Method::DELETE,
        "/rooms/sale/waiting",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!((status, v["removed"].as_u64()), (200, Some(3)));
    let (_, v) = admin(
        &proxy,
        reqwest::Method::GET,
        "/rooms/sale",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(v["waiting"], 0);

    // The room switched off lets everyone through; queue_all holds everyone.
    admin(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(visitor_state(&proxy).await.1, "origin GET /products");
    admin(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({"enabled": true, "queue_all": true, "max_active": 100})),
    )
    .await;
    assert_eq!(visitor_state(&proxy).await.1, "paused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_instance_is_obeyed_by_another() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let cfg = config(origin.addr, &redis_store(&redis.url()));
    let a = Proxy::start(&cfg);
    let b = Proxy::start(&cfg);
    assert_eq!(visitor_state(&b).await.1, "origin GET /products");
    assert_eq!(visitor_state(&b).await.1, "waiting");

    let (status, _) = admin(
        &a,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(status, 200);
    eventually(
        Duration::from_secs(2),
        "instance B lets everyone through",
        || async { (visitor_state(&b).await.1 == "origin GET /products").then_some(()) },
    )
    .await;

    admin(
        &a,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({"enabled": true, "queue_all": true})),
    )
    .await;
    eventually(
        Duration::from_secs(2),
        "instance B holds the line",
        || async { (visitor_state(&b).await.1 == "paused").then_some(()) },
    )
    .await;
    let (_, v) = admin(&b, reqwest::Method::GET, "/rooms/sale", Some(TOKEN), None).await;
    assert_eq!(
        v["queue_all"], true,
        "B reads the state from the store: {v}"
    );

    // The largest cap the API takes comes back from the store as it was given; a larger one
    // is refused (found by review: the store wrote 9007199254740993 back as 9007199254741000).
    for (cap, want) in [(9_007_199_254_740_993u64, 422), (1_000_000_000_001, 422)] {
        let (status, v) = admin(
            &a,
            reqwest::Method::PATCH,
            "/rooms/sale",
            Some(TOKEN),
            Some(json!({ "max_active": cap })),
        )
        .await;
        assert_eq!(status, want, "{cap}: {v}");
    }
    let cap = 1_000_000_000_000u64;
    let (status, _) = admin(
        &a,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({ "max_active": cap })),
    )
    .await;
    assert_eq!(status, 200);
    eventually(Duration::from_secs(2), "B reads the cap", || async {
        let (_, v) = admin(&b, reqwest::Method::GET, "/rooms/sale", Some(TOKEN), None).await;
        (v["max_active"] == cap).then_some(())
    })
    .await;
    let (_, v) = admin(
        &b,
        reqwest::Method::GET,
        "/rooms/sale/changes",
        Some(TOKEN),
        None,
    )
    .await;
    let text = v.to_string();
    assert!(
        text.contains("1000000000000") && !text.contains("e+"),
        "{text}"
    );
}

/// A store that loses its data within a tick of an operator's change: the change is what the
/// instance re-asserts, not the state its tick before had seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_kept_when_the_store_loses_its_data_before_the_next_tick() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    // Ticks far apart, so that the loss comes between the change and the next tick.
    let cfg =
        config(origin.addr, &redis_store(&redis.url())).replace("tick = \"50ms\"", "tick = \"2s\"");
    let a = Proxy::start(&cfg);
    let field = |f: &'static str| {
        let port = redis.port;
        move || async move {
            // A bulk string's value ("$-1" for none).
            let reply = common::redis::raw(port, &format!("HGET {{anteroom:sale}}:room {f}"))?;
            reply.lines().nth(1).map(str::to_string)
        }
    };
    let first = eventually(Duration::from_secs(10), "the first tick", field("gen")).await;
    let (status, _) = admin(
        &a,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({"queue_all": true})),
    )
    .await;
    assert_eq!(status, 200);
    common::redis::raw(redis.port, "FLUSHALL").unwrap();
    let second = eventually(Duration::from_secs(10), "a new generation", field("gen")).await;
    assert_ne!(first, second);
    // The loss is seen and the state re-asserted by the tick that made the generation.
    let held = eventually(
        Duration::from_secs(10),
        "the state re-asserted",
        field("queue_all"),
    )
    .await;
    assert_eq!(held, "1", "the line held again");
    let (_, v) = admin(&a, reqwest::Method::GET, "/rooms/sale", Some(TOKEN), None).await;
    assert_eq!(v["queue_all"], true, "the line held again: {v}");
    assert_eq!(visitor_state(&a).await.1, "paused");
}

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
    redis.restart();
    eventually(
        Duration::from_secs(10),
        "ready again after Redis returns",
        || ready(200),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_cli_drives_the_admin_api() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, ""));
    let cli = |args: &[&str]| {
        let out = Command::new(binary())
            .args(args)
            .arg("--config")
            .arg(proxy.config_path())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = cli(&["rooms"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("ROOM"), "{out}");
    assert!(out.contains("sale") && out.contains("open"), "{out}");
    let (ok, out, err) = cli(&[
        "room",
        "sale",
        "set",
        "queue_all=true",
        "admit_per_second=12",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["queue_all"].as_bool(), v["admit_per_second"].as_f64()),
        (Some(true), Some(12.0))
    );
    let (_, out, _) = cli(&["rooms"]);
    assert!(out.contains("held"), "{out}");
    // A rate that is not a finite number is refused: encoded, it would be `null`, which means
    // "back to the configured rate" (found by review: `1e400` removed the pin, exit 0).
    for bad in ["1e400", "inf", "-inf", "NaN", "infinity"] {
        let (ok, _, err) = cli(&["room", "sale", "set", &format!("admit_per_second={bad}")]);
        assert!(!ok && err.contains("a number"), "{bad}: {err}");
    }
    let (_, v) = admin(
        &proxy,
        reqwest::Method::GET,
        "/rooms/sale",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(v["overrides"]["admit_per_second"], 12.0, "{v}");
    let (ok, _, err) = cli(&["room", "sale", "set", "speed=9"]);
    assert!(!ok && err.contains("unknown key"), "{err}");
    let (ok, _, err) = cli(&["room", "nope"]);
    assert!(!ok && err.contains("no room named"), "{err}");
    let (ok, out, _) = cli(&["room", "sale", "clear"]);
    assert!(ok && out.contains("\"removed\""), "{out}");
    let (ok, _, _) = cli(&["health"]);
    assert!(ok);
    let out = Command::new(binary())
        .args(["health", "--admin", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// `--config FILE` takes the admin address and token from the file and nothing else: the
/// cookie key the file reads from the environment is not needed at an operator's terminal. A
/// refused or missing token is explained in CLI terms; booleans take any case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reads_only_what_it_needs_and_explains_a_refusal() {
    let origin = Origin::start().await;
    let text = format!(
        r#"
[cookie]
keys = ["env:ANTEROOM_TEST_COOKIE_KEY"]

[admin]
token = "env:ANTEROOM_TEST_ADMIN_TOKEN"

[[upstream]]
name = "shop"
addr = "{}"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 10
max-active = 5
"#,
        origin.addr
    );
    let proxy = Proxy::start_with(
        &text,
        &[
            ("ANTEROOM_LOG", "warn"),
            (
                "ANTEROOM_TEST_COOKIE_KEY",
                "cookie-key-0123456789-0123456789-0123456789",
            ),
            ("ANTEROOM_TEST_ADMIN_TOKEN", TOKEN),
        ],
        &[],
    );
    let cli = |args: &[&str], env: &[(&str, &str)]| {
        let out = Command::new(binary())
            .args(args)
            .env_remove("ANTEROOM_ADMIN_TOKEN")
            .env_remove("ANTEROOM_TEST_COOKIE_KEY")
            .env_remove("ANTEROOM_TEST_ADMIN_TOKEN")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let config = proxy.config_path();
    let config = config.to_str().unwrap();
    // The token's variable, not the cookie key's.
    let (ok, out, err) = cli(
        &["rooms", "--config", config],
        &[("ANTEROOM_TEST_ADMIN_TOKEN", TOKEN)],
    );
    assert!(ok, "{err}");
    assert!(out.contains("sale"), "{out}");
    // With --token, not even the token's variable.
    let (ok, _, err) = cli(&["rooms", "--config", config, "--token", TOKEN], &[]);
    assert!(ok, "{err}");
    // Without either: the variable is named.
    let (ok, _, err) = cli(&["rooms", "--config", config], &[]);
    assert!(!ok);
    assert!(
        err.contains("ANTEROOM_TEST_ADMIN_TOKEN is not set"),
        "{err}"
    );
    assert!(!err.contains("ANTEROOM_TEST_COOKIE_KEY"), "{err}");
    // `health` needs no token at all (`/healthz` is open): a container's check need not hold
    // the token's variable (found by review: it needed it).
    let (ok, _, err) = cli(&["health", "--config", config], &[]);
    assert!(ok, "{err}");
    // A wrong token and no token: what to pass, not which HTTP header.
    let admin = proxy.admin_url("");
    for args in [
        vec![
            "rooms",
            "--admin",
            &admin,
            "--token",
            "wrong-token-0123456789",
        ],
        vec!["rooms", "--admin", &admin],
    ] {
        let (ok, _, err) = cli(&args, &[]);
        assert!(!ok, "{args:?}");
        assert!(
            err.contains("--token") && err.contains("ANTEROOM_ADMIN_TOKEN"),
            "{err}"
        );
        assert!(!err.contains("Authorization"), "{err}");
    }
    let (ok, out, err) = cli(
        &["room", "sale", "set", "queue_all=TRUE", "--admin", &admin],
        &[("ANTEROOM_ADMIN_TOKEN", TOKEN)],
    );
    assert!(ok, "{err}");
    assert!(out.contains("\"queue_all\": true"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_carry_an_access_line_never_a_secret_and_can_be_json() {
    let origin = Origin::start().await;
    let proxy = Proxy::start_with(
        &config(origin.addr, ""),
        &[("ANTEROOM_LOG", "debug")],
        &["--log-format", "json"],
    );
    let mut jar = Jar::default();
    let resp = client()
        .get(proxy.url("/products?secret=s3cr3t"))
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    let admission = jar.get("anteroom_sale").unwrap().to_string();
    client()
        .get(proxy.url("/products/1"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    admin(&proxy, reqwest::Method::GET, "/rooms", Some(TOKEN), None).await;
    admin(
        &proxy,
        reqwest::Method::GET,
        "/rooms",
        Some("wrong-token"),
        None,
    )
    .await;
    let logs = eventually(Duration::from_secs(5), "two access lines", || async {
        let logs = proxy.stderr();
        (logs.matches("anteroom::access").count() >= 2).then_some(logs)
    })
    .await;
    let access: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "anteroom::access")
        .collect();
    assert!(access.len() >= 2, "JSON access lines in:\n{logs}");
    assert_eq!(access[0]["room"], "sale");
    assert_eq!(access[0]["outcome"], "admit");
    assert_eq!(access[0]["status"], 200);
    assert!(access[0]["duration_ms"].as_f64().is_some());
    for secret in [KEY, TOKEN, admission.as_str(), "s3cr3t"] {
        assert!(
            !logs.contains(secret),
            "{secret} appears in the logs:\n{logs}"
        );
    }
}

/// What an operator reads: the start names both listeners and the store, and the store says
/// when it answers; an admin change is logged as the keys it set; a reload refused for bad
/// syntax names no empty key; durations are to the microsecond; a Ctrl-C is one line of ours
/// and none of Pingora's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_says_what_an_operator_needs_once() {
    let origin = Origin::start().await;
    let text = config(origin.addr, "[server]\ngrace-period = \"0s\"");
    let mut proxy = Proxy::start_with(&text, &[("ANTEROOM_LOG", "info")], &[]);
    client().get(proxy.url("/products/1")).send().await.unwrap();
    let (status, _) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(json!({"max_active": 20, "admit_per_second": null})),
    )
    .await;
    assert_eq!(status, 200);
    // The access log is written every 25 ms; its last lines may be lost at exit.
    eventually(Duration::from_secs(5), "the access line", || async {
        proxy.stderr().contains("anteroom::access").then_some(())
    })
    .await;
    let good = std::fs::read_to_string(proxy.config_path()).unwrap();
    std::fs::write(proxy.config_path(), format!("{good}\n[[room]\n")).unwrap();
    proxy.signal("HUP");
    eventually(Duration::from_secs(5), "the refused reload", || async {
        proxy.stderr().contains("reload refused").then_some(())
    })
    .await;
    proxy.signal("INT");
    assert_eq!(proxy.wait_exit(Duration::from_secs(20)), Some(0));
    let logs = proxy.stderr();
    let line = |needle: &str| -> String {
        logs.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} in:\n{logs}"))
            .to_string()
    };
    let start = line(" starting ");
    assert!(
        start.contains(&format!("public={}", proxy.addr))
            && start.contains(&format!("admin={}", proxy.admin))
            && start.contains("store=memory"),
        "{start}"
    );
    line("store connected");
    let change = line("room state changed");
    assert!(
        change.contains("max_active=20") && change.contains("admit_per_second=default"),
        "{change}"
    );
    assert!(
        !change.contains("RoomPatch") && !change.contains("enabled") && !change.contains("Some("),
        "{change}"
    );
    let refused = line("reload refused");
    assert!(!refused.contains("key=\"\""), "{refused}");
    let access = line("anteroom::access");
    let ms = access.rsplit("duration_ms=").next().unwrap().trim();
    assert!(
        ms.split('.').nth(1).is_none_or(|d| d.len() <= 3),
        "{access}"
    );
    assert_eq!(logs.matches("shutting down").count(), 1, "{logs}");
    assert!(!logs.contains("pingora"), "Pingora's own lines:\n{logs}");
}
