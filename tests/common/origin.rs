//! The test origin: a real HTTP server (hyper) on a free loopback port that records every
//! request it gets and answers in the ways the tests need, stopped on drop.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// A request as the origin saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }
}

/// An origin that records every request and answers `origin METHOD URI`, or a large body for
/// `/big`, or echoes the body for `/echo`.
pub struct Origin {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
    /// Closes every open connection when the origin stops.
    stop: tokio::sync::watch::Sender<bool>,
    /// Milliseconds every answer takes (a shop that slows down): see [`Origin::set_delay`].
    delay: Arc<std::sync::atomic::AtomicU64>,
    /// Requests that have arrived, answered or not (`seen` has them once answered).
    arrived: Arc<std::sync::atomic::AtomicUsize>,
}

/// The body `/big` answers with: 2 MiB of a repeating pattern.
pub fn big_body() -> Vec<u8> {
    (0..2 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect()
}

impl Origin {
    pub async fn start() -> Origin {
        Self::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    /// Starts on a given address (to bring a stopped origin back on its port).
    pub async fn start_on(addr: SocketAddr) -> Origin {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        let delay: Arc<std::sync::atomic::AtomicU64> = Arc::default();
        let slow = delay.clone();
        let arrived: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let arriving = arrived.clone();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    break;
                };
                let log = log.clone();
                let slow = slow.clone();
                let arriving = arriving.clone();
                let mut stopped = stopped.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let log = log.clone();
                        let ms = slow.load(std::sync::atomic::Ordering::Relaxed);
                        arriving.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        async move {
                            if ms > 0 {
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                            }
                            Ok::<_, Infallible>(answer(req, log).await)
                        }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc);
                    tokio::select! {
                        _ = conn => {}
                        _ = stopped.changed() => {}
                    }
                });
            }
        });
        Origin {
            addr,
            seen,
            task,
            stop,
            delay,
            arrived,
        }
    }

    /// From now on every answer takes `ms` milliseconds longer (0: as fast as it can).
    pub fn set_delay(&self, ms: u64) {
        self.delay.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many requests have arrived, the ones still being answered (see `set_delay`) too.
    pub fn arrived(&self) -> usize {
        self.arrived.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn count(&self, path_prefix: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.uri.starts_with(path_prefix))
            .count()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
        let _ = self.stop.send(true);
    }
}

/// Answers as [`answer_plainly`] does; a path with a segment `command-WORD` also carries
/// `Anteroom-Command: WORD` (`+` in WORD stands for `, `), whatever the answer; `/healthz`
/// answers with `Anteroom-Admin: 1` (a shop passing for the admin listener).
async fn answer(req: Request<Incoming>, log: Arc<Mutex<Vec<Seen>>>) -> Response<Full<Bytes>> {
    let command = req
        .uri()
        .path()
        .split('/')
        .find_map(|seg| seg.strip_prefix("command-"))
        .map(|w| w.replace('+', ", "));
    // A shop whose health page carries the admin listener's mark: the proxy removes it.
    let marked = req.uri().path() == "/healthz";
    let mut resp = answer_plainly(req, log).await;
    if marked {
        resp.headers_mut().insert(
            "anteroom-admin",
            hyper::header::HeaderValue::from_static("1"),
        );
    }
    if let Some(w) = command {
        resp.headers_mut()
            .insert("anteroom-command", w.parse().unwrap());
    }
    resp
}

async fn answer_plainly(
    req: Request<Incoming>,
    log: Arc<Mutex<Vec<Seen>>>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let uri = parts.uri.to_string();
    log.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        uri: uri.clone(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect(),
        body: body.clone(),
    });
    if parts.uri.path().starts_with("/slow") {
        // A slow shop page: the origin's own pace, for shutdown tests.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    // `.../fail` answers 503, `.../fail-NNN` answers NNN: the shop's own error.
    let failure = parts.uri.path().rsplit('/').next().and_then(|last| {
        if last == "fail" {
            Some(503)
        } else {
            last.strip_prefix("fail-")?.parse::<u16>().ok()
        }
    });
    if let Some(status) = failure {
        return Response::builder()
            .status(status)
            .header("content-type", "text/plain")
            // A shop that lets CDNs keep its error for an hour (anteroom's page must not be).
            .header("cdn-cache-control", "max-age=3600")
            .body(Full::new(Bytes::from_static(
                b"shop internals: stack trace here",
            )))
            .unwrap();
    }
    if let Some(kind) = parts.uri.path().strip_prefix("/cached/") {
        return cached(kind, &parts.headers);
    }
    let reply = if parts.uri.path() == "/big" {
        big_body()
    } else if parts.uri.path().ends_with("/echo") {
        body
    } else {
        format!("origin {} {}", parts.method, uri).into_bytes()
    };
    Response::builder()
        .header("x-origin", "yes")
        .header("set-cookie", "shop_session=abc; Path=/")
        .body(Full::new(Bytes::from(reply)))
        .unwrap()
}

/// `/cached/KIND`: a page the shop lets caches keep, each KIND with its own caching fields
/// (`public`, `smaxage`, `none`, `cdn`, `private`, `nostore`), with an ETag; a request that
/// already has it (`If-None-Match: "v1"`) gets a `304`.
fn cached(kind: &str, headers: &hyper::HeaderMap) -> Response<Full<Bytes>> {
    let fresh = headers
        .get("if-none-match")
        .is_some_and(|v| v.as_bytes() == b"\"v1\"");
    let mut r = Response::builder()
        .status(if fresh { 304 } else { 200 })
        .header("x-origin", "yes")
        .header("etag", "\"v1\"");
    let cc = match kind {
        "public" => Some("public, max-age=600"),
        "smaxage" => Some("s-maxage=600"),
        "cdn" => Some("public, max-age=60"),
        "private" => Some("private, max-age=60"),
        "nostore" => Some("no-store"),
        _ => None,
    };
    if let Some(cc) = cc {
        r = r.header("cache-control", cc);
    }
    if kind == "cdn" {
        r = r
            .header("cdn-cache-control", "max-age=600")
            .header("surrogate-control", "max-age=600");
    }
    let body = if fresh {
        Bytes::new()
    } else {
        Bytes::from_static(b"a cacheable page")
    };
    r.body(Full::new(body)).unwrap()
}
