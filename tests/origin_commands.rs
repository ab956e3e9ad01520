//! Origin commands, black-box: a real origin answers with `Anteroom-Command: complete` or
//! `revoke` and the real proxy (memory store, and two instances on one real Redis) frees the
//! slot, refuses a revoked cookie at once and on the other instance within a tick, gives the
//! revoked visitor a new id, and never shows the header to the visitor. Without
//! `origin-commands` the header is the origin's own and nothing happens.

mod common;

use std::time::Duration;

use common::commands::*;
use common::redis::RedisServer;
use common::*;

async fn counted(proxy: &Proxy, command: &str) -> bool {
    metrics_text(proxy, TOKEN).await.lines().any(|l| {
        l.starts_with("anteroom_origin_commands_total")
            && l.contains(&format!("command=\"{command}\""))
            && l.contains("room=\"sale\"")
            && l.ends_with(" 1")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_frees_the_slot_and_the_header_never_reaches_the_visitor() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ON));
    let a = admitted(&proxy).await;
    // The only slot is taken: the next visitor waits.
    let mut b = Jar::default();
    let s = get_json(&proxy, "/.anteroom/status?room=sale", &mut b)
        .await
        .unwrap();
    assert_eq!(s["state"], "waiting", "{s}");

    let resp = send(&proxy, "GET", "/products/command-complete", &a).await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers().get("anteroom-command").is_none(),
        "the command is the origin's word to anteroom, not to the visitor"
    );
    assert!(cleared(&resp), "{:?}", set_cookies(&resp));
    assert!(resp
        .text()
        .await
        .unwrap()
        .starts_with("origin GET /products/command-complete"));

    // The slot is free at once: the one waiting gets in at the next tick.
    eventually(Duration::from_secs(10), "the next visitor admitted", || {
        let proxy = &proxy;
        let mut b = b.clone();
        async move {
            let s = get_json(proxy, "/.anteroom/status?room=sale", &mut b).await?;
            (s["state"] == "admitted").then_some(())
        }
    })
    .await;
    // The completed admission buys no order, even with its cookie kept.
    let order = send(&proxy, "POST", "/orders", &a).await;
    assert_eq!(order.status(), 409);
    assert_eq!(origin.count("/orders"), 0);
    eventually(Duration::from_secs(5), "the command counted", || async {
        counted(&proxy, "complete").await.then_some(())
    })
    .await;
}

/// A shop's confirmation page outside every room (the admission cookie, `Path=/`, comes with
/// it): the command is obeyed for the admission the request carries and never reaches the
/// visitor (found by review: it reached them, and the command was ignored). Without an
/// admission, the header is removed all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_on_a_page_outside_the_room_is_obeyed_and_removed() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ON));
    let nobody = send(&proxy, "GET", "/thanks/command-revoke", &Jar::default()).await;
    assert!(nobody.headers().get("anteroom-command").is_none());
    assert!(nobody
        .text()
        .await
        .unwrap()
        .starts_with("origin GET /thanks"));

    let a = admitted(&proxy).await;
    let resp = send(&proxy, "GET", "/thanks/command-complete", &a).await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers().get("anteroom-command").is_none(),
        "the command is the origin's word to anteroom, not to the visitor"
    );
    assert!(cleared(&resp), "{:?}", set_cookies(&resp));
    // Obeyed: the admission buys no order, and the slot is free.
    let order = send(&proxy, "POST", "/orders", &a).await;
    assert_eq!(order.status(), 409);
    assert_eq!(origin.count("/orders"), 0);
    eventually(Duration::from_secs(5), "the command counted", || async {
        counted(&proxy, "complete").await.then_some(())
    })
    .await;
    let mut b = Jar::default();
    eventually(
        Duration::from_secs(10),
        "the slot free for the next",
        || {
            let proxy = &proxy;
            let mut b = std::mem::take(&mut b);
            async move {
                let s = get_json(proxy, "/.anteroom/status?room=sale", &mut b).await?;
                (s["state"] == "admitted").then_some(())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shops_word_settles_an_order_even_when_it_failed() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ON));
    let a = admitted(&proxy).await;
    // A 503 would give the admission back; the shop says the order is complete all the same.
    let resp = send(&proxy, "POST", "/orders/command-complete/fail", &a).await;
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().get("anteroom-command").is_none());
    // Not kept for a retry, as a failed order's admission would be.
    assert!(cleared(&resp), "{:?}", set_cookies(&resp));
    assert_eq!(origin.count("/orders"), 1);
    let again = send(&proxy, "POST", "/orders", &a).await;
    assert_eq!(
        again.status(),
        409,
        "a second order with a completed admission"
    );
    assert_eq!(origin.count("/orders"), 1);
}

