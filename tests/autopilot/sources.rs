use super::*;

/// One instance on the memory store, nobody else: a room `sale` on `path` at a ceiling of 40
/// a second, with `room_extra` (its autopilot, a cap).
fn alone(origin: std::net::SocketAddr, path: &str, room_extra: &str) -> String {
    format!(
        "{base}\n[admin]\ntoken = \"{TOKEN}\"\n\n[[room]]\nname = \"sale\"\npaths = [\"{path}\"]\nadmit-per-second = 40\nmax-active = 100000\ntick = \"100ms\"\n{room_extra}\n",
        base = base_config(origin)
    )
}

/// One admitted visitor's own failing requests say nothing of the shop: each visitor counts
/// once a second in the health window (found by review: one visitor sending ~45 requests a
/// second that the shop answered 500 cut the rate from 20 to min-rate in 7 s, nobody else
/// there). The rate is watched for 4 s while they try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_visitors_own_failures_do_not_cut_the_rate() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&alone(
        origin.addr,
        "/products",
        "autopilot = { target-latency = \"300ms\", max-error-rate = 0.01, min-rate = 2, window = \"1s\" }",
    ));
    rate_until(&[&proxy], "a start", Duration::from_secs(10), |r| r > 0.0).await;
    let start = rate(&proxy).await;
    let jar = admitted_at_once(&proxy, "sale").await;
    let until = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (url, cookie) = (proxy.url("/products/fail-500"), jar.header());
        tasks.push(tokio::spawn(async move {
            let mut sent = 0u32;
            while Instant::now() < until {
                let resp = client().get(&url).header("cookie", &cookie).send().await;
                assert_eq!(resp.map(|r| r.status().as_u16()).ok(), Some(500));
                sent += 1;
            }
            sent
        }));
    }
    let mut sent = 0;
    for t in tasks {
        sent += t.await.unwrap();
    }
    assert!(sent > 40, "the visitor's requests reached the shop: {sent}");
    let v = room(&proxy).await;
    assert!(
        v["autopilot"]["rate"].as_f64().unwrap() >= start,
        "from {start}: {v}"
    );
}

/// Admitted visitors, each from its network (`X-Forwarded-For`, believed from loopback; several
/// networks split by `|` are taken in turn, one per request), sending a request every 50 ms to
/// `path` (with their index) until `stop`.
fn browse(proxy: &Proxy, visitors: Vec<(Jar, String)>, path: &'static str, stop: &Arc<AtomicBool>) {
    for (n, (jar, network)) in visitors.into_iter().enumerate() {
        let (base, stop) = (proxy.url(""), stop.clone());
        tokio::spawn(async move {
            let networks: Vec<&str> = network.split('|').collect();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = client()
                    .get(format!("{base}{path}{n}-{i}"))
                    .header("cookie", jar.header())
                    .header("x-forwarded-for", networks[i as usize % networks.len()])
                    .send()
                    .await;
                i += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }
}

/// Failures count only when they come from at least three sources, visitors each from a
/// network of their own (or from every source that voted): before (found by review), one or two
/// admitted visitors whose own requests the shop answered 500 (a bad cart, a made-up form),
/// among a few healthy ones, were an error share over `max-error-rate` and halved the rate
/// every window; counted by visitor, one client minted as many visitors as it liked; counted by
/// network, one admission sent from three addresses in turn was three (re-reviews). Three
/// failing visitors of one network and one visitor from three networks in turn, among six
/// healthy ones on six networks, are watched for 4 s; then visitors of three more networks
/// fail too, and the rate is cut for errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_from_one_or_two_sources_do_not_cut_the_rate_and_more_do() {
    only_more_sources_cut(
        "/products",
        "max-error-rate = 0.01",
        "/products/fail-500?",
        "errors",
    )
    .await;
}

/// Slowness counts only when it comes from at least three sources (or every source that
/// voted), as failures do (found by review: five admitted visitors of one network asking for a
/// page that took a second, among thirty fast ones, drove the rate from 50 to `min-rate`). Three
/// visitors of one network and one visitor from three networks in turn ask for a page the shop
/// answers in 1.5 s, among six fast ones on six networks, watched for 4 s; then visitors of
/// three more networks do too, and the rate is cut for latency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowness_from_one_or_two_sources_does_not_cut_the_rate_and_more_do() {
    // The shop answers `/slow…` in 1.5 s, against a target of 300 ms.
    only_more_sources_cut("/", "max-error-rate = 0.5", "/slow-", "latency").await;
}

