use super::*;

/// A registration's position in a pre-queue without a draw stays what the store said, polled
/// at the edge while many register behind it: nobody moves in a pre-queue (found by review:
/// the snapshot's estimate said 83 for 101, then 101 again as more registered — up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_keeps_its_position_in_a_prequeue() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let room = "admit-per-second = 5000\nmax-active = 100000\ntick = \"100ms\"";
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), room));
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let opens = anteroom::event::time::format(now_us + 1_200_000_000, 0);
    let (code, body) = admin_call(
        &proxy,
        reqwest::Method::POST,
        "/rooms/sale/events",
        Some(TOKEN),
        Some(serde_json::json!({ "name": "drop", "opens_at": opens })),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let register = |n: usize| {
        let proxy = &proxy;
        async move {
            for _ in 0..n {
                let v = json(proxy, STATUS, &mut Jar::default()).await;
                assert_eq!(v["state"], "prequeue", "{v}");
            }
        }
    };
    eventually(Duration::from_secs(5), "the pre-queue", || async {
        let v = get_json(&proxy, STATUS, &mut Jar::default()).await?;
        (v["state"] == "prequeue").then_some(())
    })
    .await;
    register(100).await;
    let mut me = Jar::default();
    let first = json(&proxy, STATUS, &mut me).await["position"]
        .as_u64()
        .expect("a position");
    let mut at_edge = 0.0;
    for _ in 0..30 {
        register(25).await;
        // The pace of arrivals (the snapshot's sample of the line is refreshed meanwhile).
        tokio::time::sleep(Duration::from_millis(250)).await;
        let before = counter(&proxy, "anteroom_polls_total", "answered=\"edge\"").await;
        let v = json(&proxy, STATUS, &mut me).await;
        at_edge += counter(&proxy, "anteroom_polls_total", "answered=\"edge\"").await - before;
        let Some(p) = v["position"].as_u64() else {
            continue;
        };
        assert_eq!(p, first, "nobody moved ({v})");
    }
    assert!(at_edge > 0.0, "some polls were answered at the edge");
}

/// The Max-Age of a cookie a response sets (`None` when it sets none).
fn max_age(resp: &reqwest::Response, name: &str) -> Option<u64> {
    set_cookies(resp)
        .into_iter()
        .find(|(k, _, _)| k == name)?
        .2
        .split(';')
        .find_map(|a| a.trim().strip_prefix("Max-Age=")?.parse().ok())
}

async fn status_with(proxy: &Proxy, jar: &mut Jar) -> (Value, Option<u64>, Option<u64>) {
    let resp = client()
        .get(proxy.url(STATUS))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    let ages = (max_age(&resp, "anteroom_vid"), max_age(&resp, TICKET));
    (resp.json().await.unwrap(), ages.0, ages.1)
}

/// The visitor-id cookie is given again with each ticket, and one lost is found again in the
/// ticket: the place is kept. In a pre-queue both live past the opening. Before (found by
/// review), the id cookie lived a day and was never given again: a registrant more than a day
/// before the opening got a new id, a new place and a new registration ticket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_visitor_id_is_found_in_the_ticket_and_outlives_the_prequeue() {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, &redis.url(), SLOW_FULL_ROOM));
    let (_holder, _head, second) = a_line(&proxy).await;
    let vid = second.get("anteroom_vid").unwrap().to_string();
    let mut ticket_only = second.clone();
    ticket_only.0.retain(|(k, _)| k == TICKET);
    let (v, vid_age, _) = status_with(&proxy, &mut ticket_only).await;
    assert_eq!(
        (v["state"].as_str(), v["position"].as_u64()),
        (Some("waiting"), Some(2)),
        "the place is kept: {v}"
    );
    assert_eq!(
        ticket_only.get("anteroom_vid"),
        Some(vid.as_str()),
        "the id from the ticket"
    );
    assert_eq!(vid_age, Some(86_400));

    // A pre-queue opening in two days: registered, both cookies live past the opening.
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let opens = anteroom::event::time::format(now_us + 2 * 86_400_000_000, 0);
    // Two days of pre-queue are asked for by giving its start (left out, at most one).
    let from = anteroom::event::time::format(now_us, 0);
    let (code, body) = admin_call(
        &proxy,
        reqwest::Method::POST,
        "/rooms/other/events",
        Some(TOKEN),
        Some(serde_json::json!({ "name": "drop", "prequeue_from": from, "opens_at": opens })),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let other = "/.anteroom/status?room=other";
    eventually(Duration::from_secs(5), "the pre-queue", || async {
        let v = get_json(&proxy, other, &mut Jar::default()).await?;
        (v["state"] == "prequeue").then_some(())
    })
    .await;
    let resp = client().get(proxy.url(other)).send().await.unwrap();
    let (vid_age, ticket_age) = (
        max_age(&resp, "anteroom_vid"),
        max_age(&resp, "anteroom_q.other"),
    );
    let past_opening = 3 * 86_400 - 60;
    assert!(vid_age.is_some_and(|a| a >= past_opening), "{vid_age:?}");
    assert!(
        ticket_age.is_some_and(|a| a >= past_opening),
        "{ticket_age:?}"
    );
}
