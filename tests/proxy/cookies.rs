use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_cookie_opens_the_origin() {
    let (origin, proxy) = setup("").await;
    let jar = admitted_visitor(&proxy).await;
    for path in ["/products/7?color=red", "/cart", "/orders/history"] {
        let resp = get(&proxy, path, &jar, None).await;
        assert_eq!(resp.status(), 200, "{path}");
        assert!(
            set_cookies(&resp)
                .iter()
                .all(|(k, _, _)| k != "anteroom_vid"),
            "no new identity"
        );
        assert_eq!(resp.text().await.unwrap(), format!("origin GET {path}"));
    }
    let last = origin.requests().pop().unwrap();
    assert_eq!(
        last.header("cookie").as_deref(),
        Some("shop_session=abc"),
        "the origin sees its own cookies, never ours"
    );
    let (_, _, attrs) = set_cookies(&get(&proxy, "/", &Jar::default(), None).await)
        .into_iter()
        .find(|(k, _, _)| k == "shop_session")
        .unwrap();
    assert!(attrs.contains("Path=/"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_whose_turn_came_is_proxied_at_once_with_the_cookie() {
    let (_origin, proxy) = setup("").await;
    let holder = admitted_visitor(&proxy).await;
    let mut jar = Jar::default();
    jar.absorb(&get(&proxy, "/products", &jar, None).await);
    client()
        .post(proxy.url("/orders"))
        .header("cookie", holder.header())
        .send()
        .await
        .unwrap();
    // Reloading the protected page (the no-JavaScript path) lets the visitor in with the cookie.
    let text = eventually(Duration::from_secs(10), "admitted on reload", || {
        let (proxy, jar) = (&proxy, &jar);
        async move {
            let resp = get(proxy, "/products", jar, None).await;
            let got = set_cookies(&resp)
                .iter()
                .any(|(k, _, _)| k == "anteroom_sale");
            let text = resp.text().await.unwrap();
            (got && text == "origin GET /products").then_some(text)
        }
    })
    .await;
    assert_eq!(text, "origin GET /products");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cookies_are_no_cookies() {
    let (origin, proxy) = setup("").await;
    let _holder = admitted_visitor(&proxy).await;
    let key = CookieKey::new(KEY.as_bytes()).unwrap();
    let other = CookieKey::new(OTHER_KEY.as_bytes()).unwrap();
    let vid = VisitorId::random();
    let valid = cookie::sign(std::slice::from_ref(&key), "sale", vid, now() + 600).unwrap();
    let mut tampered = valid.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let cases = [
        ("tampered", String::from_utf8(tampered).unwrap()),
        (
            "expired",
            cookie::sign(std::slice::from_ref(&key), "sale", vid, now() - 10).unwrap(),
        ),
        (
            "cross-room",
            cookie::sign(std::slice::from_ref(&key), "vip", vid, now() + 600).unwrap(),
        ),
        (
            "other key",
            cookie::sign(&[other], "sale", vid, now() + 600).unwrap(),
        ),
        ("truncated", valid[..valid.len() - 5].to_string()),
        ("garbage", "not-a-cookie".to_string()),
        ("oversized", "1.".to_string() + &"a".repeat(4000)),
        (
            "forged expiry",
            valid.replacen(
                &format!(".{}.", now() + 600),
                &format!(".{}.", now() + 99_999),
                1,
            ),
        ),
    ];
    let before = origin.requests().len();
    for (what, value) in cases {
        let mut jar = Jar::default();
        jar.set("anteroom_sale", &value);
        let resp = get(&proxy, "/products", &jar, Some("application/json")).await;
        assert_eq!(resp.status(), 200, "{what}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["state"], "waiting", "{what}: {v}");
    }
    assert_eq!(
        origin.requests().len(),
        before,
        "no bad cookie reached the origin"
    );
}

/// A browser sends every cookie whose domain and path match: one of our names set by a sibling
/// site for the parent domain, or for a longer path (sent first), comes beside ours. It hides
/// neither the admission nor the visitor's place (found by review: the first value of a name
/// was the only one read, and a bad one sent the admitted visitor back to the line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookie_tossed_in_beside_ours_hides_neither_admission_nor_place() {
    let (origin, proxy) = setup("").await;
    let holder = admitted_visitor(&proxy).await;
    let admission = holder.get("anteroom_sale").unwrap().to_string();
    // Without the visitor-id cookie: the store, which knows the holder by it, is no help.
    for tossed in ["bogus", "1.x.y.z.w", &admission[..admission.len() - 2]] {
        let header = format!("anteroom_sale={tossed}; anteroom_sale={admission}");
        let resp = client()
            .get(proxy.url("/products/1"))
            .header("cookie", header)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{tossed}");
        assert_eq!(
            resp.text().await.unwrap(),
            "origin GET /products/1",
            "{tossed}"
        );
    }
    // The cookies are split over two header lines too (HTTP/2 sends them so).
    let resp = client()
        .get(proxy.url("/products/2"))
        .header("cookie", "anteroom_sale=bogus")
        .header("cookie", format!("theme=dark; anteroom_sale={admission}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "origin GET /products/2");

    // A visitor in line: a second visitor id sent before theirs does not move them.
    let mut jar = Jar::default();
    let resp = get(&proxy, "/products", &jar, Some("application/json")).await;
    jar.absorb(&resp);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["state"], "waiting", "{v}");
    let place = v["position"].clone();
    let ticket = jar
        .get("anteroom_q.sale")
        .expect("a queue ticket")
        .to_string();
    let mine = jar.get("anteroom_vid").unwrap().to_string();
    let other = VisitorId::random().to_string();
    // Someone behind them, whose id and ticket a sibling site tosses in first.
    let mut behind = Jar::default();
    let resp = get(&proxy, "/products", &behind, Some("application/json")).await;
    behind.absorb(&resp);
    let waiting = resp.json::<Value>().await.unwrap()["waiting"].clone();
    let (their_id, their_ticket) = (
        behind.get("anteroom_vid").unwrap().to_string(),
        behind.get("anteroom_q.sale").unwrap().to_string(),
    );
    for (header, what) in [
        (
            format!("anteroom_vid={their_id}; anteroom_q.sale={their_ticket}; anteroom_vid={mine}; anteroom_q.sale={ticket}"),
            "a later visitor's id and ticket first",
        ),
        (
            format!("anteroom_vid={other}; anteroom_vid={mine}; anteroom_q.sale={ticket}"),
            "another id first",
        ),
        (
            format!("anteroom_q.sale=x; anteroom_vid={mine}; anteroom_q.sale={ticket}"),
            "a bad ticket first",
        ),
    ] {
        let resp = client()
            .get(proxy.url("/products"))
            .header("cookie", &header)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        // The id cookie given again is theirs, never the one tossed in.
        let given = set_cookies(&resp)
            .into_iter()
            .find(|(k, _, _)| k == "anteroom_vid")
            .map(|(_, v, _)| v);
        assert!(given.is_none_or(|g| g == mine), "{what}: another id set");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(
            (&v["state"], &v["position"], &v["waiting"]),
            (&Value::from("waiting"), &place, &waiting),
            "{what}: {v}"
        );
    }
    drop(origin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_reaches_the_origin_intact_for_an_admitted_visitor() {
    let (origin, proxy) = setup("").await;
    let jar = admitted_visitor(&proxy).await;
    let body: Vec<u8> = (0..1024 * 1024u32).map(|i| (i * 31 % 256) as u8).collect();
    let resp = client()
        .put(proxy.url("/cart/echo"))
        .header("cookie", jar.header())
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.bytes().await.unwrap().to_vec(), body);
    let seen = origin.requests().pop().unwrap();
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.body, body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_consumes_let_exactly_one_through() {
    let (origin, proxy) = setup("").await;
    let jar = admitted_visitor(&proxy).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (url, cookie) = (proxy.url("/orders"), jar.header());
        tasks.push(tokio::spawn(async move {
            client()
                .post(url)
                .header("cookie", cookie)
                .body(format!("order {i}"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses.sort();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        19,
        "{statuses:?}"
    );
    assert_eq!(origin.count("/orders"), 1);

    // Replaying the used admission gets 409 too, as a page: "on its way" while the winner's
    // confirm (sent in the background after its answer) is still going to the store, "already
    // been used" once it is there.
    eventually(Duration::from_secs(5), "the order confirmed", || async {
        let resp = client()
            .post(proxy.url("/orders"))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 409);
        let text = resp.text().await.unwrap();
        assert!(
            text.contains("already been used") || text.contains("on its way"),
            "{text}"
        );
        text.contains("already been used").then_some(())
    })
    .await;
    assert_eq!(origin.count("/orders"), 1);
}

/// A used admission tossed in first by a sibling site (a cookie set for the parent domain and
/// the order's longer path) does not refuse the visitor's own order: the store finds it used,
/// and the next admission the request carries orders (found by review: every order of the
/// visitor was refused "already used").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_admission_tossed_in_first_does_not_refuse_the_visitors_order() {
    let (origin, proxy) = setup("").await;
    let spent = admitted_visitor(&proxy).await;
    let order = |cookie: String, body: &'static str| {
        let url = proxy.url("/orders");
        async move {
            client()
                .post(url)
                .header("cookie", cookie)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(order(spent.header(), "theirs").await, 200);
    let used = spent.get("anteroom_sale").unwrap().to_string();
    let victim = admitted_visitor(&proxy).await;
    let own = victim.get("anteroom_sale").unwrap().to_string();
    let vid = victim.get("anteroom_vid").unwrap().to_string();
    let header = format!("anteroom_sale={used}; anteroom_sale={own}; anteroom_vid={vid}");
    assert_eq!(order(header.clone(), "mine").await, 200);
    assert_eq!(origin.count("/orders"), 2, "the visitor's order placed");
    // Both admissions are used now: the next order is refused.
    assert_eq!(order(header, "again").await, 409);
    assert_eq!(origin.count("/orders"), 2);
}

/// A request that carries admissions of two visitors (a sibling site's tossed in first) sets
/// no admission cookie: the renewal of the tossed one would replace the visitor's own in the
/// browser (found by review: after it, the visitor's browser held only the sibling's
/// admission, and its one order left every such visitor "already used").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admissions_of_two_visitors_in_one_request_set_no_admission_cookie() {
    let (_origin, proxy) = setup("").await;
    // Two visitors let in through the fast path of `vip` (their cookies renewed by their
    // first request, as a fast-path cookie lives `claim-ttl` only).
    let admitted = || async {
        let mut jar = Jar::default();
        let resp = get(&proxy, "/vip", &jar, None).await;
        jar.absorb(&resp);
        jar.get("anteroom_vip").unwrap().to_string()
    };
    let (tossed, own) = (admitted().await, admitted().await);
    let sets = |resp: &reqwest::Response| {
        set_cookies(resp)
            .into_iter()
            .filter(|(k, _, _)| k == "anteroom_vip")
            .count()
    };
    let visit = |cookie: String| {
        let url = proxy.url("/vip/1");
        async move {
            client()
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
        }
    };
    let resp = visit(format!("anteroom_vip={tossed}; anteroom_vip={own}")).await;
    assert_eq!(sets(&resp), 0, "{:?}", set_cookies(&resp));
    assert_eq!(resp.text().await.unwrap(), "origin GET /vip/1");
    // The tossed admission alone is renewed as ever (the control).
    let resp = visit(format!("anteroom_vip={tossed}")).await;
    assert_eq!(sets(&resp), 1, "{:?}", set_cookies(&resp));
}

/// The same when the admission tossed in first has an order on its way (its holder's, on
/// another instance or tab): the next admission the request carries orders, not "on its way"
/// (found by re-review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_tossed_in_first_with_an_order_on_its_way_does_not_hold_the_visitors() {
    let shop = "\n[[room]]\nname = \"shop\"\npaths = [\"/shop\"]\nadmit-per-second = 50\nmax-active = 100\nconsume = [\"POST /shop/orders\"]\n";
    let (origin, proxy) = setup(shop).await;
    let admitted = || async {
        let mut jar = Jar::default();
        let resp = get(&proxy, "/shop", &jar, None).await;
        jar.absorb(&resp);
        jar.get("anteroom_shop").unwrap().to_string()
    };
    let (theirs, own) = (admitted().await, admitted().await);
    let order = |cookie: String| {
        let url = proxy.url("/shop/orders");
        tokio::spawn(async move {
            client()
                .post(url)
                .header("cookie", cookie)
                .body("order")
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    origin.set_delay(1500);
    let on_its_way = order(format!("anteroom_shop={theirs}"));
    eventually(
        Duration::from_secs(5),
        "their order at the shop",
        || async { (origin.count("/shop/orders") == 1).then_some(()) },
    )
    .await;
    let mine = order(format!("anteroom_shop={theirs}; anteroom_shop={own}"));
    assert_eq!(mine.await.unwrap(), 200, "the visitor's own order");
    assert_eq!(on_its_way.await.unwrap(), 200);
    assert_eq!(origin.count("/shop/orders"), 2);
}
