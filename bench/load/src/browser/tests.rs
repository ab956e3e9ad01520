use super::*;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Mutex;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;

/// A stand-in waiting room: the first `/products` gets the waiting page and a visitor id;
/// the first status poll says waiting (position 1), the second admits; an order with the
/// admission is the shop's and clears it; an order without one is a 409.
async fn fake_room(order_fails_first: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let polls: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let order_failed = Arc::new(std::sync::atomic::AtomicBool::new(!order_fails_first));
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let polls = polls.clone();
            let order_failed = order_failed.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let polls = polls.clone();
                    let order_failed = order_failed.clone();
                    async move {
                        let cookie = req
                            .headers()
                            .get(COOKIE)
                            .and_then(|c| c.to_str().ok())
                            .unwrap_or("")
                            .to_string();
                        let admitted = cookie.contains("anteroom_sale=ok");
                        let vid = cookie.contains("anteroom_vid=v1");
                        let r = Response::builder();
                        let r = match (req.method().as_str(), req.uri().path()) {
                            ("GET", "/products") if admitted => {
                                r.header(SHOP_HEADER, "1").body("shop".to_string())
                            }
                            ("GET", "/products") => r
                                .header(RETRY_AFTER, "0")
                                .header(SET_COOKIE, "anteroom_vid=v1; Max-Age=86400; Path=/")
                                .body("waiting page".to_string()),
                            ("GET", "/.anteroom/status") if vid => {
                                assert_eq!(req.uri().query(), Some("room=sale"));
                                let mut p = polls.lock().unwrap();
                                let n = p.entry("v1".into()).or_insert(0);
                                *n += 1;
                                if *n == 1 {
                                    r.body(r#"{"room":"sale","state":"waiting","position":1,"waiting":1,"eta_seconds":1,"retry_after_ms":10}"#.to_string())
                                } else {
                                    r.header(SET_COOKIE, "anteroom_sale=ok; Max-Age=600; Path=/")
                                        .body(r#"{"room":"sale","state":"admitted","position":null,"waiting":0,"eta_seconds":null,"retry_after_ms":10}"#.to_string())
                                }
                            }
                            ("POST", "/orders") if admitted => {
                                if !order_failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                                    r.status(StatusCode::SERVICE_UNAVAILABLE)
                                        .header(RETRY_AFTER, "5")
                                        .body(
                                            r#"{"room":"sale","state":"error","status":503}"#
                                                .to_string(),
                                        )
                                } else {
                                    r.header(SHOP_HEADER, "1")
                                        .header(SET_COOKIE, "anteroom_sale=; Max-Age=0; Path=/")
                                        .body("ordered".to_string())
                                }
                            }
                            ("POST", "/orders") => r
                                .status(StatusCode::CONFLICT)
                                .body(r#"{"room":"sale","state":"consumed"}"#.to_string()),
                            _ => r.status(StatusCode::NOT_FOUND).body(String::new()),
                        };
                        Ok::<_, Infallible>(r.unwrap().map(|b| Full::new(Bytes::from(b))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

fn env(target: String) -> Arc<Env> {
    Arc::new(Env {
        client: client(),
        targets: vec![target],
        host: None,
        room: "sale".into(),
        t0: Instant::now(),
        live: Arc::new(Live::default()),
    })
}

#[tokio::test]
async fn a_browser_waits_polls_is_admitted_and_orders() {
    let env = env(fake_room(false).await);
    let mut b = Browser::new(env.clone(), 1, Duration::ZERO);
    let mut rec = Record::default();
    b.run(&mut rec).await;
    assert_eq!(rec.outcome, Outcome::Ordered);
    assert_eq!(rec.polls, 2);
    assert_eq!(rec.first_position, Some(1));
    let (js, jd, ad, lw, od) = (
        rec.join_sent.unwrap(),
        rec.join_done.unwrap(),
        rec.admitted_done.unwrap(),
        rec.last_waiting_sent.unwrap(),
        rec.ordered_done.unwrap(),
    );
    assert!(js <= jd && jd <= lw && lw < ad && ad <= od, "{rec:?}");
    // The page had no ETA; the first poll's `eta_seconds` is the prediction, from its send.
    let eta = rec.predicted.expect("the first poll's eta");
    assert_eq!((eta.secs, eta.range), (1.0, None));
    assert!(
        rec.predicted_at.is_some_and(|t| t > jd && t <= lw),
        "{rec:?}"
    );
    let classes: Vec<Class> = rec.latencies.iter().map(|l| l.0).collect();
    assert_eq!(
        classes,
        vec![
            Class::WaitingPage,
            Class::StatusPoll,
            Class::StatusPoll,
            Class::AdmittedRequest,
            Class::AdmittedRequest
        ]
    );
    assert_eq!(rec.order_attempts, 1);
    assert_eq!(
        rec.consumed_conflicts + rec.origin_errors + rec.unexpected,
        0
    );
    assert_eq!(b.jar.header().as_deref(), Some("anteroom_vid=v1"));
    assert_eq!(env.live.ordered.load(Ordering::Relaxed), 1);
    assert_eq!(env.live.waiting.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn an_order_the_origin_failed_is_retried() {
    let env = env(fake_room(true).await);
    let mut b = Browser::new(env, 1, Duration::ZERO);
    let mut rec = Record::default();
    b.run(&mut rec).await;
    assert_eq!(rec.outcome, Outcome::Ordered);
    assert_eq!(rec.order_attempts, 2);
    assert_eq!(rec.origin_errors, 1);
    assert_eq!(rec.anteroom_errors, 0);
}
