//! Reloads against what runs: a room with a line, a cookie key read from a file, a lowered
//! `abandon-after`, paths judged by the room that had them.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_does_not_drop_a_room_with_a_line() {
    let origin = Origin::start().await;
    let proxy = Proxy::start_with(
        &config(
            origin.addr,
            "\"/products\"",
            // Ticks far apart: the line forms after the first, and the reload comes before
            // the next (what the store says counts, not what the last tick saw). Sessions
            // short: the rename waits for the admitted visitor's to end.
            &format!(
                "tick = \"10s\"\nsession-ttl = \"3s\"\nclaim-ttl = \"3s\"\n[admin]\ntoken = \"{TOKEN}\""
            ),
        ),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    let c = client();
    let mut holder = Jar::default();
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut holder).await;
    assert_eq!(v.unwrap()["state"], "admitted");
    let mut waiting = Jar::default();
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut waiting).await;
    assert_eq!(v.unwrap()["position"], 1);

    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    let renamed = text.replace("name = \"sale\"", "name = \"sale2\"");
    std::fs::write(proxy.config_path(), &renamed).unwrap();
    proxy.signal("HUP");
    let logs = eventually(Duration::from_secs(5), "the refusal in the log", || async {
        let logs = proxy.stderr();
        logs.contains("reload refused").then_some(logs)
    })
    .await;
    assert!(
        logs.contains("room \\\"sale\\\" is gone from the file")
            || logs.contains("room \"sale\" is gone from the file"),
        "{logs}"
    );
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut waiting).await;
    assert_eq!(v.unwrap()["position"], 1, "the place is kept");
    // The refusal is told where a deploy looks, not only in the log (found by review).
    let ready = admin_json(&proxy, "/readyz", TOKEN).await.unwrap();
    assert_eq!(ready["last_reload"]["applied"], false, "{ready}");
    assert!(
        ready["last_reload"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("gone from the file")),
        "{ready}"
    );
    let text = metrics_text(&proxy, TOKEN).await;
    assert!(
        text.contains("anteroom_config_reloads_total{result=\"refused\"} 1"),
        "{text}"
    );
    assert_eq!(
        state(&c, &proxy, "/products").await,
        "waiting",
        "a newcomer still queues"
    );

    // Nobody waits (the line emptied), but the admitted visitor's session lasts: the renamed
    // room covers its paths, and their admission is signed for the old name, so the rename is
    // refused (found by review: it sent every admitted visitor back to the line).
    let (code, body) = admin_call(
        &proxy,
        reqwest::Method::DELETE,
        "/rooms/sale/waiting",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    proxy.signal("HUP");
    eventually(Duration::from_secs(5), "the second refusal", || async {
        proxy
            .stderr()
            .contains("admitted visitors hold its sessions")
            .then_some(())
    })
    .await;
    assert!(!proxy.stderr().contains("configuration reloaded"));
    assert_eq!(
        with_cookie(&proxy, "/products", &holder.header()).await.0,
        "origin GET /products",
        "the admitted visitor still goes in"
    );
    // Once their session has ended, the rename goes through, and is named. (The same
    // process: one just started may not listen for SIGHUP yet, and the signal's default ends it.)
    let logs = eventually(Duration::from_secs(15), "the reload in the log", || async {
        let logs = proxy.stderr();
        if !logs.contains("configuration reloaded") {
            proxy.signal("HUP");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        logs.contains("configuration reloaded").then_some(logs)
    })
    .await;
    assert!(
        logs.contains("removed=[\"sale\"]") && logs.contains("added=[\"sale2\"]"),
        "{logs}"
    );
    let ready = admin_json(&proxy, "/readyz", TOKEN).await.unwrap();
    assert_eq!(ready["last_reload"]["applied"], true, "{ready}");
    assert!(ready["last_reload"]["error"].is_null(), "{ready}");
}

/// A GET of `path` with exactly `cookie`; the body (the origin echoes the request line) and
/// the admission cookie the answer sets, if any.
async fn with_cookie(proxy: &Proxy, path: &str, cookie: &str) -> (String, Option<String>) {
    let resp = client()
        .get(proxy.url(path))
        .header("accept", "application/json")
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    let set = set_cookies(&resp)
        .into_iter()
        .find(|(k, _, _)| k == "anteroom_sale")
        .map(|(_, v, _)| v);
    (resp.text().await.unwrap(), set)
}

/// A cookie key read from a file (`file:PATH`) is read again on SIGHUP: a key rotated in a
/// mounted secret takes effect without a restart, where an `env:` value cannot change in a
/// running process (found by review: the recommended `env:` keys could only rotate by a
/// restart, which empties the memory store). The file changes, the config text does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookie_key_read_from_a_file_is_read_again_on_sighup() {
    let origin = Origin::start().await;
    let keys = tempfile::tempdir().unwrap();
    let file = keys.path().join("cookie.key");
    std::fs::write(&file, format!("{KEY}\n")).unwrap();
    let text = config(origin.addr, "\"/products\"", "").replace(
        &format!("keys = [\"{KEY}\"]"),
        &format!("keys = [\"file:{}\"]", file.display()),
    );
    assert!(text.contains("file:"), "{text}");
    let mut proxy = Proxy::start_with(&text, &[("ANTEROOM_LOG", "info")], &[]);

    let mut jar = Jar::default();
    assert_eq!(
        get_json(&proxy, "/products", &mut jar).await,
        None,
        "admitted"
    );
    let first = jar
        .get("anteroom_sale")
        .expect("admission cookie")
        .to_string();
    let (body, _) = with_cookie(&proxy, "/products", &format!("anteroom_sale={first}")).await;
    assert_eq!(
        body, "origin GET /products",
        "the cookie lets its holder in"
    );

    std::fs::write(&file, format!("{OTHER_KEY}\n")).unwrap();
    proxy.signal("HUP");
    eventually(Duration::from_secs(5), "the reload", || async {
        proxy
            .stderr()
            .contains("configuration reloaded")
            .then_some(())
    })
    .await;
    assert!(proxy.alive());
    let (body, _) = with_cookie(&proxy, "/products", &format!("anteroom_sale={first}")).await;
    assert_ne!(
        body, "origin GET /products",
        "a cookie signed with the key the file no longer holds lets nobody in"
    );
    // The visitor the store knows as admitted is let in again, under the file's new key.
    let (body, again) = with_cookie(&proxy, "/products", &jar.header()).await;
    assert_eq!(
        body, "origin GET /products",
        "the admitted visitor keeps the place"
    );
    let again = again.expect("the admission is signed again");
    assert_ne!(again, first);
    let (body, _) = with_cookie(&proxy, "/products", &format!("anteroom_sale={again}")).await;
    assert_eq!(
        body, "origin GET /products",
        "the new key signs and verifies"
    );
}

