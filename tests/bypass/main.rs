//! No way around the line: spellings of a protected path or host that common origins read as
//! the protected one, sent as raw HTTP (clients like reqwest would clean them up first), must
//! wait in the room or be refused — never reach the origin without an admission.

#[path = "../common/mod.rs"]
mod common;

use common::raw::{
    assert_held, enter, get, occupy, occupy_path, order_request, orders, raw, raw_bytes,
};
use common::{base_config, Origin, Proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod hosts;

fn room(hosts: &str, listen: &str, max_active: u32) -> String {
    format!(
        r#"{listen}
[[room]]
name = "sale"
upstream = "shop"
hosts = [{hosts}]
paths = ["/products", "/orders"]
admit-per-second = 1
max-active = {max_active}
consume = ["POST /orders"]
"#
    )
}

/// Path spellings that Tomcat/Spring, IIS (ASP.NET's cookieless values too), case-insensitive
/// routers or C servers read as a protected path.
const PATH_SPELLINGS: &[&str] = &[
    "/products;x/1",
    "/products;jsessionid=ABC/1",
    "/x/..;/products/1",
    "/x/%2e%2e;/products/1",
    "/PRODUCTS/1",
    "/Products/1",
    "/products\\1",
    "/products%5C1",
    "/x%5C..%5Cproducts/1",
    "/x\\..\\products/1",
    "/products%00.css",
    "/products./1",
    "/products%20/1",
    "/products%3Bx/1",
    "/%70roducts/1",
    "/x/../products/1",
    "/products.json",
    "/products.html;v=1",
    "//x/products/1",
    "/%u002fproducts/1",
    "/x/%u002e%u002e/products/1",
    "/%U0070roducts/1",
    "/index%u002ephp/products/1",
    "/index.php\\products/1",
    "/%u0020products/1",
    "/(S(x))/products/1",
    "/(A(a)S(b)F(c))/products/1",
    "/%28s%28x%29%29/products/1",
    "/?/products/1",
    "/index.php?/products/1",
    "/index.php/?/x/../products/1",
    "/_next/data/b1d/products/1.json",
];

#[tokio::test]
async fn path_spellings_wait_or_are_refused_in_both_modes() {
    let origin = Origin::start().await;
    for listen in ["", "path-matching = \"lenient\""] {
        let proxy = Proxy::start(&format!(
            "{}{}",
            room("\"*\"", listen, 1),
            base_config(origin.addr)
        ));
        occupy(&proxy, "shop.test").await;
        for p in PATH_SPELLINGS {
            assert_held(
                &proxy,
                &origin,
                &get(p, "shop.test", ""),
                &format!("GET {p} ({listen})"),
            )
            .await;
            let post = format!(
                "POST {p} HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            assert_held(&proxy, &origin, &post, &format!("POST {p} ({listen})")).await;
        }
        // A Tomcat session id on the room's own path is no ambiguity: it waits in both modes.
        let r = raw(&proxy, &get("/products;jsessionid=A1/1", "shop.test", "")).await;
        assert_eq!(r.status, 200, "{r:?}");
        // Strict refuses an ambiguous spelling outright; lenient queues it.
        let r = raw(&proxy, &get("/x/..;/products/1", "shop.test", "")).await;
        if listen.is_empty() {
            assert_eq!(r.status, 400, "{r:?}");
        } else {
            assert_eq!(r.status, 200, "{r:?}");
        }
        // The plain outside path still passes, and what is forwarded is byte-identical.
        let r = raw(&proxy, &get("/About%20Us;v=1", "shop.test", "")).await;
        assert!(r.reached_origin(), "{r:?}");
        let seen = origin.requests();
        assert_eq!(seen.last().map(|s| s.uri.as_str()), Some("/About%20Us;v=1"));
    }
}

#[tokio::test]
async fn a_consume_route_is_consumed_under_every_spelling() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        "{}{}",
        room("\"*\"", "path-matching = \"lenient\"", 5),
        base_config(origin.addr)
    ));
    let (vid, cookie) = enter(&proxy, "/products/1").await;
    let order = |target: &str| order_request(target, &vid, &cookie);
    let first = raw(&proxy, &order("/orders;x")).await;
    assert!(first.reached_origin(), "{first:?}");
    for again in [
        "/orders",
        "/ORDERS",
        "/orders;y",
        "/orders\\",
        "/x/..;/orders",
        "/orders.json",
        // Escaped once more, for a hop that decodes the path before the shop does (found by
        // review: both reached the shop).
        "/orders%252f",
        "/%256frders",
        // An NTFS stream of the file, as IIS serving files reads it (found by review).
        "/orders::$DATA",
        "/orders:$I30:$INDEX_ALLOCATION",
    ] {
        let r = raw(&proxy, &order(again)).await;
        assert_eq!(r.status, 409, "POST {again} after the order: {r:?}");
    }
    // The method as frameworks read it: without case, or through an override header.
    let lower = order("/orders").replacen("POST", "post", 1);
    let r = raw(&proxy, &lower).await;
    assert_eq!(r.status, 409, "post /orders: {r:?}");
    let overridden = order("/orders").replacen("POST", "PUT", 1).replacen(
        "Content-Length",
        "X-HTTP-Method-Override: POST\r\nContent-Length",
        1,
    );
    let r = raw(&proxy, &overridden).await;
    assert_eq!(
        r.status, 409,
        "PUT with X-HTTP-Method-Override: POST: {r:?}"
    );
    assert_eq!(orders(&origin), 1, "one admission, one order");
}

