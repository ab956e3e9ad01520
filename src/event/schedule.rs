//! A room's events as they stand: the config file's, with the runtime changes the store keeps
//! (added, changed, cancelled through the admin API), checked by one set of rules for both.
//!
//! The store keeps, per event name, the whole runtime definition ([`Runtime`]): a change made
//! at run time to an event of the config file shadows the file's version of it from then on
//! (a later edit of the file does not undo an operator's decision); a cancelled event is kept
//! as cancelled, so that an instance that restarts with the file does not bring it back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{valid_name, Event};
use crate::clock::Micros;

/// Most events a room keeps (config and runtime together).
pub const MAX_EVENTS: usize = 64;

/// What the store keeps for one event name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runtime {
    /// The definition in force (`None` with `cancelled`, for an event of the file).
    #[serde(default)]
    pub event: Option<Event>,
    #[serde(default)]
    pub cancelled: bool,
}

/// A room's events in force, sorted by `prequeue-from`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    pub events: Vec<Event>,
    /// The store's version of the runtime changes this was built from.
    pub version: u64,
}

/// A rule an event breaks: which (index into the list checked), which field, what and the fix.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub event: usize,
    pub field: &'static str,
    pub what: String,
    pub fix: String,
}

impl Schedule {
    /// The file's events with the store's runtime changes. Events that break the rules together
    /// (a runtime addition that overlaps an event the file gained since) keep the runtime one:
    /// the file's is left out and named in the returned warnings.
    pub fn build(
        config: &[Event],
        runtime: &BTreeMap<String, Runtime>,
        version: u64,
    ) -> (Schedule, Vec<String>) {
        let mut warnings = Vec::new();
        let mut kept: Vec<(Event, bool)> = Vec::new();
        for e in config {
            match runtime.get(&e.name) {
                Some(Runtime {
                    cancelled: true, ..
                }) => {}
                Some(Runtime {
                    event: Some(changed),
                    ..
                }) => kept.push((changed.clone(), true)),
                _ => kept.push((e.clone(), false)),
            }
        }
        for (name, r) in runtime {
            if r.cancelled || config.iter().any(|e| &e.name == name) {
                continue;
            }
            if let Some(e) = &r.event {
                kept.push((e.clone(), true));
            }
        }
        loop {
            let events: Vec<Event> = kept.iter().map(|(e, _)| e.clone()).collect();
            let problems = check(&events);
            let Some(p) = problems.iter().find(|p| !kept[p.event].1) else {
                break;
            };
            warnings.push(format!(
                "event {:?} of the config file is left out: {} {} (a runtime change is in force)",
                kept[p.event].0.name, p.field, p.what
            ));
            kept.remove(p.event);
        }
        let mut events: Vec<Event> = kept.into_iter().map(|(e, _)| e).collect();
        events.sort_by(|a, b| (a.prequeue_from, &a.name).cmp(&(b.prequeue_from, &b.name)));
        (Schedule { events, version }, warnings)
    }

    pub fn get(&self, name: &str) -> Option<&Event> {
        self.events.iter().find(|e| e.name == name)
    }

    /// The events a store call at about `now` can be decided by: the latest begun a day ago,
    /// and those after it that begin within a day. A call only ever needs the latest begun
    /// event (an older one can no longer be in force), and the margins cover clocks that
    /// disagree; the rest would only make each call longer.
    pub fn window(&self, now: Micros) -> &[Event] {
        const DAY: Micros = 86_400_000_000;
        let from = self
            .events
            .iter()
            .rposition(|e| e.prequeue_from <= now.saturating_sub(DAY))
            .unwrap_or(0);
        let to = self
            .events
            .iter()
            .rposition(|e| e.prequeue_from <= now.saturating_add(DAY))
            .map_or(from, |i| i + 1)
            .max(from);
        &self.events[from..to]
    }
}

/// The events of a window as the scripts read them (`lua/prelude.lua`'s `parse_events`): one
/// line each, `name pre open close draw after rate max`, `-` for none.
pub fn encode(events: &[Event]) -> String {
    let mut s = String::new();
    for e in events {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        s.push_str(&format!(
            "{} {} {} {} {} {} {} {}\n",
            e.name,
            e.prequeue_from,
            e.opens_at,
            opt(e.closes_at.map(|c| c.to_string())),
            if e.draw { "1" } else { "0" },
            e.after_close.as_str(),
            opt(e.admit_per_second.map(|r| format!("{r}"))),
            opt(e.max_active.map(|m| m.to_string())),
        ));
    }
    s
}

