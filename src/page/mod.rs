//! What a visitor sees while not admitted: the waiting page (Tera, HTML) or its JSON twin.
//!
//! Templates are compiled once at boot; a per-room `template` replaces the built-in one. The
//! poll interval is the server's choice, by position tier, with ±20 % jitter so that a crowd that
//! arrived together does not poll together. Rendering can never turn into a 5xx: if a template
//! fails at run time the visitor gets a minimal built-in page with the same refresh.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use tera::{Context, Tera};

mod accept;
pub mod assets;
pub mod challenge;
pub mod countdown;
mod fast;
mod pages;
mod poll;
mod status;

pub use accept::{prefers_json, weighted};
pub use poll::{poll_floor, poll_for_turn, poll_interval};
pub use status::{EventStatus, PlacedBy, State, Status};

use crate::config::Config;
use crate::texts::TextSet;

/// The built-in waiting page, compiled into the binary so `anteroom demo` needs no files.
pub const DEFAULT_WAITING: &str = include_str!("../../templates/waiting.html.tera");
/// The built-in page for short messages (already used, shop unavailable).
pub const DEFAULT_MESSAGE: &str = include_str!("../../templates/message.html.tera");

const WAITING: &str = "waiting.html.tera";
const MESSAGE: &str = "message.html.tera";

/// Everything a waiting-page template can use (documented in the README): the room's constant
/// part and this answer's [`Figures`].
#[derive(Debug, Serialize)]
pub struct WaitingView<'a> {
    pub room: &'a str,
    #[serde(flatten)]
    pub figures: Figures<'a>,
    pub status_url: String,
    pub lang: &'a str,
    /// The page's words in `lang` (see `src/texts.rs` and `[room.texts.LANG]`).
    pub t: &'a TextSet,
    /// `t` as JSON that is safe inside a `<script>` element.
    pub t_json: String,
    /// The built-in page's script for this room and language, and its style ([`assets`]).
    pub script_url: String,
    pub style_url: String,
}

impl<'a> WaitingView<'a> {
    /// `url`: where the page's refresh goes ([`refresh_url`]).
    pub fn new(s: &'a Status, lang: &'a str, t: &'a TextSet, url: &'a str) -> Self {
        Self::with(s, lang, t, Figures::new(s, t, url))
    }

    /// The view of an answer whose figures are already computed.
    fn with(s: &'a Status, lang: &'a str, t: &'a TextSet, figures: Figures<'a>) -> Self {
        let status_url = status_url(&s.room);
        let script = assets::script(&s.room, &status_url, t);
        Self {
            room: &s.room,
            figures,
            script_url: assets::script_url(&s.room, lang, &script),
            style_url: assets::style_url(&assets::style()),
            status_url,
            lang,
            t,
            t_json: t_json(t),
        }
    }
}

/// What a waiting page adds to its room's constant context: the figures of one answer, all a
/// request computes (the rest is built once per room and language).
#[derive(Debug, Clone, Serialize)]
pub struct Figures<'a> {
    pub state: &'a str,
    pub position: u64,
    pub waiting: u64,
    pub eta_seconds: Option<u64>,
    /// `[low, high]` seconds when the estimate is told as a range (see
    /// [`Status::eta_low_seconds`]); `eta_text` then words the range. Not under a minute:
    /// "less than a minute" is no range, and the page's note on ranges would stand alone (found
    /// by review).
    pub eta_range: Option<[u64; 2]>,
    pub eta_text: String,
    /// What decides when the line moves (see [`Status::held_by`]); empty when not in line.
    pub held_by: &'a str,
    pub retry_after_ms: u64,
    pub refresh_seconds: u64,
    pub progress_percent: u64,
    /// Where the page's refresh without JavaScript goes: the request's path and query
    /// ([`refresh_url`]).
    pub refresh_url: &'a str,
    /// The event of a registrant in its draw (their ticket, the seed once revealed): the page
    /// keeps showing what they check the draw with. `null` for everyone else.
    pub event: Option<&'a EventStatus>,
    /// The cancelled draw a visitor's place was drawn in ([`Status::placed_by`]): the page
    /// shows their ticket in it the same way. `null` for everyone else.
    pub placed_by: Option<&'a PlacedBy>,
    /// The request was a form (any method but `GET` and `HEAD`) that did not go to the shop:
    /// the page says so, for it is not sent again (found by review: a form posted while waiting
    /// was dropped, and the page said nothing of it).
    pub form: bool,
}

impl<'a> Figures<'a> {
    pub fn new(s: &'a Status, t: &TextSet, refresh_url: &'a str) -> Self {
        let progress_percent = match s.position {
            Some(p) if s.waiting > 0 => ((s.waiting.saturating_sub(p)) * 100 / s.waiting).min(100),
            _ if s.state == State::Admitted => 100,
            _ => 0,
        };
        Self {
            state: s.state.as_str(),
            position: s.position.unwrap_or(0),
            waiting: s.waiting,
            eta_seconds: s.eta_seconds,
            eta_range: s.eta_range().filter(|[_, hi]| *hi >= 60),
            eta_text: match (s.eta_seconds, s.eta_range(), s.held_by) {
                (Some(_), Some([lo, hi]), _) => crate::texts::eta_range_text(t, lo, hi),
                (Some(e), None, _) => crate::texts::eta_text(t, e),
                // No ETA because the shop is full: say when the line moves instead.
                (None, _, Some("max-active")) => t.get("eta_held").cloned().unwrap_or_default(),
                (None, _, _) => String::new(),
            },
            held_by: s.held_by.unwrap_or(""),
            retry_after_ms: s.retry_after_ms,
            refresh_seconds: s.retry_after_secs(),
            progress_percent,
            refresh_url,
            event: s.event.as_deref().filter(|e| e.ticket.is_some()),
            placed_by: s.placed_by.as_deref(),
            form: false,
        }
    }
}

