//! A room capped at the origin (`max-origin-inflight`), for the black-box tests of the cap
//! (`tests/origin_cap.rs`) and of request bodies under it (`tests/origin_cap_bodies.rs`): an
//! origin that counts its concurrency, the room's config, admitted visitors and their
//! requests, and uploads paced as a test needs.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

pub const TOKEN: &str = "admin-token-for-tests-0123456789";

/// An origin that takes `pace` per request (`/hold` takes `hold`; `/products/gated` answers
/// only when the test opens its gate, one request per permit) and counts how many it serves
/// at once, and in which order they came (by `x-seq`).
pub struct Counts {
    pub now: AtomicUsize,
    pub most: AtomicUsize,
    pub orders: AtomicUsize,
    pub order_of_arrival: Mutex<Vec<String>>,
    pub gate: tokio::sync::Semaphore,
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            orders: AtomicUsize::new(0),
            order_of_arrival: Mutex::default(),
            gate: tokio::sync::Semaphore::const_new(0),
        }
    }
}

pub struct CountingOrigin {
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CountingOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn counting_origin(pace: Duration, hold: Duration) -> CountingOrigin {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts: Arc<Counts> = Arc::default();
    let c = counts.clone();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let c = c.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let c = c.clone();
                    async move {
                        let n = c.now.fetch_add(1, Ordering::SeqCst) + 1;
                        c.most.fetch_max(n, Ordering::SeqCst);
                        if let Some(seq) = req.headers().get("x-seq") {
                            let seq = seq.to_str().unwrap_or("?").to_string();
                            c.order_of_arrival.lock().unwrap().push(seq);
                        }
                        if req.uri().path().starts_with("/orders") {
                            c.orders.fetch_add(1, Ordering::SeqCst);
                        }
                        let wait = if req.uri().path().starts_with("/hold") {
                            hold
                        } else {
                            pace
                        };
                        let gated = req.uri().path().starts_with("/products/gated");
                        let _ = req.into_body().collect().await;
                        if gated {
                            if let Ok(permit) = c.gate.acquire().await {
                                permit.forget();
                            }
                        }
                        tokio::time::sleep(wait).await;
                        c.now.fetch_sub(1, Ordering::SeqCst);
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                            b"from the shop",
                        ))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    CountingOrigin { addr, counts, task }
}

pub fn config(origin: SocketAddr, cap: usize, timeout: &str) -> String {
    format!(
        r#"{base}
[admin]
token = "{TOKEN}"

[[room]]
name = "sale"
paths = ["/products", "/hold", "/orders"]
admit-per-second = 1000
max-active = 100000
consume = ["POST /orders"]
max-origin-inflight = {cap}
origin-queue-timeout = "{timeout}"
"#,
        base = base_config(origin)
    )
}

pub async fn room_metric(proxy: &Proxy, line_start: &str) -> u64 {
    let text = metrics_text(proxy, TOKEN).await;
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

pub const QUEUED: &str = "anteroom_origin_queued{room=\"sale\"}";

/// A visitor let in (the fast path), with their admission cookie.
pub async fn admitted(proxy: &Proxy) -> Jar {
    let mut jar = Jar::default();
    let resp = client()
        .get(proxy.url("/.anteroom/status?room=sale"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["state"], "admitted", "{v}");
    jar
}

pub fn send(
    proxy: &Proxy,
    method: reqwest::Method,
    path: &str,
    jar: &Jar,
    seq: usize,
    json: bool,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let mut req = client()
        .request(method, proxy.url(path))
        .header("cookie", jar.header())
        .header("x-seq", seq.to_string());
    if json {
        req = req.header("accept", "application/json");
    }
    tokio::spawn(async move { req.send().await.unwrap() })
}

/// An upload paced as a test needs: its head declares `len` bytes; `burst` of them go at once,
/// then `piece` bytes every `every` until all are sent or the connection fails; then its
/// answer is read for up to 5 s.
pub struct Upload {
    pub path: &'static str,
    pub len: usize,
    pub burst: usize,
    pub piece: usize,
    pub every: Duration,
}

impl Upload {
    /// `len` bytes, `piece` bytes every `every` from the start.
    pub fn paced(path: &'static str, len: usize, piece: usize, every: Duration) -> Self {
        Self {
            path,
            len,
            burst: 0,
            piece,
            every,
        }
    }

    /// Sends it with `jar`'s cookies on a connection of its own.
    pub fn send(self, proxy: &Proxy, jar: &Jar) -> tokio::task::JoinHandle<()> {
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: shop.test\r\nCookie: {}\r\nContent-Length: {}\r\n\r\n",
            self.path,
            jar.header(),
            self.len
        );
        let addr = proxy.addr;
        tokio::spawn(async move {
            let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await else {
                return;
            };
            if conn.write_all(head.as_bytes()).await.is_err()
                || conn.write_all(&vec![b'x'; self.burst]).await.is_err()
            {
                return;
            }
            let mut sent = self.burst;
            while sent < self.len {
                let n = self.piece.min(self.len - sent);
                if conn.write_all(&vec![b'x'; n]).await.is_err() {
                    break;
                }
                sent += n;
                tokio::time::sleep(self.every).await;
            }
            let mut rest = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest)).await;
        })
    }
}

/// An origin that answers every request at once, after its head, and goes on reading its body
/// (an early 202 or 401, nginx's lingering close): how many heads it has had.
pub async fn early_answering_origin() -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>)
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                seen.fetch_add(1, Ordering::SeqCst);
                // `empty` in the target: an answer without a body.
                let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
                let answer: &[u8] = if line.windows(5).any(|w| w == b"empty") {
                    b"HTTP/1.1 204 No Content\r\n\r\n"
                } else {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly"
                };
                let _ = conn.write_all(answer).await;
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            });
        }
    });
    (addr, heads)
}
