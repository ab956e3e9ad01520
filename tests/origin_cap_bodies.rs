//! Request bodies under `max-origin-inflight` (see `tests/origin_cap.rs`): a body trickled
//! holds its slot no longer than its pace allows, time a burst earns is not banked, a small
//! body is read whole before it takes a slot, one visitor's streaming uploads hold no more
//! than their share, an upload the origin reads slowly is not cut, and a body that comes too
//! slowly is the visitor's side, not the shop's.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::capped::*;
use common::*;

const EVERY_400MS: Duration = Duration::from_millis(400);

/// While `upload` goes on, the slot it holds comes free before the queue's 20 s: `other` goes
/// in (the origin saw the upload first).
async fn the_next_goes_in(proxy: &Proxy, origin: &CountingOrigin, other: &Jar) {
    eventually(Duration::from_secs(5), "the slot taken", || async {
        (origin.counts.now.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    let resp = send(proxy, reqwest::Method::GET, "/products", other, 1, false)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "the next visitor goes in");
}

/// A room capped at `cap` behind a counting origin, `client-timeout` as given, and two
/// admitted visitors.
async fn capped_room(
    cap: usize,
    client_timeout: &str,
    queue: &str,
) -> (CountingOrigin, Proxy, Jar, Jar) {
    let origin = counting_origin(Duration::from_millis(10), Duration::from_millis(10)).await;
    let proxy = Proxy::start(&format!(
        "[server]\nclient-timeout = \"{client_timeout}\"\n{}",
        config(origin.addr, cap, queue)
    ));
    let (a, b) = (admitted(&proxy).await, admitted(&proxy).await);
    (origin, proxy, a, b)
}

/// A body trickled a byte at a time, each before the read timeout, holds the request's origin
/// slot only until `client-timeout` has passed since the request began: then the request fails
/// and the next visitor goes in (found by review: one admitted visitor trickling two bodies shut
/// a room capped at 2 with 503s for as long as they liked). Over what is read whole first
/// (64 KiB): it streams, holding the slot; a byte every 400 ms for up to 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_holds_the_slot_no_longer_than_client_timeout() {
    let (origin, proxy, slow, other) = capped_room(1, "2s", "20s").await;
    let trickle = Upload::paced("/products/upload", 100_000, 1, EVERY_400MS).send(&proxy, &slow);
    the_next_goes_in(&proxy, &origin, &other).await;
    trickle.abort();
}

/// Time a body earns by moving is not banked: 200 KiB sent at once, then a byte every 400 ms,
/// holds the slot no longer than `client-timeout` past the burst (found by re-review: the
/// burst bought 200 s, in which the drip held the slot and the room answered 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_buys_no_time_for_a_trickle_after_it() {
    let (origin, proxy, slow, other) = capped_room(1, "2s", "20s").await;
    let burst = 200 * 1024;
    let trickle = Upload {
        burst,
        ..Upload::paced("/products/upload", burst + 100, 1, EVERY_400MS)
    }
    .send(&proxy, &slow);
    the_next_goes_in(&proxy, &origin, &other).await;
    trickle.abort();
}

/// Uploads moving at a steady 2 KiB/s on several connections with one admission: they hold
/// at most a quarter of the cap (one of 2 here), and the others' requests go in (found by
/// re-review: one cookie held every slot for as long as it liked, and the room answered 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_visitors_uploads_hold_no_more_than_their_share_of_the_slots() {
    let (origin, proxy, slow, other) = capped_room(2, "2s", "2s").await;
    let every = Duration::from_millis(250);
    let first = Upload::paced("/products/upload1", 1_000_000, 512, every).send(&proxy, &slow);
    eventually(
        Duration::from_secs(5),
        "the first upload at the origin",
        || async { (origin.counts.now.load(Ordering::SeqCst) == 1).then_some(()) },
    )
    .await;
    let second = Upload::paced("/products/upload2", 1_000_000, 512, every).send(&proxy, &slow);
    // The second waits for the first's body (or is told to come back): never at the origin
    // beside it, and the slot it would take is the next visitor's.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            origin.counts.now.load(Ordering::SeqCst),
            1,
            "a second upload of the same admission at the origin"
        );
    }
    let resp = send(&proxy, reqwest::Method::GET, "/products", &other, 1, false)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "the next visitor goes in");
    assert_eq!(origin.counts.most.load(Ordering::SeqCst), 2);
    first.abort();
    second.abort();
}

