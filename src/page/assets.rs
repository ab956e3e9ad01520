//! The built-in waiting page's script and style, served as files of their own under
//! `/.anteroom/` so that the page a waiting visitor loads again and again carries only its
//! figures: the browser keeps these (their URLs name a version of their bytes, and a version is
//! cached for a year), and a crowd's page views cost the instance a third of the bytes.
//!
//! The style is one file for every room. The script is one file per room and language: the
//! constant code of `templates/waiting.js`, given the room's words in that language, its name and
//! its status URL. A page names its script's version; a request for another version (a page
//! from before a reload) gets today's file, not cached.

use std::collections::BTreeMap;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::texts::TextSet;

/// The script's constant code (see the file's head for how it is wrapped).
pub const SCRIPT: &str = include_str!("../../templates/waiting.js");
/// How every page that polls says the browser refuses cookies, when its poll is told so (put
/// after the waiting page's script, inside its wrapper; before the challenge's solver; in the
/// countdown's script).
pub const COOKIES: &str = include_str!("../../templates/cookies.js");
/// The built-in page's style.
pub const STYLE: &str = include_str!("../../templates/waiting.css");

pub const SCRIPT_PATH: &str = "/.anteroom/waiting.js";
pub const STYLE_PATH: &str = "/.anteroom/waiting.css";

pub const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
pub const CSS: &str = "text/css; charset=utf-8";

/// One file and the version its URL names.
#[derive(Debug, Clone)]
pub struct Asset {
    pub body: Bytes,
    /// The first 12 hex digits of the SHA-256 of `body`.
    pub version: String,
    pub content_type: &'static str,
}

impl Asset {
    fn new(body: String, content_type: &'static str) -> Self {
        let digest = Sha256::digest(body.as_bytes());
        let version = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        Self {
            body: Bytes::from(body),
            version,
            content_type,
        }
    }
}

/// The script of one room in one language.
pub fn script(room: &str, status_url: &str, t: &TextSet) -> Asset {
    let body = format!(
        "(function (T, room, url) {{\n{SCRIPT}{COOKIES}}})({}, {}, {});\n",
        js(t),
        js(room),
        js(status_url),
    );
    Asset::new(body, JAVASCRIPT)
}

/// The style, the same for every room.
pub fn style() -> Asset {
    Asset::new(STYLE.to_string(), CSS)
}

/// Where a page finds its room's script in `lang`. Room and language are percent-encoded and
/// the version is hex: the URL has no character HTML needs escaped but `&` (the built-in
/// template writes it as `&amp;`, and the URL as it is otherwise).
pub fn script_url(room: &str, lang: &str, a: &Asset) -> String {
    format!(
        "{SCRIPT_PATH}?room={}&lang={}&v={}",
        query_value(room),
        query_value(lang),
        a.version
    )
}

/// Where a page finds the style.
pub fn style_url(a: &Asset) -> String {
    format!("{STYLE_PATH}?v={}", a.version)
}

/// `s` percent-encoded for a query value (room names and language tags are plain already; this
/// keeps a URL well formed whatever a configuration holds).
fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Every asset of a loaded configuration: the style and, per room index and language, the
/// script (also for a room with its own template, which may name them: `script_url`,
/// `style_url`).
#[derive(Debug, Clone)]
pub struct Assets {
    pub style: Asset,
    pub scripts: Vec<BTreeMap<String, Asset>>,
    /// Per room index, its name (a request names the room; the index is found here).
    rooms: Vec<String>,
}

/// What a request under `/.anteroom/` for a file gets.
#[derive(Debug, PartialEq, Eq)]
pub enum Found<'a> {
    /// The file; `current` when the request named its version (cache it for a year).
    File {
        asset: &'a Asset,
        current: bool,
    },
    NotFound,
}

impl Assets {
    pub fn new(style: Asset, rooms: Vec<(String, BTreeMap<String, Asset>)>) -> Self {
        let (rooms, scripts) = rooms.into_iter().unzip();
        Self {
            style,
            scripts,
            rooms,
        }
    }

    /// Whether `path` is one of the files here.
    pub fn is_asset_path(path: &str) -> bool {
        path == SCRIPT_PATH || path == STYLE_PATH
    }

