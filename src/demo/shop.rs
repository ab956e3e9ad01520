//! The built-in demo origin: "Legacy Shop", a tiny server-rendered web shop.
//!
//! `anteroom demo` serves it on a loopback port behind the waiting room. It stands in for the
//! shop nobody can change: plain HTML forms, a cart kept in a cookie, an order counter. `/` is
//! left unprotected; `/products`, `/cart` and `/orders` sit behind the waiting room.
//!
//! Nothing here may panic on request data: every value from the request is parsed strictly and
//! HTML-escaped before it is echoed.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use http::header::{
    HeaderName, HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, COOKIE,
};
use http::header::{LOCATION, SET_COOKIE};
use http::{Method, Response, StatusCode};
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;

/// Name of the cart cookie: product ids separated by commas.
pub const CART_COOKIE: &str = "shop_cart";
/// A cart holds at most this many entries; further additions are ignored.
pub const MAX_CART: usize = 20;
/// Request bodies longer than this are refused with 413.
pub const MAX_BODY: usize = 64 * 1024;

const BANNER: &str = "Legacy Shop — the demo origin behind anteroom";
const CSS: &str = "body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#222;background:#fafafa}\
header{background:#333;color:#fff;padding:.6em 1em;font-size:.9em}\
main{max-width:40em;margin:0 auto;padding:1em}a{color:#0a58ca}\
ul.p{list-style:none;padding:0}ul.p li{display:flex;justify-content:space-between;gap:1em;\
padding:.6em 0;border-bottom:1px solid #ddd}.price{font-weight:600;white-space:nowrap}\
button{font:inherit;padding:.5em 1.2em;border:0;border-radius:4px;background:#0a58ca;color:#fff}\
.note{color:#666;font-size:.9em}";

/// One item of the fixed catalogue.
struct Product {
    id: u32,
    name: &'static str,
    price: u64,
}

const CATALOGUE: [Product; 6] = [
    Product {
        id: 1,
        name: "Canvas Tote Bag",
        price: 39_000,
    },
    Product {
        id: 2,
        name: "Ceramic Mug",
        price: 18_000,
    },
    Product {
        id: 3,
        name: "Wool Beanie",
        price: 29_000,
    },
    Product {
        id: 4,
        name: "Leather Notebook",
        price: 45_000,
    },
    Product {
        id: 5,
        name: "Enamel Pin Set",
        price: 12_000,
    },
    Product {
        id: 6,
        name: "Limited Edition Sneakers",
        price: 189_000,
    },
];

fn product(id: u32) -> Option<&'static Product> {
    CATALOGUE.iter().find(|p| p.id == id)
}

/// The demo shop. Cheap to share: all state is in atomics (the cart lives in the visitor's cookie).
pub struct Shop {
    orders: AtomicU64,
    items_added: AtomicU64,
}

impl Shop {
    pub fn new() -> Self {
        Shop {
            orders: AtomicU64::new(0),
            items_added: AtomicU64::new(0),
        }
    }

    /// Orders placed so far.
    pub fn orders(&self) -> u64 {
        self.orders.load(Ordering::Relaxed)
    }
}

impl Default for Shop {
    fn default() -> Self {
        Self::new()
    }
}

/// What a request asks for, decided from method and path alone.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Home,
    Products,
    Product(u32),
    Cart,
    AddToCart,
    PlaceOrder,
    NotAllowed(&'static str),
    NotFound,
}

fn route(method: &Method, path: &str) -> Route {
    let get = method == Method::GET || method == Method::HEAD;
    let post = method == Method::POST;
    let pick =
        |ok: bool, r: Route, allow: &'static str| if ok { r } else { Route::NotAllowed(allow) };
    match path {
        "/" => pick(get, Route::Home, "GET, HEAD"),
        "/products" => pick(get, Route::Products, "GET, HEAD"),
        "/cart" if post => Route::AddToCart,
        "/cart" => pick(get, Route::Cart, "GET, HEAD, POST"),
        "/orders" => pick(post, Route::PlaceOrder, "POST"),
        _ => match path.strip_prefix("/products/").and_then(parse_id) {
            Some(id) => pick(get, Route::Product(id), "GET, HEAD"),
            None => Route::NotFound,
        },
    }
}

/// A product id as written in forms and cookies: 1-2 ASCII digits, no leading zero, in the catalogue.
fn parse_id(s: &str) -> Option<u32> {
    let strict = !s.is_empty() && s.len() <= 2 && !s.starts_with('0');
    if !strict || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id: u32 = s.parse().ok()?;
    product(id).map(|p| p.id)
}

