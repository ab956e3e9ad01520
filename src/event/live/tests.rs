//! Tests of a room's events as an instance sees them.

use super::*;
use crate::event::tests::ev;

#[test]
fn the_phase_alone_is_the_views_phase() {
    let events = RoomEvents::new(
        "sale",
        vec![ev("a", 100, 200, Some(300)), ev("b", 400, 500, None)],
        None,
    );
    for t in (0..700).step_by(7) {
        assert_eq!(events.phase(t), events.view(t).map(|v| v.phase), "{t}");
    }
}

/// The seconds to the next pre-queue's start, which no session kept or admitted on an
/// instance alone outlives (review r100b, r101a): none once the last has begun.
#[test]
fn the_next_prequeue_is_the_nearest_still_to_begin() {
    let s = 1_000_000;
    let events = RoomEvents::new(
        "sale",
        vec![
            ev("a", 100 * s, 200 * s, Some(300 * s)),
            ev("b", 400 * s, 500 * s, None),
        ],
        None,
    );
    assert_eq!(events.secs_to_next_prequeue(30 * s), Some(70));
    assert_eq!(events.secs_to_next_prequeue(100 * s), Some(300));
    assert_eq!(events.secs_to_next_prequeue(399 * s + 1), Some(0));
    assert_eq!(events.secs_to_next_prequeue(400 * s), None);
}

#[test]
fn changes_made_before_the_first_tick_are_checked_at_it() {
    let events = RoomEvents::new("sale", vec![], None);
    // Nothing changed here: the first generation is only noted.
    assert!(!events.note_generation("g1"));
    assert!(!events.note_generation("g1"));
    assert!(events.note_generation("g2"));
    // An event added through the admin API before this instance's first tick: the store
    // may have lost it before that tick, whatever generation the tick reports.
    let fresh = RoomEvents::new("sale", vec![], None);
    let mut runtime = RuntimeEvents {
        version: 1,
        ..RuntimeEvents::default()
    };
    runtime.events.insert(
        "kept".into(),
        crate::event::schedule::Runtime {
            event: Some(ev("kept", 100, 200, None)),
            cancelled: false,
        },
    );
    fresh.rebuild(&runtime);
    assert!(fresh.note_generation("g1"));
    assert!(!fresh.note_generation("g1"));
}

#[test]
fn a_cancelled_draw_is_published_by_its_id_and_an_event_of_its_id_back_is_not_revealed() {
    let secret: Option<Arc<[u8]>> = Some(Arc::from(&b"secret"[..]));
    let events = RoomEvents::new("sale", vec![], secret.clone());
    let gone = ev("drop", 100, 200, None);
    let out = LineDraw {
        id: gone.id(),
        out: true,
        epoch: 7,
    };
    events.learn(None, Some(&out), 150, 0, 150);
    let c = events.cancelled_draw().expect("the cancelled draw");
    assert_eq!(
        (c.name.as_str(), c.prequeue_from, c.epoch),
        ("drop", 100, 7)
    );
    assert_eq!(Some(c.seed), events.seed(&gone));
    assert!(!events.line_sealed(150));
    // The same event back in the file (the same id): not the cancelled one any more, and
    // not revealed by the draw being out — it is in its pre-queue, places nobody by the
    // draw, and does not claim to be open (found by re-review).
    let back = RoomEvents::new("sale", vec![gone.clone()], secret);
    back.learn(None, Some(&out), 150, 0, 150);
    assert!(back.cancelled_draw().is_none());
    assert!(!back.revealed(&gone));
    assert_eq!(back.view(150).map(|v| v.phase), Some(Phase::Prequeue));
}

/// An instance that has not heard from the store reads its own clock, which may be minutes off
/// the store's: it takes the room as not yet open from ten minutes before the pre-queue to ten
/// minutes after the opening (review r103b); one that has heard, by the store's clock only.
#[test]
fn an_unheard_instance_holds_ten_minutes_either_side_of_an_event() {
    let m = 60_000_000;
    let events = RoomEvents::new("sale", vec![ev("a", 100 * m, 110 * m, None)], None);
    for (t, unheard) in [
        (89 * m, false),
        (91 * m, true),
        (100 * m, true),
        (109 * m, true),
        (115 * m, true),
        (121 * m, false),
    ] {
        assert_eq!(
            events.opening_unconfirmed(t, false),
            unheard,
            "unheard, {t}"
        );
    }
    // Heard: the pre-queue and the time before it are not an opening to confirm.
    assert!(!events.opening_unconfirmed(91 * m, true));
    assert!(!events.opening_unconfirmed(100 * m, true));
    // An order on an admission cookie asks the store in the same window; a page does not.
    assert!(events.refuses_cookies(91 * m, false, true));
    assert!(!events.refuses_cookies(91 * m, false, false));
    assert!(!events.refuses_cookies(91 * m, true, true));
    assert!(!events.refuses_cookies(89 * m, false, true));
}

/// Runtime changes that could not be read stand unread from the first failure until a read,
/// over a reload too (found by re-review r108a: a SIGHUP made an instance that could not read
/// them say it was ready for five seconds).
#[test]
fn unread_changes_stand_until_read_over_a_reload() {
    let events = RoomEvents::new("sale", vec![], None);
    assert_eq!(events.unread_for(50), None);
    events.note_read(false, 100);
    events.note_read(false, 150);
    assert_eq!(events.unread_for(400), Some(300), "from the first failure");
    let reloaded = RoomEvents::new("sale", vec![], None);
    reloaded.inherit(&events, 400);
    assert_eq!(reloaded.unread_for(500), Some(400));
    reloaded.note_read(true, 600);
    assert_eq!(reloaded.unread_for(700), None);
}