/// The rules every list of a room's events keeps, in the file and at run time. `events` in any
/// order; problems name the index in it.
pub fn check(events: &[Event]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut fail = |event, field, what: String, fix: &str| {
        out.push(Problem {
            event,
            field,
            what,
            fix: fix.to_string(),
        })
    };
    if events.len() > MAX_EVENTS {
        fail(
            MAX_EVENTS,
            "name",
            format!(
                "is event {} of the room: at most {MAX_EVENTS} are kept",
                events.len()
            ),
            "remove events that are over",
        );
    }
    for (i, e) in events.iter().enumerate() {
        if !valid_name(&e.name) {
            fail(
                i,
                "name",
                format!("{:?} is not a plain name", e.name),
                "use 1 to 64 letters, digits, '-', '_' or '.'",
            );
        }
        if events[..i].iter().any(|o| o.name == e.name) {
            fail(
                i,
                "name",
                format!("{:?} names two events of the room", e.name),
                "give each event of a room its own name",
            );
        }
        if e.prequeue_from > e.opens_at {
            fail(
                i,
                "prequeue-from",
                "is after opens-at".into(),
                "start the pre-queue before the opening",
            );
        } else if e.draw && e.prequeue_from == e.opens_at {
            fail(
                i,
                "draw",
                "draws among registrations, but the event has no pre-queue".into(),
                "set prequeue-from before opens-at, or draw = false",
            );
        }
        if let Some(close) = e.closes_at {
            if close <= e.opens_at {
                fail(
                    i,
                    "closes-at",
                    "is not after opens-at".into(),
                    "close the sale after it opens, or leave closes-at out",
                );
            }
        }
        if let Some(r) = e.admit_per_second {
            if !crate::config::valid_rate(r) {
                fail(
                    i,
                    "admit-per-second",
                    format!(
                        "{}, not {}",
                        crate::config::RATE_RULE,
                        crate::config::shown(r)
                    ),
                    "write the event's rate, such as 50",
                );
            }
        }
        if e.max_active
            .is_some_and(|m| !crate::config::valid_max_active(m))
        {
            fail(
                i,
                "max-active",
                crate::config::MAX_ACTIVE_RULE.into(),
                "write the event's cap, such as 500",
            );
        }
    }
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (events[i].prequeue_from, i));
    for w in order.windows(2) {
        let (a, b) = (&events[w[0]], &events[w[1]]);
        // An event runs from its pre-queue to its closing (or, without one, to the next
        // event's pre-queue, which must begin after it has opened). Strictly after: an event
        // gets at least a moment in each phase (its opening seen, its closing's release made).
        let end = a.closes_at.unwrap_or(a.opens_at);
        if b.prequeue_from <= end {
            fail(
                w[1],
                "prequeue-from",
                format!(
                    "begins while event {:?} still runs (events of a room must not overlap)",
                    a.name
                ),
                "start it after the other event's closes-at (or after its opens-at, if it has none), leaving at least a few seconds",
            );
        }
    }
    out
}