/// A small body is read whole before its slot is asked for: trickled, it never reaches the
/// origin meanwhile and holds no slot, and the same visitor's form posted during their own
/// large upload goes in at once (found by re-review: the form waited behind the upload in the
/// visitor's share and got a 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_body_is_read_whole_before_it_takes_a_slot() {
    let (origin, proxy, slow, other) = capped_room(1, "5s", "2s").await;
    // 2,000 bytes at 10 a second: at the proxy, not at the origin.
    let small =
        Upload::paced("/products/form", 2_000, 10, Duration::from_millis(100)).send(&proxy, &slow);
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            origin.counts.now.load(Ordering::SeqCst),
            0,
            "a small body at the origin"
        );
    }
    let resp = send(&proxy, reqwest::Method::GET, "/products", &other, 1, false)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "the next visitor goes in");
    small.abort();

    // A large upload of their own streams (one slot of 4, at 2 KiB/s); their form waits for
    // a slot, not behind the upload in their share.
    let (origin, proxy, me, _) = capped_room(4, "5s", "2s").await;
    let big = Upload::paced("/products/big", 1_000_000, 512, Duration::from_millis(250))
        .send(&proxy, &me);
    eventually(
        Duration::from_secs(5),
        "the upload at the origin",
        || async { (origin.counts.now.load(Ordering::SeqCst) == 1).then_some(()) },
    )
    .await;
    let form = client()
        .post(proxy.url("/products/form"))
        .header("cookie", me.header())
        .body(vec![b'f'; 20])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200, "their form beside their upload");
    big.abort();
}

/// An origin that reads a large upload slowly: a receive buffer of 16 KiB, one read every
/// 10 ms (about 1.6 MB/s); answers 200 once the `Content-Length` has been read.
async fn slow_reading_origin() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(16).unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut seen = Vec::new();
                let (head_end, len) = loop {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if let Some(i) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..i]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (i + 4, len);
                    }
                };
                let mut got = seen.len() - head_end;
                while got < len {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    got += n;
                }
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .await;
            });
        }
    });
    (addr, task)
}

/// An upload the origin reads slowly goes on past `client-timeout` as long as it moves: the
/// proxy reads the visitor no faster than the origin takes it, and each KiB received earns a
/// second (found by re-review: cut at `client-timeout` and told as the visitor's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_the_origin_reads_slowly_is_not_cut() {
    let (addr, task) = slow_reading_origin().await;
    let proxy = Proxy::start(&format!(
        "[server]\nclient-timeout = \"1s\"\n{}",
        config(addr, 1, "20s")
    ));
    let jar = admitted(&proxy).await;
    let started = std::time::Instant::now();
    let resp = client()
        .post(proxy.url("/products/upload"))
        .header("cookie", jar.header())
        .body(vec![b'x'; 12 * 1024 * 1024])
        .send()
        .await;
    let status = resp.map(|r| r.status().as_u16()).unwrap_or(0);
    assert_eq!(status, 200, "after {:?}", started.elapsed());
    assert!(
        started.elapsed() > Duration::from_secs(1),
        "the origin took longer than client-timeout to read it"
    );
    task.abort();
}

/// A body not complete within `client-timeout` is the visitor's slowness, not the shop's: no
/// 504 page, no "origin failed", no failure in the origin's health that the autopilot reads
/// (found by review: the timeout was told as the origin's, so one admitted visitor trickling
/// bodies halved the room's rate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_client_timeout_is_the_visitors_side() {
    let origin = counting_origin(Duration::from_millis(10), Duration::from_millis(10)).await;
    let proxy = Proxy::start_with(
        &format!(
            "[server]\nclient-timeout = \"1s\"\n{}",
            config(origin.addr, 1, "20s")
        ),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    let slow = admitted(&proxy).await;
    // A byte every 200 ms: past the 1 s client-timeout long before the 100 bytes.
    let answer = common::raw::trickled_post(&proxy, "/products/upload", &slow.header()).await;
    assert!(!answer.contains(" 504 "), "{answer}");
    let logs = eventually(Duration::from_secs(5), "the access line", || async {
        let logs = proxy.stderr();
        logs.contains("/products/upload").then_some(logs)
    })
    .await;
    assert!(!logs.contains("origin failed"), "{logs}");
}

