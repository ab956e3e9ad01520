//! One simulated browser: a cookie jar, arrival on the curve, the waiting flow, then the order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE, COOKIE, HOST, RETRY_AFTER, SET_COOKIE};
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::eta::{self, Prediction};
use crate::shop::SHOP_HEADER;

mod jar;
mod page;

pub use jar::CookieJar;
use page::{page_position, page_wait, parse_status, Status};

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Per-request timeout.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a transport or origin error.
const ERROR_PAUSE: Duration = Duration::from_secs(1);
/// Order retries after an origin error (a real shopper tries again a few times).
const ORDER_RETRIES: u32 = 3;

const HTML: &str = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8";
const JSON: &str = "application/json";

pub fn client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// Latency classes of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The waiting page answering a visitor's first shop request.
    WaitingPage,
    /// `GET /.anteroom/status` (every answer).
    StatusPoll,
    /// Requests answered by the shop after the visitor had waited, and every order.
    AdmittedRequest,
    /// A first `GET /products` answered by the shop at once (no wait: no room or fast path).
    DirectRequest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outcome {
    /// Its arrival time came after the deadline.
    #[default]
    NotArrived,
    /// Still trying when the deadline came.
    Unfinished,
    Ordered,
    /// Stopped trying: the order failed past its retries, or a 409 or a 4xx on the order.
    GaveUp,
}

/// Everything one browser saw. Times are µs since the run started.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub arrival: Option<u64>,
    pub join_sent: Option<u64>,
    pub join_done: Option<u64>,
    pub admitted_done: Option<u64>,
    pub last_waiting_sent: Option<u64>,
    pub ordered_done: Option<u64>,
    pub first_position: Option<u64>,
    /// The last place the visitor was told while in line: (answer done µs, position). With the
    /// admission counter it tells when their turn came (the discovery lag).
    pub last_told: Option<(u64, u64)>,
    /// The first wait the visitor was predicted, and the send time of the request whose waiting
    /// answer told it (the first waiting answer with an ETA before the admission).
    pub predicted: Option<Prediction>,
    pub predicted_at: Option<u64>,
    pub polls: u32,
    pub rejected: u32,
    pub origin_errors: u32,
    pub anteroom_errors: u32,
    pub consumed_conflicts: u32,
    pub transport_errors: u32,
    pub unexpected: u32,
    pub sent_back_to_line: u32,
    pub order_attempts: u32,
    pub outcome: Outcome,
    pub latencies: Vec<(Class, u32)>,
}

/// Live counts for the progress line.
#[derive(Default)]
pub struct Live {
    pub arrived: AtomicU64,
    pub waiting: AtomicU64,
    pub ordered: AtomicU64,
    pub gave_up: AtomicU64,
}

/// What every browser shares.
pub struct Env {
    pub client: HttpClient,
    pub targets: Vec<String>,
    pub host: Option<HeaderValue>,
    pub room: String,
    pub t0: Instant,
    pub live: Arc<Live>,
}

/// One answered request.
#[derive(Debug)]
struct Reply {
    status: u16,
    shop: bool,
    retry_after: Option<Duration>,
    body: Bytes,
    sent: u64,
    done: u64,
}

impl Reply {
    fn latency(&self) -> u32 {
        self.done.saturating_sub(self.sent).min(u32::MAX as u64) as u32
    }
}

enum Step {
    Enter,
    Poll(Duration),
    Shop,
    Order { failures: u32 },
}

pub struct Browser {
    env: Arc<Env>,
    rng: fastrand::Rng,
    jar: CookieJar,
    arrival: Duration,
    waiting: bool,
}

impl Browser {
    pub fn new(env: Arc<Env>, seed: u64, arrival: Duration) -> Browser {
        Browser {
            env,
            rng: fastrand::Rng::with_seed(seed),
            jar: CookieJar::default(),
            arrival,
            waiting: false,
        }
    }

    fn now(&self) -> u64 {
        self.env.t0.elapsed().as_micros() as u64
    }