/// Cart cookie value → product ids. Malformed or unknown entries are dropped; at most [`MAX_CART`].
fn parse_cart(value: &str) -> Vec<u32> {
    value
        .split(',')
        .filter_map(parse_id)
        .take(MAX_CART)
        .collect()
}

fn serialize_cart(items: &[u32]) -> String {
    let ids: Vec<String> = items.iter().take(MAX_CART).map(u32::to_string).collect();
    ids.join(",")
}

/// The cart from the request's `Cookie` header values (the first `shop_cart` wins).
fn cart_from_cookies<'a>(headers: impl IntoIterator<Item = &'a [u8]>) -> Vec<u32> {
    for raw in headers {
        let Ok(text) = std::str::from_utf8(raw) else {
            continue;
        };
        for pair in text.split(';') {
            if let Some((name, value)) = pair.trim().split_once('=') {
                if name == CART_COOKIE {
                    return parse_cart(value.trim_matches('"'));
                }
            }
        }
    }
    Vec::new()
}

fn set_cart_cookie(items: &[u32]) -> String {
    format!(
        "{CART_COOKIE}={}; Path=/; SameSite=Lax",
        serialize_cart(items)
    )
}

fn clear_cart_cookie() -> String {
    format!("{CART_COOKIE}=; Path=/; Max-Age=0")
}

/// Percent-decodes one `application/x-www-form-urlencoded` component; `None` if malformed.
fn url_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The first value of `key` in a urlencoded form body.
fn form_value(body: &[u8], key: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (url_decode(k)? == key).then(|| url_decode(v)).flatten()
    })
}

/// `39000` → `₩39,000`.
fn format_krw(won: u64) -> String {
    let digits = won.to_string();
    let lead = digits.len() % 3; // a comma goes before every index i with i % 3 == lead
    let mut out = String::from("₩");
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && i % 3 == lead {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn layout(title: &str, main: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>{} · Legacy Shop</title><style>{CSS}</style></head>\
<body><header>{BANNER}</header><main>{main}</main></body></html>",
        html_escape(title)
    )
}

/// Cart entries grouped by product, in order of first addition: (product, quantity).
fn group_cart(items: &[u32]) -> Vec<(&'static Product, u64)> {
    let mut lines: Vec<(&'static Product, u64)> = Vec::new();
    for p in items.iter().filter_map(|&id| product(id)) {
        match lines.iter_mut().find(|(q, _)| q.id == p.id) {
            Some((_, n)) => *n += 1,
            None => lines.push((p, 1)),
        }
    }
    lines
}

fn home_page() -> String {
    layout(
        "Welcome",
        "<h1>Welcome to Legacy Shop</h1><p>Today only: the big sale. Stock is limited.</p>\
<p><a href=\"/products\">Enter the sale</a></p><p class=\"note\"><code>/products</code>, \
<code>/cart</code> and <code>/orders</code> are protected by the waiting room; \
<code>/</code> is not.</p>",
    )
}

fn products_page() -> String {
    let mut items = String::new();
    for p in &CATALOGUE {
        let (id, name, price) = (p.id, html_escape(p.name), format_krw(p.price));
        items += &format!(
            "<li><a href=\"/products/{id}\">{name}</a><span class=\"price\">{price}</span></li>"
        );
    }
    let more = "<p><a href=\"/cart\">View cart</a></p>";
    layout(
        "Products",
        &format!("<h1>The sale</h1><ul class=\"p\">{items}</ul>{more}"),
    )
}

fn product_page(p: &Product) -> String {
    let (id, name, price) = (p.id, html_escape(p.name), format_krw(p.price));
    let main = format!(
        "<h1>{name}</h1><p class=\"price\">{price}</p><form method=\"post\" action=\"/cart\">\
<input type=\"hidden\" name=\"product\" value=\"{id}\"><button>Add to cart</button></form>\
<p><a href=\"/products\">Back to products</a> · <a href=\"/cart\">View cart</a></p>"
    );
    layout(p.name, &main)
}

fn cart_page(items: &[u32]) -> String {
    let lines = group_cart(items);
    if lines.is_empty() {
        let main = "<h1>Your cart</h1><p>Your cart is empty.</p><p><a href=\"/products\">Enter the sale</a></p>";
        return layout("Cart", main);
    }
    let mut rows = String::new();
    for (p, n) in &lines {
        let (name, sum) = (html_escape(p.name), format_krw(p.price * n));
        rows += &format!("<li><span>{name} × {n}</span><span class=\"price\">{sum}</span></li>");
    }
    let total = format_krw(lines.iter().map(|(p, n)| p.price * n).sum());
    let main = format!(
        "<h1>Your cart</h1><ul class=\"p\">{rows}<li><strong>Total</strong>\
<span class=\"price\">{total}</span></li></ul><form method=\"post\" action=\"/orders\">\
<button>Place order</button></form><p><a href=\"/products\">Keep shopping</a></p>"
    );
    layout("Cart", &main)
}

fn order_page(number: u64, items: &[u32]) -> String {
    let total = format_krw(
        items
            .iter()
            .filter_map(|&id| product(id))
            .map(|p| p.price)
            .sum(),
    );
    let count = items.len();
    let main = format!(
        "<h1>Order #{number} placed — thank you</h1><p>{count} item(s), {total} in total.</p>\
<p><a href=\"/products\">Back to the sale</a></p>"
    );
    layout("Order placed", &main)
}

fn message_page(title: &str, text: &str) -> String {
    let (h1, text) = (html_escape(title), html_escape(text));
    layout(
        title,
        &format!("<h1>{h1}</h1><p>{text}</p><p><a href=\"/\">Home</a></p>"),
    )
}

/// Builds an HTML response; infallible (no builder, header values that fail to parse are skipped).
fn html(
    status: StatusCode,
    page: String,
    no_store: bool,
    extra: &[(HeaderName, String)],
) -> Response<Vec<u8>> {
    let body = page.into_bytes();
    let len = body.len();
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    if no_store {
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    for (name, value) in extra {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.append(name.clone(), v);
        }
    }
    resp
}

/// Reads the whole request body, refusing more than [`MAX_BODY`] bytes. `Err`: the status to answer.
async fn read_body(session: &mut ServerSession) -> Result<Vec<u8>, (StatusCode, &'static str)> {
    let mut buf = Vec::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(c)) if buf.len() + c.len() > MAX_BODY => {
                return Err((StatusCode::PAYLOAD_TOO_LARGE, "Request too large"))
            }
            Ok(Some(c)) => buf.extend_from_slice(&c),
            Ok(None) => return Ok(buf),
            Err(_) => return Err((StatusCode::BAD_REQUEST, "Bad request")),
        }
    }
}

