use super::*;

/// An admission to `sale`, asked for over plain HTTP/1.1: the `Cookie` value to send.
async fn admission(proxy: &Proxy) -> String {
    let resp = client()
        .get(proxy.url("/.anteroom/status?room=sale"))
        .header("host", "shop.test")
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let mut jar = Jar::default();
    jar.absorb(&resp);
    assert!(jar.get("anteroom_sale").is_some(), "admitted at once");
    jar.header()
}

/// A POST whose body stops after two of its [`STALLED_LEN`] bytes, on a stream left open.
fn stalled_post(
    client: &mut h2::client::SendRequest<bytes::Bytes>,
    port: u16,
    path: &str,
    cookie: &str,
) -> (h2::client::ResponseFuture, h2::SendStream<bytes::Bytes>) {
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("https://shop.test:{port}{path}"))
        .header("cookie", cookie)
        .header("content-length", STALLED_LEN.to_string())
        .body(())
        .unwrap();
    let (resp, mut body) = client.send_request(req, false).unwrap();
    body.send_data(bytes::Bytes::from_static(b"ab"), false)
        .unwrap();
    (resp, body)
}

/// `Some(())` when the room's origin gate holds `n` slots (its metric, read when scraped).
async fn inflight(proxy: &Proxy, n: u8) -> Option<()> {
    let m = metrics_text(proxy, ADMIN).await;
    m.contains(&format!("anteroom_origin_inflight{{room=\"sale\"}} {n}"))
        .then_some(())
}

/// A request of `cookie`'s over HTTP/1.1 that holds the room's one origin slot, once it does:
/// its status when the origin has answered it.
async fn holding_the_slot(
    proxy: &Proxy,
    cookie: &str,
) -> tokio::task::JoinHandle<reqwest::Result<u16>> {
    let req = client()
        .get(proxy.url("/products/first"))
        .header("host", "shop.test")
        .header("cookie", cookie);
    let first = tokio::spawn(async move { req.send().await.map(|r| r.status().as_u16()) });
    eventually(
        std::time::Duration::from_secs(5),
        "the first holds the slot",
        || inflight(proxy, 1),
    )
    .await;
    first
}

/// Over HTTP/2 Pingora cuts no stalled request body (it sets no read timeout there): such a
/// request holds the room's origin slot while the origin has it open, until the upstream's
/// `read-timeout` past its last piece, also past `client-timeout` (found by re-review: given
/// back at `client-timeout`, the origin saw twice the cap); and a connection with no stream
/// open closes after `client-timeout`, as over HTTP/1.1 (found by review: it was never closed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_holds_its_slot_while_the_origin_has_it_and_an_idle_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    let short = format!(
        "upstream = \"short\"\nmax-origin-inflight = 1\norigin-queue-timeout = \"20s\"\n\
         [[upstream]]\nname = \"short\"\naddr = \"{}\"\nread-timeout = \"4s\"",
        origin.addr
    );
    let (proxy, port, ca) = https_proxy_with(
        dir.path(),
        &origin,
        "[server]\nclient-timeout = \"1s\"\n[admin]\ntoken = \"admin-token-for-tests-0123456789\"",
        &short,
    )
    .await;
    let cookie = admission(&proxy).await;

    let (mut h2c, _conn) = h2_connect(port, &ca).await;
    let (stalled, _body) = stalled_post(&mut h2c, port, "/products/upload", &cookie);
    eventually(
        std::time::Duration::from_secs(5),
        "the stalled request holds the slot",
        || inflight(&proxy, 1),
    )
    .await;
    // Another admitted request waits for the slot, past the stalled body's client-timeout
    // (1 s): the origin still has the stalled request until its read-timeout (4 s).
    let next = tokio::spawn({
        let req = client()
            .get(proxy.url("/products/next"))
            .header("host", "shop.test")
            .header("cookie", &cookie);
        async move { req.send().await.unwrap().status().as_u16() }
    });
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert!(
        !next.is_finished(),
        "the slot given to another while the origin has the request"
    );
    assert!(inflight(&proxy, 1).await.is_some());
    // The origin lets go at its read-timeout: the stalled request ends, and the next goes in.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(15), stalled).await;
    assert!(ended.is_ok(), "the stalled request never ended");
    assert_eq!(next.await.unwrap(), 200);

    // A connection with no stream open closes after client-timeout.
    let (_idle, conn) = h2_connect(port, &ca).await;
    let ended = tokio::time::timeout(std::time::Duration::from_secs(15), conn).await;
    assert!(
        ended.is_ok(),
        "an idle HTTP/2 connection still open after 15 s"
    );
    drop(proxy);
}

