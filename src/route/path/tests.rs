use super::*;

fn paths(raw: &str) -> Vec<String> {
    Readings::of(raw)
        .iter()
        .map(|r| r.path.to_string())
        .collect()
}

#[test]
fn prefixes_match_on_segment_boundaries() {
    assert!(path_covers("/cart", "/cart"));
    assert!(path_covers("/cart", "/cart/1"));
    assert!(!path_covers("/cart", "/cartoon"));
    assert!(path_covers("/", "/anything"));
    assert!(path_covers("/shop/", "/shop/x"));
    assert!(path_covers_folded("/cart", "/CART/1"));
    assert!(!path_covers_folded("/cart", "/CARTOON"));
    // Format suffixes (Rails, Spring) and ;params (Tomcat) end a name too.
    assert!(path_covers("/orders", "/orders.json"));
    assert!(path_covers("/orders", "/orders;jsessionid=1"));
    assert!(path_covers_folded("/orders", "/ORDERS.XML"));
}

#[test]
fn normalisation_defeats_traversal_and_encoding() {
    assert_eq!(normalize_path("/products/1"), "/products/1");
    assert_eq!(normalize_path("/x/../orders"), "/orders");
    assert_eq!(normalize_path("/%6Frders"), "/orders");
    assert_eq!(normalize_path("//orders"), "/orders");
    assert_eq!(normalize_path("/./orders/"), "/orders/");
    assert_eq!(normalize_path("/../../"), "/");
    // A `%` that starts no escape is the character (its plain form escapes it).
    assert_eq!(normalize_path("/a%2"), "/a%252");
    assert_eq!(normalize_path("/a%20b"), "/a%20b");
    assert_eq!(normalize_path("/%d1%82"), "/%D1%82");
    assert_eq!(normalize_path("/.anteroom/status"), "/.anteroom/status");
    // Decoded once, as an origin decodes: found by fuzz/route.
    // (the literal `%333`).
    assert_eq!(normalize_path("%%3333"), "/%25333");
}

#[test]
fn a_clean_path_has_one_borrowed_reading() {
    let r = Readings::of("/products/1");
    assert_eq!(r.len(), 1);
    assert!(matches!(
        r.iter().next().map(|r| &r.path),
        Some(Cow::Borrowed(_))
    ));
}

#[test]
fn each_origin_family_is_read() {
    // Tomcat / Spring: ;params per segment, ..; as ..
    assert!(paths("/products;jsessionid=1/2").contains(&"/products/2".to_string()));
    assert!(paths("/x/..;/products/1").contains(&"/products/1".to_string()));
    assert!(paths("/products%3Bx/1").contains(&"/products/1".to_string()));
    // IIS: backslashes, %5C, trailing dots and spaces
    assert!(paths("/products\\1").contains(&"/products/1".to_string()));
    assert!(paths("/x%5C..%5Cproducts").contains(&"/products".to_string()));
    assert!(paths("/products./1").contains(&"/products/1".to_string()));
    assert!(paths("/products%20/1").contains(&"/products/1".to_string()));
    // NUL ends the path
    assert!(paths("/products%00.css").contains(&"/products".to_string()));
    // Behind IIS: PHP's path info and Spring's trimming of what IIS read
    assert!(paths("/index.php\\products/1").contains(&"/products/1".to_string()));
    assert!(paths("/index%u002ephp/orders").contains(&"/orders".to_string()));
    assert!(paths("/%u0020orders").contains(&"/orders".to_string()));
    // An old WSGI server: `//host/path` is `/path`; without a path after the host, `/`
    assert!(paths("//x/orders/1").contains(&"/orders/1".to_string()));
    assert!(paths("//x;y/orders").contains(&"/orders".to_string()));
    assert_eq!(
        paths("//orders"),
        ["/orders"],
        "no path after the host: not read so"
    );
    assert_eq!(Readings::of("//x/orders").standard(), "/x/orders");
    // Case, also combined with another family
    let r = Readings::of("/PRODUCTS;x\\1");
    assert!(
        r.iter().any(|r| r.folded && r.path == "/products/1"),
        "{r:?}"
    );
    // The standard reading comes first and is the path as sent, normalised.
    assert_eq!(Readings::of("/a/../B;x").standard(), "/B;x");
}

