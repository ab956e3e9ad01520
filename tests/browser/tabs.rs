use super::*;

/// A tab that is hidden and throttled keeps its place, and polls at once when shown again.
///
/// Scaled down from the real thing so that it stays fast: the page polls every second, and a
/// hidden tab's timers run every 4 s, as Chrome runs them once a minute after five minutes
/// hidden (`throttled-poll = "4s"`; `abandon-after` leaves room for two such gaps, as the
/// default 5 minutes does for two throttled minutes — the old default of 60 s did not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_throttled_tab_keeps_its_place_and_polls_when_shown() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        r#"{base}
[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 10
max-active = 1
tick = "100ms"
poll = [ {{ every = "1s" }} ]
throttled-poll = "4s"
abandon-after = "10s"
"#,
        base = base_config(origin.addr)
    ));
    let status = proxy.url("/.anteroom/status?room=sale");
    // The holder takes the only slot; two wait ahead of the browser, two will wait behind it,
    // and all four keep polling, so only the browser's own silence could cost its place.
    let mut others: Vec<Jar> = Vec::new();
    for _ in 0..3 {
        let mut jar = Jar::default();
        jar.absorb(&client().get(&status).send().await.unwrap());
        others.push(jar);
    }
    let keep_polling = |jars: Vec<Jar>, status: String| {
        tokio::spawn(async move {
            loop {
                for j in &jars {
                    let _ = client()
                        .get(&status)
                        .header("cookie", j.header())
                        .send()
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
        })
    };
    let ahead = keep_polling(others.split_off(1), status.clone());
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 900, true, "en-US,en").await;
    browser.goto(&proxy.url("/products")).await;
    let position = "var e = document.getElementById('position'); return e ? e.textContent : null";
    assert_eq!(browser.run(position).await, "3", "{}", browser.text().await);
    let mut behind = Vec::new();
    for expected in 4..=5u64 {
        let mut jar = Jar::default();
        let resp = client().get(&status).send().await.unwrap();
        jar.absorb(&resp);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["position"], expected);
        behind.push(jar);
    }
    let behind = keep_polling(behind, status.clone());

    // Hidden, and its timers throttled to one every 4 s.
    browser
        .run(
            "window.__vis = 'hidden'; window.__st = window.setTimeout;
             window.setTimeout = function (f, ms) { return window.__st(f, Math.max(ms, 4000)); };
             Object.defineProperty(document, 'visibilityState', { configurable: true, get: function () { return window.__vis; } });
             Object.defineProperty(document, 'hidden', { configurable: true, get: function () { return window.__vis !== 'visible'; } });
             document.dispatchEvent(new Event('visibilitychange')); return true",
        )
        .await;
    let hidden_at = Instant::now();
    let hidden_from = polls(&browser).await;
    // Three throttled gaps; then wait for a throttled poll, so the next is about 4 s away.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let n = polls(&browser).await;
    eventually(Duration::from_secs(6), "a throttled poll", || {
        let b = &browser;
        async move { (polls(b).await > n).then_some(()) }
    })
    .await;
    let before = polls(&browser).await;
    let throttled = before - hidden_from;
    let hidden_secs = hidden_at.elapsed().as_secs_f64();
    assert!(
        throttled >= 2 && (throttled as f64) <= hidden_secs / 4.0 + 2.0,
        "{throttled} polls in {hidden_secs:.1} s hidden: throttled to one every 4 s"
    );
    assert_eq!(
        browser.run(position).await,
        "3",
        "the place is kept while hidden"
    );

    // Shown again 1.5 s after that poll: it polls at once, not when its throttled timer fires.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(polls(&browser).await, before, "no poll yet");
    browser
        .run(
            "window.setTimeout = window.__st; window.__vis = 'visible';
             document.dispatchEvent(new Event('visibilitychange')); return true",
        )
        .await;
    let shown = Instant::now();
    eventually(Duration::from_secs(2), "a poll on becoming visible", || {
        let b = &browser;
        async move { (polls(b).await > before).then_some(()) }
    })
    .await;
    assert!(
        shown.elapsed() < Duration::from_millis(1500),
        "polled {:?} after being shown, before the throttled timer",
        shown.elapsed()
    );
    assert_eq!(browser.run(position).await, "3", "still third in line");
    let v: Value = client()
        .get(&status)
        .header("cookie", others[0].header())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        v["state"], "admitted",
        "the holder still holds the slot: {v}"
    );
    let errors = browser.severe_logs().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    ahead.abort();
    behind.abort();
    browser.close().await;
}

/// At the start of a sale nothing says how fast the line will really move: the page tells the
/// wait as a range, says it is an estimate, and keeps doing so as its script polls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poor_estimate_is_told_as_a_range_and_called_an_estimate() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        r#"{base}
[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 1
max-active = 1000
tick = "100ms"
"#,
        base = base_config(origin.addr)
    ));
    // Sixty ahead at one a second: about a minute, from 0.7× to 1.5× of it.
    for _ in 0..60 {
        client()
            .get(proxy.url("/.anteroom/status?room=sale"))
            .send()
            .await
            .unwrap();
    }
    let driver = Driver::start().await;
    let browser = driver.browser(1280, 900, true, "en-US,en").await;
    browser.goto(&proxy.url("/products")).await;
    let told = || async {
        browser
            .run(
                "var e = document.getElementById('eta'), n = document.getElementById('eta-note'); \
                 return [e ? e.textContent : '', n ? !n.hidden : false, n ? n.textContent : ''];",
            )
            .await
    };
    let first = told().await;
    assert_eq!(first[0], "1 to 2 minutes", "{first}");
    assert_eq!(first[1], true, "the note is shown: {first}");
    assert!(
        first[2].as_str().unwrap_or("").contains("estimate"),
        "{first}"
    );
    browser.screenshot("waiting-range.png").await;
    // The script's own wording after a poll is the server's.
    let deadline = Instant::now() + Duration::from_secs(15);
    while polls(&browser).await < 2 {
        assert!(Instant::now() < deadline, "the page did not poll");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let later = told().await;
    let words = later[0].as_str().unwrap_or("");
    assert!(
        words.contains(" to ") && words.ends_with("minutes") || words == "about a minute",
        "{later}"
    );
    assert_eq!(
        later[1],
        words.contains(" to "),
        "note shown with a range: {later}"
    );
    let errors = browser.severe_logs().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    browser.close().await;
}