#[tokio::test]
async fn a_consume_route_written_with_capitals_is_consumed_in_every_case() {
    // Capitals in the configuration: a case-insensitive origin (IIS, ASP.NET) takes an order
    // at `/orders` as at `/Orders`.
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        "{}{}",
        room("\"*\"", "", 5)
            .replace("\"/products\", \"/orders\"", "\"/Products\", \"/Orders\"")
            .replace("POST /orders", "POST /Orders"),
        base_config(origin.addr)
    ));
    let (vid, cookie) = enter(&proxy, "/Products/1").await;
    let order = |target: &str| order_request(target, &vid, &cookie);
    let first = raw(&proxy, &order("/orders")).await;
    assert!(first.reached_origin(), "{first:?}");
    for again in ["/orders", "/Orders", "/ORDERS", "/oRdErS;x"] {
        let r = raw(&proxy, &order(again)).await;
        assert_eq!(r.status, 409, "POST {again} after the order: {r:?}");
    }
    assert_eq!(orders(&origin), 1, "one admission, one order");
}

#[tokio::test]
async fn a_shop_cookie_that_is_not_utf8_hides_neither_ours_nor_itself() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        "{}{}",
        room("\"*\"", "", 1),
        base_config(origin.addr)
    ));
    let (vid, cookie) = enter(&proxy, "/products/1").await;
    // The shop's own cookie in Latin-1, in the same header as ours.
    let mut request =
        b"GET /products/2 HTTP/1.1\r\nHost: shop.test\r\nCookie: theme=\xe9t\xe9; ".to_vec();
    request.extend_from_slice(format!("{vid}; {cookie}\r\nConnection: close\r\n\r\n").as_bytes());
    let r = raw_bytes(&proxy, &request).await;
    assert!(
        r.reached_origin(),
        "the admitted visitor is still admitted: {r:?}"
    );
    assert_eq!(r.set_cookie("anteroom_vid"), None, "no new identity: {r:?}");
    let last = origin.requests().pop().unwrap();
    let seen: Vec<&Vec<u8>> = last
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("cookie"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        seen,
        [&b"theme=\xe9t\xe9".to_vec()],
        "the shop's cookie byte for byte, none of ours"
    );
}

