//! The page that asks a new visitor's browser for the join challenge's work
//! ([`crate::edge::challenge`]): a short "one moment" in the visitor's language, the solver
//! inline (the page is seen once per new visitor, so it is not worth a cached file), and for a
//! browser without JavaScript a `<meta refresh>` and the reason it will queue under a stricter
//! limit. Rendered by Tera from `templates/challenge.html.tera` (the operator's texts apply).

use serde::Serialize;
use tera::Context;

use super::{assets, error_chain, status_url, Pages};
use crate::texts::TextSet;

pub(super) const NAME: &str = "challenge.html.tera";
pub(super) const TEMPLATE: &str = include_str!("../../templates/challenge.html.tera");
/// The solver, also run by `bench/join-challenge` to measure a real browser.
pub const SOLVER: &str = concat!(
    include_str!("../../templates/cookies.js"),
    include_str!("../../templates/challenge.js")
);

/// Seconds before a browser without JavaScript reloads (and joins, under the stricter limit).
pub const NO_SCRIPT_REFRESH_SECS: u64 = 3;

#[derive(Serialize)]
struct View<'a> {
    lang: &'a str,
    t: &'a TextSet,
    challenge: &'a str,
    difficulty: u32,
    status_url: String,
    style_url: String,
    refresh_seconds: u64,
    refresh_url: &'a str,
    solver: &'static str,
    /// The request was a form the shop did not get (see `Figures::form`).
    form: bool,
}

impl Pages {
    /// The challenge page for `room` in `lang`: `challenge` is the puzzle (`BUCKET.NONCE`);
    /// `url` where its refresh goes ([`super::refresh_url`]).
    pub fn challenge(
        &self,
        room: &str,
        lang: &str,
        t: &TextSet,
        challenge: &str,
        difficulty: u32,
        (url, form): (&str, bool),
    ) -> String {
        let view = View {
            lang,
            t,
            challenge,
            difficulty,
            status_url: status_url(room),
            style_url: assets::style_url(&assets::style()),
            refresh_seconds: NO_SCRIPT_REFRESH_SECS,
            refresh_url: url,
            solver: SOLVER,
            form,
        };
        match Context::from_serialize(&view).and_then(|ctx| self.tera.render(NAME, &ctx)) {
            Ok(html) => html,
            Err(e) => {
                tracing::error!(error = %error_chain(&e), "challenge template failed; serving the fallback page");
                super::fallback_page(
                    "One moment",
                    "Please reload this page.",
                    NO_SCRIPT_REFRESH_SECS,
                    url,
                )
            }
        }
    }
}
