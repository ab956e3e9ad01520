//! What a protected request gets when its store call failed: the room's `on-store-error`
//! policy applied to what this instance last knew of the room.
//!
//! One pure function, [`on_store_error`], so that every combination is in one table of tests.
//! The rules, and why:
//! - A store that refuses the room's keys (another key layout: anteroom versions mixed on one
//!   room) puts everyone on hold, whatever the policy: it is not an outage that ends by
//!   itself, and `open` would pass everyone for as long as the versions are mixed (found by
//!   review: orders without any cookie reached the shop).
//! - A room last seen switched off lets everyone pass, whatever the policy: nobody queues in a
//!   room that is off.
//! - A line last seen held (`queue_all`) stays held under every policy: a store blip before a
//!   sale must not open the doors early.
//! - So does a room whose instances disagree on its events at the last tick (a rolling reload
//!   under way): the store admits nobody then, and an instance whose own file has no event
//!   would let newcomers into a drawn sale's pre-queue (found by review: with Redis paused
//!   mid-rollout, they reached the shop and ordered through the other instance before the
//!   opening).
//! - So does a room whose event is past its opening by this instance's clock while the store
//!   has not said it opened (`unopened`), also on an instance that has never heard from the
//!   store: the registrants of its pre-queue go first, and only the store lets them in.
//!   Before (found by review), Redis paused across a drawn opening let newcomers in through
//!   the `local` policy ahead of everyone registered.
//! - `open` lets everyone else through; `closed` puts everyone on hold ("paused", keep polling).
//! - `local` admits from this instance's own bucket only while the circuit breaker is open,
//!   i.e. while the store is known to be down. A single failed call with the breaker closed (a
//!   slow Redis, a one-off timeout) is put on hold: the store is probably still admitting at
//!   the full rate, and admitting here too would add up to rate/N per instance on top of it.
//! - `local` stays closed until this instance has heard from the store once (an admission tick
//!   answered): before that it knows neither the room's state nor how many instances share it.
//! - `local` admits at most its share of max-active: the room's max-active in force divided by
//!   the instances last seen alive (rounded down, so that the shares never add up to more than
//!   the cap), minus the sessions this instance admitted locally that are still within their
//!   session. Sessions admitted through the store before the outage are not subtracted: this
//!   instance cannot know how many of them are still browsing.

use std::time::Duration;

use crate::config::StorePolicy;
use crate::store::StoreError;

/// How the store call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Not made: the circuit breaker is open (the store failed repeatedly just now).
    BreakerOpen,
    /// Made, and it failed or timed out, while the breaker was closed or half-open.
    Failed,
    /// Made, and the store refused the room's keys: another key layout.
    Refused,
}

impl Failure {
    pub fn of(e: &StoreError) -> Self {
        match e {
            StoreError::BreakerOpen { .. } => Failure::BreakerOpen,
            e if e.is_layout_refusal() => Failure::Refused,
            StoreError::Timeout { .. } | StoreError::Unavailable { .. } => Failure::Failed,
        }
    }
}

/// What this instance last knew of the room (from its admission loop), and what it admitted
/// on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastKnown {
    /// An admission tick has answered at least once since this instance started.
    pub heard: bool,
    /// The last admission tick that reached the store was refused: another key layout.
    pub refused: bool,
    pub enabled: bool,
    pub queue_all: bool,
    /// The last tick said the live instances disagree on the room's events (a rolling reload
    /// under way): the store admits nobody meanwhile, and neither does this instance's policy.
    pub events_mixed: bool,
    /// The room's event is open by this instance's clock, and the store had not said it
    /// opened when it last answered.
    pub unopened: bool,
    /// The room's max-active in force (config or override).
    pub max_active: u64,
    /// Live proxy instances of the room, at least 1.
    pub instances: u64,
    /// Sessions this instance admitted locally that have not run out yet.
    pub local_active: u64,
    /// Sessions the store held at the last tick that may still run (see [`still_active`]).
    pub store_active: u64,
}