/// A `bypass` path rule holds only when every reading of the path is under it: spellings that
/// an origin reads as another page of the room, sent as they are on the wire (reqwest would
/// resolve the `..` first), wait in the full line like that page; only the rule's own path
/// reaches the origin. `src/route/bypass.rs` tests the readings; this, the proxy acting on them.
#[tokio::test]
async fn a_bypass_path_lets_past_only_its_own_spelling() {
    // The answer in strict mode (lenient: every one waits). `/PRODUCTS/FEED.XML` is outside
    // the room as written and inside it read without case (IIS): strict refuses readings
    // that disagree.
    const SPELLINGS: [(&str, u16); 5] = [
        ("/products/feed.xml/../cart", 200),
        // Tomcat: `;` ends the segment's name, then `../..` climbs out of /products.
        ("/products/feed.xml;/../../cart", 200),
        // A server that decodes `%2f` before it resolves dot segments.
        ("/products/feed.xml%2f..%2fcart", 200),
        // IIS: `\` is `/`.
        ("/products/feed.xml\\..\\cart", 200),
        ("/PRODUCTS/FEED.XML", 400),
    ];
    let origin = Origin::start().await;
    for lenient in [false, true] {
        let listen = if lenient {
            "path-matching = \"lenient\""
        } else {
            ""
        };
        let proxy = Proxy::start(&format!(
            r#"{listen}
{base}
[[room]]
name = "sale"
paths = ["/products", "/cart"]
admit-per-second = 1
max-active = 1
bypass = [{{ path = "/products/feed.xml" }}]
"#,
            base = base_config(origin.addr)
        ));
        occupy_path(&proxy, "/products/0").await;
        for (p, strict) in SPELLINGS {
            let before = origin.requests().len();
            let r = raw(&proxy, &get(p, "shop.test", "")).await;
            let what = format!("GET {p} ({listen})");
            let brief = r.body.chars().take(200).collect::<String>();
            assert!(!r.reached_origin(), "{what}: {}", r.head);
            assert_eq!(origin.requests().len(), before, "{what}: the origin saw it");
            if lenient || strict == 200 {
                assert!(
                    r.status == 200 && r.body.contains("data-state=\"waiting\""),
                    "{what}: the waiting page, not {} {brief}",
                    r.head
                );
            } else {
                assert_eq!(r.status, strict, "{what}: {brief}");
            }
        }
        let r = raw(&proxy, &get("/products/feed.xml", "shop.test", "")).await;
        assert!(r.reached_origin(), "the feed itself ({listen}): {}", r.head);
    }
}

/// An origin that reads the request target as Werkzeug, gunicorn and Go's `net/http` do: it
/// records each request line as sent and answers every one (hyper, the other tests' origin,
/// refuses a target like `a:/products/1` itself, so it cannot show whether one got through).
struct LenientOrigin {
    addr: std::net::SocketAddr,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl LenientOrigin {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let lines: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
        let log = lines.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&buf);
                    log.lock()
                        .unwrap()
                        .push(text.lines().next().unwrap_or("").to_string());
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\nX-Origin: yes\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                        .await;
                });
            }
        });
        Self { addr, lines, task }
    }
}

impl Drop for LenientOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn a_target_that_is_not_a_path_is_refused() {
    let origin = LenientOrigin::start().await;
    let proxy = Proxy::start(&format!(
        "{}{}",
        room("\"shop.test\"", "", 1),
        base_config(origin.addr)
    ));
    occupy(&proxy, "shop.test").await;
    let before = origin.lines.lock().unwrap().len();
    // Pingora routes these as `/` (outside the room) but forwards their bytes, from which a
    // lenient origin reads `/products/1` and `/orders`.
    for request in [
        get("a:/products/1", "shop.test", ""),
        get("x:/products/1", "shop.test", ""),
        get("products/1", "shop.test", ""),
        get("*", "shop.test", ""),
        "POST x:/orders HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string(),
    ] {
        let r = raw(&proxy, &request).await;
        assert!(
            r.status == 400 && !r.reached_origin(),
            "{request}: {} {}",
            r.head,
            r.body
        );
    }
    assert_eq!(
        origin.lines.lock().unwrap()[before..],
        [] as [String; 0],
        "nothing reached the origin"
    );
    // What is routed still goes through: outside the room, and `OPTIONS *`.
    let r = raw(&proxy, &get("/about", "shop.test", "")).await;
    assert!(r.reached_origin(), "{r:?}");
    let r = raw(
        &proxy,
        &get("*", "shop.test", "").replacen("GET", "OPTIONS", 1),
    )
    .await;
    assert!(r.reached_origin(), "{r:?}");
}
