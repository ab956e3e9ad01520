//! Queueing methods, black-box (the real proxy, a real origin; Redis for the random draw):
//! `reject` answers newcomers with the room's "closed" page and queues nobody while admitted
//! sessions run on; `random` shows no place (each admission is anyone's), answers every poll
//! from the store and lets everyone in.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anteroom::cookie::{self, CookieKey};
use anteroom::store::VisitorId;
use common::redis::RedisServer;
use common::*;

const TOKEN: &str = "admin-token-for-tests-0123456789";

fn config(origin: std::net::SocketAddr, store: &str, room: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"
{store}

[[room]]
name = "sale"
paths = ["/products", "/orders"]
admit-per-second = 20
max-active = 100
tick = "50ms"
{room}
"#,
        base = base_config(origin)
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn get(proxy: &Proxy, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = client().get(proxy.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_that_rejects_queues_nobody_and_lets_the_admitted_finish() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(
        origin.addr,
        "",
        "queueing = \"reject\"\n[room.texts.ko]\ntitle_closed = \"품절되었습니다\"",
    ));
    let page = get(&proxy, "/products", &[]).await;
    assert_eq!(page.status(), 200, "closed-status defaults to 200");
    assert_eq!(page.headers()["cache-control"], "no-store");
    assert!(
        set_cookies(&page).is_empty(),
        "no identity, no place: {:?}",
        set_cookies(&page)
    );
    let html = page.text().await.unwrap();
    assert!(html.contains("This sale is closed"), "{html}");
    let json: serde_json::Value = get(&proxy, "/products", &[("accept", "application/json")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(json["state"], "closed", "{json}");
    assert_eq!(json["room"], "sale");
    let status: serde_json::Value = get(&proxy, "/.anteroom/status?room=sale", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(status["state"], "closed", "{status}");
    // The operator's words, in the visitor's language.
    let ko = get(&proxy, "/products", &[("accept-language", "ko")]).await;
    assert!(ko.text().await.unwrap().contains("품절되었습니다"));
    assert_eq!(origin.count("/products"), 0, "nobody reached the shop");

    // An admission granted before the room closed runs to its end.
    let key = CookieKey::new(KEY.as_bytes()).unwrap();
    let vid = VisitorId::random();
    let value = cookie::sign(std::slice::from_ref(&key), "sale", vid, now() + 600).unwrap();
    let admitted = get(
        &proxy,
        "/products/42",
        &[("cookie", &format!("anteroom_sale={value}"))],
    )
    .await;
    assert_eq!(admitted.text().await.unwrap(), "origin GET /products/42");
    // Outside the room nothing changes.
    assert_eq!(
        get(&proxy, "/home", &[]).await.text().await.unwrap(),
        "origin GET /home"
    );
    eventually(Duration::from_secs(5), "the refusals counted", || {
        let proxy = &proxy;
        async move {
            let m = metrics_text(proxy, TOKEN).await;
            m.lines()
                .any(|l| {
                    l.starts_with("anteroom_rejected_total")
                        && l.contains("reason=\"closed\"")
                        && !l.ends_with(" 0")
                })
                .then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_page_may_have_its_own_status() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(
        origin.addr,
        "",
        "queueing = \"reject\"\nclosed-status = 410",
    ));
    assert_eq!(get(&proxy, "/products", &[]).await.status(), 410);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_random_draw_shows_no_place_asks_the_store_and_lets_everyone_in() {
    let redis = RedisServer::start();
    let store = format!(
        "[store]\nbackend = \"redis\"\nredis-url = \"{}\"\ntimeout = \"500ms\"",
        redis.url()
    );
    let origin = Origin::start().await;
    let proxy = Proxy::start(
        &config(
            origin.addr,
            &store,
            "queueing = \"random\"\nadmit-per-second = 5\n",
        )
        .replace("admit-per-second = 20\n", ""),
    );
    // Hold the line while everyone joins, so that nobody walks in through an empty room.
    let (code, body) = admin_call(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(serde_json::json!({ "queue_all": true })),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let mut jars: Vec<Jar> = (0..12).map(|_| Jar::default()).collect();
    for jar in jars.iter_mut() {
        let s = get_json(&proxy, "/.anteroom/status?room=sale", jar)
            .await
            .unwrap();
        assert_eq!(s["state"], "paused", "{s}");
    }
    let (code, _) = admin_call(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(serde_json::json!({ "queue_all": false })),
    )
    .await;
    assert_eq!(code, 200);
    // In line: no place to show, a count and an ETA all the same. (Asked of the last to come,
    // then of the others: a random draw may well have let the last one in first, and a loaded
    // machine may take a few ticks to the first poll.)
    let s = eventually(Duration::from_secs(10), "a waiting answer", || {
        let (proxy, mut all) = (&proxy, jars.clone());
        async move {
            for jar in all.iter_mut().rev() {
                let s = get_json(proxy, "/.anteroom/status?room=sale", jar).await?;
                if s["state"] == "waiting" {
                    return Some(s);
                }
            }
            None
        }
    })
    .await;
    assert!(s["position"].is_null(), "{s}");
    assert!(s["waiting"].as_u64().unwrap() >= 1, "{s}");
    until_all_admitted(&proxy, "sale", &mut jars, Duration::from_secs(30)).await;
    for jar in &jars {
        assert!(jar.get("anteroom_sale").is_some());
    }
    // Every poll asked the store: no answer came from the line's snapshot.
    let m = metrics_text(&proxy, TOKEN).await;
    let edge = m
        .lines()
        .find(|l| l.starts_with("anteroom_polls_total") && l.contains("answered=\"edge\""))
        .map(|l| l.rsplit(' ').next().unwrap_or("0").to_string())
        .unwrap_or_else(|| "0".into());
    assert_eq!(edge, "0", "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_lets_everyone_in_and_the_admin_api_counts_who_would_have_waited() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(
        &config(origin.addr, "", "queueing = \"passthrough\"")
            .replace("max-active = 100\n", "max-active = 1\n"),
    );
    for i in 0..5 {
        let resp = get(&proxy, &format!("/products/{i}"), &[]).await;
        let cookies = set_cookies(&resp);
        assert_eq!(
            resp.text().await.unwrap(),
            format!("origin GET /products/{i}")
        );
        assert!(
            cookies.iter().any(|(k, _, _)| k == "anteroom_sale"),
            "let in as admitted: {cookies:?}"
        );
    }
    let room = admin_json(&proxy, "/rooms/sale", TOKEN).await.unwrap();
    assert_eq!(room["would_have_queued"], 4, "max-active 1: {room}");
    assert_eq!(room["waiting"], 0, "{room}");
}

/// A room switched to `passthrough` by a reload lets in the visitors left in line from before,
/// on their next poll: the dry run's poll is the store's to answer, not the line's copy (found
/// by review: they were told to wait on at the old line's pace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_to_a_dry_run_lets_the_line_left_from_before_in() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ""));
    let patch = |body: serde_json::Value| {
        let proxy = &proxy;
        async move {
            let (status, text) = admin_call(
                proxy,
                reqwest::Method::PATCH,
                "/rooms/sale",
                Some(TOKEN),
                Some(body),
            )
            .await;
            assert_eq!(status, 200, "{text}");
        }
    };
    // A line that hardly moves: held, then at one admission in 1000 s.
    patch(serde_json::json!({ "queue_all": true, "admit_per_second": 0.001 })).await;
    let mut jars: Vec<Jar> = (0..30).map(|_| Jar::default()).collect();
    for jar in &mut jars {
        let v = get_json(&proxy, "/.anteroom/status?room=sale", jar)
            .await
            .unwrap();
        assert_ne!(v["state"], "admitted", "{v}");
    }
    let digest = || async {
        let v = admin_json(&proxy, "/rooms/sale", TOKEN)
            .await
            .expect("the room");
        v["config_digest"].as_str().unwrap_or("").to_string()
    };
    let before = digest().await;
    std::fs::write(
        proxy.config_path(),
        config(origin.addr, "", "queueing = \"passthrough\""),
    )
    .unwrap();
    proxy.signal("HUP");
    eventually(Duration::from_secs(10), "reloaded", || async {
        (digest().await != before).then_some(())
    })
    .await;
    patch(serde_json::json!({ "queue_all": false })).await;
    // Each at the first poll: the store lets the dry run's line in at once.
    for jar in &mut jars {
        let v = get_json(&proxy, "/.anteroom/status?room=sale", jar)
            .await
            .unwrap();
        assert_eq!(v["state"], "admitted", "let in by the dry run: {v}");
    }
}
