//! Black-box tests of the proxy: the real binary, a real origin, real HTTP.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anteroom::cookie::{self, CookieKey};
use anteroom::store::VisitorId;
use common::*;
use serde_json::Value;

/// Two rooms: `sale` (one shopper at a time, consume on POST /orders) and `vip`.
fn config(origin: std::net::SocketAddr, extra: &str) -> String {
    format!(
        r#"{base}
[[room]]
name = "sale"
paths = ["/products", "/cart", "/orders"]
admit-per-second = 50
max-active = 1
tick = "50ms"
consume = ["POST /orders"]
{extra}

[[room]]
name = "vip"
paths = ["/vip"]
admit-per-second = 50
max-active = 100
"#,
        base = base_config(origin)
    )
}

async fn setup(extra: &str) -> (Origin, Proxy) {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, extra));
    (origin, proxy)
}

async fn get(proxy: &Proxy, path: &str, jar: &Jar, accept: Option<&str>) -> reqwest::Response {
    let mut req = client().get(proxy.url(path));
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    req.send().await.unwrap()
}

/// A visitor who got in through the fast path and holds the only slot of `sale`.
async fn admitted_visitor(proxy: &Proxy) -> Jar {
    let mut jar = Jar::default();
    let resp = get(proxy, "/products", &jar, None).await;
    assert_eq!(resp.status(), 200);
    jar.absorb(&resp);
    assert!(
        jar.get("anteroom_sale").is_some(),
        "fast path sets the admission cookie"
    );
    assert_eq!(resp.text().await.unwrap(), "origin GET /products");
    jar
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_outside_rooms_pass_through_unchanged() {
    let (origin, proxy) = setup("").await;
    let resp = client()
        .get(proxy.url("/home/page?x=1&y=%20z"))
        .header("x-custom", "kept")
        .header(
            "cookie",
            "shop=1; anteroom_vid=0123456789abcdef0123456789abcdef; other=2",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-origin"], "yes");
    assert_eq!(
        set_cookies(&resp)[0].0,
        "shop_session",
        "the origin's cookies reach the visitor"
    );
    assert_eq!(
        resp.text().await.unwrap(),
        "origin GET /home/page?x=1&y=%20z"
    );
    let seen = origin.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/home/page?x=1&y=%20z");
    assert_eq!(seen[0].header("x-custom").as_deref(), Some("kept"));
    assert_eq!(
        seen[0].header("cookie").as_deref(),
        Some("shop=1; other=2"),
        "our cookies are stripped"
    );

    // A 1 MiB body out and a 2 MiB body back, byte for byte.
    let body: Vec<u8> = (0..1024 * 1024u32).map(|i| (i * 7 % 256) as u8).collect();
    let resp = client()
        .post(proxy.url("/api/echo"))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.bytes().await.unwrap().to_vec(), body);
    let resp = client().get(proxy.url("/big")).send().await.unwrap();
    assert_eq!(resp.bytes().await.unwrap().to_vec(), big_body());
    assert_eq!(origin.requests()[1].body, body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_cookie_opens_the_origin() {
    let (origin, proxy) = setup("").await;
    let jar = admitted_visitor(&proxy).await;
    for path in ["/products/7?color=red", "/cart", "/orders/history"] {
        let resp = get(&proxy, path, &jar, None).await;
        assert_eq!(resp.status(), 200, "{path}");
        assert!(
            set_cookies(&resp)
                .iter()
                .all(|(k, _, _)| k != "anteroom_vid"),
            "no new identity"
        );
        assert_eq!(resp.text().await.unwrap(), format!("origin GET {path}"));
    }
    let last = origin.requests().pop().unwrap();
    assert_eq!(
        last.header("cookie").as_deref(),
        Some("shop_session=abc"),
        "the origin sees its own cookies, never ours"
    );
    let (_, _, attrs) = set_cookies(&get(&proxy, "/", &Jar::default(), None).await)
        .into_iter()
        .find(|(k, _, _)| k == "shop_session")
        .unwrap();
    assert!(attrs.contains("Path=/"));
}

/// `Accept` sent in several field lines is one list (RFC 9110), and a parameter's name is
/// read without case (found by review: only the first line was read, and `Q=` was not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_in_several_lines_and_any_case_chooses_the_answer() {
    let (_origin, proxy) = setup("").await;
    let _holder = admitted_visitor(&proxy).await;
    let kind = |accept: &'static [&'static str]| {
        let proxy = &proxy;
        async move {
            let mut req = client().get(proxy.url("/products/1"));
            for a in accept {
                req = req.header("accept", *a);
            }
            let resp = req.send().await.unwrap();
            let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
            ct.split(';').next().unwrap().to_string()
        }
    };
    assert_eq!(
        kind(&["text/html;q=0.1", "application/json"]).await,
        "application/json"
    );
    assert_eq!(
        kind(&["application/json;q=0.1", "text/html"]).await,
        "text/html"
    );
    assert_eq!(
        kind(&["application/json;Q=0.1, text/html;q=0.5"]).await,
        "text/html"
    );
    assert_eq!(kind(&["application/json"]).await, "application/json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_visitor_gets_the_waiting_page() {
    let (origin, proxy) = setup("").await;
    let _holder = admitted_visitor(&proxy).await;
    let before = origin.requests().len();
    let resp = get(
        &proxy,
        "/products/1",
        &Jar::default(),
        Some("text/html,*/*;q=0.8"),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert_eq!(h["cache-control"], "no-store");
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(
        (1..=2).contains(&retry),
        "position 1 polls about every second: {retry}"
    );
    let cookies = set_cookies(&resp);
    let (_, vid, attrs) = cookies
        .iter()
        .find(|(k, _, _)| k == "anteroom_vid")
        .expect("visitor id cookie");
    assert!(VisitorId::parse(vid).is_some());
    assert!(
        attrs.contains("HttpOnly") && attrs.contains("SameSite=Lax") && attrs.contains("Path=/")
    );
    assert!(cookies.iter().all(|(k, _, _)| k != "anteroom_sale"));
    let html = resp.text().await.unwrap();
    assert!(html.contains("<html lang=\"en\""));
    assert!(html.contains("http-equiv=\"refresh\""));
    assert!(html.contains("aria-live"));
    assert!(html.contains("id=\"position\">1<"), "place in line: {html}");
    // The script that polls /.anteroom/status is the room's own file, cached.
    assert!(
        html.contains("/.anteroom/waiting.js?room=sale&amp;lang=en&amp;v="),
        "{html}"
    );
    assert!(html.contains("refreshing does not lose your place"));
    assert!(html.len() < 3 * 1024, "{} bytes", html.len());
    assert_eq!(
        origin.requests().len(),
        before,
        "a waiting visitor never reaches the origin"
    );
}

/// A page's poll (`page=1`) that comes back without the visitor-id cookie its page set is a
/// browser that refuses cookies: told `cookies_required`, it joins nobody (each such poll was a
/// new place at the end of the line: found by review). The same poll with the cookie, or
/// without the mark, joins as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pages_poll_without_the_cookie_it_was_given_joins_nobody() {
    let (_origin, proxy) = setup("").await;
    let holder = admitted_visitor(&proxy).await;
    let status = "/.anteroom/status?room=sale&page=1";
    for _ in 0..3 {
        let resp = get(&proxy, status, &Jar::default(), None).await;
        assert_eq!(resp.status(), 200);
        assert!(set_cookies(&resp).is_empty(), "nothing to keep");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["state"], "cookies_required", "{v}");
        assert_eq!(v["position"], Value::Null);
    }
    // A visitor who keeps the cookie: the mark changes nothing.
    let mut jar = Jar::default();
    let first = get(&proxy, "/products/1", &jar, None).await;
    jar.absorb(&first);
    let v: Value = get(&proxy, status, &jar, Some("application/json"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (v["state"].as_str(), v["position"].as_u64()),
        (Some("waiting"), Some(1)),
        "{v}"
    );
    // Without the mark (an API client of the status endpoint), a poll joins as documented.
    let v: Value = get(&proxy, "/.anteroom/status?room=sale", &Jar::default(), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["position"], 2, "{v}");
    let v: Value = get(&proxy, "/.anteroom/status?room=sale", &holder, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["state"], "admitted");
}

/// Every waiting page gives the visitor-id cookie a fresh life: its polls are judged by it, and
/// one set a day before on an earlier visit ran out on a page that gave no ticket, its visitor
/// then told `cookies_required` (found by re-review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_page_renews_the_visitor_id_cookie() {
    let (_origin, proxy) = setup("max-waiting = 1").await;
    let _holder = admitted_visitor(&proxy).await;
    let mut first = Jar::default();
    first.absorb(&get(&proxy, "/products/1", &first, None).await);
    // The line is full: the page gives no ticket. A visitor back with the id of an earlier
    // visit gets it again, with a day's life.
    let vid = "0123456789abcdef0123456789abcdef";
    let only_vid = Jar(vec![("anteroom_vid".into(), vid.into())]);
    let resp = get(&proxy, "/products/1", &only_vid, Some("text/html")).await;
    assert_eq!(resp.status(), 503, "the line is full");
    let cookies = set_cookies(&resp);
    let again = cookies.iter().find(|(k, _, _)| k == "anteroom_vid");
    let (_, value, attrs) = again.expect("the visitor-id cookie again");
    assert_eq!(value, vid);
    assert!(attrs.contains("Max-Age=86400"), "{attrs}");
    assert_eq!(
        cookies
            .iter()
            .filter(|(k, _, _)| k == "anteroom_vid")
            .count(),
        1,
        "once: {cookies:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_is_served_when_preferred() {
    let (_origin, proxy) = setup("").await;
    let _holder = admitted_visitor(&proxy).await;
    let mut jars = Vec::new();
    for expected in 1..=3u64 {
        let mut jar = Jar::default();
        let resp = get(&proxy, "/cart", &jar, Some("application/json")).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "application/json");
        assert!(resp.headers().contains_key("retry-after"));
        jar.absorb(&resp);
        let v: Value = resp.json().await.unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "room",
            "state",
            "position",
            "waiting",
            "eta_seconds",
            "retry_after_ms",
        ] {
            assert!(keys.contains(&k), "{k} missing in {v}");
        }
        assert_eq!(v["room"], "sale");
        assert_eq!(v["state"], "waiting");
        assert_eq!(v["position"], expected);
        assert_eq!(v["waiting"], expected);
        // The only slot is held by a session that does not end: the ETA is a number only
        // while the holder's admission still counts as a measured pace, and unknown (null)
        // once that measurement has decayed (tests/forecast.rs pins both cases down).
        assert!(
            v["eta_seconds"].is_u64() || v["eta_seconds"].is_null(),
            "{v}"
        );
        let ms = v["retry_after_ms"].as_u64().unwrap();
        // The tier (1 s ± 20 %) at the latest; sooner when the turn is sooner, never below
        // the floor (one tick of 100 ms).
        assert!((100..=1200).contains(&ms), "{ms} ms");
        jars.push(jar);
    }
    // Polling the status endpoint keeps each place.
    for (i, jar) in jars.iter().enumerate() {
        let v: Value = get(&proxy, "/.anteroom/status?room=sale", jar, None)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(v["position"], i as u64 + 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_until_admitted_then_the_origin_opens() {
    let (origin, proxy) = setup("").await;
    let holder = admitted_visitor(&proxy).await;
    let mut jar = Jar::default();
    let resp = get(&proxy, "/products/3?ref=queue", &jar, None).await;
    jar.absorb(&resp);
    assert!(jar.get("anteroom_vid").is_some());

    // The holder places an order: that consumes the admission and frees the slot.
    let resp = client()
        .post(proxy.url("/orders"))
        .header("cookie", holder.header())
        .body("item=1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let cleared = set_cookies(&resp)
        .into_iter()
        .find(|(k, _, _)| k == "anteroom_sale")
        .expect("cleared");
    assert!(cleared.2.contains("Max-Age=0"));
    assert_eq!(origin.count("/orders"), 1);

    let status: Value = eventually(
        Duration::from_secs(10),
        "admitted by the status poll",
        || {
            let (proxy, jar2) = (&proxy, &jar);
            async move {
                let resp = get(proxy, "/.anteroom/status?room=sale", jar2, None).await;
                let cookies = set_cookies(&resp);
                let v: Value = resp.json().await.unwrap();
                (v["state"] == "admitted").then(|| {
                    let c = cookies
                        .into_iter()
                        .find(|(k, _, _)| k == "anteroom_sale")
                        .expect("cookie with admitted");
                    serde_json::json!({"cookie": c.1, "status": v})
                })
            }
        },
    )
    .await;
    jar.set("anteroom_sale", status["cookie"].as_str().unwrap());
    let resp = get(&proxy, "/products/3?ref=queue", &jar, None).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.text().await.unwrap(),
        "origin GET /products/3?ref=queue"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_whose_turn_came_is_proxied_at_once_with_the_cookie() {
    let (_origin, proxy) = setup("").await;
    let holder = admitted_visitor(&proxy).await;
    let mut jar = Jar::default();
    jar.absorb(&get(&proxy, "/products", &jar, None).await);
    client()
        .post(proxy.url("/orders"))
        .header("cookie", holder.header())
        .send()
        .await
        .unwrap();
    // Reloading the protected page (the no-JavaScript path) lets the visitor in with the cookie.
    let text = eventually(Duration::from_secs(10), "admitted on reload", || {
        let (proxy, jar) = (&proxy, &jar);
        async move {
            let resp = get(proxy, "/products", jar, None).await;
            let got = set_cookies(&resp)
                .iter()
                .any(|(k, _, _)| k == "anteroom_sale");
            let text = resp.text().await.unwrap();
            (got && text == "origin GET /products").then_some(text)
        }
    })
    .await;
    assert_eq!(text, "origin GET /products");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cookies_are_no_cookies() {
    let (origin, proxy) = setup("").await;
    let _holder = admitted_visitor(&proxy).await;
    let key = CookieKey::new(KEY.as_bytes()).unwrap();
    let other = CookieKey::new(OTHER_KEY.as_bytes()).unwrap();
    let vid = VisitorId::random();
    let valid = cookie::sign(std::slice::from_ref(&key), "sale", vid, now() + 600).unwrap();
    let mut tampered = valid.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let cases = [
        ("tampered", String::from_utf8(tampered).unwrap()),
        (
            "expired",
            cookie::sign(std::slice::from_ref(&key), "sale", vid, now() - 10).unwrap(),
        ),
        (
            "cross-room",
            cookie::sign(std::slice::from_ref(&key), "vip", vid, now() + 600).unwrap(),
        ),
        (
            "other key",
            cookie::sign(&[other], "sale", vid, now() + 600).unwrap(),
        ),
        ("truncated", valid[..valid.len() - 5].to_string()),
        ("garbage", "not-a-cookie".to_string()),
        ("oversized", "1.".to_string() + &"a".repeat(4000)),
        (
            "forged expiry",
            valid.replacen(
                &format!(".{}.", now() + 600),
                &format!(".{}.", now() + 99_999),
                1,
            ),
        ),
    ];
    let before = origin.requests().len();
    for (what, value) in cases {
        let mut jar = Jar::default();
        jar.set("anteroom_sale", &value);
        let resp = get(&proxy, "/products", &jar, Some("application/json")).await;
        assert_eq!(resp.status(), 200, "{what}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["state"], "waiting", "{what}: {v}");
    }
    assert_eq!(
        origin.requests().len(),
        before,
        "no bad cookie reached the origin"
    );
}

/// A browser sends every cookie whose domain and path match: one of our names set by a sibling
/// site for the parent domain, or for a longer path (sent first), comes beside ours. It hides
/// neither the admission nor the visitor's place (found by review: the first value of a name
/// was the only one read, and a bad one sent the admitted visitor back to the line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookie_tossed_in_beside_ours_hides_neither_admission_nor_place() {
    let (origin, proxy) = setup("").await;
    let holder = admitted_visitor(&proxy).await;
    let admission = holder.get("anteroom_sale").unwrap().to_string();
    // Without the visitor-id cookie: the store, which knows the holder by it, is no help.
    for tossed in ["bogus", "1.x.y.z.w", &admission[..admission.len() - 2]] {
        let header = format!("anteroom_sale={tossed}; anteroom_sale={admission}");
        let resp = client()
            .get(proxy.url("/products/1"))
            .header("cookie", header)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{tossed}");
        assert_eq!(
            resp.text().await.unwrap(),
            "origin GET /products/1",
            "{tossed}"
        );
    }
    // The cookies are split over two header lines too (HTTP/2 sends them so).
    let resp = client()
        .get(proxy.url("/products/2"))
        .header("cookie", "anteroom_sale=bogus")
        .header("cookie", format!("theme=dark; anteroom_sale={admission}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "origin GET /products/2");

    // A visitor in line: a second visitor id sent before theirs does not move them.
    let mut jar = Jar::default();
    let resp = get(&proxy, "/products", &jar, Some("application/json")).await;
    jar.absorb(&resp);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["state"], "waiting", "{v}");
    let place = v["position"].clone();
    let ticket = jar
        .get("anteroom_q.sale")
        .expect("a queue ticket")
        .to_string();
    let mine = jar.get("anteroom_vid").unwrap().to_string();
    let other = VisitorId::random().to_string();
    // Someone behind them, whose id and ticket a sibling site tosses in first.
    let mut behind = Jar::default();
    let resp = get(&proxy, "/products", &behind, Some("application/json")).await;
    behind.absorb(&resp);
    let waiting = resp.json::<Value>().await.unwrap()["waiting"].clone();
    let (their_id, their_ticket) = (
        behind.get("anteroom_vid").unwrap().to_string(),
        behind.get("anteroom_q.sale").unwrap().to_string(),
    );
    for (header, what) in [
        (
            format!("anteroom_vid={their_id}; anteroom_q.sale={their_ticket}; anteroom_vid={mine}; anteroom_q.sale={ticket}"),
            "a later visitor's id and ticket first",
        ),
        (
            format!("anteroom_vid={other}; anteroom_vid={mine}; anteroom_q.sale={ticket}"),
            "another id first",
        ),
        (
            format!("anteroom_q.sale=x; anteroom_vid={mine}; anteroom_q.sale={ticket}"),
            "a bad ticket first",
        ),
    ] {
        let resp = client()
            .get(proxy.url("/products"))
            .header("cookie", &header)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        // The id cookie given again is theirs, never the one tossed in.
        let given = set_cookies(&resp)
            .into_iter()
            .find(|(k, _, _)| k == "anteroom_vid")
            .map(|(_, v, _)| v);
        assert!(given.is_none_or(|g| g == mine), "{what}: another id set");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(
            (&v["state"], &v["position"], &v["waiting"]),
            (&Value::from("waiting"), &place, &waiting),
            "{what}: {v}"
        );
    }
    drop(origin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_reaches_the_origin_intact_for_an_admitted_visitor() {
    let (origin, proxy) = setup("").await;
    let jar = admitted_visitor(&proxy).await;
    let body: Vec<u8> = (0..1024 * 1024u32).map(|i| (i * 31 % 256) as u8).collect();
    let resp = client()
        .put(proxy.url("/cart/echo"))
        .header("cookie", jar.header())
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.bytes().await.unwrap().to_vec(), body);
    let seen = origin.requests().pop().unwrap();
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.body, body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_consumes_let_exactly_one_through() {
    let (origin, proxy) = setup("").await;
    let jar = admitted_visitor(&proxy).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (url, cookie) = (proxy.url("/orders"), jar.header());
        tasks.push(tokio::spawn(async move {
            client()
                .post(url)
                .header("cookie", cookie)
                .body(format!("order {i}"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses.sort();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        19,
        "{statuses:?}"
    );
    assert_eq!(origin.count("/orders"), 1);

    // Replaying the used admission gets 409 too, as a page: "on its way" while the winner's
    // confirm (sent in the background after its answer) is still going to the store, "already
    // been used" once it is there.
    eventually(Duration::from_secs(5), "the order confirmed", || async {
        let resp = client()
            .post(proxy.url("/orders"))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 409);
        let text = resp.text().await.unwrap();
        assert!(
            text.contains("already been used") || text.contains("on its way"),
            "{text}"
        );
        text.contains("already been used").then_some(())
    })
    .await;
    assert_eq!(origin.count("/orders"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_line_answers_503() {
    let (_origin, proxy) = setup("max-waiting = 1").await;
    let _holder = admitted_visitor(&proxy).await;
    let resp = get(
        &proxy,
        "/products",
        &Jar::default(),
        Some("application/json"),
    )
    .await;
    assert_eq!(resp.json::<Value>().await.unwrap()["state"], "waiting");
    let resp = get(
        &proxy,
        "/products",
        &Jar::default(),
        Some("application/json"),
    )
    .await;
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["state"], "full");
    assert_eq!(v["position"], Value::Null);
    let resp = get(&proxy, "/products", &Jar::default(), None).await;
    assert_eq!(resp.status(), 503);
    assert!(resp.text().await.unwrap().contains("full"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reserved_prefix_is_never_forwarded() {
    let (origin, proxy) = setup("").await;
    for (path, status) in [
        ("/.anteroom/", 404),
        ("/.anteroom/admin", 404),
        ("/.anteroom/status", 404),
        ("/.anteroom/status?room=nope", 404),
        ("/x/../.anteroom/secret", 404),
        ("/%2Eanteroom/status?room=sale", 200),
        ("/.anteroom/status?room=sale", 200),
    ] {
        let resp = get(&proxy, path, &Jar::default(), None).await;
        assert_eq!(resp.status(), status, "{path}");
        assert_eq!(resp.headers()["content-type"], "application/json", "{path}");
    }
    let resp = client()
        .post(proxy.url("/.anteroom/status?room=sale"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(origin.requests().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_tricks_meet_the_same_room() {
    let (origin, proxy) = setup("").await;
    let _holder = admitted_visitor(&proxy).await;
    let before = origin.requests().len();
    for path in ["/x/../products", "//products", "/%70roducts/1", "/./cart"] {
        let resp = get(&proxy, path, &Jar::default(), Some("application/json")).await;
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["state"], "waiting", "{path}");
    }
    assert_eq!(origin.requests().len(), before);
    // A different room is unaffected by sale's line.
    let resp = get(&proxy, "/vip/lounge", &Jar::default(), None).await;
    assert_eq!(resp.text().await.unwrap(), "origin GET /vip/lounge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_speaks_korean_and_the_operators_own_words() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(
        origin.addr,
        "[room.texts.en]\ntitle_waiting = \"Welcome to the Summer Sale line\"\n[room.texts.ko]\nkeep_tab = \"탭을 닫지 마세요\"",
    ));
    let _holder = admitted_visitor(&proxy).await;
    let page = |lang: &'static str| {
        let url = proxy.url("/products");
        async move {
            client()
                .get(url)
                .header("accept-language", lang)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let ko = page("ko-KR,ko;q=0.9,en;q=0.8").await;
    assert!(ko.contains("<html lang=\"ko\""), "{ko}");
    assert!(ko.contains("내 대기 순서"));
    assert!(
        ko.contains("탭을 닫지 마세요"),
        "the operator's Korean text"
    );
    let en = page("en-GB,en;q=0.9").await;
    assert!(en.contains("<html lang=\"en\""));
    assert!(
        en.contains("Welcome to the Summer Sale line"),
        "the operator's English title"
    );
    assert!(en.contains("Your place in line"));
    let other = page("fr-FR").await;
    assert!(
        other.contains("<html lang=\"en\""),
        "unknown languages get English"
    );
    assert!(ko.len() < 10 * 1024 && en.len() < 10 * 1024);
}
