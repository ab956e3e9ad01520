//! A shop origin whose answers to orders (`POST /orders…`) the test scripts: a status, a status
//! after a delay, or no answer at all (held until the connection goes). Every other request gets
//! a 200 page. It counts the orders it received (on their heads) and the ones it answered below
//! 500.

use std::collections::VecDeque;
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
use tokio::net::TcpListener;

/// How the shop answers one order.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    Status(u16),
    /// The status, after the shop's own pace.
    Late(Duration, u16),
    /// Never answers.
    Hold,
}

#[derive(Default)]
struct State {
    script: Mutex<VecDeque<Answer>>,
    orders: AtomicUsize,
    placed: AtomicUsize,
    pages: AtomicUsize,
}

pub struct Shop {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Shop {
    pub async fn start() -> Shop {
        Self::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    pub async fn start_on(addr: SocketAddr) -> Shop {
        Self::serve(TcpListener::bind(addr).await.unwrap())
    }

    /// Starts on a port that was kept closed until now.
    pub fn start_on_closed(port: super::ClosedPort) -> Shop {
        Self::serve(port.listen())
    }

    fn serve(listener: TcpListener) -> Shop {
        let addr = listener.local_addr().unwrap();
        let state: Arc<State> = Arc::default();
        let st = state.clone();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let st = st.clone();
                conns.spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let st = st.clone();
                        async move { Ok::<_, Infallible>(answer(req, st).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Shop { addr, state, task }
    }

    /// The next orders get these answers, in order; after them, 200.
    pub fn script(&self, answers: &[Answer]) {
        self.state.script.lock().unwrap().extend(answers);
    }

    /// Orders received (answered or not).
    pub fn orders(&self) -> usize {
        self.state.orders.load(Ordering::SeqCst)
    }

    /// Orders answered below 500: placed.
    pub fn placed(&self) -> usize {
        self.state.placed.load(Ordering::SeqCst)
    }

    /// Requests for anything but an order.
    pub fn pages(&self) -> usize {
        self.state.pages.load(Ordering::SeqCst)
    }
}

impl Drop for Shop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(req: Request<Incoming>, st: Arc<State>) -> Response<Full<Bytes>> {
    let order = req.method() == hyper::Method::POST && req.uri().path().starts_with("/orders");
    // An order counts on its head, as a shop that acts before reading its body (a handler
    // that reads none, or stops at the end of its JSON) takes it.
    if order {
        st.orders.fetch_add(1, Ordering::SeqCst);
    }
    let _ = req.into_body().collect().await;
    if !order {
        st.pages.fetch_add(1, Ordering::SeqCst);
        return Response::new(Full::new(Bytes::from_static(b"shop page")));
    }
    let next = st.script.lock().unwrap().pop_front();
    let status = match next.unwrap_or(Answer::Status(200)) {
        Answer::Status(s) => s,
        Answer::Late(pace, s) => {
            // The shop's own pace, not a wait for a condition.
            tokio::time::sleep(pace).await;
            s
        }
        Answer::Hold => std::future::pending().await,
    };
    if status < 500 {
        st.placed.fetch_add(1, Ordering::SeqCst);
    }
    Response::builder()
        .status(status)
        .body(Full::new(Bytes::from(format!("order answered {status}"))))
        .unwrap()
}