    fn set_waiting(&mut self, w: bool) {
        if w != self.waiting {
            self.waiting = w;
            if w {
                self.env.live.waiting.fetch_add(1, Ordering::Relaxed);
            } else {
                self.env.live.waiting.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    async fn send(&mut self, method: Method, path: &str, accept: &str) -> Result<Reply, String> {
        let target = &self.env.targets[self.rng.usize(..self.env.targets.len())];
        let mut req = Request::builder()
            .method(method.clone())
            .uri(format!("{target}{path}"))
            .header(ACCEPT, accept);
        if let Some(h) = &self.env.host {
            req = req.header(HOST, h.clone());
        }
        if let Some(c) = self.jar.header() {
            req = req.header(COOKIE, c);
        }
        let body = if method == Method::POST {
            req = req.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
            Bytes::from_static(b"item=1")
        } else {
            Bytes::new()
        };
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        let sent = self.now();
        let fut = async {
            let resp = self
                .env
                .client
                .request(req)
                .await
                .map_err(|e| e.to_string())?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
            Ok::<_, String>((parts, body))
        };
        let (parts, body) = tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .map_err(|_| "timeout".to_string())??;
        let done = self.now();
        for c in parts.headers.get_all(SET_COOKIE) {
            if let Ok(c) = c.to_str() {
                self.jar.store(c);
            }
        }
        let shop = parts
            .headers
            .get(SHOP_HEADER)
            .is_some_and(|v| v.as_bytes() == b"1");
        let retry_after = parts
            .headers
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        Ok(Reply {
            status: parts.status.as_u16(),
            shop,
            retry_after,
            body,
            sent,
            done,
        })
    }

    fn joined(rec: &mut Record, r: &Reply) {
        if rec.join_sent.is_none() {
            rec.join_sent = Some(r.sent);
            rec.join_done = Some(r.done);
        }
        rec.last_waiting_sent = Some(r.sent);
    }

    /// Runs the visit to its end. Cancelled from outside at the deadline; `rec` keeps what was
    /// seen so far.
    pub async fn run(&mut self, rec: &mut Record) {
        tokio::time::sleep_until((self.env.t0 + self.arrival).into()).await;
        rec.arrival = Some(self.now());
        rec.outcome = Outcome::Unfinished;
        self.env.live.arrived.fetch_add(1, Ordering::Relaxed);
        let outcome = self.visit(rec).await;
        self.set_waiting(false);
        rec.outcome = outcome;
        match outcome {
            Outcome::Ordered => &self.env.live.ordered,
            _ => &self.env.live.gave_up,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// Leaves the live waiting count consistent when the deadline cancels the visit.
    pub fn finish(&mut self) {
        self.set_waiting(false);
    }

    async fn visit(&mut self, rec: &mut Record) -> Outcome {
        let pause = tokio::time::sleep;
        let mut step = Step::Enter;
        loop {
            step = match step {
                Step::Enter => match self.send(Method::GET, "/products", HTML).await {
                    Err(_) => {
                        rec.transport_errors += 1;
                        pause(ERROR_PAUSE).await;
                        Step::Enter
                    }
                    Ok(r) if r.shop && r.status == 200 => {
                        rec.latencies.push((Class::DirectRequest, r.latency()));
                        rec.admitted_done.get_or_insert(r.done);
                        Step::Order { failures: 0 }
                    }
                    Ok(r) if !r.shop && r.status == 200 => {
                        // The waiting page.
                        rec.latencies.push((Class::WaitingPage, r.latency()));
                        Self::joined(rec, &r);
                        eta::note(rec, r.sent, eta::from_page(&r.body));
                        self.set_waiting(true);
                        if let Some(p) = page_position(&r.body) {
                            rec.last_told = Some((r.done, p));
                        }
                        Step::Poll(page_wait(&r.body).or(r.retry_after).unwrap_or(ERROR_PAUSE))
                    }
                    Ok(r) if !r.shop && (r.status == 503 || r.status == 429) => {
                        // Full or limited: no place taken. Try again when told.
                        rec.rejected += 1;
                        pause(r.retry_after.unwrap_or(ERROR_PAUSE)).await;
                        Step::Enter
                    }
                    Ok(r) if r.status >= 500 => {
                        // The shop's own 5xx, or anteroom's page for a shop that failed.
                        rec.origin_errors += 1;
                        pause(r.retry_after.unwrap_or(ERROR_PAUSE)).await;
                        Step::Enter
                    }
                    Ok(r) => {
                        rec.unexpected += 1;
                        pause(r.retry_after.unwrap_or(ERROR_PAUSE)).await;
                        Step::Enter
                    }
                },
                Step::Poll(wait) => {
                    pause(wait).await;
                    let path = format!("/.anteroom/status?room={}", self.env.room);
                    match self.send(Method::GET, &path, JSON).await {
                        Err(_) => {
                            rec.transport_errors += 1;
                            Step::Poll(ERROR_PAUSE)
                        }
                        Ok(r) => {
                            rec.latencies.push((Class::StatusPoll, r.latency()));
                            rec.polls += 1;
                            let st = parse_status(&r.body);
                            let state = st.as_ref().and_then(|s| s.state.as_deref());
                            let next = st
                                .as_ref()
                                .and_then(|s| s.retry_after_ms)
                                .map(Duration::from_millis)
                                .or(r.retry_after)
                                .unwrap_or(ERROR_PAUSE);
                            match (r.status, state) {
                                (200, Some("waiting" | "paused")) => {
                                    Self::joined(rec, &r);
                                    eta::note(
                                        rec,
                                        r.sent,
                                        st.as_ref().and_then(Status::prediction),
                                    );
                                    if let Some(p) = st.as_ref().and_then(|s| s.position) {
                                        rec.last_told = Some((r.done, p));
                                    }
                                    if rec.first_position.is_none() {
                                        rec.first_position = st.as_ref().and_then(|s| s.position);
                                    }
                                    Step::Poll(next)
                                }
                                (200, Some("admitted")) => {
                                    if rec.join_sent.is_none() {
                                        rec.join_sent = Some(r.sent);
                                        rec.join_done = Some(r.done);
                                    }
                                    rec.admitted_done.get_or_insert(r.done);
                                    self.set_waiting(false);
                                    Step::Shop
                                }
                                (503 | 429, _) => {
                                    rec.rejected += 1;
                                    Step::Poll(next)
                                }
                                (s, _) if s >= 500 => {
                                    rec.anteroom_errors += 1;
                                    Step::Poll(next)
                                }
                                _ => {
                                    rec.unexpected += 1;
                                    Step::Poll(next.max(ERROR_PAUSE))
                                }
                            }
                        }
                    }
                }
                Step::Shop => match self.send(Method::GET, "/products", HTML).await {
                    Err(_) => {
                        rec.transport_errors += 1;
                        pause(ERROR_PAUSE).await;
                        Step::Shop
                    }
                    Ok(r) => {
                        rec.latencies.push((Class::AdmittedRequest, r.latency()));
                        if r.shop && r.status == 200 {
                            Step::Order { failures: 0 }
                        } else if !r.shop && r.status == 200 {
                            // The admission did not take: back in line.
                            rec.sent_back_to_line += 1;
                            Self::joined(rec, &r);
                            self.set_waiting(true);
                            Step::Poll(r.retry_after.unwrap_or(ERROR_PAUSE))
                        } else if r.status >= 500 {
                            rec.origin_errors += 1;
                            pause(r.retry_after.unwrap_or(ERROR_PAUSE)).await;
                            Step::Shop
                        } else {
                            rec.unexpected += 1;
                            pause(r.retry_after.unwrap_or(ERROR_PAUSE)).await;
                            Step::Shop
                        }
                    }
                },
                Step::Order { failures } => {
                    rec.order_attempts += 1;
                    // JSON, as a checkout script would ask: anteroom's answers then say which
                    // error it is (origin "error", store "retry", "consumed").
                    match self.send(Method::POST, "/orders", JSON).await {
                        Err(_) => {
                            rec.transport_errors += 1;
                            if failures >= ORDER_RETRIES {
                                return Outcome::GaveUp;
                            }
                            pause(ERROR_PAUSE).await;
                            Step::Order {
                                failures: failures + 1,
                            }
                        }
                        Ok(r) => {
                            rec.latencies.push((Class::AdmittedRequest, r.latency()));
                            let state = if r.shop {
                                None
                            } else {
                                parse_status(&r.body).and_then(|s| s.state)
                            };
                            if r.shop && r.status == 200 {
                                rec.ordered_done = Some(r.done);
                                return Outcome::Ordered;
                            } else if r.status == 409 && !r.shop {
                                rec.consumed_conflicts += 1;
                                return Outcome::GaveUp;
                            } else if !r.shop && r.status == 200 {
                                // Waiting response on the order: no valid admission.
                                rec.sent_back_to_line += 1;
                                Self::joined(rec, &r);
                                self.set_waiting(true);
                                let next = parse_status(&r.body)
                                    .and_then(|s| s.retry_after_ms)
                                    .map(Duration::from_millis)
                                    .or(r.retry_after)
                                    .unwrap_or(ERROR_PAUSE);
                                Step::Poll(next)
                            } else if r.status >= 500 {
                                if r.shop || state.as_deref() == Some("error") {
                                    rec.origin_errors += 1;
                                } else {
                                    rec.anteroom_errors += 1;
                                }
                                if failures >= ORDER_RETRIES {
                                    return Outcome::GaveUp;
                                }
                                pause(ERROR_PAUSE).await;
                                Step::Order {
                                    failures: failures + 1,
                                }
                            } else {
                                rec.unexpected += 1;
                                return Outcome::GaveUp;
                            }
                        }
                    }
                }
            };
        }
    }
}

#[cfg(test)]
mod tests;
