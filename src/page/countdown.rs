//! The pages of a room's event: the countdown of a pre-queue (built in, `templates/
//! countdown.html.tera`), and an event's own template (`[[room.event]] template`), which shows
//! every state while the event runs. Both get the waiting page's context with the event's
//! fields added ([`EventView`]).

use serde::Serialize;
use tera::Context;

use super::{error_chain, fallback_page, Pages, State, Status, WaitingView};
use crate::event::time;
use crate::texts::TextSet;

pub(super) const NAME: &str = "countdown.html.tera";
pub(super) const TEMPLATE: &str = include_str!("../../templates/countdown.html.tera");

/// What a template of an event's page gets besides the waiting page's context.
#[derive(Debug, Serialize)]
struct EventView<'a> {
    /// The `event` object of the status JSON.
    event: Option<&'a super::EventStatus>,
    draw: bool,
    ticket: Option<&'a str>,
    commitment: Option<&'a str>,
    seed: Option<&'a str>,
    event_url: &'a str,
    /// RFC 3339, and as read without a script: in the offset the operator wrote it in.
    opens_at: &'a str,
    opens_at_text: String,
    opens_in_ms: u64,
    /// The time to the opening, `[Nd ]HH:MM:SS` (the script counts it down).
    countdown: String,
    /// Defines `anteroomSayCookiesRefused(text)` (`templates/cookies.js`), for a poll told
    /// `cookies_required`.
    cookies_script: &'static str,
}