/// An origin that answers before the body's end goes on reading it: the request keeps its
/// slot until its body is whole too (found by re-review: the slot and the visitor's share were
/// given back with the answer, and one visitor had six uploads at an origin capped at 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_answered_before_its_body_ends_keeps_its_slot() {
    let (addr, heads) = early_answering_origin().await;
    let proxy = Proxy::start(&format!(
        "[server]\nclient-timeout = \"5s\"\n{}",
        config(addr, 2, "2s")
    ));
    let me = admitted(&proxy).await;
    let upload = Upload::paced(
        "/products/early",
        1_000_000,
        512,
        Duration::from_millis(250),
    )
    .send(&proxy, &me);
    eventually(Duration::from_secs(5), "the head at the origin", || async {
        (heads.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    // The answer has long come back; the body still goes on.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        room_metric(&proxy, "anteroom_origin_inflight{room=\"sale\"}").await,
        1,
        "the slot of a request whose body the origin still reads"
    );
    upload.abort();
}

/// Requests waiting for a place in their visitor's share are counted as waiting, and a reload
/// that takes the cap away lets them go on at once (found by re-review: they were in no
/// figure, and got 503 at their timeout after the cap was gone while newer ones went in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_removes_the_cap_lets_uploads_waiting_for_their_share_go_on() {
    let (origin, proxy, slow, _) = capped_room(2, "30s", "3s").await;
    // 2 KiB/s: the visitor's share (one of 2) held for minutes.
    let every = Duration::from_millis(250);
    let first = Upload::paced("/products/upload1", 1_000_000, 512, every).send(&proxy, &slow);
    eventually(
        Duration::from_secs(5),
        "the first upload at the origin",
        || async { (origin.counts.now.load(Ordering::SeqCst) == 1).then_some(()) },
    )
    .await;
    let second = {
        let req = client()
            .post(proxy.url("/products/upload2"))
            .header("cookie", slow.header())
            .body(vec![b'x'; 100_000]);
        tokio::spawn(async move { req.send().await.map(|r| r.status().as_u16()) })
    };
    eventually(
        Duration::from_secs(2),
        "the second waiting for its share",
        || async { (room_metric(&proxy, QUEUED).await == 1).then_some(()) },
    )
    .await;
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    let uncapped = text
        .replace("max-origin-inflight = 2\n", "")
        .replace("origin-queue-timeout = \"3s\"\n", "");
    assert_ne!(uncapped, text);
    std::fs::write(proxy.config_path(), uncapped).unwrap();
    reload_applied(&proxy).await;
    let status = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the second answered")
        .unwrap();
    assert_eq!(status.ok(), Some(200), "the second upload after the reload");
    first.abort();
}

/// An order that waited for a place in its visitor's share, whose visitor left just before the
/// place came, is asked when it comes and goes no further, though its slot is free at once
/// (found by re-review: only a wait for the slot was asked about, the departure was polled for
/// every half second while it waited for the share, and the order was placed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_whose_visitor_left_as_its_share_came_is_not_placed() {
    use tokio::io::AsyncWriteExt;
    let (origin, proxy, buyer, _) = capped_room(2, "30s", "10s").await;
    // The visitor's upload holds their share (one of 2), its body not whole.
    let mut upload = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = format!(
        "POST /products/upload HTTP/1.1\r\nHost: shop.test\r\nCookie: {}\r\nContent-Length: 100000\r\n\r\n",
        buyer.header()
    );
    upload.write_all(head.as_bytes()).await.unwrap();
    upload.write_all(&[b'x'; 90_000]).await.unwrap();
    eventually(
        Duration::from_secs(5),
        "the upload at the origin",
        || async { (origin.counts.now.load(Ordering::SeqCst) == 1).then_some(()) },
    )
    .await;
    // Their order (chunked: never read ahead) waits for the share; they leave; at once the
    // upload ends and the share comes.
    let mut order = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!(
        "POST /orders HTTP/1.1\r\nHost: shop.test\r\nCookie: {}\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nY\r\n0\r\n\r\n",
        buyer.header()
    );
    order.write_all(request.as_bytes()).await.unwrap();
    eventually(Duration::from_secs(5), "the order waiting", || async {
        (room_metric(&proxy, QUEUED).await == 1).then_some(())
    })
    .await;
    drop(order);
    upload.write_all(&[b'x'; 10_000]).await.unwrap();
    eventually(Duration::from_secs(5), "nobody waiting", || async {
        (room_metric(&proxy, QUEUED).await == 0).then_some(())
    })
    .await;
    eventually(Duration::from_secs(5), "the upload answered", || async {
        (origin.counts.now.load(Ordering::SeqCst) == 0).then_some(())
    })
    .await;
    assert_eq!(origin.counts.orders.load(Ordering::SeqCst), 0, "no order");
    // The admission was not used.
    let resp = send(&proxy, reqwest::Method::POST, "/orders", &buyer, 1, true)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(origin.counts.orders.load(Ordering::SeqCst), 1);
}