/// An origin that times out waiting for a body the visitor stopped sending was waiting for the
/// visitor: no 504 page and no "origin failed" (the shop is not failing), as for a body cut at
/// `client-timeout` over HTTP/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_waiting_for_a_stalled_body_is_not_the_shops_failure() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    let ca = TestCa::new(dir.path());
    let (cert, key) = ca.issue("shop", &["DNS:shop.test"]);
    let port = free_port();
    let proxy = Proxy::start_with(
        &format!(
            r#"https = "127.0.0.1:{port}"
[cookie]
keys = ["{KEY}"]

[[upstream]]
name = "shop"
addr = "{origin}"
read-timeout = "1s"

[default]
upstream = "shop"

[[room]]
name = "sale"
hosts = ["shop.test"]
paths = ["/products"]
admit-per-second = 100
max-active = 100

[[tls]]
hosts = ["shop.test"]
cert = "{cert}"
key = "{key}"
"#,
            origin = origin.addr,
            cert = cert.display(),
            key = key.display(),
        ),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    eventually(
        std::time::Duration::from_secs(20),
        "the HTTPS listener",
        || async move { tokio::net::TcpStream::connect(addr).await.ok().map(|_| ()) },
    )
    .await;
    let cookie = admission(&proxy).await;
    let (mut h2c, _conn) = h2_connect(port, &ca.ca()).await;
    let (resp, _body) = stalled_post(&mut h2c, port, "/products/upload", &cookie);
    let status = match tokio::time::timeout(std::time::Duration::from_secs(15), resp).await {
        Ok(Ok(r)) => r.status().as_u16(),
        Ok(Err(_)) => 0,
        Err(_) => panic!("no end to the stalled request within 15 s"),
    };
    assert_ne!(status, 504, "the shop's 504 page for the visitor's stall");
    let logs = eventually(
        std::time::Duration::from_secs(5),
        "the access line",
        || async {
            let logs = proxy.stderr();
            logs.contains("/products/upload").then_some(logs)
        },
    )
    .await;
    assert!(!logs.contains("origin failed"), "{logs}");
}

/// An HTTP/2 request whose whole body came while it waited for its origin slot longer than
/// `client-timeout` keeps the slot once it has it: the watch counts from the slot's coming
/// (found by re-review: counted from the request's start, the slot was given back at once and
/// a third request went to the origin beside it, past the cap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_waited_for_its_slot_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    origin.set_delay(2500);
    let (proxy, port, ca) = https_proxy_with(
        dir.path(),
        &origin,
        "[server]\nclient-timeout = \"1s\"\n[admin]\ntoken = \"admin-token-for-tests-0123456789\"",
        "max-origin-inflight = 1\norigin-queue-timeout = \"20s\"",
    )
    .await;
    let cookie = admission(&proxy).await;
    let first = holding_the_slot(&proxy, &cookie).await;
    // The order, whole, on HTTP/2: it waits about 2.5 s for the slot (past client-timeout).
    let (mut h2c, _conn) = h2_connect(port, &ca).await;
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("https://shop.test:{port}/products/second"))
        .header("cookie", &cookie)
        .header("content-length", "2")
        .body(())
        .unwrap();
    let (second, mut body) = h2c.send_request(req, false).unwrap();
    body.send_data(bytes::Bytes::from_static(b"ok"), true)
        .unwrap();
    assert_eq!(first.await.unwrap().unwrap(), 200);
    // Now the second is at the origin for 2.5 s, holding the slot all along.
    for _ in 0..3 {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            inflight(&proxy, 1).await.is_some(),
            "the slot given back while its request is at the origin"
        );
    }
    let second = second.await.unwrap();
    assert_eq!(second.status(), 200);
    drop(proxy);
}

