//! What a reload may not change while people are in line: a begun pre-queue's start and draw,
//! the `[draw] secret` under a draw, a room's queueing under its events, a room gone from the
//! file while its line waits, rooms handed to another (`takeover`).

use std::sync::Arc;

use super::takeover::Takeover;
use crate::app::Shared;
use crate::config;
use crate::event::schedule::Schedule;
use crate::store::{LineDraw, RuntimeEvents};

/// What a reload may not change, as the admin API may not (`schedule::frozen`): an event whose
/// pre-queue has begun keeps its start and its draw, and while one that draws is still in the
/// schedule the `[draw] secret` stays — each would change or void a commitment already
/// published and place registrants by a seed nobody can check (found by review: a SIGHUP
/// moved a begun pre-queue and emptied its registrations). Cancelling such an event (leaving
/// it out of the file) stays allowed, as the API's DELETE is; the secret stays while the
/// line holds the places it drew. `runtime`: each running room's runtime event changes as the
/// store says now ([`runtime_now`]).
pub(super) fn frozen_changes(
    old: &Shared,
    new: &config::Config,
    path: &std::path::Path,
    lines: &[Line],
    taken: &[Takeover],
    runtime: &[Arc<RuntimeEvents>],
) -> Vec<config::ConfigError> {
    use config::locate::{KeyPath, Located};
    let text = crate::files::read_regular_text(path, crate::files::MAX_CONFIG).unwrap_or_default();
    let located = Located::new(&text);
    let file = path.display().to_string();
    let error = |key: KeyPath, problem: String, fix: String| {
        let (line, col) = located
            .span_of(&key)
            .map_or((0, 0), |s| located.line_col(s.start));
        config::ConfigError {
            file: file.clone(),
            line,
            col,
            key: key.to_string(),
            problem,
            fix,
        }
    };
    let local = crate::clock::Clock::now_micros(&crate::clock::SystemClock);
    let secret = |c: &config::Config| c.draw_secret.as_ref().map(|s| s.0.clone());
    let secret_changed = secret(&old.config) != secret(new);
    let mut out = Vec::new();
    for (i, r) in new.rooms.iter().enumerate() {
        let Some((oi, o)) = old
            .rooms
            .iter()
            .enumerate()
            .find(|(_, o)| o.name() == r.name())
        else {
            continue;
        };
        let now = o.events.store_now(local);
        // The schedules as the running and the new room would build them: their file's events
        // with the store's runtime changes (read now: by the last tick's, an event added
        // through another instance a moment before was not seen), which a reload keeps.
        let runtime = runtime
            .get(oi)
            .cloned()
            .unwrap_or_else(|| o.events.runtime());
        let (before, _) = Schedule::build(o.events.file_events(), &runtime.events, runtime.version);
        let (after, _) = Schedule::build(&r.events, &runtime.events, runtime.version);
        // A room that keeps no line has no events (`check` refuses them in the file, the admin
        // API at run time): nor may a reload make one such while a runtime event is still to
        // come or running (found by review: switched to passthrough in a pre-queue, the room
        // let its registrants in before the opening).
        if matches!(
            r.queueing,
            config::QueueMethod::Reject | config::QueueMethod::Passthrough
        ) {
            let running = after
                .events
                .iter()
                .filter(|e| e.closes_at.is_none_or(|c| c > now))
                .map(|e| format!("{:?}", e.name))
                .collect::<Vec<_>>();
            if !running.is_empty() {
                out.push(error(
                    KeyPath::root().key("room").index(i).key("queueing"),
                    format!(
                        "room {:?} has events not yet closed ({}): queueing = {:?} keeps no line for them",
                        r.name(),
                        running.join(", "),
                        r.queueing.as_str()
                    ),
                    format!(
                        "keep queueing = \"fifo\" until they have closed, or cancel them first (`anteroom room {} event cancel NAME`)",
                        r.name()
                    ),
                ));
            }
        }
        for e in before.events.iter().filter(|e| now >= e.prequeue_from) {
            let room = KeyPath::root().key("room").index(i);
            let at = |field: &str| match r.events.iter().position(|x| x.name == e.name) {
                Some(j) => room.key("event").index(j).key(field),
                None => room.key("event"),
            };
            if let Some(p) = after
                .events
                .iter()
                .find(|x| x.name == e.name)
                .and_then(|x| {
                    // The store's record as read for this reload, or the last tick's.
                    let opened = runtime.opened(e) || o.events.recorded_open(e);
                    crate::event::schedule::frozen(e, x, now, opened)
                })
            {
                out.push(error(
                    at(p.field),
                    format!("event {:?}: {}", e.name, p.what),
                    p.fix,
                ));
            }
        }
        if secret_changed {
            // The runtime events this instance knows count too: the store's may be empty
            // after a data loss the instance has yet to write them back after (found by
            // re-review: a FLUSHALL, then a SIGHUP within the tick, changed the secret under
            // a begun drawn pre-queue).
            let known = o.events.runtime();
            let (kept, _) = Schedule::build(&r.events, &known.events, known.version);
            let schedules = [&before, &after, &o.events.schedule(), &kept];
            if let Some(problem) = drawing(&schedules, o.events.line_draw().as_deref(), now) {
                out.push(error(
                    KeyPath::root().key("draw").key("secret"),
                    format!(
                        "cannot change while room {:?} {problem}: seeds, commitments and lists made with the old secret would no longer check",
                        r.name()
                    ),
                    "keep the secret until the drawn events are out of the file (or cancelled) and the line holds none of their places; then change it".into(),
                ));
            }
        }
    }
    // With the store's runtime events and with this instance's: a store that just lost its
    // data has none, and the instance writes its own back after the swap (found by re-review:
    // a FLUSHALL, then a SIGHUP that lowered a cap, and an event ran at 84/s under 50).
    let known: Vec<Arc<RuntimeEvents>> = old.rooms.iter().map(|o| o.events.runtime()).collect();
    let mut told = std::collections::HashSet::new();
    for (key, what, fix) in super::caps::events_over_caps(old, new, runtime, local)
        .into_iter()
        .chain(super::caps::events_over_caps(old, new, &known, local))
    {
        if told.insert(what.clone()) {
            out.push(error(key, what, fix));
        }
    }
    // A room gone from the file (removed, or renamed: the store keys a line by the room's
    // name) while people wait in its line, or while its line is held: they would lose their
    // place (their polls answered 404), and its paths would open past the hold (found by
    // review: a renamed room's newcomers walked in while the old line stayed held in Redis).
    // Admitted visitors of a room whose paths another room of the new file takes (a rename,
    // a path moved to another room, a room nested inside) would meet that room's line: their
    // cookies are signed for the old room (found by review: a rename with nobody waiting sent
    // every admitted visitor back to the line, and their turns came due to 404s; re-review: so
    // did a path moved between two rooms that keep their names); so would the visitors waiting
    // in a room that keeps its name, at their turn (found by re-review). A room simply removed
    // opens its paths to its admitted visitors instead, which costs them nothing.
    for t in taken {
        // Where the file gives them away: the taking room's paths (a room nested inside, a
        // path moved to it), else the room itself.
        let at = |name: &str| new.rooms.iter().position(|r| r.name() == name);
        let by = t.by.as_deref().and_then(at);
        let key = match (by, at(&t.room)) {
            (Some(i), _) | (None, Some(i)) => KeyPath::root().key("room").index(i).key("paths"),
            (None, None) => KeyPath::root().key("room"),
        };
        let who = match (t.active, t.waiting) {
            (a, 0) => format!("{a} admitted visitors hold its sessions"),
            (0, w) => format!("{w} visitors wait in its line"),
            (a, w) => format!("{a} admitted visitors hold its sessions and {w} wait in its line"),
        };
        let gone = if t.gone {
            ", which is gone from the file,"
        } else {
            ""
        };
        let problem = match &t.by {
            Some(by) => format!(
                "room {by:?} would take {} from room {:?}{gone} while {who}: they would meet room {by:?}'s line, their admissions and places being room {:?}'s",
                t.at, t.room, t.room
            ),
            None => format!(
                "{} of room {:?}{gone} would be refused (its readings would fall in two rooms) while {who}",
                t.at, t.room
            ),
        };
        let wait = format!(
            "leave {1} with room {0:?} until its sessions have ended and its line is empty (`anteroom room {0}` shows `active` and `waiting`; a session lasts session-ttl), then move it",
            t.room, t.at
        );
        out.push(error(key, problem, unanswered_first(t.unanswered, wait)));
    }
    for (o, line) in gone(old, new).zip(lines) {
        let &Line {
            waiting,
            held,
            unanswered,
        } = line;
        if waiting == 0 && !held {
            continue;
        }
        let what = match (waiting, held) {
            (0, _) => "its line is held (queue_all)".to_string(),
            (n, false) => format!("{n} visitors wait in its line"),
            (n, true) => format!("{n} visitors wait in its held line"),
        };
        out.push(error(
            KeyPath::root().key("room"),
            format!(
                "room {:?} is gone from the file (removed or renamed) while {what}: they would lose their place, and its paths would open",
                o.name()
            ),
            unanswered_first(
                unanswered,
                format!(
                    "keep the room under its name until its line is empty and not held (`anteroom room {0} clear` empties it, `anteroom room {0} set queue_all=false` releases the hold), then remove or rename it",
                    o.name()
                ),
            ),
        ));
    }
    out
}

