//! Client connections kept open or closed as the client asks: an HTTP/1.0 request without
//! `Connection: keep-alive` is answered and its connection closed, whatever answers it (the
//! origin, a waiting page, a refusal). Found while testing host readings: anteroom set its
//! keep-alive timeout on every connection, and an HTTP/1.0 client reading to the close waited
//! `client-timeout` for each answer.

mod common;

use std::time::Duration;

use common::raw::occupy;
use common::{base_config, Origin, Proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `request`'s answer, and whether the connection was closed after it (read to its end within
/// a deadline far below `client-timeout`).
async fn answer(proxy: &Proxy, request: &str) -> (String, bool) {
    let mut s = TcpStream::connect(proxy.addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .is_ok();
    (String::from_utf8_lossy(&buf).into_owned(), closed)
}

#[tokio::test]
async fn an_http_1_0_request_is_answered_and_its_connection_closed() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        r#"
[server]
client-timeout = "120s"

[[room]]
name = "sale"
upstream = "shop"
hosts = ["shop.test"]
paths = ["/products"]
admit-per-second = 1
max-active = 1
{base}"#,
        base = base_config(origin.addr)
    ));
    occupy(&proxy, "shop.test").await;
    for (request, what) in [
        ("GET /about HTTP/1.0\r\n\r\n", "the origin's answer"),
        (
            "GET /products/1 HTTP/1.0\r\nHost: shop.test\r\n\r\n",
            "the waiting page",
        ),
        ("GET /products/1 HTTP/1.0\r\n\r\n", "a refusal"),
    ] {
        let (text, closed) = answer(&proxy, request).await;
        assert!(text.starts_with("HTTP/1."), "{what}: {text}");
        assert!(closed, "{what}: the connection was kept open: {text}");
    }
    // A client that asks for keep-alive keeps its connection: the next request is answered
    // on it.
    let mut s = TcpStream::connect(proxy.addr).await.unwrap();
    for _ in 0..2 {
        s.write_all(b"GET /about HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .await
            .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(head.starts_with("http/1."), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a length");
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).await.unwrap();
    }
}
