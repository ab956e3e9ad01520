//! The built-in waiting page names its script and style as files of their own under
//! `/.anteroom/`, versioned by their bytes: the page a waiting visitor loads carries only its
//! figures, and the browser keeps the rest. The files are answered from memory, to anyone, with
//! no cookie and no place in line; a wrong version gets today's file uncached, a wrong room or
//! language a 404, and nothing under the prefix reaches the origin.

mod common;

use common::*;

fn config(origin: std::net::SocketAddr) -> String {
    format!(
        r#"{base}
[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 1
max-active = 1
"#,
        base = base_config(origin)
    )
}

/// The waiting page a new visitor gets in `lang` (the first visitor takes the only place).
async fn waiting_page(proxy: &Proxy, lang: &str) -> String {
    let resp = client()
        .get(proxy.url("/products"))
        .header("accept", "text/html")
        .header("accept-language", lang)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

/// The value of `attr="..."` on the first element that has it, with `&amp;` read as `&`.
fn attr(page: &str, attr: &str) -> String {
    let start = page.find(&format!("{attr}=\"")).expect(attr) + attr.len() + 2;
    let end = page[start..].find('"').unwrap() + start;
    page[start..end].replace("&amp;", "&")
}

async fn get(proxy: &Proxy, path: &str) -> reqwest::Response {
    client().get(proxy.url(path)).send().await.unwrap()
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_page_carries_its_figures_and_names_a_cached_script_and_style() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr));
    let first = get(&proxy, "/products").await;
    assert_eq!(first.status(), 200, "the first visitor is let in");
    let page = waiting_page(&proxy, "en").await;
    assert!(page.contains("data-state=\"full\"") || page.contains("data-state=\"waiting\""));
    assert!(
        !page.contains("function"),
        "no code in the page itself: {page}"
    );
    assert!(
        page.len() < 3 * 1024,
        "the page is its figures and words: {} bytes",
        page.len()
    );

    let script_url = attr(&page, "src");
    assert!(
        script_url.starts_with("/.anteroom/waiting.js?room=sale&lang=en&v="),
        "{script_url}"
    );
    let resp = get(&proxy, &script_url).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "content-type"),
        "text/javascript; charset=utf-8"
    );
    assert_eq!(
        header(&resp, "cache-control"),
        "public, max-age=31536000, immutable"
    );
    assert_eq!(header(&resp, "x-content-type-options"), "nosniff");
    assert!(
        set_cookies(&resp).is_empty(),
        "a file is no place in line: {:?}",
        set_cookies(&resp)
    );
    let en = resp.text().await.unwrap();
    assert!(en.starts_with("(function (T, room, url) {"), "{en}");
    assert!(en.contains("\"/.anteroom/status?room=sale\""));
    assert!(en.contains("document.currentScript"));

    let style_url = attr(&page, "href");
    assert!(
        style_url.starts_with("/.anteroom/waiting.css?v="),
        "{style_url}"
    );
    let resp = get(&proxy, &style_url).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "text/css; charset=utf-8");
    assert_eq!(
        header(&resp, "cache-control"),
        "public, max-age=31536000, immutable"
    );
    assert!(resp.text().await.unwrap().contains("--accent"));

    // The Korean page names the Korean words: another file, another version.
    let ko_page = waiting_page(&proxy, "ko-KR,ko").await;
    let ko_url = attr(&ko_page, "src");
    assert!(ko_url.contains("&lang=ko&v="), "{ko_url}");
    assert_ne!(
        ko_url[ko_url.len() - 12..],
        script_url[script_url.len() - 12..]
    );
    let ko = get(&proxy, &ko_url).await.text().await.unwrap();
    assert_ne!(ko, en);
    assert!(ko.contains("분"), "the Korean minutes: {ko}");

    // HEAD: the same header, no body.
    let head = client().head(proxy.url(&script_url)).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(header(&head, "content-length"), en.len().to_string());

    // Nothing here went to the origin: only the first visitor's page did.
    assert_eq!(origin.count("/"), 1, "{:?}", origin.requests());
}

#[tokio::test]
async fn a_wrong_version_room_language_or_method_is_answered_plainly() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr));
    // A page from before a reload names an old version: today's file, asked for again later.
    let resp = get(
        &proxy,
        "/.anteroom/waiting.js?room=sale&lang=en&v=000000000000",
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "cache-control"), "no-cache");
    assert!(resp.text().await.unwrap().contains("\"sale\""));
    for path in [
        "/.anteroom/waiting.js?room=nope&lang=en&v=1",
        "/.anteroom/waiting.js?room=sale&lang=xx",
        "/.anteroom/waiting.js?lang=en",
        "/.anteroom/waiting.js",
        "/.anteroom/other.js",
    ] {
        let resp = get(&proxy, path).await;
        assert_eq!(resp.status(), 404, "{path}");
        assert_eq!(header(&resp, "cache-control"), "no-store", "{path}");
    }
    let post = client()
        .post(proxy.url("/.anteroom/waiting.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    assert_eq!(header(&post, "allow"), "GET, HEAD");
    assert_eq!(origin.count("/"), 0, "{:?}", origin.requests());
}

/// Every answer of anteroom's own — the waiting page, the status JSON, a refusal — is read as
/// the type it says and may be framed by the shop's own pages only (found by review: none of
/// them said so, and a waiting page in another site's frame is a clickjacking surface).
#[tokio::test]
async fn our_own_answers_are_not_sniffed_or_framed_by_other_sites() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr));
    assert_eq!(
        get(&proxy, "/products").await.status(),
        200,
        "the only place"
    );
    for path in [
        "/products",
        "/.anteroom/status?room=sale",
        "/.anteroom/nothing-here",
    ] {
        let resp = get(&proxy, path).await;
        assert!(header(&resp, "x-origin").is_empty(), "{path}: ours");
        assert_eq!(header(&resp, "x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header(&resp, "x-frame-options"), "SAMEORIGIN", "{path}");
        assert_eq!(
            header(&resp, "content-security-policy"),
            "frame-ancestors 'self'",
            "{path}"
        );
    }
}