/// An HTTP/2 order whose stream is reset while it waits for its origin slot, its body still to
/// come (too long to be read ahead), reaches nobody and uses nothing: it leaves the line at
/// once, the slot goes to the next, and the same admission then places its order (found by
/// review: only a request whose body had been read whole was asked whether its visitor left,
/// and only when its slot came: this one went on to the origin and used the admission up, and
/// streams opened and reset at once waited by the ten thousand, costing memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_reset_while_waiting_for_its_slot_reaches_nobody_and_uses_nothing() {
    order_left_while_waiting(false).await;
}

/// The same when the visitor closes the whole connection, resetting no stream (found by
/// review: the order, read whole, was placed when its slot came, and the retry got 409).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_whose_connection_closed_while_waiting_reaches_nobody_and_uses_nothing() {
    order_left_while_waiting(true).await;
}

async fn order_left_while_waiting(close: bool) {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    origin.set_delay(4000);
    let (proxy, port, ca) = https_proxy_with(
        dir.path(),
        &origin,
        "[admin]\ntoken = \"admin-token-for-tests-0123456789\"",
        "max-origin-inflight = 1\norigin-queue-timeout = \"20s\"\nconsume = [\"POST /products/order\"]",
    )
    .await;
    let cookie = admission(&proxy).await;
    let first = holding_the_slot(&proxy, &cookie).await;
    let queued = |n: u8| {
        let proxy = &proxy;
        async move {
            let m = metrics_text(proxy, ADMIN).await;
            m.contains(&format!("anteroom_origin_queued{{room=\"sale\"}} {n}"))
                .then_some(())
        }
    };
    let (mut h2c, conn) = h2_connect(port, &ca).await;
    let (order, mut body) = if close {
        // Small and whole: read ahead before the wait.
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("https://shop.test:{port}/products/order"))
            .header("cookie", &cookie)
            .header("content-length", "2")
            .body(())
            .unwrap();
        let (resp, mut body) = h2c.send_request(req, false).unwrap();
        body.send_data(bytes::Bytes::from_static(b"ok"), true)
            .unwrap();
        (resp, body)
    } else {
        stalled_post(&mut h2c, port, "/products/order", &cookie)
    };
    let wait = std::time::Duration::from_secs(5);
    eventually(wait, "the order waiting for the slot", || queued(1)).await;
    if close {
        conn.abort();
        drop(h2c);
    } else {
        body.send_reset(h2::Reason::CANCEL);
    }
    drop(order);
    // It leaves the line while the first still holds the slot.
    eventually(wait, "the order out of the line", || async {
        queued(0).await?;
        inflight(&proxy, 1).await
    })
    .await;
    assert_eq!(first.await.unwrap().unwrap(), 200);
    eventually(wait, "the slot free", || inflight(&proxy, 0)).await;
    let posts = || {
        origin
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count()
    };
    assert_eq!(posts(), 0, "the order whose visitor left reached the shop");
    // The admission was not used: the order is placed now.
    origin.set_delay(0);
    let resp = client()
        .post(proxy.url("/products/order"))
        .header("host", "shop.test")
        .header("cookie", &cookie)
        .body("ok")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(posts(), 1);
}