#[test]
fn origins_that_route_the_path_as_sent_are_read() {
    let additive = |raw: &str, want: &str| {
        let r = Readings::of(raw);
        assert!(
            r.iter().any(|r| r.additive && r.path == want),
            "{raw}: {r:?}"
        );
    };
    // Werkzeug, Express, Symfony: dot segments kept, `%2F` decoded (or not: the prefix
    // is the same either way).
    additive("/products/..", "/products/..");
    additive("/products/%2e%2E", "/products/..");
    additive("/products/1%2F..%2F..%2Fx", "/products/1/../../x");
    additive("/products/.%2e/x", "/products/../x");
    // A PHP front controller's path info, also with dots kept.
    additive("/index.php/products/1", "/products/1");
    additive("/shop/App.PHP/orders", "/orders");
    additive("/index%2ephp/products", "/products");
    additive("/index.php/products/..", "/products/..");
    // Found by the property: the path info resolved on its own.
    additive("/a%20/index.php/../%70roducts", "/products");
    assert!(Readings::of("/index.php/products").iter().any(|r| r.script));
    // Spring with trimTokens: a segment's leading and trailing characters up to U+0020.
    additive("/orders%09", "/orders");
    additive("/%20orders/1", "/orders/1");
    additive("/orders%0a;x", "/orders");
    additive("/orders%0D%20/%09", "/orders/");
    additive("/x/%20..%20/orders", "/orders");
    // No path after the script, or no script: no such reading.
    for raw in [
        "/index.php",
        "/a.php",
        "/php/x",
        "/x.phpx/y",
        "/products/a..b",
    ] {
        let r = Readings::of(raw);
        assert!(!r.iter().any(|r| r.additive), "{raw}: {r:?}");
    }
    assert_eq!(path_info("/index.php/"), Some("/"));
    assert_eq!(path_info("/index.php"), None);
    assert_eq!(path_info("/.php/x"), Some("/x"), "an extension alone too");
    // Front controllers other than PHP's (found by review: `.fcgi` was not read).
    for (raw, info) in [
        ("/app.fcgi/orders", "/orders"),
        ("/cgi-bin/shop.CGI/orders/1", "/orders/1"),
        ("/app.wsgi/orders", "/orders"),
        ("/Default.aspx/orders", "/orders"),
        ("/scripts/shop.dll/orders", "/orders"),
    ] {
        additive(raw, info);
    }
    // Every script in the path is read: a directory may carry a script's name.
    let infos: Vec<&str> = path_infos("/dir.cgi/index.php/orders").collect();
    assert_eq!(infos, ["/index.php/orders", "/orders"]);
    additive("/dir.cgi/index.php/orders", "/orders");
    // The first scripts and the last (nginx's greedy split: re-review).
    let infos: Vec<&str> = path_infos("/a.php/b.php/c.php/d.php/e.fcgi/x").collect();
    assert_eq!(
        infos,
        [
            "/b.php/c.php/d.php/e.fcgi/x",
            "/c.php/d.php/e.fcgi/x",
            "/d.php/e.fcgi/x",
            "/x"
        ]
    );
    additive("/a.fcgi/b.fcgi/c.fcgi/d.fcgi/app.fcgi/orders", "/orders");
    // A script's extension alone is a script to nginx's split.
    additive("/.fcgi/orders", "/orders");
    // A newline at the end of a script's path info (PCRE's `$` before it: re-review).
    additive("/index.php/orders%0A", "/orders");
    additive("/a.php/b.php/c.php/d.php/e.fcgi/orders%0a", "/orders");
    // And with dot segments kept after the script (found by the property test).
    additive("/a%20/index.php/../orders%0A", "/orders");
    for raw in [
        "/app.js/x",
        "/a.pyc/x",
        "/x.aspxx/y",
        "/orders.json",
        "/files/setup.exe/download",
        "/docs/setup.py/x",
        "/brands/shop.pl/sale",
    ] {
        assert_eq!(path_info(raw), None, "{raw}");
    }
    // A path read the same way by every origin stays one borrowed reading.
    assert_eq!(Readings::of("/products/a.png").len(), 1);
}

