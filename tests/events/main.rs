//! Scheduled sales, black-box (issue 17): the real binary, a real origin, Redis where asked.
//! Visitors register during a pre-queue and see a countdown with no place; the room publishes
//! its commitment and, at the opening, the seed and the list; `anteroom verify-draw` checks a
//! visitor's place against it (and refuses a list that was changed); places after the opening
//! follow the draw; the closing turns newcomers away; operators add, change and cancel events
//! at run time; on Redis two instances agree and the countdown costs Redis nothing.

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use anteroom::event::draw;
use common::redis::RedisServer;
use common::sale::*;
use common::*;
use serde_json::Value;

mod admin_view;
mod orders;
mod recovery;
mod runtime;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drawn_sale_from_registration_to_a_checked_draw() {
    let origin = Origin::start().await;
    // One slot and a long claim: once open, the line barely moves, and places can be read.
    let proxy = Proxy::start(&config(
        origin.addr,
        "",
        "admit-per-second = 10\nmax-active = 1",
        &drawn_event(6),
    ));
    // Before anyone registers, the commitment is published; the seed is not.
    let (code, doc) = event_doc(&proxy, "").await;
    assert_eq!(code, 200, "{doc}");
    assert_eq!(
        (doc["phase"].as_str(), doc["draw"].as_bool()),
        (Some("prequeue"), Some(true))
    );
    let commitment = doc["commitment"]
        .as_str()
        .expect("a commitment")
        .to_string();
    assert_eq!(commitment.len(), 64);
    assert!(doc["seed"].is_null(), "{doc}");
    assert_eq!(
        event_doc(&proxy, "&tickets=1").await.0,
        404,
        "no list before the opening"
    );

    let mut jars: Vec<Jar> = (0..12).map(|_| Jar::default()).collect();
    let mut tickets = Vec::new();
    for jar in jars.iter_mut() {
        let s = status(&proxy, jar).await;
        assert_eq!(s["state"], "prequeue", "{s}");
        assert!(s["position"].is_null(), "no place before the draw: {s}");
        assert_eq!(s["event"]["commitment"], commitment.as_str());
        assert!(s["event"]["seed"].is_null());
        let t = s["event"]["ticket"]
            .as_str()
            .expect("a registration ticket")
            .to_string();
        assert_eq!(t.len(), 32);
        tickets.push(t);
    }
    // Polls with a queue ticket during the pre-queue are answered here: the countdown.
    let edge_before = metric(&proxy, TOKEN, "anteroom_polls_total", "answered=\"edge\"").await;
    for jar in jars.iter_mut() {
        let s = status(&proxy, jar).await;
        assert_eq!(s["state"], "prequeue", "{s}");
        assert!(s["event"]["opens_in_seconds"].as_u64().unwrap() <= 7);
    }
    let edge_after = metric(&proxy, TOKEN, "anteroom_polls_total", "answered=\"edge\"").await;
    assert!(
        edge_after >= edge_before + 12,
        "the countdown came from the edge: {edge_before} -> {edge_after}"
    );
    // The page: the countdown, the commitment and the visitor's ticket.
    let page = client()
        .get(proxy.url("/products/1"))
        .header("cookie", jars[0].header())
        .send()
        .await
        .unwrap();
    assert_eq!(page.headers()["cache-control"], "no-store");
    let html = page.text().await.unwrap();
    assert!(html.contains("You&#x27;re registered"), "{html}");
    assert!(
        html.contains(&commitment) && html.contains(&tickets[0]),
        "{html}"
    );

