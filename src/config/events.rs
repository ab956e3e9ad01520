//! `[[room.event]]` and `[draw]`: scheduled sales, checked by the rules of
//! [`crate::event::schedule::check`] with each problem at its key. Part of [`super::build`].

use std::collections::BTreeMap;

use super::build::{k, Builder};
use super::file::{DrawFile, EventFile};
use super::locate::KeyPath;
use super::model::{DrawSecret, EventPage, RoomConfig, MIN_COOKIE_KEY_LEN};
use super::QueueMethod;
use crate::event::{self, AfterClose, Event};
use crate::texts::TextSet;

/// A day, in µs.
const DAY_US: u64 = 86_400_000_000;

impl Builder<'_> {
    /// A room's events and the pages of those that have their own.
    pub(super) fn events(
        &mut self,
        p: &KeyPath,
        files: &[EventFile],
        room_texts: &BTreeMap<String, TextSet>,
        queueing: QueueMethod,
    ) -> (Vec<Event>, BTreeMap<String, EventPage>) {
        let mut events = Vec::new();
        let mut pages = BTreeMap::new();
        // Index into `files` of each event kept, for the rules' problems.
        let mut at = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let ep = p.key("event").index(i);
            if matches!(queueing, QueueMethod::Reject | QueueMethod::Passthrough) {
                self.fail(
                    ep.key("name"),
                    format!(
                        "is an event of a room with queueing = {:?}, which keeps no line",
                        queueing.as_str()
                    ),
                    "use queueing = \"fifo\" for a room with events",
                );
            }
            let Some((opens_at, utc_offset)) = self.when(&ep.key("opens-at"), Some(&f.opens_at))
            else {
                continue;
            };
            let prequeue_from = match self.when(&ep.key("prequeue-from"), f.prequeue_from.as_ref())
            {
                Some((t, _)) => t,
                None if f.prequeue_from.is_some() => continue,
                None => opens_at,
            };
            let closes_at = match self.when(&ep.key("closes-at"), f.closes_at.as_ref()) {
                Some((t, _)) => Some(t),
                None if f.closes_at.is_some() => continue,
                None => None,
            };
            let after_close = match f.after_close.as_deref() {
                None | Some("keep") => AfterClose::Keep,
                Some("release") => AfterClose::Release,
                Some(other) => {
                    self.fail(
                        ep.key("after-close"),
                        format!("{other:?} is not what to do with the line at the closing"),
                        "use \"keep\" (those in line are still let in: the default) or \"release\" (the line is emptied)",
                    );
                    AfterClose::Keep
                }
            };
            let max_active = match f.max_active {
                Some(m) if m >= 1 => Some(m as u64),
                Some(_) => Some(0),
                None => None,
            };
            let draw = f.draw.unwrap_or(false);
            if draw && queueing == QueueMethod::Random {
                self.fail(
                    ep.key("draw"),
                    "draws the places of a room that lets its line in at random anyway",
                    "use queueing = \"fifo\" with draw = true, or leave draw out",
                );
            }
            let template = f.template.as_ref().and_then(|t| {
                self.template_checked(
                    &ep.key("template"),
                    t,
                    crate::page::countdown::check_event_template,
                )
            });
            if f.template.is_some() || f.texts.is_some() {
                let texts = self.texts_over(&ep, room_texts.clone(), f.texts.as_ref());
                pages.insert(f.name.clone(), EventPage { template, texts });
            }
            events.push(Event {
                name: f.name.clone(),
                prequeue_from,
                opens_at,
                closes_at,
                draw,
                after_close,
                admit_per_second: f.admit_per_second,
                max_active,
                utc_offset,
            });
            at.push(i);
        }
        // The last event closed more than a day ago keeps the room closed to newcomers as long
        // as it stays in the file (found by review: a sale of 2020 left in the file, and `check`
        // said nothing of a room that turned everyone away).
        let now = crate::clock::Clock::now_micros(&crate::clock::SystemClock);
        let last = events.iter().enumerate().max_by_key(|(_, e)| e.opens_at);
        if let Some((j, e)) = last {
            if let Some(closed) = e.closes_at.filter(|c| now > c.saturating_add(DAY_US)) {
                self.warn(
                    p.key("event").index(at.get(j).copied().unwrap_or(0)).key("closes-at"),
                    format!(
                        "event {:?} closed at {}: the room takes nobody new while it is in the file",
                        e.name,
                        crate::event::time::format_exact(closed, e.utc_offset)
                    ),
                    "remove the event once its sale is over (or the room, if it was only for the sale)",
                );
            }
        }
        for problem in event::schedule::check(&events) {
            let i = at.get(problem.event).copied().unwrap_or(0);
            self.fail(
                p.key("event").index(i).key(problem.field),
                problem.what,
                problem.fix,
            );
        }
        (events, pages)
    }

    /// An event time: RFC 3339 with an offset, as Unix microseconds and that offset.
    fn when(&mut self, key: &KeyPath, raw: Option<&String>) -> Option<(u64, i32)> {
        let text = self.string(key, raw?)?;
        match event::time::parse(&text) {
            Ok(t) => Some(t),
            Err(e) => {
                self.fail(
                    key.clone(),
                    format!("{text:?} {e}"),
                    "write it like \"2027-03-01T10:00:00+09:00\" (RFC 3339, with the offset of the time zone meant)",
                );
                None
            }
        }
    }

    /// `[draw] secret`, required once an event draws.
    pub(super) fn draw_secret(
        &mut self,
        f: Option<&DrawFile>,
        rooms: &[RoomConfig],
    ) -> Option<DrawSecret> {
        let key = k("draw").key("secret");
        let secret = f
            .and_then(|d| d.secret.as_ref())
            .and_then(|raw| self.secret(&key, raw));
        if let Some(s) = &secret {
            if s.len() < MIN_COOKIE_KEY_LEN {
                self.fail(
                    key.clone(),
                    format!(
                        "is {} characters: a guessable seed lets anyone compute the draw before it is revealed",
                        s.len()
                    ),
                    format!("use at least {MIN_COOKIE_KEY_LEN} random characters (openssl rand -base64 32)"),
                );
            }
        }
        if secret.is_none() && f.and_then(|d| d.secret.as_ref()).is_none() {
            for (i, r) in rooms.iter().enumerate() {
                if let Some(j) = r.events.iter().position(|e| e.draw) {
                    self.fail(
                        k("room").index(i).key("event").index(j).key("draw"),
                        "draws places, but there is no [draw] secret to seed the draw from",
                        "add [draw] with secret = \"env:ANTEROOM_DRAW_SECRET\" (generate: openssl rand -base64 32); keep it for as long as a draw must be checkable",
                    );
                    break;
                }
            }
        }
        secret.map(|s| DrawSecret(s.into_bytes()))
    }
}