/// Context of the message page.
#[derive(Debug, Serialize)]
pub struct MessageView<'a> {
    pub status: u16,
    pub title: &'a str,
    pub message: &'a str,
    pub retry_seconds: Option<u64>,
    /// Where the retry goes ([`refresh_url`]; empty: the page's own address).
    pub refresh_url: &'a str,
    pub room: &'a str,
    pub lang: &'a str,
    /// Said when the request was a form (`proxy::method::is_form`): what it sent did not reach
    /// the shop, and the page's retry sends nothing of it (found by review: the 429 after
    /// `join-limit` said "try again" and nothing of the form).
    pub form_note: Option<&'a str>,
}

/// Where a page's refresh goes: the request's path and query (`path_and_query`), written out
/// rather than left to mean "this page", which a browser reads with the address's fragment and
/// then only scrolls (found by review: without JavaScript, a visitor on `/item#reviews` never
/// polled again and lost the place for silence; every retry page stayed where it was). A path
/// that a browser would read as another host's (`//host/…`, `/\host`) is written with one
/// slash.
pub fn refresh_url(path_and_query: &str) -> String {
    let rest = path_and_query.trim_start_matches(['/', '\\']);
    format!("/{rest}")
}

/// The wait for `position` at `rate` admissions per second.
pub fn eta_seconds(position: u64, rate: f64) -> Option<u64> {
    if rate > 0.0 && rate.is_finite() {
        Some((position as f64 / rate).ceil() as u64)
    } else {
        None
    }
}

/// Compiled templates: the built-ins and each room's override.
pub struct Pages {
    tera: Tera,
    /// Per room index, the name of its waiting template.
    room_templates: Vec<String>,
    /// Per room index and language, the parts of the waiting page's context that never change
    /// (the texts, their JSON, the room, the status URL), built once: a request only adds the
    /// few figures of its own ([`Figures`]).
    bases: Vec<BTreeMap<String, Context>>,
    /// Per room index and language, the built-in page pre-rendered ([`fast`]); empty for a
    /// room with its own template.
    fast: Vec<BTreeMap<String, fast::Prerendered>>,
    /// The built-in page's script and style, served under `/.anteroom/`.
    pub assets: assets::Assets,
    /// Per (room index, event name), the name of the event's own template.
    event_templates: std::collections::HashMap<(usize, String), String>,
}

/// The constant part of a room's waiting context in one language, and the script it names.
fn base_context(
    room: &str,
    lang: &str,
    t: &TextSet,
    style: &assets::Asset,
) -> (Context, assets::Asset) {
    let url = status_url(room);
    let script = assets::script(room, &url, t);
    let mut ctx = Context::new();
    ctx.insert("room", room);
    ctx.insert("lang", lang);
    ctx.insert("t", t);
    ctx.insert("t_json", &t_json(t));
    ctx.insert("status_url", &url);
    ctx.insert("script_url", &assets::script_url(room, lang, &script));
    ctx.insert("style_url", &assets::style_url(style));
    (ctx, script)
}

fn t_json(t: &TextSet) -> String {
    serde_json::to_string(t)
        .unwrap_or_default()
        .replace('<', "\\u003c")
}

fn status_url(room: &str) -> String {
    format!("/.anteroom/status?room={room}")
}

/// Checks that a template compiles and renders with a sample context in every state and
/// language; the error says why.
pub fn check_template(source: &str) -> Result<(), String> {
    let mut tera = Tera::default();
    tera.autoescape_on(vec![".tera", ".html"]);
    tera.add_raw_template("check.html.tera", source)
        .map_err(|e| error_chain(&e))?;
    for lang in crate::texts::LANGUAGES {
        let t = crate::texts::builtin(lang).unwrap_or_default();
        for (state, range) in [
            (State::Waiting, None),
            (State::Waiting, Some((60, 140))),
            (State::Paused, None),
            (State::Full, None),
            (State::Admitted, None),
        ] {
            let status = Status {
                room: "sample".into(),
                state,
                position: (state != State::Full).then_some(42),
                waiting: 1000,
                eta_seconds: (state == State::Waiting).then_some(90),
                eta_low_seconds: range.map(|r: (u64, u64)| r.0),
                eta_high_seconds: range.map(|r| r.1),
                retry_after_ms: 3000,
                held_by: None,
                event: None,
                placed_by: None,
            };
            let ctx = Context::from_serialize(WaitingView::new(&status, lang, &t, "/"))
                .map_err(|e| error_chain(&e))?;
            tera.render("check.html.tera", &ctx)
                .map_err(|e| format!("state {}, {lang}: {}", state.as_str(), error_chain(&e)))?;
        }
    }
    Ok(())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

fn read(path: &Path) -> Result<String, String> {
    crate::files::read_regular_text(path, 1024 * 1024)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The page of last resort; its inputs are our own constant strings.
/// The note a message page answering a form says ([`MessageView::form_note`]; message pages
/// are in English).
pub fn form_note() -> &'static str {
    "What you sent from the previous page did not reach the shop: send it again once you are let in."
}

fn fallback_page(title: &str, message: &str, refresh: u64, url: &str) -> String {
    let refresh = if refresh > 0 && url.is_empty() {
        format!("<meta http-equiv=\"refresh\" content=\"{refresh}\">")
    } else if refresh > 0 {
        let url = tera::escape_html(url);
        format!("<meta http-equiv=\"refresh\" content=\"{refresh}; url={url}\">")
    } else {
        String::new()
    };
    format!("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}<title>{title}</title></head><body><h1>{title}</h1><p>{message}</p></body></html>")
}

#[cfg(test)]
mod tests;