/// What a runtime change may not do to an event whose pre-queue has begun (by the store's
/// clock): move its start or switch its draw, which would change or void a commitment already
/// published (the start is part of the seed); nor, once the store recorded its opening
/// (`opened`), move its opening.
pub fn frozen(old: &Event, new: &Event, now: Micros, opened: bool) -> Option<Problem> {
    if now < old.prequeue_from {
        return None;
    }
    let fail = |field, what: &str| Problem {
        event: 0,
        field,
        what: what.to_string(),
        fix: "cancel the event and add a new one under another name".into(),
    };
    if new.prequeue_from != old.prequeue_from {
        return Some(fail(
            "prequeue-from",
            "cannot move: the pre-queue has begun and its start is part of the draw's seed",
        ));
    }
    if new.draw != old.draw {
        return Some(fail(
            "draw",
            "cannot change: registrants were placed by the rule in force when they came",
        ));
    }
    // Once the store recorded the opening, the event stays open whatever its `opens-at` says: a
    // moved opening would only show a countdown beside `phase: open` (found by review). An
    // opening not recorded yet may still move (a rolling reload that moves it later).
    if opened && new.opens_at != old.opens_at {
        return Some(Problem {
            event: 0,
            field: "opens-at",
            what: "cannot move: the event has opened, and an opened event stays open".into(),
            fix:
                "to hold the line now, pause the room (`queue-all`); to end the sale, set closes-at"
                    .into(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::tests::ev;
    use super::*;

    #[test]
    fn overlaps_order_and_values_are_refused() {
        let ok = vec![ev("a", 100, 200, Some(300)), ev("b", 301, 400, None)];
        assert!(check(&ok).is_empty(), "{:?}", check(&ok));
        let fields = |events: &[Event]| -> Vec<(usize, &str)> {
            check(events).iter().map(|p| (p.event, p.field)).collect()
        };
        assert_eq!(
            fields(&[ev("a", 100, 200, Some(300)), ev("b", 250, 400, None)]),
            vec![(1, "prequeue-from")]
        );
        // Without a closing, the next pre-queue may begin once this one has opened.
        assert!(check(&[ev("a", 100, 200, None), ev("b", 201, 400, None)]).is_empty());
        // Not at the same instant: the first would never be seen open (or closed).
        assert_eq!(
            fields(&[ev("a", 100, 200, None), ev("b", 200, 400, None)]),
            vec![(1, "prequeue-from")]
        );
        assert_eq!(
            fields(&[ev("a", 100, 200, Some(300)), ev("b", 300, 400, None)]),
            vec![(1, "prequeue-from")]
        );
        assert_eq!(
            fields(&[ev("b", 150, 400, None), ev("a", 100, 200, None)]),
            vec![(0, "prequeue-from")]
        );
        assert_eq!(
            fields(&[ev("a", 300, 200, None)]),
            vec![(0, "prequeue-from")]
        );
        assert_eq!(fields(&[ev("a", 200, 200, None)]), vec![(0, "draw")]);
        let mut no_draw = ev("a", 200, 200, None);
        no_draw.draw = false;
        assert!(
            check(&[no_draw]).is_empty(),
            "an opening without a pre-queue"
        );
        assert_eq!(
            fields(&[ev("a", 100, 200, Some(200))]),
            vec![(0, "closes-at")]
        );
        assert_eq!(
            fields(&[ev("a", 100, 200, Some(300)), ev("a", 400, 500, None)]),
            vec![(1, "name")]
        );
        let mut bad = ev("a b", 100, 200, None);
        bad.admit_per_second = Some(0.0);
        bad.max_active = Some(0);
        assert_eq!(
            fields(&[bad]),
            vec![(0, "name"), (0, "admit-per-second"), (0, "max-active")]
        );
    }

    #[test]
    fn runtime_changes_shadow_the_file_and_cancellations_stick() {
        let file = vec![ev("a", 100, 200, Some(300)), ev("b", 400, 500, None)];
        let mut rt = BTreeMap::new();
        let mut later = ev("a", 100, 250, Some(350));
        later.admit_per_second = Some(5.0);
        rt.insert(
            "a".to_string(),
            Runtime {
                event: Some(later.clone()),
                cancelled: false,
            },
        );
        rt.insert(
            "b".to_string(),
            Runtime {
                event: None,
                cancelled: true,
            },
        );
        rt.insert(
            "c".to_string(),
            Runtime {
                event: Some(ev("c", 600, 700, None)),
                cancelled: false,
            },
        );
        let (s, warnings) = Schedule::build(&file, &rt, 7);
        assert!(warnings.is_empty());
        assert_eq!(s.version, 7);
        let names: Vec<&str> = s.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(s.get("a"), Some(&later));
        // The file gained an event that overlaps a runtime one: the runtime one stays.
        let file2 = vec![ev("a", 100, 200, Some(300)), ev("d", 650, 800, None)];
        let (s, warnings) = Schedule::build(&file2, &rt, 8);
        let names: Vec<&str> = s.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("\"d\""));
    }

    #[test]
    fn a_window_holds_the_latest_begun_and_what_begins_soon() {
        const DAY: u64 = 86_400_000_000;
        let s = Schedule {
            events: vec![
                ev("old", DAY, DAY + 1, Some(DAY + 2)),
                ev("last", 2 * DAY, 2 * DAY + 5, Some(3 * DAY)),
                ev("soon", 5 * DAY, 5 * DAY + 5, None),
                ev("far", 9 * DAY, 9 * DAY + 5, None),
            ],
            version: 0,
        };
        let names = |now| -> Vec<String> { s.window(now).iter().map(|e| e.name.clone()).collect() };
        assert_eq!(names(4 * DAY + 1), ["last", "soon"]);
        assert_eq!(names(2 * DAY + 10), ["old", "last"], "a day's margin back");
        assert_eq!(names(0), ["old"]);
        assert_eq!(names(20 * DAY), ["far"]);
        let line = encode(&s.events[1..2]);
        assert_eq!(
            line,
            format!("last {} {} {} 1 keep - -\n", 2 * DAY, 2 * DAY + 5, 3 * DAY)
        );
    }

    #[test]
    fn a_begun_pre_queue_keeps_its_start_and_its_draw() {
        let old = ev("a", 100, 200, Some(300));
        let mut later = old.clone();
        later.opens_at = 250;
        assert_eq!(
            frozen(&old, &later, 150, false),
            None,
            "the opening may move"
        );
        let mut moved = old.clone();
        moved.prequeue_from = 120;
        assert_eq!(frozen(&old, &moved, 99, false), None, "not begun yet");
        assert_eq!(
            frozen(&old, &moved, 100, false).unwrap().field,
            "prequeue-from"
        );
        let mut undrawn = old.clone();
        undrawn.draw = false;
        assert_eq!(frozen(&old, &undrawn, 150, false).unwrap().field, "draw");
        assert_eq!(
            frozen(&old, &later, 250, false),
            None,
            "its opening not recorded"
        );
        assert_eq!(frozen(&old, &later, 250, true).unwrap().field, "opens-at");
        let mut sooner = old.clone();
        sooner.opens_at = 180;
        assert_eq!(frozen(&old, &sooner, 250, true).unwrap().field, "opens-at");
        let mut closed = old.clone();
        closed.closes_at = Some(280);
        assert_eq!(
            frozen(&old, &closed, 250, true),
            None,
            "the closing may move"
        );
    }
}
