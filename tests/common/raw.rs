//! Raw HTTP/1.1 on the wire, for spellings that clients like reqwest would clean up first:
//! a request sent byte for byte, its answer read whole, and the steps of entering a room and
//! placing an order with them.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Origin, Proxy};

/// A response read off the wire.
#[derive(Debug)]
pub struct Raw {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Raw {
    pub fn reached_origin(&self) -> bool {
        self.head.to_ascii_lowercase().contains("\r\nx-origin: yes")
    }

    pub fn set_cookie(&self, name: &str) -> Option<String> {
        self.head.split("\r\n").find_map(|l| {
            let (k, v) = l.split_once(':')?;
            let v = v.trim();
            (k.eq_ignore_ascii_case("set-cookie") && v.starts_with(&format!("{name}=")))
                .then(|| v.split(';').next().unwrap_or("").to_string())
        })
    }
}

/// A POST of `path` with `cookie` that declares 100 bytes and sends its body a byte every
/// 200 ms (15 at most: past a `client-timeout` of 1 s long before the end); the answer read
/// whole, as text.
pub async fn trickled_post(proxy: &Proxy, path: &str, cookie: &str) -> String {
    trickled_post_of(proxy, path, cookie, 100).await
}

/// [`trickled_post`] declaring `declared` bytes (past 64 KiB, an order's body is not read whole
/// before its admission is used: it streams to the shop).
pub async fn trickled_post_of(proxy: &Proxy, path: &str, cookie: &str, declared: usize) -> String {
    let mut s = TcpStream::connect(proxy.addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: shop.test\r\nCookie: {cookie}\r\nContent-Length: {declared}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    for _ in 0..15 {
        if s.write_all(b"x").await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Sends `request` as it is (it must ask for `Connection: close` or be HTTP/1.0) and reads the
/// whole answer.
pub async fn raw(proxy: &Proxy, request: &str) -> Raw {
    raw_bytes(proxy, request.as_bytes()).await
}

/// [`raw`] for a request that is not UTF-8 (a Latin-1 cookie).
pub async fn raw_bytes(proxy: &Proxy, request: &[u8]) -> Raw {
    let mut s = TcpStream::connect(proxy.addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Raw {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

pub fn get(target: &str, host: &str, extra: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
}

/// A visitor let in at `path` (the room must have room): their `anteroom_vid=…` and
/// `anteroom_sale=…`.
pub async fn enter(proxy: &Proxy, path: &str) -> (String, String) {
    let entered = raw(proxy, &get(path, "shop.test", "")).await;
    assert!(entered.reached_origin(), "{entered:?}");
    let vid = entered.set_cookie("anteroom_vid").expect("visitor id");
    let cookie = entered
        .set_cookie("anteroom_sale")
        .expect("admission cookie");
    (vid, cookie)
}

/// An order (`POST target`) with the visitor's cookies.
pub fn order_request(target: &str, vid: &str, cookie: &str) -> String {
    format!(
        "POST {target} HTTP/1.1\r\nHost: shop.test\r\nCookie: {vid}; {cookie}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
}

/// The orders that reached the origin.
pub fn orders(origin: &Origin) -> usize {
    origin
        .requests()
        .iter()
        .filter(|s| s.method == "POST")
        .count()
}

/// One visitor let in through the fast path, so that with `max-active = 1` everyone else waits.
pub async fn occupy(proxy: &Proxy, host: &str) {
    let r = raw(proxy, &get("/products/0", host, "")).await;
    assert!(r.reached_origin(), "the first visitor enters: {r:?}");
}

pub async fn occupy_path(proxy: &Proxy, path: &str) {
    let r = raw(proxy, &get(path, "shop.test", "")).await;
    assert!(r.reached_origin(), "the first visitor enters: {r:?}");
}

/// `request` waited in the room (the waiting page) or was refused (400), and the origin saw
/// nothing of it.
pub async fn assert_held(proxy: &Proxy, origin: &Origin, request: &str, what: &str) {
    let before = origin.requests().len();
    let r = raw(proxy, request).await;
    assert!(
        !r.reached_origin() && (r.status == 400 || r.status == 200 && r.body.contains("anteroom")),
        "{what}: {} {}",
        r.head,
        r.body.chars().take(200).collect::<String>()
    );
    assert_eq!(origin.requests().len(), before, "{what}: the origin saw it");
}