/// Of the `active` sessions the store held when it last answered, `since` ago, how many may
/// still run: all of them at first, none after a whole `session-ttl` (each would have had to
/// renew through the store), linearly in between. Unknown (never heard): all.
pub fn still_active(active: u64, since: Option<Duration>, session_ttl: Duration) -> u64 {
    let Some(since) = since else {
        return active;
    };
    if session_ttl.is_zero() || since >= session_ttl {
        return 0;
    }
    let left = 1.0 - since.as_secs_f64() / session_ttl.as_secs_f64();
    (active as f64 * left).ceil() as u64
}

/// The answer for the visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// On to the origin without an admission.
    Pass,
    /// The "paused" waiting response: poll again.
    Hold,
    /// Admit if this instance's rate bucket has a token and fewer than `share` local sessions
    /// are running (checked again, atomically, by the bucket).
    Local { share: u64 },
}

/// The decision; see the module docs for the rules.
pub fn on_store_error(policy: StorePolicy, failure: Failure, room: &LastKnown) -> OnError {
    if failure == Failure::Refused || room.refused {
        return OnError::Hold;
    }
    if room.heard && !room.enabled {
        return OnError::Pass;
    }
    // Unopened holds without a tick heard too: an instance started (or upgraded) during the
    // outage knows the store has not told it of the opening (re-review: under `open` it let
    // everyone in at an opening the store never recorded).
    if room.unopened || (room.heard && (room.queue_all || room.events_mixed)) {
        return OnError::Hold;
    }
    match policy {
        StorePolicy::Open => OnError::Pass,
        StorePolicy::Closed => OnError::Hold,
        StorePolicy::Local => {
            if failure != Failure::BreakerOpen || !room.heard {
                return OnError::Hold;
            }
            // This instance's share of the slots the store's sessions leave free.
            let share = room.max_active.saturating_sub(room.store_active) / room.instances.max(1);
            if room.local_active >= share {
                OnError::Hold
            } else {
                OnError::Local { share }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Failure::{BreakerOpen as Down, Failed};
    use OnError::{Hold, Pass};
    use StorePolicy::{Closed, Local, Open};

    const ROOM: LastKnown = LastKnown {
        heard: true,
        refused: false,
        enabled: true,
        queue_all: false,
        events_mixed: false,
        unopened: false,
        max_active: 100,
        instances: 2,
        local_active: 0,
        store_active: 0,
    };

    fn with(f: impl FnOnce(&mut LastKnown)) -> LastKnown {
        let mut r = ROOM;
        f(&mut r);
        r
    }

    #[test]
    fn the_store_s_sessions_leave_their_slots_taken() {
        let busy = with(|r| r.store_active = 60);
        assert_eq!(
            on_store_error(Local, Down, &busy),
            OnError::Local { share: 20 }
        );
        let full = with(|r| r.store_active = 100);
        assert_eq!(on_store_error(Local, Down, &full), Hold);
        let s = Duration::from_secs;
        assert_eq!(still_active(100, None, s(600)), 100);
        assert_eq!(still_active(100, Some(s(0)), s(600)), 100);
        assert_eq!(still_active(100, Some(s(300)), s(600)), 50);
        assert_eq!(still_active(100, Some(s(600)), s(600)), 0);
    }

    #[test]
    fn the_table() {
        let never_heard = with(|r| r.heard = false);
        let held = with(|r| r.queue_all = true);
        let off = with(|r| r.enabled = false);
        let off_and_held = with(|r| {
            r.enabled = false;
            r.queue_all = true
        });
        let share_used = with(|r| r.local_active = 50);
        let share_almost_used = with(|r| r.local_active = 49);
        let alone = with(|r| r.instances = 1);
        let zero_instances = with(|r| r.instances = 0);
        let tiny_cap = with(|r| {
            r.max_active = 2;
            r.instances = 3
        });
        let unopened = with(|r| r.unopened = true);
        let unopened_and_off = with(|r| {
            r.unopened = true;
            r.enabled = false
        });
        let refused = with(|r| r.refused = true);
        let mixed = with(|r| r.events_mixed = true);
        let mixed_and_off = with(|r| {
            r.events_mixed = true;
            r.enabled = false
        });
        let refused_and_off = with(|r| {
            r.refused = true;
            r.enabled = false
        });
        let cases: &[(StorePolicy, Failure, &LastKnown, OnError, &str)] = &[
            (
                Local,
                Down,
                &mixed,
                Hold,
                "instances disagree on the events: no local admission",
            ),
            (Open, Down, &mixed, Hold, "nor open"),
            (
                Open,
                Down,
                &mixed_and_off,
                Pass,
                "a room last seen off lets everyone pass",
            ),
            (
                Open,
                Failure::Refused,
                &ROOM,
                Hold,
                "another key layout: not open",
            ),
            (
                Open,
                Down,
                &refused,
                Hold,
                "refused at the last tick, breaker open now",
            ),
            (
                Local,
                Down,
                &refused,
                Hold,
                "refused: no local admission either",
            ),
            (Closed, Failure::Refused, &ROOM, Hold, "closed stays closed"),
            (
                Open,
                Failure::Refused,
                &off,
                Hold,
                "refused outranks a room last seen off",
            ),
            (
                Open,
                Failed,
                &refused_and_off,
                Hold,
                "refused, and off before",
            ),
            (
                Local,
                Down,
                &ROOM,
                OnError::Local { share: 50 },
                "breaker open: its share",
            ),
            (
                Local,
                Failed,
                &ROOM,
                Hold,
                "one failed call, breaker closed",
            ),
            (
                Local,
                Down,
                &never_heard,
                Hold,
                "never heard from the store",
            ),
            (
                Local,
                Failed,
                &never_heard,
                Hold,
                "never heard, one failure",
            ),
            (Local, Down, &held, Hold, "held line stays held"),
            (Local, Down, &off, Pass, "room switched off"),
            (Local, Failed, &off, Pass, "room off, one failure"),
            (Local, Down, &off_and_held, Pass, "off wins over held"),
            (Local, Down, &share_used, Hold, "share of max-active used"),
            (
                Local,
                Down,
                &share_almost_used,
                OnError::Local { share: 50 },
                "one left",
            ),
            (
                Local,
                Down,
                &alone,
                OnError::Local { share: 100 },
                "alone: the whole cap",
            ),
            (
                Local,
                Down,
                &zero_instances,
                OnError::Local { share: 100 },
                "0 counts as 1",
            ),
            (Local, Down, &tiny_cap, Hold, "a share rounds down to none"),
            (Open, Failed, &ROOM, Pass, "open lets through"),
            (Open, Down, &ROOM, Pass, "open lets through"),
            (Open, Down, &never_heard, Pass, "open, never heard"),
            (Open, Down, &held, Hold, "open honours a held line"),
            (Open, Failed, &off, Pass, "open, room off"),
            (Closed, Down, &ROOM, Hold, "closed holds"),
            (Closed, Failed, &ROOM, Hold, "closed holds"),
            (Closed, Down, &off, Pass, "closed, room off"),
            (Closed, Down, &held, Hold, "closed, held"),
            (
                Local,
                Down,
                &unopened,
                Hold,
                "an opening not yet the store's",
            ),
            (
                Open,
                Down,
                &unopened,
                Hold,
                "open waits for the opening too",
            ),
            (Open, Failed, &unopened, Hold, "one failure at the opening"),
            (
                Local,
                Down,
                &unopened_and_off,
                Pass,
                "off wins over unopened",
            ),
            (
                Open,
                Down,
                &with(|r| {
                    r.unopened = true;
                    r.heard = false
                }),
                Hold,
                "unopened, never heard",
            ),
        ];
        for (policy, failure, room, want, why) in cases {
            assert_eq!(
                on_store_error(*policy, *failure, room),
                *want,
                "{why}: {policy:?} {failure:?} {room:?}"
            );
        }
    }

    #[test]
    fn failures_are_told_apart() {
        let room = "r".to_string();
        assert_eq!(
            Failure::of(&StoreError::BreakerOpen {
                op: "join",
                room: room.clone()
            }),
            Failure::BreakerOpen
        );
        assert_eq!(
            Failure::of(&StoreError::Timeout {
                op: "join",
                room: room.clone(),
                after: std::time::Duration::from_millis(1)
            }),
            Failure::Failed
        );
        assert_eq!(
            Failure::of(&StoreError::Unavailable {
                op: "join",
                room,
                reason: "x".into()
            }),
            Failure::Failed
        );
    }
}