/// A request let past the line (a bypass rule) that carries an admission is answered for it:
/// the shop's command ends the admission it came with (found by review: it was counted
/// `unadmitted` and the admission kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_on_a_bypassed_request_ends_the_admission_it_carried() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ON));
    let a = admitted(&proxy).await;
    let resp = send(&proxy, "GET", "/products/feed/command-revoke", &a).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("anteroom-command").is_none());
    assert!(cleared(&resp), "the admission cookie cleared");
    eventually(Duration::from_secs(5), "counted as a revoke", || async {
        counted(&proxy, "revoke").await.then_some(())
    })
    .await;
}

/// A visitor who closes the connection before the origin has answered does not take the
/// command on that answer away: the answer is awaited (found by review: Pingora ended the
/// origin's side with the visitor's, and the `complete` never came).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_comes_through_when_the_visitor_left_before_the_answer() {
    use tokio::io::AsyncWriteExt;
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ON));
    let a = admitted(&proxy).await;
    origin.set_delay(500);
    let mut s = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!(
        "GET /products/command-complete HTTP/1.1\r\nHost: shop.test\r\nCookie: {}\r\n\r\n",
        a.header()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    s.shutdown().await.unwrap();
    drop(s);
    eventually(Duration::from_secs(5), "the complete counted", || async {
        counted(&proxy, "complete").await.then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_words_and_commands_without_an_admission_do_nothing() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ON));
    let a = admitted(&proxy).await;
    let resp = send(&proxy, "GET", "/products/command-revoked", &a).await;
    assert!(resp.headers().get("anteroom-command").is_none());
    assert!(!cleared(&resp));
    assert!(
        reaches_origin(&proxy, "/products", &a).await,
        "still admitted"
    );
    // A bypassed request carries no admission: the command is removed and ignored.
    let feed = send(
        &proxy,
        "GET",
        "/products/feed/command-revoke",
        &Jar::default(),
    )
    .await;
    assert_eq!(feed.status(), 200);
    assert!(feed.headers().get("anteroom-command").is_none());
    assert!(
        reaches_origin(&proxy, "/products", &a).await,
        "still admitted"
    );
    eventually(Duration::from_secs(5), "both counted", || async {
        (counted(&proxy, "unknown").await && counted(&proxy, "unadmitted").await).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_origin_commands_the_header_is_the_origins_own() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ""));
    let a = admitted(&proxy).await;
    let resp = send(&proxy, "GET", "/products/command-revoke", &a).await;
    assert_eq!(resp.headers()["anteroom-command"], "revoke");
    assert!(!cleared(&resp));
    assert!(reaches_origin(&proxy, "/products", &a).await);
    let order = send(&proxy, "POST", "/orders", &a).await;
    assert_eq!(order.status(), 200, "the admission is untouched");
}

