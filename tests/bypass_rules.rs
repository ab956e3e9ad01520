//! `bypass` rules and `crawlers`: health checks, staff and partners past a full line, each
//! read the strict way (every reading of a path, the client address only from a trusted
//! proxy, the exact secret), counted by rule and never as active; a search crawler gets a 503
//! instead of the waiting page.

mod common;

use common::*;

const TOKEN: &str = "test-admin-token-0123456789";
const PARTNER: &str = "partner-secret-0123456789";

/// Two rooms of one slot each: `sale` with the rules, `vip` letting crawlers wait.
fn config(origin: std::net::SocketAddr, listen_extra: &str) -> String {
    format!(
        r#"{listen_extra}
[admin]
token = "{TOKEN}"
{base}
[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 50
max-active = 1
bypass = [
  {{ path = "/products/feed.xml" }},
  {{ header = "X-Partner-Key", equals = "env:TEST_PARTNER_KEY" }},
  {{ client = ["10.20.0.0/16"] }},
]

[[room]]
name = "vip"
paths = ["/vip"]
admit-per-second = 50
max-active = 1
crawlers = "wait"
bypass = [{{ preflight = true }}]
"#,
        base = base_config(origin)
    )
}

fn start(origin: &Origin, listen_extra: &str) -> Proxy {
    Proxy::start_with(
        &config(origin.addr, listen_extra),
        &[("ANTEROOM_LOG", "warn"), ("TEST_PARTNER_KEY", PARTNER)],
        &[],
    )
}

async fn get(proxy: &Proxy, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = client().get(proxy.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

fn reached_origin(resp: &reqwest::Response) -> bool {
    resp.headers().get("x-origin").is_some()
}

/// Fills the room's one slot with a visitor let in on the fast path.
async fn fill(proxy: &Proxy, path: &str) {
    let first = get(proxy, path, &[]).await;
    assert!(reached_origin(&first), "the first visitor walks in");
    let next = get(proxy, path, &[]).await;
    assert!(!reached_origin(&next), "the next one waits");
}

fn counted(metrics: &str, rule: &str) -> f64 {
    let needle = format!("anteroom_bypassed_total{{room=\"sale\",rule=\"{rule}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&needle))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn bypass_rules_let_past_a_full_line_only_what_they_name() {
    let origin = Origin::start().await;
    let proxy = start(&origin, "trusted-proxies = [\"127.0.0.0/8\"]");
    fill(&proxy, "/products/1").await;

    let passes: [(&str, &[(&str, &str)]); 4] = [
        ("/products/feed.xml", &[]),
        ("/products/feed.xml/page2", &[]),
        ("/products/2", &[("X-Partner-Key", PARTNER)]),
        ("/products/3", &[("X-Forwarded-For", "10.20.7.8")]),
    ];
    for (path, headers) in passes {
        let resp = get(&proxy, path, headers).await;
        assert!(reached_origin(&resp), "{path} {headers:?} is let past");
        assert!(
            set_cookies(&resp)
                .iter()
                .all(|(k, _, _)| !k.starts_with("anteroom_")),
            "{path}: no admission, no visitor id"
        );
    }
    let waits: [(&str, &[(&str, &str)]); 5] = [
        ("/products/FEED.xml", &[]),
        ("/products/feed.xmlx", &[]),
        (
            "/products/2",
            &[("X-Partner-Key", "partner-secret-012345678")],
        ),
        ("/products/2", &[("X-Partner-Key", "")]),
        ("/products/3", &[("X-Forwarded-For", "10.99.7.8")]),
    ];
    for (path, headers) in waits {
        let resp = get(&proxy, path, headers).await;
        assert!(!reached_origin(&resp), "{path} {headers:?} waits");
        assert_eq!(resp.status(), 200, "{path}: the waiting page");
    }

    let room = admin_json(&proxy, "/rooms/sale", TOKEN).await.unwrap();
    assert_eq!(room["active"], 1, "bypassed requests hold no slot: {room}");
    let m = metrics_text(&proxy, TOKEN).await;
    assert_eq!(counted(&m, "path:/products/feed.xml"), 2.0, "{m}");
    assert_eq!(counted(&m, "header:x-partner-key"), 1.0, "{m}");
    assert_eq!(counted(&m, "client:10.20.0.0/16"), 1.0, "{m}");
}

#[tokio::test]
async fn a_client_rule_believes_only_a_trusted_proxy() {
    let origin = Origin::start().await;
    let proxy = start(&origin, "");
    fill(&proxy, "/products/1").await;
    let resp = get(&proxy, "/products/3", &[("X-Forwarded-For", "10.20.7.8")]).await;
    assert!(!reached_origin(&resp), "anyone can write X-Forwarded-For");
}

/// Sends `headers` (raw bytes) for `path`.
async fn get_raw(proxy: &Proxy, path: &str, headers: &[(&str, &[u8])]) -> reqwest::Response {
    let mut req = client().get(proxy.url(path));
    for (k, v) in headers {
        req = req.header(*k, reqwest::header::HeaderValue::from_bytes(v).unwrap());
    }
    req.send().await.unwrap()
}

/// Behind a trusted proxy that appends what it saw to one forwarding header and passes the
/// other on as the client wrote it (nginx's `$proxy_add_x_forwarded_for`): the client rule
/// believes only the hop the proxy appended to the header `client-header` names. Found by
/// review: a line that was not clean ASCII was dropped whole, and the client's own `Forwarded`
/// believed; then, with a disagreement of the two headers taken for the proxy itself, a
/// client's `Forwarded: for=unknown` passed a rule for the load balancer's health checks.
#[tokio::test]
async fn a_client_rule_believes_only_the_hop_a_trusted_proxy_appended() {
    let origin = Origin::start().await;
    // The load balancer (this test, from 127.0.0.1) has a rule of its own: its health checks.
    let cfg = config(origin.addr, "trusted-proxies = [\"127.0.0.1/32\"]").replace(
        "{ client = [\"10.20.0.0/16\"] }",
        "{ client = [\"10.20.0.0/16\", \"127.0.0.1/32\"] }",
    );
    let proxy = Proxy::start_with(
        &cfg,
        &[("ANTEROOM_LOG", "warn"), ("TEST_PARTNER_KEY", PARTNER)],
        &[],
    );
    let visitor: &[(&str, &[u8])] = &[("X-Forwarded-For", b"198.51.100.1")];
    assert!(reached_origin(
        &get_raw(&proxy, "/products/1", visitor).await
    ));
    assert!(!reached_origin(
        &get_raw(&proxy, "/products/1", visitor).await
    ));
    let health = get(&proxy, "/products/health", &[]).await;
    assert!(reached_origin(&health), "the load balancer's own request");

    let forged: [&[(&str, &[u8])]; 6] = [
        // The client's X-Forwarded-For made unreadable, its own Forwarded naming staff.
        &[
            ("X-Forwarded-For", b"\xff, 198.51.100.7"),
            ("Forwarded", b"for=10.20.1.1"),
        ],
        // Its own Forwarded naming nobody, or another address: not the load balancer either.
        &[
            ("X-Forwarded-For", b"198.51.100.7"),
            ("Forwarded", b"for=unknown"),
        ],
        &[
            ("X-Forwarded-For", b"198.51.100.7"),
            ("Forwarded", b"for=9.9.9.9"),
        ],
        &[
            ("X-Forwarded-For", b"1.1.1.1, 198.51.100.7"),
            ("Forwarded", b"for=_x"),
        ],
        &[("X-Forwarded-For", b"10.20.1.1, 198.51.100.7")],
        &[("X-Forwarded-For", b"127.0.0.1, 198.51.100.7")],
    ];
    for headers in forged {
        let resp = get_raw(&proxy, "/products/3", headers).await;
        assert!(!reached_origin(&resp), "{headers:?} waits");
        assert_eq!(resp.status(), 200, "{headers:?}: the waiting page");
    }
    let staff = get_raw(
        &proxy,
        "/products/3",
        &[("X-Forwarded-For", b"\xfejunk, 10.20.1.1")],
    );
    assert!(
        reached_origin(&staff.await),
        "what the proxy appended is believed"
    );
}

/// With `client-header = "forwarded"` (a load balancer that writes RFC 7239 `Forwarded` and
/// passes `X-Forwarded-For` on), only `Forwarded` names the client.
#[tokio::test]
async fn a_load_balancer_that_writes_forwarded_is_read_by_it_alone() {
    let origin = Origin::start().await;
    let proxy = start(
        &origin,
        "trusted-proxies = [\"127.0.0.0/8\"]\nclient-header = \"forwarded\"",
    );
    fill(&proxy, "/products/1").await;
    let forged = get_raw(
        &proxy,
        "/products/3",
        &[
            ("X-Forwarded-For", b"10.20.1.1"),
            ("Forwarded", b"for=198.51.100.7"),
        ],
    )
    .await;
    assert!(!reached_origin(&forged), "the client's own X-Forwarded-For");
    let staff = get_raw(
        &proxy,
        "/products/3",
        &[
            ("X-Forwarded-For", b"198.51.100.7"),
            ("Forwarded", b"for=9.9.9.9, for=\"10.20.1.1:4711\""),
        ],
    )
    .await;
    assert!(reached_origin(&staff), "the hop the load balancer appended");
}

#[tokio::test]
async fn a_crawler_gets_a_503_where_a_visitor_would_wait() {
    let origin = Origin::start().await;
    let proxy = start(&origin, "");
    let bot = [(
        "User-Agent",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    )];
    // An empty line: the crawler walks in like anyone and indexes the shop's page.
    let walk_in = get(&proxy, "/products/1", &bot).await;
    assert!(reached_origin(&walk_in));
    let next = get(&proxy, "/products/2", &[]).await;
    assert!(!reached_origin(&next), "the room is full now");

    let refused = get(&proxy, "/products/2", &bot).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(
        refused.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1800"[..])
    );
    let body = refused.text().await.unwrap();
    assert!(
        !body.contains("anteroom/status"),
        "not the waiting page: {body}"
    );
    // Counted when the request's logging phase runs, which can be just after the client has
    // the whole answer: polled, not read once.
    eventually(
        std::time::Duration::from_secs(5),
        "the crawler counted as rejected",
        || async {
            metrics_text(&proxy, TOKEN)
                .await
                .contains("anteroom_rejected_total{reason=\"crawler\",room=\"sale\"} 1")
                .then_some(())
        },
    )
    .await;

    // `crawlers = "wait"`: the waiting page, like any visitor.
    fill(&proxy, "/vip/1").await;
    let waits = get(&proxy, "/vip/2", &bot).await;
    assert_eq!(waits.status(), 200);
    assert!(!reached_origin(&waits));
}

/// A CORS preflight carries no cookies (browsers send none with it): it takes no place in line
/// and is told no (found by review: each took a place, and an admitted visitor's cross-origin
/// call could never pass it); a room's `{ preflight = true }` rule sends it to the shop, which
/// answers what it allows. Only a preflight as browsers send it: with a body, a method
/// override or an `Upgrade` (found by review: a WebSocket upgrade sent as a preflight reached
/// the shop) it is an ordinary request, and queues.
#[tokio::test]
async fn a_preflight_takes_no_place_and_a_rule_lets_it_reach_the_shop() {
    let origin = Origin::start().await;
    let proxy = start(&origin, "");
    fill(&proxy, "/products").await;
    fill(&proxy, "/vip").await;
    let preflight = |path: &str, extra: Option<(&'static str, &'static str)>| {
        let mut req = client()
            .request(reqwest::Method::OPTIONS, proxy.url(path))
            .header("Origin", "https://app.shop.example")
            .header("Access-Control-Request-Method", "POST");
        if let Some((k, v)) = extra {
            req = req.header(k, v);
        }
        req.send()
    };
    let waiting = || async {
        admin_json(&proxy, "/rooms/sale", TOKEN).await.unwrap()["waiting"]
            .as_u64()
            .unwrap()
    };
    let before = waiting().await;
    for _ in 0..5 {
        let resp = preflight("/products", None).await.unwrap();
        assert_eq!(resp.status(), 503);
        assert!(!reached_origin(&resp));
        assert!(resp.headers().get("set-cookie").is_none(), "no visitor id");
    }
    assert_eq!(waiting().await, before, "no place taken");
    let resp = preflight("/vip", None).await.unwrap();
    assert!(reached_origin(&resp), "the rule sends it to the shop");
    let scraped = metrics_text(&proxy, TOKEN).await;
    assert!(
        scraped.contains("anteroom_bypassed_total{room=\"vip\",rule=\"preflight\"} 1"),
        "{scraped}"
    );
    for extra in [
        ("X-HTTP-Method-Override", "GET"),
        ("Upgrade", "websocket"),
        ("Content-Length", "0"),
    ] {
        let resp = preflight("/vip", Some(extra)).await.unwrap();
        assert_eq!(
            reached_origin(&resp),
            extra.0 == "Content-Length",
            "{extra:?}"
        );
    }
}