/// A reload that lowers `abandon-after` keeps the old value in force for as long as it was:
/// a visitor silent for less than the value they polled under (a throttled tab, or the store's
/// view of one whose "last seen" is noted once every `abandon-after`/4) keeps the place. Before
/// (found by review), the shorter value judged them at once: swept, they joined again behind
/// someone who came after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowering_abandon_after_keeps_the_places_of_the_visitors_in_line() {
    let origin = Origin::start().await;
    let proxy = Proxy::start_with(
        &config(
            origin.addr,
            "\"/products\"",
            &format!("tick = \"100ms\"\nabandon-after = \"20s\"\npoll = [ {{ every = \"1s\" }} ]\n[admin]\ntoken = \"{TOKEN}\""),
        ),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    let mut holder = Jar::default();
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut holder).await;
    assert_eq!(v.unwrap()["state"], "admitted");
    let (mut first, mut second) = (Jar::default(), Jar::default());
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut first).await;
    assert_eq!(v.unwrap()["position"], 1);
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut second).await;
    assert_eq!(v.unwrap()["position"], 2);
    // The first is silent for 5 s (a hidden tab: well within the 20 s they polled under) while
    // the second keeps polling; meanwhile abandon-after becomes 4 s.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    std::fs::write(
        proxy.config_path(),
        text.replace("abandon-after = \"20s\"", "abandon-after = \"4s\""),
    )
    .unwrap();
    proxy.signal("HUP");
    eventually(Duration::from_secs(5), "the reload", || async {
        proxy
            .stderr()
            .contains("configuration reloaded")
            .then_some(())
    })
    .await;
    while std::time::Instant::now() < until {
        get_json(&proxy, "/.anteroom/status?room=sale", &mut second).await;
        // The admin API's view of the room asks the store too (on the memory store, any call
        // judged silence by the lowered value: found by re-review).
        admin_json(&proxy, "/rooms/sale", TOKEN).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut first)
        .await
        .unwrap();
    assert_eq!(
        (v["state"].as_str(), v["position"].as_u64()),
        (Some("waiting"), Some(1)),
        "the first keeps their place: {v}"
    );
}

/// The outcome of the next reload: SIGHUP, then `/readyz`'s `last_reload` once it is not
/// `before`'s.
async fn reload(proxy: &Proxy, before: &Value) -> Value {
    proxy.signal("HUP");
    eventually(Duration::from_secs(5), "the reload's outcome", || async {
        let ready = admin_json(proxy, "/readyz", TOKEN).await?;
        let last = ready["last_reload"].clone();
        (!last.is_null() && last != *before).then_some(last)
    })
    .await
}

/// Paths are judged by who had them (found by re-review): with a room nested in a site-wide
/// one, the same file reloaded while the site-wide room has admitted visitors applies (it was
/// refused, the nested room counted as taking the site-wide room's paths, so nothing could be
/// reloaded under traffic); a path moved from a room that keeps its name while people wait in
/// its line is refused (it applied, and at their turn they met the other room's line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_judges_paths_by_the_room_that_had_them() {
    let origin = Origin::start().await;
    let vip = "[[room]]\nname = \"vip\"\npaths = [\"/vip\"]\nadmit-per-second = 100\n\
               max-active = 10\n";
    let proxy = Proxy::start(&config(
        origin.addr,
        "\"/\"",
        &format!("{vip}\n[admin]\ntoken = \"{TOKEN}\""),
    ));
    let c = client();
    assert_eq!(
        state(&c, &proxy, "/products").await,
        "origin GET /products",
        "admitted in the site-wide room"
    );
    let last = reload(&proxy, &Value::Null).await;
    assert_eq!(last["applied"], true, "the same file: {last}");

    let (code, body) = admin_call(
        &proxy,
        reqwest::Method::PATCH,
        "/rooms/vip",
        Some(TOKEN),
        Some(serde_json::json!({ "queue_all": true })),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let mut waiting = Jar::default();
    let v = get_json(&proxy, "/.anteroom/status?room=vip", &mut waiting).await;
    assert_eq!(v.unwrap()["position"], 1);
    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    std::fs::write(
        proxy.config_path(),
        text.replace("paths = [\"/vip\"]", "paths = [\"/vip-old\"]"),
    )
    .unwrap();
    let last = reload(&proxy, &last).await;
    assert_eq!(last["applied"], false, "{last}");
    assert!(
        last["error"]
            .as_str()
            .is_some_and(|e| e.contains("wait in its line") && e.contains("from room \"vip\"")),
        "{last}"
    );
    let v = get_json(&proxy, "/.anteroom/status?room=vip", &mut waiting).await;
    assert_eq!(v.unwrap()["position"], 1, "the place is kept");
}