impl Shop {
    fn handle(&self, route: Route, body: &[u8], cart: Vec<u32>) -> Response<Vec<u8>> {
        let ok = StatusCode::OK;
        match route {
            Route::Home => html(ok, home_page(), false, &[]),
            Route::Products => html(ok, products_page(), false, &[]),
            Route::Product(id) => match product(id) {
                Some(p) => html(ok, product_page(p), false, &[]),
                None => not_found(),
            },
            Route::Cart => html(ok, cart_page(&cart), true, &[]),
            Route::AddToCart => {
                let Some(id) = form_value(body, "product").as_deref().and_then(parse_id) else {
                    let page =
                        message_page("Unknown product", "That product is not in the catalogue.");
                    return html(StatusCode::BAD_REQUEST, page, true, &[]);
                };
                let mut cart = cart;
                if cart.len() < MAX_CART {
                    cart.push(id);
                    self.items_added.fetch_add(1, Ordering::Relaxed);
                }
                let page = message_page("Added to cart", "See your cart.");
                let extra = [
                    (LOCATION, "/cart".to_string()),
                    (SET_COOKIE, set_cart_cookie(&cart)),
                ];
                html(StatusCode::SEE_OTHER, page, true, &extra)
            }
            Route::PlaceOrder => {
                let number = self.orders.fetch_add(1, Ordering::Relaxed) + 1;
                html(
                    ok,
                    order_page(number, &cart),
                    true,
                    &[(SET_COOKIE, clear_cart_cookie())],
                )
            }
            Route::NotAllowed(allow) => {
                let page = message_page(
                    "Method not allowed",
                    "This page does not accept that method.",
                );
                html(
                    StatusCode::METHOD_NOT_ALLOWED,
                    page,
                    false,
                    &[(ALLOW, allow.to_string())],
                )
            }
            Route::NotFound => not_found(),
        }
    }
}

fn not_found() -> Response<Vec<u8>> {
    html(
        StatusCode::NOT_FOUND,
        message_page("Not found", "There is no such page in this shop."),
        false,
        &[],
    )
}

#[async_trait]
impl ServeHttp for Shop {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let req = session.req_header();
        let (method, path) = (req.method.clone(), req.uri.path().to_string());
        let cart = cart_from_cookies(req.headers.get_all(COOKIE).iter().map(|v| v.as_bytes()));
        let body = match read_body(session).await {
            Ok(body) => body,
            Err((status, title)) => {
                session.set_keepalive(None);
                let page = message_page(title, "The request body could not be accepted.");
                return html(status, page, true, &[]);
            }
        };
        let mut resp = self.handle(route(&method, &path), &body, cart);
        if method == Method::HEAD {
            resp.body_mut().clear();
        }
        resp
    }
}

#[cfg(test)]
mod tests;