    // The opening: the seed is revealed and matches the commitment; the list follows.
    let doc = eventually(Duration::from_secs(20), "the seed revealed", || {
        let proxy = &proxy;
        async move {
            let (_, d) = event_doc(proxy, "").await;
            d["seed"].is_string().then_some(d)
        }
    })
    .await;
    let seed = draw::unhex::<32>(doc["seed"].as_str().unwrap()).unwrap();
    assert_eq!(draw::commitment(&seed), commitment);
    let full = eventually(Duration::from_secs(10), "the list", || {
        let proxy = &proxy;
        async move {
            let (code, d) = event_doc(proxy, "&tickets=1").await;
            (code == 200).then_some(d)
        }
    })
    .await;
    let list: Vec<String> = full["tickets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(list.len(), 12, "{full}");
    for t in &tickets {
        assert!(list.contains(t), "every registration is listed");
    }
    // Places in line after the opening follow the draw: one let in (the first drawn), the rest
    // waiting in the list's order.
    let mut places = Vec::new();
    for (jar, t) in jars.iter_mut().zip(&tickets) {
        let s = status(&proxy, jar).await;
        let drawn = list.iter().position(|x| x == t).unwrap();
        places.push((
            drawn,
            s["state"].as_str().unwrap().to_string(),
            s["position"].as_u64(),
        ));
    }
    places.sort();
    assert_eq!(
        places[0].1, "admitted",
        "the first of the draw is let in: {places:?}"
    );
    for (i, (drawn, state, position)) in places.iter().enumerate().skip(1) {
        assert_eq!(
            (*drawn, state.as_str(), *position),
            (i, "waiting", Some(i as u64)),
            "{places:?}"
        );
    }
    // A registrant's waiting page after the opening keeps their ticket, now with the seed.
    let (i, _) = jars
        .iter()
        .enumerate()
        .find(|(_, j)| j.get("anteroom_sale").is_none())
        .expect("someone still waiting");
    let page = client()
        .get(proxy.url("/products/9"))
        .header("cookie", jars[i].header())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&tickets[i]),
        "the ticket on the waiting page: {page}"
    );
    assert!(
        page.contains(doc["seed"].as_str().unwrap()),
        "and the seed: {page}"
    );
    // verify-draw against the live room, and against a saved list that was changed.
    let url = proxy.url(EVENT);
    let (ok, out) = verify_draw(&[
        "--event",
        &url,
        "--ticket",
        &tickets[3],
        "--commitment",
        &commitment,
    ]);
    let place = list.iter().position(|x| *x == tickets[3]).unwrap() + 1;
    assert!(ok, "{out}");
    assert!(out.contains(&format!("at place {place} of 12")), "{out}");
    let saved = proxy.dir.path().join("event.json");
    let mut changed = full.clone();
    changed["tickets"].as_array_mut().unwrap().swap(0, 11);
    std::fs::write(&saved, changed.to_string()).unwrap();
    let (ok, out) = verify_draw(&["--event", saved.to_str().unwrap(), "--ticket", &tickets[3]]);
    assert!(
        !ok && out.contains("order"),
        "a changed list is refused: {out}"
    );
    std::fs::write(&saved, full.to_string()).unwrap();
    let (ok, out) = verify_draw(&["--event", saved.to_str().unwrap(), "--ticket", &tickets[3]]);
    assert!(ok, "the saved list checks out: {out}");
    let (ok, out) = verify_draw(&[
        "--event",
        &url,
        "--ticket",
        &tickets[3],
        "--commitment",
        &"0".repeat(64),
    ]);
    assert!(!ok && out.contains("the seed was changed"), "{out}");
    let stranger = draw::hex(&[7u8; 16]);
    let (ok, out) = verify_draw(&["--event", &url, "--ticket", &stranger]);
    assert!(!ok && out.contains("not in the list"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_closing_turns_newcomers_away_and_keeps_the_line() {
    let origin = Origin::start().await;
    let closes = at(7).replace("+09:00", ".250+09:00");
    let event = format!(
        "[[room.event]]\nname = \"short\"\nprequeue-from = \"{}\"\nopens-at = \"{}\"\ncloses-at = \"{}\"\n",
        at(-1),
        // Room for a start on a loaded machine: both must register before the opening.
        at(4),
        closes
    );
    let proxy = Proxy::start(&config(
        origin.addr,
        "",
        "admit-per-second = 10\nmax-active = 1",
        &event,
    ));
    // A time with a fraction of a second is published with it (found by review: it was cut
    // to the second, earlier than the sale really closed).
    let (code, d) = event_doc(&proxy, "").await;
    assert_eq!(
        (code, &d["closes_at"]),
        (200, &Value::from(closes.clone())),
        "{d}"
    );
    let mut holder = Jar::default();
    let mut waiter = Jar::default();
    assert_eq!(status(&proxy, &mut holder).await["state"], "prequeue");
    assert_eq!(status(&proxy, &mut waiter).await["state"], "prequeue");
    // After the closing: a newcomer is told the sale has ended, in JSON and on the page.
    let s = eventually(Duration::from_secs(20), "the closing", || {
        let proxy = &proxy;
        async move {
            let s = get_json(proxy, STATUS, &mut Jar::default()).await?;
            (s["state"] == "ended").then_some(s)
        }
    })
    .await;
    assert_eq!(s["room"], "sale");
    let page = client().get(proxy.url("/products/1")).send().await.unwrap();
    assert_eq!(page.status(), 200, "closed-status, 200 by default");
    assert_eq!(page.headers()["cache-control"], "no-store");
    assert!(page.text().await.unwrap().contains("This sale has ended"));
    // Those in line before it keep their places (after-close = "keep", the default).
    let s = status(&proxy, &mut holder).await;
    let w = status(&proxy, &mut waiter).await;
    let states = [s["state"].as_str().unwrap(), w["state"].as_str().unwrap()];
    assert!(
        states.contains(&"admitted") && states.contains(&"waiting"),
        "the line is kept: {s} {w}"
    );
    // Counted in the logging phase, which may run just after the answer went out.
    eventually(Duration::from_secs(5), "the ended answers counted", || {
        let proxy = &proxy;
        async move {
            let n = metric(
                proxy,
                TOKEN,
                "anteroom_rejected_total",
                "reason=\"ended\",room=\"sale\"",
            )
            .await;
            (n >= 2).then_some(())
        }
    })
    .await;
}

/// Two instances on one Redis in front of one origin, the room at `rate` admissions a second
/// (and as many places), ticking once a second: the window between a change and the next tick
/// is wide.
async fn two_instances(rate: u32) -> (RedisServer, Origin, Proxy, Proxy) {
    let redis = RedisServer::start();
    let origin = Origin::start().await;
    let store = redis_store(&redis, "500ms");
    let room = format!("admit-per-second = {rate}\nmax-active = {rate}\ntick = \"1s\"");
    let a = Proxy::start(&config(origin.addr, &store, &room, ""));
    let b = Proxy::start(&config(origin.addr, &store, &room, ""));
    (redis, origin, a, b)
}

/// Adds an event whose pre-queue begins `from` seconds from now, through `proxy`'s admin API.
async fn add_event(proxy: &Proxy, name: &str, from: i64) -> (u16, String) {
    let body = serde_json::json!({
        "name": name, "prequeue_from": at(from), "opens_at": at(from + 100)
    });
    let path = "/rooms/sale/events";
    admin_call(proxy, reqwest::Method::POST, path, Some(TOKEN), Some(body)).await
}

/// The names of the events `proxy` has in force, sorted.
async fn event_names(proxy: &Proxy) -> Option<Vec<String>> {
    let list = admin_json(proxy, "/rooms/sale/events", TOKEN).await?;
    let mut names: Vec<String> = list["events"]
        .as_array()?
        .iter()
        .filter_map(|e| e["name"].as_str().map(String::from))
        .collect();
    names.sort();
    Some(names)
}