/// The fix of a refusal judged by counts the store did not give: they are the last tick's
/// (and this instance's admissions since), which no session's end or operator's command
/// changes until the store answers (found by review r91b: the fix told to wait a session-ttl,
/// and the reload stayed refused for the whole outage).
fn unanswered_first(unanswered: bool, fix: String) -> String {
    if unanswered {
        format!(
            "the store does not answer, so these are the counts of the last tick and of this instance's admissions since, which do not change until it answers: reload again once it does; then {fix}"
        )
    } else {
        fix
    }
}

/// A room's line and sessions as a reload judges a room gone from the file.
pub(super) struct Line {
    waiting: u64,
    held: bool,
    /// The store did not answer: the last tick's figures.
    unanswered: bool,
}

/// The line of each room [`gone`] from `new`, in its order: how many wait in it, whether it
/// is held and how many sessions it has, as the store says now, or as the last tick saw it
/// when the store does not answer (found by review: by the last tick's counts alone, a line
/// that formed within the last tick was not seen).
pub(super) async fn lines_of_gone_rooms(old: &Shared, new: &config::Config) -> Vec<Line> {
    let mut out = Vec::new();
    for o in gone(old, new) {
        let now = old
            .store_call("stats", o.name(), old.store.stats(&o.cfg.params))
            .await;
        out.push(match now {
            Ok(st) => Line {
                waiting: st.waiting,
                held: st.state.queue_all,
                unanswered: false,
            },
            Err(e) => {
                old.warn_store_error(&e);
                Line {
                    waiting: o.live.waiting(),
                    held: o.live.queue_all(),
                    unanswered: true,
                }
            }
        });
    }
    out
}