/// A body finished after its deadline does not reach the origin whole: the request fails at
/// the body's end (found by re-review: it reached the origin beside the slot's next holder,
/// when the slot was given back at the deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_finished_after_its_deadline_does_not_reach_the_origin() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    let (proxy, port, ca) = https_proxy_env(
        dir.path(),
        &origin,
        "[server]\nclient-timeout = \"1s\"\n[admin]\ntoken = \"admin-token-for-tests-0123456789\"",
        "max-origin-inflight = 1\norigin-queue-timeout = \"20s\"",
        &[("ANTEROOM_LOG", "info,anteroom=debug")],
    )
    .await;
    let cookie = admission(&proxy).await;
    let (mut h2c, _conn) = h2_connect(port, &ca).await;
    let (resp, mut body) = stalled_post(&mut h2c, port, "/products/late", &cookie);
    eventually(std::time::Duration::from_secs(5), "the slot taken", || {
        inflight(&proxy, 1)
    })
    .await;
    eventually(
        std::time::Duration::from_secs(5),
        "the deadline passed",
        || async {
            proxy
                .stderr()
                .contains("request body not whole in time")
                .then_some(())
        },
    )
    .await;
    // The rest of the body, after the deadline.
    let _ = body.send_data(bytes::Bytes::from(vec![b'c'; STALLED_LEN - 2]), true);
    let status = match tokio::time::timeout(std::time::Duration::from_secs(10), resp).await {
        Ok(Ok(r)) => r.status().as_u16(),
        Ok(Err(_)) => 0,
        Err(_) => panic!("no end to the request"),
    };
    assert_ne!(status, 200, "the late body's request answered by the shop");
    // The shop had the head when the slot came; the body never reached it whole.
    assert!(
        origin
            .requests()
            .iter()
            .all(|r| r.uri != "/products/late" || r.body.len() < STALLED_LEN),
        "{:?}",
        origin.requests()
    );
    drop(proxy);
}

/// A client that never opens its flow-control window (it reads nothing of the answers) holds
/// no origin slot once the origin has sent its whole answer: the origin is done (found by
/// re-review: one admission's streams held every slot of a capped room while the origin sat
/// idle, each for a client-timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_holds_no_slot_once_the_origin_is_done() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    let (proxy, port, ca) = https_proxy_with(
        dir.path(),
        &origin,
        "[server]\nclient-timeout = \"30s\"\n[admin]\ntoken = \"admin-token-for-tests-0123456789\"",
        "max-origin-inflight = 1\norigin-queue-timeout = \"5s\"",
    )
    .await;
    let cookie = admission(&proxy).await;
    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(0);
    let (mut h2c, _conn) = h2_connect_with(port, &ca, builder).await;
    let mut held = Vec::new();
    for i in 0..3 {
        let req = http::Request::builder()
            .uri(format!("https://shop.test:{port}/products/{i}"))
            .header("cookie", &cookie)
            .body(())
            .unwrap();
        held.push(h2c.send_request(req, true).unwrap().0);
    }
    eventually(
        std::time::Duration::from_secs(5),
        "the three at the origin",
        || async { (origin.count("/products/") >= 3).then_some(()) },
    )
    .await;
    // Their answers are stuck at the visitor's side; the slot is the next visitor's.
    let resp = client()
        .get(proxy.url("/products/next"))
        .header("host", "shop.test")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    drop(held);
}

/// After the origin's whole answer, nothing on its side ends a stalled HTTP/2 body (Pingora
/// only writes to it then): past the body's deadline the slot is given back (found by
/// re-review: held for as long as the stream stayed open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_after_a_whole_answer_gives_its_slot_back_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, heads) = common::capped::early_answering_origin().await;
    let (proxy, port, ca) = https_proxy_at(
        dir.path(),
        addr,
        "[server]\nclient-timeout = \"1s\"\n[admin]\ntoken = \"admin-token-for-tests-0123456789\"",
        "max-origin-inflight = 1\norigin-queue-timeout = \"20s\"",
        &[],
    )
    .await;
    let cookie = admission(&proxy).await;
    // An answer with a body, and one without (re-review: Pingora calls no body filter for
    // an answer its head ends, and the slot was never given back).
    for (i, path) in ["/products/early", "/products/early-empty"]
        .into_iter()
        .enumerate()
    {
        let (mut h2c, _conn) = h2_connect(port, &ca).await;
        let (resp, _body) = stalled_post(&mut h2c, port, path, &cookie);
        let answer = tokio::time::timeout(std::time::Duration::from_secs(10), resp).await;
        assert!(
            answer.is_ok_and(|r| r.is_ok()),
            "the early answer to {path}"
        );
        assert_eq!(heads.load(std::sync::atomic::Ordering::SeqCst), i + 1);
        eventually(
            std::time::Duration::from_secs(10),
            "the slot given back past the deadline",
            || inflight(&proxy, 0),
        )
        .await;
    }
    drop(proxy);
}
