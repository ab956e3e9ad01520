//! The fuzz entry points under proptest, in every CI run (libFuzzer runs them longer: `fuzz/run`).

use anteroom::fuzzing;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn cookies_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        fuzzing::cookie(&data);
    }

    #[test]
    fn cookie_shaped_strings_never_verify(s in "1\\.[0-9a-f]{32}\\.[0-9]{1,12}\\.[0-9a-f]{8}\\.[A-Za-z0-9_-]{43}") {
        fuzzing::cookie(s.as_bytes());
    }

    #[test]
    fn routes_never_panic(s in "[a-zA-Z0-9./%_~:\\[\\]-]{0,40}\n?[a-zA-Z0-9/%.~_-]{0,60}") {
        fuzzing::route(s.as_bytes());
    }

    /// The attacker's goal as a property: no spelling built from the pieces origins read
    /// differently (`;params`, `..;`, `\\`, `%5C`, IIS's `%uXXXX`, NUL, case, trailing dots, dot segments
    /// resolved or kept, `%2F`, a script's path info, whitespace at a segment's ends, ASP.NET's
    /// cookieless values, any of them escaped once more for a hop that decodes the path first, host
    /// case, trailing dot and port) reaches an origin as a protected path from outside its room.
    #[test]
    fn no_spelling_walks_around_a_room(
        host in prop::sample::select(vec!["shop.test", "SHOP.Test.", "shop.test:8080", "shop.test.:80", "evil.test", "", "127.0.0.1:8080", "[::1]:80"]),
        segs in proptest::collection::vec(prop::sample::select(vec![
            "products", "PRODUCTS", "Products.", "products ", "orders", "ORDERS", "orders;x", "x", "..", ".", "..;", "..;x",
            "%2e%2e", "%2E%2e;", "products;jsessionid=1", "products%3Bx", "%70roducts", "products%00", "orders%00.css",
            "products\\1", "x%5C..%5Cproducts", "x\\..", "", "%00", "a%20", "products%20", "products%2e",
            "1%2F..%2F..%2Fx", "x%2f..", "index.php", "App.PHP", "index%2ephp", "a.phpx", "app.fcgi", "Default.ASPX", "x.cgi", "app.js", ".fcgi", "a.php", "setup.exe", "orders%0A", "products%0a",
            "orders%09", "%20products", "%0a", "products%0D;x", "%09..", "products\t",
            "%u002fproducts", "%u002e%u002e", "x%U005C..", "%u0070roducts", "orders%u002e", "%u00",
            "..%u003b", "products%u003bx", "orders%u0000.css", "index%u002ephp", "index.php\\orders",
            "%u0020orders", "products%u0009", "(S(x))", "(a(1)F(2))", "(S(a(b))", "_next", "data", "orders.json", "%28S%28x%29%29", "(S(x)).", "(S(x)",
            "%2570roducts", "%252e%252e", "%252E.", "orders%2500", "x%252f..", "x%255C..", "products%253Bx", "%2525", "%25", "%252", "%2570roducts%2520",
            "orders%3F", "products%23x", "%3f", "%25%36Frders", "%%370roducts", "%25%37%30roducts", "%25%32e%25%32e", "x%U005C..%3Fx",
            "주문", "%EC%A3%BC%EB%AC%B8", "%ec%a3%bc%eb%ac%b8", "%EC%A3%BC문", "주문%3B", "%25EC%25A3%25BC%25EB%25AC%25B8", "%25%45C%A3%BC%EB%AC%B8", "%%45C%A3%BC%EB%AC%B8", "%2%35EC%A3%BC%EB%AC%B8", "%u0025EC%u0025A3%u0025BC%u0025EB%u0025AC%u0025B8", "%u002570roducts", "q%u00253Ar", "x%u00252e%u00252e", "q:r", "q%3Ar", "q%3ar", "Q%3AR", "q%253Ar", "q:r;x",
        ]), 1..6),
    ) {
        let path = format!("/{}", segs.join("/"));
        fuzzing::route_property(host, &path);
    }

    #[test]
    fn route_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..120)) {
        fuzzing::route(&data);
    }

    #[test]
    fn configs_never_panic(s in "(\\[\\[?[a-z]{1,8}\\]\\]?\n|[a-z-]{1,16} = (\"[a-z0-9:./ ]{0,20}\"|[0-9-]{1,5}|\\[\\]|true)\n){0,12}") {
        fuzzing::config(s.as_bytes());
    }

    #[test]
    fn config_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        fuzzing::config(&data);
    }
}

/// The same for the whole request target: schemes with and without an authority,
/// targets without a leading `/`, absolute forms for this host and others, a route in the
/// query (CodeIgniter's `/?/orders`). Every combination, not a sample: the space is small
/// enough (about 30,000 targets), and a sample of 2,000 once let a finding through one CI
/// run in forty (`/index.php/?//%70roducts/orders`).
#[test]
fn no_request_target_walks_around_a_room() {
    const HEADS: &[&str] = &[
        "",
        "/",
        "a:",
        "a:/",
        "x:",
        "X-1.y+z:",
        "1a:",
        "http:",
        "http:/",
        "http://shop.test",
        "HTTP://Shop.Test.",
        "https://shop.test:8443",
        "http://evil.test",
        "ftp://shop.test",
        "a://shop.test",
        "//shop.test",
        "://shop.test",
        "http://shop.test\\evil.test",
        "*",
        "/?/",
        "/index.php?/",
        "/index.php/?/",
        "/?x/",
        "/a/?/",
        "/a?/",
        "/a/index.php?/",
    ];
    const SEGS: &[&str] = &[
        "products",
        "PRODUCTS",
        "orders",
        "orders;x",
        "x",
        "..",
        ".",
        "",
        "%70roducts",
        "products?q=1",
    ];
    let mut n = 0;
    for head in HEADS {
        let mut tails: Vec<String> = SEGS.iter().map(|s| s.to_string()).collect();
        for _ in 0..3 {
            for tail in &tails {
                fuzzing::route_target_property("shop.test", &format!("{head}{tail}"));
                n += 1;
            }
            tails = tails
                .iter()
                .flat_map(|t| SEGS.iter().map(move |s| format!("{t}/{s}")))
                .collect();
        }
    }
    assert_eq!(n, HEADS.len() * (10 + 100 + 1000));
}

#[test]
fn the_reference_config_survives_every_single_byte_deletion() {
    let text = include_str!("../conf/demo.toml");
    for i in (0..text.len()).step_by(7) {
        if text.is_char_boundary(i) && text.is_char_boundary(i + 1) {
            let mut t = text.to_string();
            t.remove(i);
            fuzzing::config(t.as_bytes());
        }
    }
}

/// Inputs libFuzzer once found (kept so they stay fixed).
#[test]
fn past_findings_stay_fixed() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fuzz");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("route") {
            fuzzing::route(&data);
        } else if name.starts_with("cookie") {
            fuzzing::cookie(&data);
        } else if name.starts_with("config") {
            fuzzing::config(&data);
        }
        n += 1;
    }
    assert!(n >= 2);
}