#[test]
fn exempting_needs_every_reading() {
    let r = Readings::of("/feed.xml;/../products");
    assert!(r.any_covered_by("/products"));
    // A prefix written with capitals holds every case of it, as a room's does.
    for p in ["/orders", "/ORDERS", "/Orders/1", "/oRdErS;x"] {
        assert!(Readings::of(p).any_covered_by("/Orders"), "{p}");
    }
    assert!(!Readings::of("/ordersx").any_covered_by("/Orders"));
    assert!(!Readings::of("/Orders").all_covered_by("/orders/1"));
    assert!(!r.all_covered_by("/feed.xml"));
    assert!(Readings::of("/feed.xml").all_covered_by("/feed.xml"));
}

#[test]
fn a_route_in_the_query_is_read_where_codeigniter_reads_it() {
    let read = |path: &str, query: &str| {
        let mut r = Readings::of(path);
        r.add_query_route(path, Some(query));
        r.iter()
            .map(|r| (r.path.to_string(), r.additive))
            .collect::<Vec<_>>()
    };
    let has = |path: &str, query: &str, want: &str| {
        let got = read(path, query);
        assert!(
            got.iter().any(|(p, additive)| p == want && *additive),
            "{path}?{query}: {got:?}"
        );
    };
    has("/", "/orders", "/orders");
    has("/index.php", "/orders", "/orders");
    has("/index.php/", "/x/../orders?a=1", "/orders");
    has("/shop/", "/orders", "/shop/orders");
    has("/shop", "/orders", "/shop/orders");
    has("/shop/index.php/", "/orders", "/shop/orders");
    has("/index.php//", "/orders", "/orders");
    has("/", "%2Forders", "/orders");
    // Not a route: a query that does not start with `/`.
    for (path, query) in [
        ("/", "orders"),
        ("/products", "x=/orders"),
        ("/a.css", "?/orders"),
    ] {
        assert_eq!(read(path, query).len(), 1, "{path}?{query}");
    }
}

#[test]
fn a_next_js_data_request_is_read_as_its_page() {
    let additive = |raw: &str, want: &str| {
        let r = Readings::of(raw);
        assert!(
            r.iter().any(|r| r.path == want && r.additive),
            "{raw}: {r:?}"
        );
    };
    additive("/_next/data/b1d-ID/products/1.json", "/products/1");
    additive("/_next/data/b1d-ID/index.json", "/");
    additive("/shop/_next/data/x/orders.json", "/shop/orders");
    additive("/_next/data/x/a/../orders.json", "/orders");
    assert_eq!(Readings::of("/_next/data/x/a.js").len(), 1);
    assert_eq!(Readings::of("/_next/static/x/orders.json").len(), 1);
}

/// The one-pass test answers what the four `contains`/`starts_with` it replaced answered, for
/// every path of up to six bytes over the bytes that matter (and one that does not).
#[test]
fn needing_normalizing_is_what_the_substring_tests_said() {
    let alphabet = [b'/', b'.', b'%', b'a'];
    let mut paths = vec![String::new()];
    for _ in 0..6 {
        let longer: Vec<String> = paths
            .iter()
            .filter(|p| p.len() == paths.last().map_or(0, String::len))
            .flat_map(|p| alphabet.iter().map(move |&c| format!("{p}{}", c as char)))
            .collect();
        paths.extend(longer);
    }
    assert_eq!(paths.len(), (0..=6).map(|n| 4usize.pow(n)).sum::<usize>());
    for p in &paths {
        let was = p.contains('%') || p.contains("//") || p.contains("/.") || !p.starts_with('/');
        assert_eq!(needs_normalizing(p), was, "{p:?}");
    }
}

proptest::proptest! {
    /// The `/`-by-`/` search for `/_next/data/` finds what `str::find` found, in paths built
    /// from its pieces (and a multi-byte letter, so a `/` after one is tried too).
    #[test]
    fn next_data_is_found_where_str_find_finds_it(
        parts in proptest::collection::vec(
            proptest::sample::select(vec!["/", "_next", "/data", "data/", "/_next/data/", "x", "é", ".json", "index"]),
            0..10,
        )
    ) {
        let path: String = parts.concat();
        proptest::prop_assert_eq!(next_data_at(&path), path.find(NEXT_DATA));
    }
}
