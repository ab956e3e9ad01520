//! Entry points for fuzzing the parsers that face the internet or the operator: the admission
//! cookie, route matching with path normalisation, and the config file. Each takes arbitrary
//! bytes and must never panic; `fuzz/` runs them under libFuzzer (`fuzz/run`), and
//! `tests/fuzz_properties.rs` runs them under proptest in every CI run.

use std::path::Path;

use crate::cookie::{self, CookieKey};
use crate::route::{self, HostPattern, Router};

/// Cookie parsing and verification on arbitrary input: never panics, and accepts only values
/// this key signed.
pub fn cookie(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(key) = CookieKey::new(b"fuzz-key-fuzz-key-fuzz-key-fuzz-key!") else {
        return;
    };
    let keys = [key];
    if let Some(v) = cookie::verify(&keys, "sale", text, 1) {
        // Anything accepted must be what signing produces.
        let again = cookie::sign(&keys, "sale", v.vid, v.expires);
        assert_eq!(
            again.as_deref(),
            Some(text),
            "accepted a value we did not sign"
        );
    }
    let _ = cookie::find([data], "anteroom_sale");
    let _ = cookie::without_ours(data);
}

/// Path normalisation and routing on arbitrary input: never panics, and the normalised path
/// has no dot segments or empty segments left to walk around a room with. (It is not
/// idempotent, on purpose: `%%33` decodes once to `%3`, as an origin decodes it once.)
pub fn route(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (host, path) = text.split_once('\n').unwrap_or(("shop.test", text));
    let norm = route::normalize_path(path);
    assert!(norm.starts_with('/'), "{path:?} -> {norm:?}");
    assert!(!norm.contains("//"), "{path:?} -> {norm:?}");
    assert!(
        norm.split('/').all(|s| s != "." && s != ".."),
        "{path:?} -> {norm:?}"
    );
    let hosts = [HostPattern::Any];
    let paths = ["/products".to_string(), "/".to_string()];
    let exact = [HostPattern::parse("shop.test").unwrap_or(HostPattern::Any)];
    let orders = ["/orders".to_string()];
    let router = Router::new([(&hosts[..], &paths[..]), (&exact[..], &orders[..])]);
    let _ = router.route(route::host_without_port(host), &norm);
    let _ = HostPattern::parse(host);
}

/// Config parsing on arbitrary input: never panics; every error names a position in the file.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = crate::config::parse(text, "fuzz.toml", Path::new("/nonexistent")) {
        for e in errors.0 {
            assert!(e.line >= 1 && e.col >= 1, "{e}");
        }
    }
}