/// `secs` as the countdown shows it.
pub fn countdown_text(secs: u64) -> String {
    let (d, h, m, s) = (
        secs / 86_400,
        secs % 86_400 / 3600,
        secs % 3600 / 60,
        secs % 60,
    );
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// An RFC 3339 time as a person reads it: `2027-03-01 10:00 UTC+09:00`.
fn readable(rfc3339: &str) -> String {
    match time::parse(rfc3339) {
        Ok((us, off)) => {
            let t = time::format(us, off);
            let (date, rest) = t.split_once('T').unwrap_or((&t, ""));
            let hm = rest.get(..5).unwrap_or(rest);
            let zone = if off == 0 {
                "UTC".to_string()
            } else {
                format!(
                    "UTC{}{:02}:{:02}",
                    if off < 0 { '-' } else { '+' },
                    off.unsigned_abs() / 3600,
                    off.unsigned_abs() % 3600 / 60
                )
            };
            format!("{date} {hm} {zone}")
        }
        Err(_) => rfc3339.to_string(),
    }
}

/// The context of an event's page: the waiting page's, with the event's fields.
fn context(
    status: &Status,
    e: &super::EventStatus,
    lang: &str,
    t: &TextSet,
    (url, form): (&str, bool),
) -> tera::Result<Context> {
    let view = EventView {
        event: Some(e),
        draw: e.draw,
        ticket: e.ticket.as_deref(),
        commitment: e.commitment.as_deref(),
        seed: e.seed.as_deref(),
        event_url: &e.url,
        opens_at: &e.opens_at,
        opens_at_text: readable(&e.opens_at),
        opens_in_ms: e.opens_in_seconds.saturating_mul(1000),
        countdown: countdown_text(e.opens_in_seconds),
        cookies_script: super::assets::COOKIES,
    };
    let mut waiting = WaitingView::new(status, lang, t, url);
    waiting.figures.form = form;
    let mut ctx = Context::from_serialize(waiting)?;
    ctx.extend(Context::from_serialize(&view)?);
    Ok(ctx)
}

/// Checks that an event's template compiles and renders in every state an event shows, in every
/// language, with a sample event (drawn and not); the error says why.
pub fn check_event_template(source: &str) -> Result<(), String> {
    let mut tera = tera::Tera::default();
    tera.autoescape_on(vec![".tera", ".html"]);
    tera.add_raw_template("check.html.tera", source)
        .map_err(|e| error_chain(&e))?;
    for lang in crate::texts::LANGUAGES {
        let t = crate::texts::builtin(lang).unwrap_or_default();
        for (state, draw, phase) in [
            (State::Prequeue, true, "prequeue"),
            (State::Prequeue, false, "prequeue"),
            (State::Waiting, true, "open"),
            (State::Paused, false, "open"),
            (State::Full, false, "open"),
        ] {
            let e = super::EventStatus {
                name: "sample".into(),
                opens_at: "2027-03-01T10:00:00+09:00".into(),
                opens_in_seconds: if phase == "prequeue" { 90 } else { 0 },
                closes_at: None,
                phase,
                draw,
                commitment: draw.then(|| "0".repeat(64)),
                seed: (draw && phase != "prequeue").then(|| "1".repeat(64)),
                ticket: draw.then(|| "2".repeat(32)),
                registrations: 1000,
                url: "/.anteroom/event?room=sample".into(),
            };
            let status = Status {
                room: "sample".into(),
                state,
                position: (!draw && state != State::Full).then_some(42),
                waiting: 1000,
                eta_seconds: (state == State::Waiting).then_some(90),
                eta_low_seconds: None,
                eta_high_seconds: None,
                retry_after_ms: 3000,
                held_by: None,
                event: Some(Box::new(e.clone())),
                placed_by: None,
            };
            let ctx = context(&status, &e, lang, &t, ("/", true)).map_err(|e| error_chain(&e))?;
            tera.render("check.html.tera", &ctx).map_err(|err| {
                format!(
                    "state {} (draw {draw}), {lang}: {}",
                    state.as_str(),
                    error_chain(&err)
                )
            })?;
        }
    }
    Ok(())
}

impl Pages {
    /// The page of an answer in a room whose event is in force: the event's own template when
    /// it has one, else the countdown in a pre-queue; `None` for the room's usual page.
    pub(super) fn event_page(
        &self,
        room: usize,
        status: &Status,
        lang: &str,
        t: &TextSet,
        (url, form): (&str, bool),
    ) -> Option<String> {
        let e = status.event.as_deref()?;
        let own = self.event_templates.get(&(room, e.name.clone()));
        let name = match own {
            Some(name) => name.as_str(),
            None if status.state == State::Prequeue => NAME,
            None => return None,
        };
        match context(status, e, lang, t, (url, form)).and_then(|ctx| self.tera.render(name, &ctx))
        {
            Ok(html) => Some(html),
            Err(err) => {
                tracing::error!(room = status.room, event = e.name, error = %error_chain(&err), "event page failed; serving the fallback page");
                Some(fallback_page(
                    "You're registered",
                    "The sale opens soon. This page refreshes by itself.",
                    status.retry_after_secs(),
                    url,
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_countdown_renders_in_every_state_an_event_shows() {
        assert_eq!(check_event_template(TEMPLATE), Ok(()));
        assert!(check_event_template("{{ no_such_thing }}").is_err());
    }

    /// A form posted in a pre-queue is said not to have reached the shop, and the promise of a
    /// kept place can be hidden by the cookie note's script (found by re-review).
    #[test]
    fn the_countdown_says_a_form_was_not_sent() {
        let mut tera = tera::Tera::default();
        tera.autoescape_on(vec![".tera", ".html"]);
        tera.add_raw_template(NAME, TEMPLATE).unwrap();
        let t = crate::texts::builtin("en").unwrap();
        let e = super::super::EventStatus {
            name: "spring".into(),
            opens_at: "2027-03-01T10:00:00+09:00".into(),
            opens_in_seconds: 90,
            closes_at: None,
            phase: "prequeue",
            draw: false,
            commitment: None,
            seed: None,
            ticket: None,
            registrations: 10,
            url: "/.anteroom/event?room=sale".into(),
        };
        let status = Status {
            room: "sale".into(),
            state: State::Prequeue,
            position: Some(3),
            waiting: 10,
            eta_seconds: None,
            eta_low_seconds: None,
            eta_high_seconds: None,
            retry_after_ms: 3000,
            held_by: None,
            event: Some(Box::new(e.clone())),
            placed_by: None,
        };
        let note = tera::escape_html(&t["form_not_sent"]);
        for form in [false, true] {
            let ctx = context(&status, &e, "en", &t, ("/p", form)).unwrap();
            let page = tera.render(NAME, &ctx).unwrap();
            assert_eq!(page.contains(&note), form, "{page}");
            assert!(page.contains("id=\"keep-tab\""), "{page}");
        }
    }

    #[test]
    fn times_read_as_people_read_them() {
        assert_eq!(countdown_text(0), "00:00:00");
        assert_eq!(countdown_text(3_725), "01:02:05");
        assert_eq!(countdown_text(2 * 86_400 + 61), "2d 00:01:01");
        assert_eq!(
            readable("2027-03-01T10:00:00+09:00"),
            "2027-03-01 10:00 UTC+09:00"
        );
        assert_eq!(readable("2027-03-01T01:00:00Z"), "2027-03-01 01:00 UTC");
        assert_eq!(
            readable("2027-03-01T01:00:00-05:30"),
            "2027-03-01 01:00 UTC-05:30"
        );
    }
}
