//! No way around the line, continued: origins that route the path as sent (Werkzeug, Express,
//! Symfony: dot segments kept, `%2F` decoded or not), a PHP front controller's path info
//! (`/index.php/products`), Spring's `trimTokens` (`/orders%09`), the CGI variables gunicorn takes from request headers, and methods
//! that frameworks make out of a POST's `_method` or a HEAD. Each spelling must wait in the
//! room, be refused, or — on a consume route — use up the admission.

mod common;

use common::raw::{assert_held, enter, get, occupy, order_request, raw};
use common::{base_config, Origin, Proxy};

fn room(listen: &str, max_active: u32) -> String {
    format!(
        r#"{listen}
[[room]]
name = "sale"
upstream = "shop"
paths = ["/products", "/orders", "/cart", "/claim"]
admit-per-second = 1
max-active = {max_active}
consume = ["POST /orders", "PUT /cart/checkout", "GET /claim"]
"#
    )
}

/// Spellings that an origin routing the path as sent, a PHP front controller, or Spring trimming
/// a segment's whitespace serves under
/// `/products` or `/orders` while the standard reading is elsewhere.
const AS_SENT: &[&str] = &[
    "/products/..",
    "/products/%2e%2e",
    "/products/x/../..",
    "/products/../about",
    "/products/1%2F..%2F..%2Fx",
    "/products/1%2f..%2f..%2fabout",
    "/orders/7%2F..%2F..%2Fx",
    "/index.php/products/1",
    "/index.php/orders",
    "/shop/App.PHP/products",
    "/index%2ephp/products",
    "/index.php/products/..",
    "/app.fcgi/orders",
    "/cgi-bin/shop.cgi/products/1",
    "/Default.aspx/orders",
    "/a.fcgi/b.fcgi/c.fcgi/d.fcgi/app.fcgi/orders",
    "/.fcgi/orders",
    "/index.php/orders%0A",
    "/app.fcgi/orders%0a",
    "/index.php/products%0A",
    "/orders%09",
    "/%20products/1",
    "/products%0A;x",
    "/orders%0d%20",
];

#[tokio::test]
async fn paths_read_as_sent_wait_in_the_room_in_both_modes() {
    let origin = Origin::start().await;
    for listen in ["", "path-matching = \"lenient\""] {
        let proxy = Proxy::start(&format!("{}{}", room(listen, 1), base_config(origin.addr)));
        occupy(&proxy, "shop.test").await;
        for p in AS_SENT {
            let what = format!("GET {p} ({listen})");
            assert_held(&proxy, &origin, &get(p, "shop.test", ""), &what).await;
            let post = format!(
                "POST {p} HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            assert_held(&proxy, &origin, &post, &format!("POST {p} ({listen})")).await;
        }
        // Kept dots and a script's path info only add a room: in strict mode they do not make
        // a spelling that most origins resolve into the room ambiguous.
        for p in ["/x/../products/1", "/index.php/products/1", "/products/.."] {
            let r = raw(&proxy, &get(p, "shop.test", "")).await;
            assert!(
                r.status == 200 && !r.reached_origin(),
                "{p} waits ({listen}): {r:?}"
            );
        }
        // Outside every reading of the room, a request still passes, byte for byte.
        for p in [
            "/index.php/about",
            "/about/../contact",
            "/index.php",
            "/a.php",
        ] {
            let r = raw(&proxy, &get(p, "shop.test", "")).await;
            assert!(r.reached_origin(), "{p} ({listen}): {r:?}");
            let seen = origin.requests();
            assert_eq!(seen.last().map(|s| s.uri.as_str()), Some(p));
        }
    }
}

#[tokio::test]
async fn headers_that_set_the_path_never_reach_the_origin() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!("{}{}", room("", 1), base_config(origin.addr)));
    // gunicorn takes `SCRIPT_NAME` from a request header when the peer is in its
    // `forwarded-allow-ips` (127.0.0.1 by default) and cuts it off the path: `/x/products`
    // would be the app's `/products`. CGI-style servers read `_` as `-`.
    let sent = [
        "SCRIPT_NAME: /x",
        "Script_Name: /x",
        "script-name: /x",
        "PATH_INFO: /products",
        "X_Original_URL: /products",
        "X_Rewrite_Url: /products",
        "X_Forwarded_Host: other.test",
        // Flask's widely copied "ReverseProxied" middleware cuts it off the path the same way.
        "X-Script-Name: /x",
        "X_SCRIPT_NAME: /x",
    ];
    let extra: String = sent.iter().map(|h| format!("{h}\r\n")).collect();
    let r = raw(&proxy, &get("/x/products", "shop.test", &extra)).await;
    assert!(r.reached_origin(), "{r:?}");
    let seen = origin.requests();
    let last = seen.last().expect("the origin saw the request");
    let names: Vec<String> = last
        .headers
        .iter()
        .map(|(k, _)| k.to_ascii_lowercase().replace('_', "-"))
        .collect();
    for h in [
        "script-name",
        "path-info",
        "x-original-url",
        "x-rewrite-url",
        "x-forwarded-host",
        "x-script-name",
    ] {
        assert!(
            !names.iter().any(|n| n == h),
            "{h} reached the origin: {names:?}"
        );
    }
}

