//! Events at the proxy: the countdown of a pre-queue (answered from the ticket and this
//! instance's knowledge of the event, no store call), what a visitor is told of the event in
//! force, and the "ended" answer after the closing (see [`crate::event`]).

use std::time::Duration;

use pingora::proxy::Session;
use pingora::Result;

use super::refuse::ClosedWords;
use super::{Ctx, Proxy};
use crate::app::Shared;
use crate::event::live::View;
use crate::event::{draw, time, Phase};
use crate::metrics::Reject;
use crate::page::{EventStatus, PlacedBy, State, Status};
use crate::store::VisitorId;

/// The countdown's next poll: half the time to the opening (between 1 s and 30 s); close to
/// it, just after it, spread over two seconds so that a pre-queue of thousands does not poll
/// in one instant.
pub fn countdown_poll(opens_in: Duration) -> Duration {
    let two = Duration::from_secs(2);
    if opens_in > two {
        return (opens_in / 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
    }
    opens_in + Duration::from_millis(200 + fastrand::u64(0..2000))
}

impl Proxy {
    /// What `vid` is told of the room's event in force. `registered`: they hold a place of the
    /// event's draw (their registration ticket is shown); `drawn_in`: the line's epoch of their
    /// drawn place, when their ticket or the join told it.
    pub(super) fn event_status(
        shared: &Shared,
        room: usize,
        v: &View,
        vid: Option<VisitorId>,
        registered: bool,
        drawn_in: Option<u64>,
    ) -> EventStatus {
        let r = &shared.rooms[room];
        let e = &v.event;
        let seed = if e.draw {
            r.events.published_seed(e)
        } else {
            None
        };
        // A registrant's ticket is of the draw their place was drawn in: this event's, unless
        // the line's draw is another's (cancelled; shown as `placed_by`) and their place is in
        // its epoch (a place of another epoch was drawn since the last tick: re-review). Before
        // (found by review), a registrant of a cancelled draw was shown a ticket of the next
        // event's, in no list.
        let own = r
            .events
            .line_draw()
            .is_none_or(|d| e.is(&d.id) || drawn_in.is_some_and(|epoch| epoch != d.epoch));
        EventStatus {
            name: e.name.clone(),
            opens_at: time::format_exact(e.opens_at, e.utc_offset),
            // No countdown beside an opening the store recorded early by this clock.
            opens_in_seconds: match v.phase {
                Phase::Prequeue => e.opens_at.saturating_sub(v.now).div_ceil(1_000_000),
                _ => 0,
            },
            closes_at: e.closes_at.map(|c| time::format_exact(c, e.utc_offset)),
            phase: v.phase.as_str(),
            draw: e.draw,
            commitment: seed.map(|s| draw::commitment(&s)),
            seed: seed.filter(|_| v.revealed).map(|s| draw::hex(&s)),
            ticket: vid
                .filter(|_| e.draw && registered && own)
                .map(|vid| draw::hex(&r.events.ticket(e, vid))),
            registrations: v.registrations,
            url: format!("/.anteroom/event?room={}", r.name()),
        }
    }

    /// The cancelled draw `vid`'s place was drawn in: when they hold a drawn place in the
    /// line's epoch `drawn_in` and the line's draw, in that epoch, is of an event no longer in
    /// the schedule.
    pub(super) fn placed_by(
        shared: &Shared,
        room: usize,
        vid: VisitorId,
        drawn_in: Option<u64>,
    ) -> Option<Box<PlacedBy>> {
        let epoch = drawn_in?;
        let r = &shared.rooms[room];
        let d = r.events.cancelled_draw().filter(|d| d.epoch == epoch)?;
        Some(Box::new(PlacedBy {
            event: d.name.clone(),
            commitment: draw::commitment(&d.seed),
            seed: d.out.then(|| draw::hex(&d.seed)),
            ticket: draw::hex(&d.ticket(r.name(), vid)),
            url: format!("/.anteroom/event?room={}&event={}", r.name(), d.id),
        }))
    }

    /// The answer to a registrant during a pre-queue: the countdown, their place when it is
    /// not a draw's (`drawn`); `drawn_in`, the line's epoch of their drawn place.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prequeue_status(
        shared: &Shared,
        room: usize,
        v: &View,
        vid: VisitorId,
        position: Option<u64>,
        waiting: u64,
        drawn: bool,
        drawn_in: Option<u64>,
    ) -> Status {
        let r = &shared.rooms[room];
        let opens_in = Duration::from_micros(v.event.opens_at.saturating_sub(v.now));
        Status {
            room: r.name().to_string(),
            state: State::Prequeue,
            position: position.filter(|_| !drawn),
            waiting: if drawn {
                v.registrations.max(waiting)
            } else {
                waiting
            },
            eta_seconds: None,
            eta_low_seconds: None,
            eta_high_seconds: None,
            retry_after_ms: countdown_poll(opens_in).as_millis() as u64,
            held_by: Some("prequeue"),
            event: Some(Box::new(Self::event_status(
                shared,
                room,
                v,
                Some(vid),
                drawn,
                drawn_in,
            ))),
            placed_by: Self::placed_by(shared, room, vid, drawn_in),
        }
    }

    /// Adds the event in force to an answer (a visitor in line after the opening sees the
    /// draw's commitment and seed, and their ticket when they registered: `drawn_in`, the
    /// line's epoch of their drawn place).
    pub(super) fn with_event(
        shared: &Shared,
        room: usize,
        mut s: Status,
        vid: VisitorId,
        drawn_in: Option<u64>,
    ) -> Status {
        let r = &shared.rooms[room];
        if s.placed_by.is_none() {
            s.placed_by = Self::placed_by(shared, room, vid, drawn_in);
        }
        if s.event.is_none() {
            if let Some(v) = r.events.view(shared.clock.now_micros()) {
                s.event = Some(Box::new(Self::event_status(
                    shared,
                    room,
                    &v,
                    Some(vid),
                    drawn_in.is_some(),
                    drawn_in,
                )));
            }
        }
        s
    }

    /// After an event's closing: "this sale has ended" (`title_ended`, `lead_ended`), with the
    /// room's `closed-status`; nobody is added to the line.
    pub(super) async fn send_ended(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        always_json: bool,
    ) -> Result<()> {
        let words = ClosedWords {
            state: "ended",
            title: ("title_ended", "This sale has ended"),
            lead: (
                "lead_ended",
                "Thank you for your interest. This sale is over.",
            ),
            reject: Reject::Ended,
        };
        Self::send_closed_words(shared, session, ctx, room, always_json, &words).await
    }
}

/// Whether a room's event view says the store should decide a poll: at the opening, until a
/// tick has confirmed it (the snapshot still says pre-queue while the clock says open).
pub(super) fn opening_unconfirmed(v: &View, store_says_prequeue: bool) -> bool {
    v.phase != Phase::Prequeue && store_says_prequeue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_countdown_polls_less_far_from_the_opening_and_spreads_after_it() {
        let s = Duration::from_secs;
        assert_eq!(countdown_poll(s(3600)), s(30));
        assert_eq!(countdown_poll(s(20)), s(10));
        assert_eq!(countdown_poll(s(3)), Duration::from_millis(1500).max(s(1)));
        for _ in 0..100 {
            let p = countdown_poll(Duration::from_millis(1500));
            assert!(
                p > Duration::from_millis(1500) && p <= Duration::from_millis(3700),
                "{p:?}"
            );
        }
    }
}
