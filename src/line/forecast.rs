//! What holds the line back and what that means for an ETA: the rate, `max-active` (the shop is
//! full and the line moves only as sessions end), or a pause. Pure: the admission tick's
//! figures in, the answer out.

use serde::Serialize;

/// Below this many admissions per second a measured rate is no measurement: the line is not
/// moving (or there has not been a line yet).
pub const MIN_MEASURED: f64 = 0.05;

/// What decides when the next visitor in line gets in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeldBy {
    /// The admission rate: a slot is free for the next batch.
    Rate,
    /// `max-active`: every slot is taken; the line moves only as sessions end (or are used up).
    MaxActive,
    /// The line is held (`queue_all`): nobody is admitted until it is released.
    Paused,
    /// The store lets nobody in for now: it waits to be told of the sessions instances let in
    /// on their own while it was away (`on-store-error = "local"`), or cannot be read under
    /// `closed`.
    Store,
}

impl HeldBy {
    pub fn as_str(self) -> &'static str {
        match self {
            HeldBy::Rate => "rate",
            HeldBy::MaxActive => "max-active",
            HeldBy::Paused => "paused",
            HeldBy::Store => "store",
        }
    }
}

/// The figures of the last admission tick a forecast is made from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub enabled: bool,
    pub queue_all: bool,
    pub waiting: u64,
    pub active: u64,
    pub max_active: u64,
    /// The store lets nobody in until instances that admitted on their own while it was away
    /// have told it ([`crate::store::AdmitReport::untold_hold`]).
    pub store_hold: bool,
}

/// What holds the line (or would hold a newcomer); `None` when nothing does: the room is off,
/// or nobody waits and a slot is free (a newcomer walks in).
pub fn held_by(f: &Figures) -> Option<HeldBy> {
    if !f.enabled {
        None
    } else if f.queue_all {
        Some(HeldBy::Paused)
    } else if f.store_hold {
        // Not the rate: the line stands still until they have told (found by review r95a: the
        // page and the admin API said `rate` meanwhile).
        Some(HeldBy::Store)
    } else if f.active >= f.max_active {
        Some(HeldBy::MaxActive)
    } else if f.waiting > 0 {
        Some(HeldBy::Rate)
    } else {
        None
    }
}

/// The admissions per second a waiting visitor's ETA should assume; 0 for "not known".
///
/// `eta_rate` is the store's choice (the measured rate, never above the rate in force; the
/// rate in force before there is a measurement). When every slot is taken that fallback is
/// wrong: the line moves as fast as sessions end, which only the measured rate knows (while
/// the shop is full, every admission is a slot that freed up). A measurement of nothing is
/// "not known", never the configured rate: a visitor first in a line held by a full shop
/// was told two seconds for a minute and more.
pub fn eta_rate(held: Option<HeldBy>, eta_rate: f64, measured: f64) -> f64 {
    match held {
        Some(HeldBy::Paused | HeldBy::Store) => 0.0,
        Some(HeldBy::MaxActive) if measured < MIN_MEASURED => 0.0,
        Some(HeldBy::MaxActive) => eta_rate.min(measured),
        _ => eta_rate,
    }
}

/// The wait a visitor who joined now would face, in seconds: 0 when they walk in, `None`
/// when not known (held, or a full shop whose sessions are not ending). `eta` and `measured`
/// as for [`eta_rate`].
pub fn new_visitor_wait(
    held: Option<HeldBy>,
    waiting: u64,
    eta: f64,
    measured: f64,
) -> Option<u64> {
    match held {
        None => Some(0),
        Some(HeldBy::Paused | HeldBy::Store) => None,
        Some(_) => crate::page::eta_seconds(waiting + 1, eta_rate(held, eta, measured)),
    }
}

/// The admissions per second to show as "now": the measured rate, never above the rate in
/// force (the bucket's first burst can make a second's count exceed it), and 0 when nobody
/// waits (the measurement is of the last line, not of now).
pub fn shown_rate(waiting: u64, measured: f64, rate_in_force: f64) -> f64 {
    if waiting == 0 {
        0.0
    } else {
        measured.min(rate_in_force).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(waiting: u64, active: u64) -> Figures {
        Figures {
            enabled: true,
            queue_all: false,
            waiting,
            active,
            max_active: 3,
            store_hold: false,
        }
    }

    #[test]
    fn what_holds_the_line() {
        assert_eq!(held_by(&figures(0, 0)), None, "a newcomer walks in");
        assert_eq!(held_by(&figures(5, 1)), Some(HeldBy::Rate));
        assert_eq!(held_by(&figures(5, 3)), Some(HeldBy::MaxActive));
        assert_eq!(
            held_by(&figures(0, 3)),
            Some(HeldBy::MaxActive),
            "a newcomer to a full shop waits"
        );
        let paused = Figures {
            queue_all: true,
            ..figures(5, 3)
        };
        assert_eq!(held_by(&paused), Some(HeldBy::Paused));
        let told = Figures {
            store_hold: true,
            ..figures(0, 0)
        };
        assert_eq!(
            held_by(&told),
            Some(HeldBy::Store),
            "not even a newcomer walks in"
        );
        assert_eq!(
            held_by(&Figures {
                queue_all: true,
                ..told
            }),
            Some(HeldBy::Paused),
            "the operator's hold first"
        );
        assert_eq!(eta_rate(held_by(&told), 5.0, 5.0), 0.0, "not known");
        assert_eq!(new_visitor_wait(held_by(&told), 0, 5.0, 5.0), None);
        let off = Figures {
            enabled: false,
            ..paused
        };
        assert_eq!(held_by(&off), None);
    }

    /// The case an operator met: 0.5/s, max-active 3 full, sessions not ending.
    #[test]
    fn a_full_shop_that_does_not_empty_has_no_eta() {
        let held = held_by(&figures(1, 3));
        // The store fell back to the configured rate: the measurement decayed to nothing.
        assert_eq!(eta_rate(held, 0.5, 0.01), 0.0);
        assert_eq!(crate::page::eta_seconds(1, eta_rate(held, 0.5, 0.01)), None);
        assert_eq!(new_visitor_wait(held, 1, 0.5, 0.01), None);
        // Sessions end at 0.1/s: that is the line's pace, not the rate.
        assert_eq!(eta_rate(held, 0.1, 0.1), 0.1);
        assert_eq!(
            crate::page::eta_seconds(2, eta_rate(held, 0.1, 0.1)),
            Some(20)
        );
        // Held by the rate, the store's choice stands (also before a measurement).
        assert_eq!(eta_rate(Some(HeldBy::Rate), 0.5, 0.0), 0.5);
        assert_eq!(eta_rate(Some(HeldBy::Paused), 0.5, 0.5), 0.0);
    }

    #[test]
    fn a_newcomer_to_an_empty_line_walks_in() {
        assert_eq!(new_visitor_wait(None, 0, 0.5, 0.0), Some(0));
        assert_eq!(new_visitor_wait(Some(HeldBy::Rate), 9, 5.0, 5.0), Some(2));
        assert_eq!(new_visitor_wait(Some(HeldBy::Paused), 9, 5.0, 5.0), None);
    }

    #[test]
    fn the_rate_shown_is_of_a_line_and_within_the_rate() {
        assert_eq!(shown_rate(0, 0.9, 0.5), 0.0, "the line emptied");
        assert_eq!(shown_rate(4, 0.6, 0.5), 0.5, "a first burst");
        assert_eq!(shown_rate(4, 0.3, 0.5), 0.3);
    }
}