/// A room on `room_path` whose autopilot has `limit`; three visitors of one network and one
/// visitor from three networks in turn ask for `bad` (failing, or slow), among six healthy
/// ones on six networks, watched for 4 s: the rate is not cut. Then visitors of three more
/// networks ask for it too, and the rate is cut for `reason` (one more is three sources, but
/// the window is judged without the two parts with the most bad votes: a third network's
/// slow page, about one vote in ten, was a cut in some windows only).
async fn only_more_sources_cut(room_path: &str, limit: &str, bad: &'static str, reason: &str) {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        "trusted-proxies = [\"127.0.0.1/32\"]\n{}",
        alone(
            origin.addr,
            room_path,
            &format!("autopilot = {{ target-latency = \"300ms\", {limit}, min-rate = 1, window = \"1s\" }}"),
        )
        .replace("admit-per-second = 40", "admit-per-second = 10")
    ));
    rate_until(&[&proxy], "a start", Duration::from_secs(10), |r| r > 0.0).await;
    let start = rate(&proxy).await;
    let mut visitors = Vec::new();
    for i in 0..13 {
        // In at the rate in force (the first at once, the rest after a short wait in line).
        let jar = admitted_in_turn(&proxy).await;
        // Six healthy networks; three visitors on 10.0.9.1, one from three networks in turn;
        // then one on each of 10.0.9.3–5.
        let network = match i {
            0..=5 => format!("10.0.0.{}", i + 1),
            6..=8 => "10.0.9.1".to_string(),
            9 => "10.0.8.1|10.0.8.2|10.0.8.3".to_string(),
            _ => format!("10.0.9.{}", i - 7),
        };
        visitors.push((jar, network));
    }
    let more = visitors.split_off(10);
    let bad_ones = visitors.split_off(6);
    let stop = Arc::new(AtomicBool::new(false));
    browse(&proxy, visitors, "/products/ok-", &stop);
    browse(&proxy, bad_ones, bad, &stop);
    // The windows are judged (10 voters a second, over the least a window needs at this rate).
    eventually(Duration::from_secs(5), "windows judged", || async {
        let v = room(&proxy).await;
        (v["autopilot"]["origin_requests"].as_u64()? >= 6).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let v = room(&proxy).await;
    assert!(
        v["autopilot"]["rate"].as_f64().unwrap() >= start,
        "two sources cut the rate from {start}: {v}"
    );
    browse(&proxy, more, bad, &stop);
    eventually(Duration::from_secs(15), "a cut by more sources", || async {
        let v = room(&proxy).await;
        (v["autopilot"]["rate"].as_f64()? < start
            && v["autopilot"]["last_change"]["reason"] == reason)
            .then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
}

/// The shop's latency runs from the end of a request's body: a body the visitor uploads
/// slowly is not the shop's slowness (found by review: 30 trickled uploads read as a p90 of a
/// second and cut the rate to min-rate, the shop answering at once). The window's p90 is
/// watched while one upload trickles for over a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upload_is_not_the_shops_latency() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = Origin::start().await;
    let proxy = Proxy::start(&alone(
        origin.addr,
        "/products",
        "autopilot = { target-latency = \"300ms\", max-error-rate = 0.5, min-rate = 2, window = \"1s\" }",
    ));
    rate_until(&[&proxy], "a start", Duration::from_secs(10), |r| r > 0.0).await;
    let jar = admitted_at_once(&proxy, "sale").await;
    let mut conn = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = format!(
        "POST /products/upload HTTP/1.1\r\nHost: shop.test\r\nCookie: {}\r\nContent-Length: 8\r\nConnection: close\r\n\r\n",
        jar.header()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        conn.write_all(b"x").await.unwrap();
    }
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.unwrap();
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // The window with the upload in it: its p90 is the shop's few milliseconds.
    let p90 = eventually(Duration::from_secs(5), "the upload counted", || async {
        let v = room(&proxy).await;
        (v["autopilot"]["origin_requests"].as_u64()? > 0)
            .then(|| v["autopilot"]["origin_p90_ms"].as_f64())
            .flatten()
    })
    .await;
    assert!(p90 < 300.0, "p90 {p90} ms");
}

/// Admitted requests turned away at `max-origin-inflight` are not failures in the shop's
/// health window: the cap is the room's on this instance, and one admitted visitor may hold
/// all its slots (re-review: a first version that counted them let one visitor with slow
/// uploads cut every room on the shop to `min-rate`). Twelve admitted visitors ask for a page
/// the shop takes 1.5 s over (under the 3 s target), one at a time; the rate is watched for
/// 4 s while most are turned away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_turned_away_at_the_origin_cap_are_not_the_shops_failures() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&alone(
        origin.addr,
        "/slow",
        "max-origin-inflight = 1\norigin-queue-timeout = \"200ms\"\nautopilot = { target-latency = \"3s\", max-error-rate = 0.2, min-rate = 2, window = \"1s\" }",
    ));
    rate_until(&[&proxy], "a start", Duration::from_secs(10), |r| r > 0.0).await;
    let start = rate(&proxy).await;
    let mut jars = Vec::new();
    for _ in 0..12 {
        // In at the rate's pace: a poll now and then until the turn comes.
        let jar = admitted_in_turn(&proxy).await;
        jars.push(jar);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for jar in jars {
        let (url, cookie, stop) = (proxy.url("/slow/page"), jar.header(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let _ = client().get(&url).header("cookie", &cookie).send().await;
            }
        }));
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        let v = room(&proxy).await;
        assert!(
            v["autopilot"]["rate"].as_f64().unwrap() >= start,
            "from {start}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let busy = metric(
        &proxy,
        TOKEN,
        "anteroom_rejected_total",
        "reason=\"origin_busy\",room=\"sale\"",
    )
    .await;
    assert!(busy > 10, "most were turned away: {busy}");
    for t in tasks {
        t.abort();
    }
}