/// The rooms of the running configuration that `new` has no room of the same name for.
pub(super) fn gone<'a>(
    old: &'a Shared,
    new: &'a config::Config,
) -> impl Iterator<Item = &'a crate::room::Room> + 'a {
    old.rooms
        .iter()
        .filter(|o| !new.rooms.iter().any(|r| r.name() == o.name()))
}

/// How long before a drawn pre-queue begins its secret is kept already, by this instance's
/// estimate of the store's clock: the estimate moves with each tick's call (back by as much as
/// a slow call took), and another instance's may be ahead, showing the commitment a moment
/// sooner. Found by a flaky CI run: the commitment shown, a tick under load put the estimate
/// back before the pre-queue's start, and a SIGHUP changed the secret under it.
const SECRET_MARGIN: crate::clock::Micros = 60_000_000;

/// What of a room's draws a change of the secret would void, told for the refusal: a drawn
/// event whose pre-queue has begun by `now`, in any of `schedules` (running and new, with the
/// store's runtime events and this instance's), or the
/// draw whose places the line holds (`line`, at the last tick; its event perhaps cancelled,
/// whose seed is published with its list while it does: found by review, a reload changed
/// the secret under a cancelled draw's registrants and its published draw no longer checked).
fn drawing(
    schedules: &[&Schedule],
    line: Option<&LineDraw>,
    now: crate::clock::Micros,
) -> Option<String> {
    let mut names: Vec<&str> = schedules
        .iter()
        .flat_map(|s| &s.events)
        .filter(|e| e.draw && now.saturating_add(SECRET_MARGIN) >= e.prequeue_from)
        .map(|e| e.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    let held = line.and_then(|d| d.name_and_start()).map(|(name, _)| name);
    match (names.is_empty(), held) {
        (true, None) => None,
        (false, _) => Some(format!(
            "draws (event {})",
            names
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (true, Some(name)) => Some(format!(
            "holds the places the draw of event {name:?} gave (cancelled, its draw published)"
        )),
    }
}

/// Each running room's runtime event changes as the store says now, for the rooms `new` keeps
/// (the others', and any the store does not answer for, as the last tick saw them), in the
/// order of the running rooms. The calls run together: a store away costs one timeout.
pub(super) async fn runtime_now(old: &Shared, new: &config::Config) -> Vec<Arc<RuntimeEvents>> {
    let calls = old.rooms.iter().map(|o| async move {
        if !new.rooms.iter().any(|r| r.name() == o.name()) {
            return o.events.runtime();
        }
        match old
            .store_call(
                "runtime_events",
                o.name(),
                old.store.runtime_events(&o.cfg.params),
            )
            .await
        {
            Ok(r) => Arc::new(r),
            Err(e) => {
                old.warn_store_error(&e);
                o.events.runtime()
            }
        }
    });
    futures_util::future::join_all(calls).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drawn pre-queue keeps the secret from a minute before it begins, by this instance's
    /// estimate of the store's clock, as long as its event is in a schedule.
    #[test]
    fn the_secret_is_kept_from_a_minute_before_a_drawn_prequeue() {
        let at = |secs: i64| (1_800_000_000_i64 + secs) as u64 * 1_000_000;
        let event = |draw| crate::event::Event {
            name: "flash".into(),
            prequeue_from: at(0),
            opens_at: at(3600),
            closes_at: None,
            draw,
            after_close: Default::default(),
            admit_per_second: None,
            max_active: None,
            utc_offset: 0,
        };
        let drawn = Schedule {
            events: vec![event(true)],
            version: 1,
        };
        assert!(drawing(&[&drawn], None, at(0)).is_some());
        assert!(
            drawing(&[&drawn], None, at(-30)).is_some(),
            "an estimate 30 s behind"
        );
        assert!(
            drawing(&[&drawn], None, at(-120)).is_none(),
            "two minutes before"
        );
        let plain = Schedule {
            events: vec![event(false)],
            version: 1,
        };
        assert!(drawing(&[&plain], None, at(0)).is_none());
    }
}
