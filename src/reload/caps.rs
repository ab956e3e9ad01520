//! A reload against the events it keeps: an event added at run time (the admin API) was
//! checked against the upstream caps of the file running then, and a new file may lower a cap,
//! move a room to another upstream or raise another room's rate under it. Each event not yet
//! closed, of the file or of the store's runtime changes, must still run within what its
//! upstream's `admit-per-second` leaves its room (`config::event_rate_bound`), as `check` asks
//! of the file's own (found by review: the README said a reload did not check this, and an
//! event at 90/s ran on under a cap lowered to 50/s).

use std::sync::Arc;

use crate::app::Shared;
use crate::clock::Micros;
use crate::config::{self, locate::KeyPath};
use crate::event::schedule::Schedule;
use crate::store::RuntimeEvents;

/// A problem: where in the new file, what, and the fix.
pub(super) type Problem = (KeyPath, String, String);

/// The events of `new` (its file's, with the running rooms' runtime changes, `runtime` in the
/// order of `old.rooms`) whose rate is above what their upstream's cap leaves their room at
/// `now` or later. Other rooms count at their rates in force (an operator's pin on a room the
/// new file keeps) or their events' while these admit.
pub(super) fn events_over_caps(
    old: &Shared,
    new: &config::Config,
    runtime: &[Arc<RuntimeEvents>],
    now: Micros,
) -> Vec<Problem> {
    let running = |name: &str| old.rooms.iter().position(|o| o.name() == name);
    let schedules: Vec<Schedule> = new
        .rooms
        .iter()
        .map(|r| {
            let rt = running(r.name())
                .and_then(|i| runtime.get(i).cloned())
                .unwrap_or_default();
            Schedule::build(&r.events, &rt.events, rt.version).0
        })
        .collect();
    let events_of = |i: usize| schedules.get(i).map_or_else(Vec::new, |s| s.events.clone());
    let rate_of = |i: usize| {
        new.rooms.get(i).map_or(0.0, |r| {
            let own = r.params.admit_per_second;
            running(r.name())
                .and_then(|o| old.rooms[o].live.rate_in_force())
                .map_or(own, |pin| pin.max(own))
        })
    };
    let mut out = Vec::new();
    for (i, (r, s)) in new.rooms.iter().zip(&schedules).enumerate() {
        for e in s
            .events
            .iter()
            .filter(|e| e.closes_at.is_none_or(|c| c > now))
        {
            let Some(rate) = e.admit_per_second else {
                continue;
            };
            let Some(bound) = config::event_rate_bound(
                &new.rooms,
                &new.upstreams,
                i,
                e,
                &events_of,
                &rate_of,
                now,
            ) else {
                continue;
            };
            if rate <= bound {
                continue;
            }
            let upstream = &new.upstreams[r.upstream];
            let from_file = r.events.iter().any(|f| f.name == e.name);
            out.push((
                KeyPath::root()
                    .key("upstream")
                    .index(r.upstream)
                    .key("admit-per-second"),
                format!(
                    "event {:?} of room {:?}{} admits {rate}/s, more than upstream {:?}'s admit-per-second leaves the room in this file ({bound}/s, after what the other rooms admit meanwhile)",
                    e.name,
                    r.name(),
                    if from_file { "" } else { " (added at run time)" },
                    upstream.name,
                ),
                format!(
                    "lower the event's rate first (`anteroom room {} event change {} --admit-per-second {bound}`), then reload; or keep the cap",
                    r.name(),
                    e.name
                ),
            ));
        }
    }
    out
}