/// A `revoke` ends the admission in its room and nothing else: a visitor waiting in another
/// room's line keeps their place there, though the id cookie every room shares was replaced
/// (found by review: fourth in line, they were put at the back, behind three who came later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_in_one_room_keeps_the_visitors_place_in_another() {
    let origin = Origin::start().await;
    let other = "origin-commands = true\n\n[[room]]\nname = \"drop\"\npaths = [\"/drop\"]\n\
                 admit-per-second = 50\nmax-active = 100\ntick = \"50ms\"";
    let proxy = Proxy::start(&config(origin.addr, "", other));
    let (status, body) = admin_call(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/drop",
        Some(TOKEN),
        Some(serde_json::json!({ "queue_all": true })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let poll = |mut jar: Jar| {
        let proxy = &proxy;
        async move {
            let s = get_json(proxy, "/.anteroom/status?room=drop", &mut jar)
                .await
                .unwrap();
            (s["position"].as_u64().unwrap(), jar)
        }
    };
    for _ in 0..3 {
        poll(Jar::default()).await;
    }
    let mut v = admitted(&proxy).await;
    let (place, jar) = poll(v.clone()).await;
    v = jar;
    assert_eq!(place, 4);
    let mut behind = Jar::default();
    for _ in 0..3 {
        behind = poll(Jar::default()).await.1;
    }

    let resp = send(&proxy, "GET", "/products/command-revoke", &v).await;
    assert!(cleared(&resp));
    v.absorb(&resp);
    let old = v.get("anteroom_vid").unwrap().to_string();
    let resp = send(&proxy, "GET", "/products", &v).await;
    v.absorb(&resp);
    let new = v.get("anteroom_vid").unwrap().to_string();
    assert_ne!(new, old, "the revoked visitor has a new id");

    let (place, jar) = poll(v.clone()).await;
    assert_eq!(place, 4, "the place in the other line is kept");
    assert_eq!(
        jar.get("anteroom_vid"),
        Some(new.as_str()),
        "and the id cookie stays the one the room that revoked gave"
    );
    let (place, jar) = poll(jar).await;
    assert_eq!(place, 4);
    // A ticket of someone behind tossed in first (a sibling site's cookie for a longer path):
    // no ticket names the id cookie now, and the earlier place counts (re-review: the first
    // sent did).
    let tossed = behind.get("anteroom_q.drop").unwrap();
    let resp = client()
        .get(proxy.url("/.anteroom/status?room=drop"))
        .header("accept", "application/json")
        .header(
            "cookie",
            format!("anteroom_q.drop={tossed}; {}", jar.header()),
        )
        .send()
        .await
        .unwrap();
    let s: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(s["position"], 4, "{s}");
}

async fn hold(proxy: &Proxy, on: bool) {
    let (status, body) = admin_call(
        proxy,
        reqwest::Method::PATCH,
        "/rooms/sale",
        Some(TOKEN),
        Some(serde_json::json!({ "queue_all": on })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_cookie_is_refused_at_once_and_by_every_instance_within_a_tick() {
    let redis = RedisServer::start();
    let store = format!(
        "[store]\nbackend = \"redis\"\nredis-url = \"{}\"\ntimeout = \"500ms\"",
        redis.url()
    );
    let origin = Origin::start().await;
    let cfg = config(origin.addr, &store, ON).replace("max-active = 1\n", "max-active = 50\n");
    let (one, two) = (Proxy::start(&cfg), Proxy::start(&cfg));
    let a = admitted(&one).await;
    let old_vid = a.get("anteroom_vid").unwrap().to_string();
    assert!(
        reaches_origin(&two, "/products", &a).await,
        "one line, one cookie"
    );
    // The line is held: a newcomer waits (so that a refused cookie shows as waiting, not as a
    // new admission through the free room); the admitted keep going.
    hold(&one, true).await;
    assert!(reaches_origin(&two, "/products", &a).await);

    let resp = send(&one, "GET", "/products/command-revoke", &a).await;
    assert_eq!(
        resp.status(),
        200,
        "the answer that revokes is the visitor's"
    );
    assert!(resp.headers().get("anteroom-command").is_none());
    assert!(cleared(&resp));

    // The cookie kept (replayed): refused by the instance that got the command, at once.
    let before = origin.count("/products");
    let replay = send(&one, "GET", "/products", &a).await;
    let new_vid = set_cookies(&replay)
        .into_iter()
        .find(|(k, _, _)| k == "anteroom_vid")
        .map(|(_, v, _)| v);
    let body = replay.text().await.unwrap();
    assert!(!body.starts_with("origin "), "{body}");
    assert_eq!(origin.count("/products"), before);
    let new_vid = new_vid.expect("a revoked visitor is given a new id");
    assert_ne!(new_vid, old_vid);
    // The status endpoint does not call it admitted either.
    let mut kept = a.clone();
    let s = get_json(&one, "/.anteroom/status?room=sale", &mut kept)
        .await
        .unwrap();
    assert_ne!(s["state"], "admitted", "{s}");
    // And by the other instance, once its tick has learned it.
    eventually(
        Duration::from_secs(10),
        "the other instance refuses it",
        || {
            let (two, a) = (&two, &a);
            async move { (!reaches_origin(two, "/products", a).await).then_some(()) }
        },
    )
    .await;
    assert!(
        !reaches_origin(&two, "/products", &a).await,
        "and keeps refusing it"
    );

    // A new identity queues and is let in as anyone would be; its cookie works everywhere.
    hold(&one, false).await;
    let mut fresh = Jar::default();
    fresh.set("anteroom_vid", &new_vid);
    eventually(Duration::from_secs(10), "the new identity admitted", || {
        let one = &one;
        let mut jar = fresh.clone();
        async move {
            let s = get_json(one, "/.anteroom/status?room=sale", &mut jar).await?;
            (s["state"] == "admitted").then_some(jar)
        }
    })
    .await
    .clone_into(&mut fresh);
    assert!(fresh.get("anteroom_sale").is_some());
    assert!(reaches_origin(&one, "/products", &fresh).await);
    assert!(reaches_origin(&two, "/products", &fresh).await);
    // The old cookie stays refused on both.
    assert!(!reaches_origin(&one, "/products", &a).await);
    assert!(!reaches_origin(&two, "/products", &a).await);
    // Also after a reload that turns `origin-commands` off (found by review: the revoked
    // cookie reached the shop again).
    hold(&one, true).await;
    let text = std::fs::read_to_string(one.config_path()).unwrap();
    let off = text.replace(ON, "origin-commands = false");
    assert_ne!(off, text);
    std::fs::write(one.config_path(), off).unwrap();
    reload_applied(&one).await;
    assert!(
        !reaches_origin(&one, "/products", &a).await,
        "refused after a reload without origin-commands"
    );
    // And a revocation told to the other instance reaches it still (found by re-review: it
    // read the store's revocations only with origin-commands on).
    hold(&one, false).await;
    let b = eventually(Duration::from_secs(10), "a visitor admitted", || {
        let one = &one;
        async move {
            let mut jar = Jar::default();
            let s = get_json(one, "/.anteroom/status?room=sale", &mut jar).await?;
            (s["state"] == "admitted").then_some(jar)
        }
    })
    .await;
    hold(&one, true).await;
    let resp = send(&two, "GET", "/products/command-revoke", &b).await;
    assert_eq!(resp.status(), 200);
    eventually(
        Duration::from_secs(10),
        "the instance without origin-commands refuses it",
        || {
            let (one, b) = (&one, &b);
            async move { (!reaches_origin(one, "/products", b).await).then_some(()) }
        },
    )
    .await;
}

/// A `complete` told while Redis is away: the instance that got it refuses an order of that
/// admission itself until the store has heard, also the moment Redis is back (found by review:
/// the order went through before the command's retry landed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_during_a_store_outage_buys_no_order_when_the_store_is_back() {
    let redis = RedisServer::start();
    let store = format!(
        "[store]\nbackend = \"redis\"\nredis-url = \"{}\"\ntimeout = \"300ms\"",
        redis.url()
    );
    let origin = Origin::start().await;
    let cfg = config(origin.addr, &store, ON).replace("max-active = 1\n", "max-active = 50\n");
    let one = Proxy::start(&cfg);
    let a = admitted(&one).await;
    redis.signal(true);
    let resp = send(&one, "GET", "/products/command-complete", &a).await;
    assert_eq!(
        resp.status(),
        200,
        "the answer that completes is the visitor's"
    );
    assert!(cleared(&resp));
    let during = send(&one, "POST", "/orders", &a).await;
    assert_eq!(during.status(), 409, "an order of a completed admission");
    redis.signal(false);
    let after = send(&one, "POST", "/orders", &a).await;
    assert_eq!(after.status(), 409, "and the moment the store is back");
    // Once the command has landed, the store says so too.
    eventually(Duration::from_secs(10), "the store hears it", || {
        let (one, a) = (&one, &a);
        async move {
            let resp = send(one, "POST", "/orders", a).await;
            (resp.status() == 409).then_some(())
        }
    })
    .await;
    assert_eq!(origin.count("/orders"), 0, "no order reached the shop");
}

/// A visitor's own `Anteroom-Command` (under any spelling CGI-style servers read alike) never
/// reaches the origin: a shop that echoes request headers in its answer would otherwise let
/// the visitor speak for it (found by review r106a: an echoed `revoke` was obeyed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitors_own_command_never_reaches_the_origin() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, "", ON));
    let a = admitted(&proxy).await;
    for path in ["/products/echo", "/outside/echo"] {
        let resp = client()
            .get(proxy.url(path))
            .header("cookie", a.header())
            .header("Anteroom-Command", "revoke")
            .header("anteroom_command", "complete")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let seen = origin.requests();
        let last = seen.last().expect("the origin saw the request");
        assert!(
            !last
                .headers
                .iter()
                .any(|(k, _)| k.to_ascii_lowercase().replace('_', "-") == "anteroom-command"),
            "{path}: {:?}",
            last.headers
        );
    }
    assert!(
        reaches_origin(&proxy, "/products", &a).await,
        "still admitted"
    );
}
