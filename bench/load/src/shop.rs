//! The legacy shop, in-process: a hyper 1 server with a cheap product page and an order
//! endpoint limited by a fixed pool of workers. Past its capacity it slows (orders queue for a
//! worker) and then errors (503 after `queue_timeout`). It counts what it sees per 100 ms bucket
//! on the run's clock.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::analysis::bucket_of;

pub const SHOP_HEADER: &str = "x-legacy-shop";

#[derive(Debug, Clone)]
pub struct ShopConfig {
    pub workers: usize,
    pub order_time: Duration,
    pub queue_timeout: Duration,
    /// Workers lost for a while in the middle of the run.
    pub drop: Option<crate::capacity::Drop>,
}

#[derive(Default)]
struct Counters {
    requests: Vec<u64>,
    orders: Vec<u64>,
    errors: Vec<u64>,
    order_latency_us: Vec<u64>,
}

fn bump(v: &mut Vec<u64>, b: usize) {
    if v.len() <= b {
        v.resize(b + 1, 0);
    }
    v[b] += 1;
}

/// What the shop saw, per 100 ms bucket since the run started.
#[derive(Debug, Clone, Default)]
pub struct ShopStats {
    pub requests: Vec<u64>,
    pub orders: Vec<u64>,
    pub errors: Vec<u64>,
    pub order_latency_us: Vec<u64>,
    pub max_in_flight: u64,
}

pub struct Shop {
    cfg: ShopConfig,
    t0: Instant,
    workers: Semaphore,
    counters: Mutex<Counters>,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    order_seq: AtomicU64,
    page: Bytes,
}

/// Decrements the in-flight count however the request ends.
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn product_page() -> Bytes {
    let mut html = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Legacy shop: flash sale</title></head>\n<body><h1>Flash sale</h1>\n<form method=\"post\" action=\"/orders\"><ul>\n",
    );
    for i in 1..=16 {
        html.push_str(&format!(
            "<li><label><input type=\"radio\" name=\"item\" value=\"{i}\"> Limited item #{i}, 19.99</label></li>\n"
        ));
    }
    html.push_str("</ul><button>Order now</button></form></body></html>\n");
    Bytes::from(html)
}

impl Shop {
    pub fn new(cfg: ShopConfig, t0: Instant) -> Arc<Shop> {
        let shop = Self::build(cfg, t0);
        if let Some(d) = shop.cfg.drop {
            // The drop: take the lost workers' permits at its start (as orders in flight
            // finish) and give them back at its end.
            let lost = shop.cfg.workers.saturating_sub(d.workers) as u32;
            let s = shop.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until((s.t0 + d.at).into()).await;
                if let Ok(held) = s.workers.acquire_many(lost).await {
                    tokio::time::sleep_until((s.t0 + d.at + d.length).into()).await;
                    drop(held);
                }
            });
        }
        shop
    }

    fn build(cfg: ShopConfig, t0: Instant) -> Arc<Shop> {
        Arc::new(Shop {
            workers: Semaphore::new(cfg.workers),
            cfg,
            t0,
            counters: Mutex::new(Counters::default()),
            in_flight: AtomicU64::new(0),
            max_in_flight: AtomicU64::new(0),
            order_seq: AtomicU64::new(0),
            page: product_page(),
        })
    }

    fn now_us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }

    fn count(&self, f: impl FnOnce(&mut Counters)) {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut c);
    }

    pub fn current_in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> ShopStats {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        ShopStats {
            requests: c.requests.clone(),
            orders: c.orders.clone(),
            errors: c.errors.clone(),
            order_latency_us: c.order_latency_us.clone(),
            max_in_flight: self.max_in_flight.load(Ordering::Relaxed),
        }
    }

    /// Totals so far: (requests, orders, errors).
    pub fn totals(&self) -> (u64, u64, u64) {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        (
            c.requests.iter().sum(),
            c.orders.iter().sum(),
            c.errors.iter().sum(),
        )
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let received = self.now_us();
        self.count(|c| bump(&mut c.requests, bucket_of(received)));
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
        let _guard = InFlight(&self.in_flight);

        let resp = match (req.method(), req.uri().path()) {
            (&Method::GET | &Method::HEAD, "/products") => reply(
                StatusCode::OK,
                "text/html; charset=utf-8",
                self.page.clone(),
            ),
            (&Method::POST, "/orders") => {
                // Read the form (keeps the connection reusable).
                let _ = req.into_body().collect().await;
                self.order(received).await
            }
            _ => reply(
                StatusCode::NOT_FOUND,
                "text/plain",
                Bytes::from_static(b"not found\n"),
            ),
        };
        if resp.status().is_server_error() {
            let t = self.now_us();
            self.count(|c| bump(&mut c.errors, bucket_of(t)));
        }
        resp
    }

    async fn order(&self, received: u64) -> Response<Full<Bytes>> {
        let permit =
            match tokio::time::timeout(self.cfg.queue_timeout, self.workers.acquire()).await {
                Ok(Ok(p)) => p,
                _ => {
                    return reply(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "text/plain",
                        Bytes::from_static(b"shop overloaded\n"),
                    )
                }
            };
        tokio::time::sleep(self.cfg.order_time).await;
        drop(permit);
        let n = self.order_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let done = self.now_us();
        self.count(|c| {
            bump(&mut c.orders, bucket_of(done));
            c.order_latency_us.push(done.saturating_sub(received));
        });
        reply(
            StatusCode::OK,
            "application/json",
            Bytes::from(format!("{{\"order\":{n},\"status\":\"confirmed\"}}\n")),
        )
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(SHOP_HEADER, hyper::header::HeaderValue::from_static("1"));
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    r
}