    /// The file a request for `path?query` gets.
    pub fn find(&self, path: &str, query: Option<&str>) -> Found<'_> {
        let asset = if path == STYLE_PATH {
            Some(&self.style)
        } else if path == SCRIPT_PATH {
            let room = crate::route::query_param(query, "room");
            let lang = crate::route::query_param(query, "lang");
            room.and_then(|room| self.rooms.iter().position(|r| query_value(r) == room))
                .and_then(|i| self.scripts.get(i))
                .zip(lang)
                .and_then(|(langs, lang)| langs.iter().find(|(l, _)| query_value(l) == lang))
                .map(|(_, a)| a)
        } else {
            None
        };
        match asset {
            Some(asset) => Found::File {
                asset,
                current: crate::route::query_param(query, "v") == Some(asset.version.as_str()),
            },
            None => Found::NotFound,
        }
    }
}

impl PartialEq for Asset {
    fn eq(&self, other: &Self) -> bool {
        self.body == other.body
    }
}
impl Eq for Asset {}

/// `v` as a JavaScript literal (JSON with `<` escaped, so no text can close a script element).
fn js<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v)
        .unwrap_or_else(|_| "null".into())
        .replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts() -> TextSet {
        crate::texts::builtin("en").unwrap_or_default()
    }

    fn assets() -> Assets {
        let t = texts();
        let shop = script("shop", "/.anteroom/status?room=shop", &t);
        let mut langs = BTreeMap::new();
        langs.insert("en".to_string(), shop);
        Assets::new(style(), vec![("shop".into(), langs)])
    }

    #[test]
    fn the_script_is_the_constant_code_given_the_rooms_words() {
        let t = texts();
        let a = script("shop", "/.anteroom/status?room=shop", &t);
        let body = std::str::from_utf8(&a.body).unwrap();
        assert!(body.starts_with("(function (T, room, url) {\n"));
        assert!(body.contains(SCRIPT));
        assert!(body
            .trim_end()
            .ends_with(r#", "shop", "/.anteroom/status?room=shop");"#));
        assert!(body.contains(&format!("{:?}", t.get("eta_minute").unwrap())));
        assert_eq!(a.version.len(), 12);
        // Another room's or language's script is another file with another version.
        let b = script("other", "/.anteroom/status?room=other", &t);
        assert_ne!(a.version, b.version);
        let ko = script(
            "shop",
            "/.anteroom/status?room=shop",
            &crate::texts::builtin("ko").unwrap(),
        );
        assert_ne!(a.version, ko.version);
    }

    #[test]
    fn words_cannot_end_the_script_element_or_the_string() {
        let mut t = texts();
        t.insert(
            "eta_minute".into(),
            "</script><script>alert(1)</script>\"".into(),
        );
        let a = script("shop", "/x", &t);
        let body = std::str::from_utf8(&a.body).unwrap();
        assert!(!body.contains("</script>"));
        assert!(body.contains("\\u003c/script>"));
    }

    #[test]
    fn a_request_finds_its_file_and_learns_whether_it_named_the_version() {
        let a = assets();
        let v = a.scripts[0]["en"].version.clone();
        let url = script_url("shop", "en", &a.scripts[0]["en"]);
        assert_eq!(
            url,
            format!("/.anteroom/waiting.js?room=shop&lang=en&v={v}")
        );
        let (path, query) = url.split_once('?').unwrap();
        assert_eq!(
            a.find(path, Some(query)),
            Found::File {
                asset: &a.scripts[0]["en"],
                current: true
            }
        );
        assert_eq!(
            a.find(path, Some("room=shop&lang=en&v=000000000000")),
            Found::File {
                asset: &a.scripts[0]["en"],
                current: false
            }
        );
        assert_eq!(a.find(path, Some("room=shop")), Found::NotFound);
        assert_eq!(a.find(path, Some("room=nope&lang=en")), Found::NotFound);
        assert_eq!(a.find(path, Some("room=shop&lang=xx")), Found::NotFound);
        assert_eq!(a.find(path, None), Found::NotFound);
        let style = style_url(&a.style);
        let (path, query) = style.split_once('?').unwrap();
        assert!(matches!(
            a.find(path, Some(query)),
            Found::File { current: true, .. }
        ));
        assert_eq!(a.find("/.anteroom/other.js", None), Found::NotFound);
    }

    #[test]
    fn odd_names_are_percent_encoded_in_the_url() {
        assert_eq!(query_value("a b&c=d"), "a%20b%26c%3Dd");
        assert_eq!(query_value("zh-Hant_1.x~"), "zh-Hant_1.x~");
    }
}