/// An informational answer is not the shop's answer: a shop that sends `103 Early Hints` at
/// once and its page half a second later is half a second slow (found by re-review: the first
/// answer, a 1xx, was taken as the latency, and a slow shop read as fast).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_hints_are_not_the_shops_latency() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shop = tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let hints = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n";
                let _ = conn.write_all(hints).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                let page = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
                let _ = conn.write_all(page).await;
            });
        }
    });
    let proxy = Proxy::start(&alone(
        addr,
        "/products",
        "autopilot = { target-latency = \"2s\", max-error-rate = 0.5, min-rate = 2, window = \"1s\" }",
    ));
    rate_until(&[&proxy], "a start", Duration::from_secs(10), |r| r > 0.0).await;
    let jar = admitted_at_once(&proxy, "sale").await;
    let resp = client()
        .get(proxy.url("/products/hint"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let p90 = eventually(Duration::from_secs(5), "the page counted", || async {
        let v = room(&proxy).await;
        (v["autopilot"]["origin_requests"].as_u64()? > 0)
            .then(|| v["autopilot"]["origin_p90_ms"].as_f64())
            .flatten()
    })
    .await;
    assert!(p90 >= 400.0, "p90 {p90} ms");
    shop.abort();
}

/// `n` client addresses whose networks each fall in a part of their own of the health window
/// (`anteroom::admission::health::trim`), so that which part a network shares does not decide
/// a test.
fn networks_in_parts_of_their_own(n: usize) -> Vec<String> {
    use anteroom::admission::health::{network_key, trim};
    let mut taken = [false; trim::PARTS];
    let mut out = Vec::new();
    for x in 0..=255u8 {
        let address = format!("10.0.{x}.1");
        let part = trim::part_of(network_key(&address));
        if out.len() < n && !taken[part] {
            taken[part] = true;
            out.push(address);
        }
    }
    assert_eq!(out.len(), n);
    out
}

/// The window is judged without the two parts (networks, by hash) with the most failed votes
/// and the two with the most answered ones: one network's failing visitors do not cut the rate
/// where an honest tail of failures supplies the three failing sources (found by review, for
/// slowness: 2 % of honest requests a little over the target supplied them, and one network's
/// slow pages drove the rate from 50 to `min-rate` in 26 s). Eight healthy networks, two
/// visitors the shop fails for on networks of their own, and six failing visitors of one more
/// network, at a `max-error-rate` of 0.25, watched for 4 s (all votes: 8 of 16 failed; the
/// votes judged: 1 of 7). Then three more networks fail, and the rate is cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_networks_failures_among_an_honest_tail_do_not_cut_the_rate() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        "trusted-proxies = [\"127.0.0.1/32\"]\n{}",
        alone(
            origin.addr,
            "/products",
            "autopilot = { target-latency = \"300ms\", max-error-rate = 0.25, min-rate = 1, window = \"1s\" }",
        )
        .replace("admit-per-second = 40", "admit-per-second = 20")
    ));
    rate_until(&[&proxy], "a start", Duration::from_secs(10), |r| r > 0.0).await;
    let start = rate(&proxy).await;
    let networks = networks_in_parts_of_their_own(14);
    let mut jars = Vec::new();
    for _ in 0..19 {
        jars.push(admitted_in_turn(&proxy).await);
    }
    let with = |jars: Vec<Jar>, nets: &[String]| -> Vec<(Jar, String)> {
        jars.into_iter().zip(nets.iter().cycle().cloned()).collect()
    };
    let later = jars.split_off(16);
    let crowd = jars.split_off(10);
    let tail = jars.split_off(8);
    let stop = Arc::new(AtomicBool::new(false));
    browse(&proxy, with(jars, &networks[..8]), "/products/ok-", &stop);
    browse(
        &proxy,
        with(tail, &networks[8..10]),
        "/products/fail-500?",
        &stop,
    );
    browse(
        &proxy,
        with(crowd, &networks[10..11]),
        "/products/fail-500?",
        &stop,
    );
    eventually(Duration::from_secs(5), "windows judged", || async {
        let v = room(&proxy).await;
        (v["autopilot"]["origin_requests"].as_u64()? >= 12).then_some(())
    })
    .await;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        let v = room(&proxy).await;
        assert!(
            v["autopilot"]["rate"].as_f64().unwrap() >= start,
            "one network among an honest tail cut the rate from {start}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    browse(
        &proxy,
        with(later, &networks[11..14]),
        "/products/fail-500?",
        &stop,
    );
    eventually(
        Duration::from_secs(15),
        "a cut by more networks",
        || async {
            let v = room(&proxy).await;
            (v["autopilot"]["rate"].as_f64()? < start
                && v["autopilot"]["last_change"]["reason"] == "errors")
                .then_some(())
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
}