/// Serves the shop on `listener` until `stop` turns true.
pub async fn serve(shop: Arc<Shop>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
    let mut accept_errors = 0u64;
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: back off a little, keep serving.
                    // Said once, then every 1000th time: a collapsing shop fails thousands.
                    accept_errors += 1;
                    if accept_errors % 1000 == 1 {
                        eprintln!("shop: accept failed ({accept_errors} so far): {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let shop = shop.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let shop = shop.clone();
                async move { Ok::<_, Infallible>(shop.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Empty;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    async fn start(cfg: ShopConfig) -> (Arc<Shop>, String, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shop = Shop::new(cfg, Instant::now());
        let (tx, rx) = watch::channel(false);
        tokio::spawn(serve(shop.clone(), listener, rx));
        (shop, format!("http://{addr}"), tx)
    }

    #[tokio::test]
    async fn orders_past_capacity_get_503_and_everything_is_counted() {
        let (shop, base, _stop) = start(ShopConfig {
            workers: 2,
            order_time: Duration::from_millis(200),
            queue_timeout: Duration::from_millis(100),
            drop: None,
        })
        .await;
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let page = client
            .get(format!("{base}/products").parse().unwrap())
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        assert_eq!(page.headers()[SHOP_HEADER], "1");
        let body = page.into_body().collect().await.unwrap().to_bytes();
        assert!(body.len() > 800 && body.len() < 2048, "{}", body.len());

        // Five orders at once against two workers: two succeed, three wait 100 ms and fail.
        let mut tasks = Vec::new();
        for _ in 0..5 {
            let client = client.clone();
            let uri: hyper::Uri = format!("{base}/orders").parse().unwrap();
            tasks.push(tokio::spawn(async move {
                let req = Request::post(uri)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(Full::new(Bytes::from_static(b"item=1")))
                    .unwrap();
                let r = client.request(req).await.unwrap();
                (r.status().as_u16(), r.headers().contains_key(SHOP_HEADER))
            }));
        }
        let mut statuses = Vec::new();
        for t in tasks {
            statuses.push(t.await.unwrap());
        }
        statuses.sort();
        assert_eq!(
            statuses,
            vec![
                (200, true),
                (200, true),
                (503, true),
                (503, true),
                (503, true)
            ]
        );

        let other: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let nf = other
            .get(format!("{base}/nope").parse().unwrap())
            .await
            .unwrap();
        assert_eq!(nf.status(), 404);

        let s = shop.stats();
        assert_eq!(s.requests.iter().sum::<u64>(), 7);
        assert_eq!(s.orders.iter().sum::<u64>(), 2);
        assert_eq!(s.errors.iter().sum::<u64>(), 3);
        assert_eq!(s.order_latency_us.len(), 2);
        assert!(s.order_latency_us.iter().all(|&l| l >= 200_000));
        assert!(s.max_in_flight >= 5, "{}", s.max_in_flight);
        assert_eq!(shop.current_in_flight(), 0);
    }
}