/// A request that the origin's framework reads as `plain`'s method, sent first with a fresh
/// admission: it reaches the origin and uses the admission up, so `plain` is then refused.
async fn consumed_as(proxy: &Proxy, variant: &str, body: &str, extra: &str, plain: &str) {
    let (vid, cookie) = enter(proxy, "/products/1").await;
    let (method, target) = variant.split_once(' ').unwrap();
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: shop.test\r\nCookie: {vid}; {cookie}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let r = raw(proxy, &request).await;
    assert!(r.reached_origin(), "{variant} {extra}: {r:?}");
    let (method, target) = plain.split_once(' ').unwrap();
    let again = format!(
        "{method} {target} HTTP/1.1\r\nHost: shop.test\r\nCookie: {vid}; {cookie}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let r = raw(proxy, &again).await;
    assert_eq!(
        r.status, 409,
        "{plain} after {variant} {extra} (it was the order): {r:?}"
    );
}

#[tokio::test]
async fn methods_as_frameworks_make_them_use_the_admission() {
    let origin = Origin::start().await;
    // Every visitor let in at once: each variant gets an admission of its own.
    let rooms = room("", 50).replace("admit-per-second = 1\n", "admit-per-second = 1000\n");
    let proxy = Proxy::start(&format!("{rooms}{}", base_config(origin.addr)));
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    // Rails, Laravel, Symfony, Express's method-override: a POST's `_method`, in the query or
    // the form body, is the method the route sees.
    consumed_as(
        &proxy,
        "POST /cart/checkout?_method=PUT",
        "",
        "",
        "PUT /cart/checkout",
    )
    .await;
    consumed_as(
        &proxy,
        "POST /cart/checkout",
        "_method=PUT",
        form,
        "PUT /cart/checkout",
    )
    .await;
    consumed_as(&proxy, "POST /claim?_method=GET", "", "", "GET /claim").await;
    // Express's method-override takes the first item of a list.
    let list = "X-HTTP-Method-Override: PUT, GET\r\n";
    consumed_as(
        &proxy,
        "PATCH /cart/checkout",
        "",
        list,
        "PUT /cart/checkout",
    )
    .await;
    // Rack and PHP read a header name spelled with `_` as with `-`.
    let cgi = "X_HTTP_Method_Override: PUT\r\n";
    consumed_as(&proxy, "GET /cart/checkout", "", cgi, "PUT /cart/checkout").await;
    // HEAD runs the GET handler.
    consumed_as(&proxy, "HEAD /claim", "", "", "GET /claim").await;
    // A PHP front controller's path info, and kept dot segments, are the order too.
    consumed_as(&proxy, "POST /index.php/orders", "", "", "POST /orders").await;
    consumed_as(&proxy, "POST /app.fcgi/orders", "", "", "POST /orders").await;
    consumed_as(
        &proxy,
        "POST /orders/7%2F..%2F..%2Fx",
        "",
        "",
        "POST /orders",
    )
    .await;
}

/// A room's path written as `check` takes it (`/%EC%A3%BC%EB%AC%B8` for `/주문`, `/q:r`) holds
/// every spelling of it: the raw UTF-8 bytes, escapes in either case, `/q%3Ar` (found by
/// review r89a: the raw bytes and the escaped colon reached the shop without waiting, and one
/// admission ordered three times through the raw spelling of its consume route).
#[tokio::test]
async fn a_path_with_non_ascii_or_escaped_characters_is_held_in_every_spelling() {
    let origin = Origin::start().await;
    let rooms = |max_active: u32| {
        format!(
            r#"
[[room]]
name = "sale"
upstream = "shop"
paths = ["/products", "/%EC%A3%BC%EB%AC%B8", "/q:r"]
admit-per-second = 1000
max-active = {max_active}
consume = ["POST /%EC%A3%BC%EB%AC%B8"]
"#
        )
    };
    let held = Proxy::start(&format!("{}{}", rooms(1), base_config(origin.addr)));
    occupy(&held, "shop.test").await;
    for p in [
        "/주문",
        "/주문/1",
        "/%ec%a3%bc%eb%ac%b8",
        "/%EC%A3%BC문",
        "/q%3Ar",
        "/q%3ar/x",
        "/q:r",
        // Escaped twice, nested: a hop decodes it to `%EC` and raw bytes, the app to `/주문`
        // (found by re-review r90a).
        "/%25%45C%A3%BC%EB%AC%B8",
        "/%%45C%A3%BC%EB%AC%B8",
        // IIS as the hop: `%u0025` is a `%` to the app behind (found by re-review r91a).
        "/q%u00253Ar",
        "/%u0025EC%u0025A3%u0025BC%u0025EB%u0025AC%u0025B8",
    ] {
        assert_held(
            &held,
            &origin,
            &get(p, "shop.test", ""),
            &format!("GET {p}"),
        )
        .await;
        let post = format!(
            "POST {p} HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        assert_held(&held, &origin, &post, &format!("POST {p}")).await;
    }
    drop(held);
    // One order per admission, whatever spelling of the route the order takes.
    let open = Proxy::start(&format!("{}{}", rooms(50), base_config(origin.addr)));
    let (vid, cookie) = enter(&open, "/products/1").await;
    let r = raw(&open, &order_request("/%EC%A3%BC%EB%AC%B8", &vid, &cookie)).await;
    assert!(r.reached_origin(), "the order: {r:?}");
    for again in [
        "/%EC%A3%BC%EB%AC%B8",
        "/주문",
        "/%ec%a3%bc%eb%ac%b8",
        "/%25%45C%A3%BC%EB%AC%B8",
        "/%u0025EC%u0025A3%u0025BC%u0025EB%u0025AC%u0025B8",
    ] {
        let r = raw(&open, &order_request(again, &vid, &cookie)).await;
        assert_eq!(r.status, 409, "a second order as {again}: {r:?}");
    }
}
