use super::*;

fn snap(points: Vec<(u64, u64)>, waiting: u64) -> Snapshot {
    Snapshot {
        sample: LineSample { epoch: 1, points },
        waiting,
        enabled: true,
        queue_all: false,
        eta_rate: 10.0,
        rate: 0.0,
        burst: 0,
        room_left: u64::MAX,
        taken: Instant::now(),
        random_recent: false,
        stale_after: Duration::from_secs(3600),
    }
}

fn ticket(key: u64, seen: u64, shown: u64) -> Ticket {
    Ticket {
        vid: VisitorId::from_bytes([1; 16]),
        place: Place { epoch: 1, key },
        seen,
        shown,
        predicted: None,
        drawn: false,
    }
}

/// A registration at any instant of second `seen` (the ticket keeps whole seconds): only a
/// snapshot taken after that second ends can have been taken after it, and only such a
/// snapshot's empty line says the store lost it.
#[test]
fn only_an_empty_line_seen_surely_after_a_registration_lost_it() {
    let t = ticket(5, 10, 3);
    let empty = snap(vec![], 0);
    for taken in [9_000_000, 10_000_000, 10_400_000, 10_999_999, 11_000_000] {
        assert!(!registration_lost(&empty, taken, &t), "{taken}");
    }
    assert!(registration_lost(&empty, 11_000_001, &t));
    assert!(!registration_lost(&snap(vec![(5, 1)], 1), 60_000_000, &t));
    let other_line = Snapshot {
        sample: LineSample {
            epoch: 2,
            points: vec![],
        },
        ..snap(vec![], 1)
    };
    assert!(registration_lost(&other_line, 9_000_000, &t));
}

const ABANDON: Duration = Duration::from_secs(300);

#[test]
fn a_ticket_behind_the_head_is_answered_here() {
    let s = snap(vec![(0, 10), (5, 60), (9, 100)], 10);
    match decide(Some(&s), &ticket(60, 1000, 50), 1010, ABANDON, true) {
        Edge::Answer {
            position,
            waiting,
            paused,
            refresh,
            ..
        } => {
            assert_eq!((position, waiting, paused, refresh), (6, 10, false, false));
        }
        e => panic!("{e:?}"),
    }
    // Shown 3 before: never more now.
    assert!(matches!(
        decide(Some(&s), &ticket(60, 1000, 3), 1010, ABANDON, true),
        Edge::Answer { position: 3, .. }
    ));
}

/// A visitor who joined after the snapshot, in a spike of arrivals: their place from the
/// store (shown 150) stands, not "everyone in the sample plus one" (which would then stick,
/// as a position never goes up).
#[test]
fn a_visitor_who_joined_after_the_snapshot_keeps_the_place_the_store_gave() {
    let s = snap(vec![(0, 10), (4, 50)], 5);
    match decide(Some(&s), &ticket(900, 1000, 150), 1001, ABANDON, true) {
        Edge::Answer {
            position, waiting, ..
        } => assert_eq!((position, waiting), (150, 150)),
        e => panic!("{e:?}"),
    }
    assert_eq!(
        decide(Some(&s), &ticket(900, 1000, 0), 1001, ABANDON, true),
        Edge::AskStore,
        "no place known: the store tells"
    );
}

#[test]
fn the_turn_an_empty_line_no_snapshot_and_a_switched_off_room_ask_the_store() {
    let s = snap(vec![(0, 10), (9, 100)], 10);
    for key in [5, 10] {
        assert_eq!(
            decide(Some(&s), &ticket(key, 1000, 9), 1001, ABANDON, true),
            Edge::AskStore
        );
    }
    assert_eq!(
        decide(None, &ticket(50, 1000, 9), 1001, ABANDON, true),
        Edge::AskStore
    );
    let off = Snapshot {
        enabled: false,
        ..s.clone()
    };
    assert_eq!(
        decide(Some(&off), &ticket(50, 1000, 9), 1001, ABANDON, true),
        Edge::AskStore
    );
}

/// Who may have been admitted since the snapshot (by another instance's tick, or this
/// one's next) asks the store: rate × age plus a batch, at most three batches; nobody
/// while the line is held.
#[test]
fn the_front_that_may_have_gone_since_the_snapshot_asks_the_store() {
    let s = Snapshot {
        rate: 100.0,
        burst: 10,
        ..snap(vec![(0, 10), (10, 20), (20, 30), (40, 50)], 50)
    };
    let ms = Duration::from_millis;
    assert_eq!(s.may_have_gone(ms(0)), 10);
    assert_eq!(s.may_have_gone(ms(150)), 25);
    assert_eq!(
        s.may_have_gone(ms(5000)),
        30,
        "an old snapshot: a few batches"
    );
    let held = Snapshot {
        queue_all: true,
        ..s.clone()
    };
    assert_eq!(held.may_have_gone(ms(150)), 0);
    let full = Snapshot {
        room_left: 0,
        ..s.clone()
    };
    assert_eq!(full.may_have_gone(ms(5000)), 10, "a full shop: one batch");
    let nearly = Snapshot {
        room_left: 4,
        ..s.clone()
    };
    assert_eq!(nearly.may_have_gone(ms(5000)), 14);
    // Just taken: ranks 0–9 ask, rank 10 is answered here.
    assert_eq!(
        decide(Some(&s), &ticket(19, 1000, 50), 1001, ABANDON, true),
        Edge::AskStore
    );
    assert!(matches!(
        decide(Some(&s), &ticket(20, 1000, 50), 1001, ABANDON, true),
        Edge::Answer { position: 11, .. }
    ));
    // A visitor who joined after the snapshot, shown a place within it, asks too.
    let short = Snapshot {
        rate: 100.0,
        burst: 10,
        ..snap(vec![(0, 10), (2, 12)], 3)
    };
    assert_eq!(
        decide(Some(&short), &ticket(90, 1000, 4), 1001, ABANDON, true),
        Edge::AskStore
    );
}

/// An instance whose breaker is open renews no ticket's `seen`: its liveness batch cannot
/// reach the store, and a ticket renewed there looks fresh to the instances that could.
#[test]
fn no_refresh_where_the_store_does_not_answer() {
    let s = snap(vec![(0, 10), (9, 100)], 10);
    for (answers, want) in [(true, true), (false, false)] {
        match decide(Some(&s), &ticket(50, 1000, 9), 1080, ABANDON, answers) {
            Edge::Answer { refresh, .. } => assert_eq!(refresh, want),
            e => panic!("{e:?}"),
        }
    }
}

/// A snapshot no admit answer has refreshed for longer than `stale_after` bounds nothing
/// while the store answers (late admit calls may have let anyone in): the poll asks the
/// store. With the breaker open it answers as before, a few batches at the front asking.
#[test]
fn an_old_snapshot_asks_the_store_while_the_store_answers() {
    let old = Snapshot {
        rate: 100.0,
        burst: 10,
        stale_after: Duration::from_millis(300),
        taken: Instant::now()
            .checked_sub(Duration::from_secs(2))
            .expect("an instant two seconds ago"),
        ..snap(vec![(0, 10), (10, 20), (20, 30), (40, 50), (49, 1000)], 50)
    };
    let far_back = ticket(900, 1000, 45);
    assert_eq!(
        decide(Some(&old), &far_back, 1001, ABANDON, true),
        Edge::AskStore
    );
    assert!(matches!(
        decide(Some(&old), &far_back, 1001, ABANDON, false),
        Edge::Answer { .. }
    ));
    let fresh = Snapshot {
        taken: Instant::now(),
        ..old.clone()
    };
    assert!(matches!(
        decide(Some(&fresh), &far_back, 1001, ABANDON, true),
        Edge::Answer { .. }
    ));
    let ms = Duration::from_millis;
    assert_eq!(stale_after(ms(100), ms(60_000)), ms(1000));
    assert_eq!(stale_after(ms(500), ms(60_000)), ms(1500));
    assert_eq!(
        stale_after(ms(100), ms(2000)),
        ms(500),
        "a quarter of claim-ttl"
    );
    assert_eq!(stale_after(ms(10), ms(1000)), ms(250));
    assert_eq!(
        stale_after(ms(1000), ms(4000)),
        ms(1500),
        "a tick and a half"
    );
}

#[test]
fn liveness_is_refreshed_every_quarter_and_a_visitor_away_for_half_asks_the_store() {
    let s = snap(vec![(0, 10), (9, 100)], 10);
    let refresh = |seen, now| match decide(Some(&s), &ticket(50, seen, 9), now, ABANDON, true) {
        Edge::Answer { refresh, .. } => Some(refresh),
        Edge::AskStore => None,
    };
    assert_eq!(refresh(1000, 1074), Some(false));
    assert_eq!(refresh(1000, 1075), Some(true));
    assert_eq!(refresh(1000, 1149), Some(true));
    assert_eq!(refresh(1000, 1150), None, "away for half of abandon-after");
    assert_eq!(
        refresh(1100, 1000),
        Some(true),
        "seen far ahead of this clock"
    );
    assert_eq!(refresh(1003, 1000), Some(false), "a little ahead");
}

#[test]
fn a_failed_flush_is_kept_for_the_next() {
    let seen = Seen::default();
    let (a, b) = (VisitorId::random(), VisitorId::random());
    let p = |key| Place { epoch: 1, key };
    let age = Duration::from_secs(20);
    assert!(seen.note(a, p(1), 10));
    assert!(seen.note(b, p(2), 10));
    let batch = seen.take(20, age);
    assert_eq!(batch.len(), 2);
    assert!(seen.is_empty());
    assert!(seen.note(a, p(3), 30));
    seen.restore(batch);
    let mut again = seen.take(40, age);
    again.sort_by_key(|(_, p, _)| p.key);
    assert_eq!(
        again,
        vec![(b, p(2), 10), (a, p(3), 30)],
        "the newer note of a wins"
    );
}

/// A flood of more than a batch of notes each tick (tickets replayed, each noted again at
/// every poll) delays nobody else's note past the next batch or two, and drops none of them
/// for its age (found by review r105b: taken in the map's order, the same visitors came last
/// every tick, and their notes were dropped unsent).
#[test]
fn a_flood_of_notes_drops_no_one_elses() {
    let seen = Seen::default();
    let p = Place { epoch: 1, key: 1 };
    let tick = 100_000;
    let max_age = Duration::from_micros(7 * tick);
    let flood: Vec<VisitorId> = (0..FLUSH_MAX + FLUSH_MAX / 5)
        .map(|_| VisitorId::random())
        .collect();
    let honest: Vec<VisitorId> = (0..1_000).map(|_| VisitorId::random()).collect();
    let mut sent = std::collections::HashSet::new();
    let mut t = 0;
    for step in 0..40u64 {
        // Within the tick, the flood's polls and a fifth of the honest visitors' interleave.
        let mine = honest.iter().skip((step % 5) as usize).step_by(5);
        let mut mine = mine.peekable();
        for (i, v) in flood.iter().enumerate() {
            t += 1;
            assert!(seen.note(*v, p, t));
            if i % 100 == 0 {
                if let Some(h) = mine.next() {
                    t += 1;
                    assert!(seen.note(*h, p, t));
                }
            }
        }
        for h in mine {
            t += 1;
            assert!(seen.note(*h, p, t));
        }
        let batch = seen.take(t, max_age);
        assert_eq!(batch.len(), FLUSH_MAX);
        sent.extend(batch.into_iter().map(|(v, _, _)| v));
        t += tick;
    }
    let missed = honest.iter().filter(|v| !sent.contains(v)).count();
    assert_eq!(missed, 0, "honest visitors never sent");
    // Oldest first: the batch is the notes before every newer one.
    let seen = Seen::default();
    let first = VisitorId::random();
    assert!(seen.note(first, p, 1));
    for (i, v) in flood.iter().enumerate() {
        assert!(seen.note(*v, p, 2 + i as u64));
    }
    let batch = seen.take(3 + flood.len() as u64, max_age);
    let newest = batch.iter().map(|(_, _, at)| *at).max().unwrap();
    assert!(batch.iter().any(|(v, _, _)| *v == first));
    assert_eq!(newest, FLUSH_MAX as u64);
    assert_eq!(seen.len(), flood.len() + 1 - FLUSH_MAX);
}

#[test]
fn a_note_waits_for_the_step_after_a_cooldown_and_no_longer() {
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    // Defaults: a tick of 100 ms, a cooldown of 1 s: the step after it, and two ticks.
    assert_eq!(note_max_age(ms(100), s(1), s(20)), ms(1200));
    // A short cooldown: the liveness cap, a second.
    assert_eq!(note_max_age(ms(100), ms(200), s(20)), s(1));
    // A long cooldown: the step after it, and two ticks.
    assert_eq!(note_max_age(ms(100), s(3), s(20)), ms(3200));
    // Never past abandon-after.
    assert_eq!(note_max_age(ms(100), s(30), s(20)), s(20));
}

#[test]
fn a_note_older_than_abandon_after_is_dropped_unsent() {
    const S: u64 = 1_000_000;
    let seen = Seen::default();
    let (a, b) = (VisitorId::random(), VisitorId::random());
    let p = Place { epoch: 1, key: 1 };
    assert!(seen.note(a, p, 100 * S));
    assert!(seen.note(b, p, 105 * S));
    // The store away from this instance for a while: the batch comes back each time.
    let batch = seen.take(110 * S, Duration::from_secs(20));
    seen.restore(batch);
    // 20 s after a's last poll, the note still stands; past it, it says nothing of a.
    assert_eq!(seen.take(120 * S, Duration::from_secs(20)).len(), 2);
    seen.restore(vec![(a, p, 100 * S), (b, p, 105 * S)]);
    let left = seen.take(121 * S, Duration::from_secs(20));
    assert_eq!(left, vec![(b, p, 105 * S)]);
}

#[test]
fn a_ticket_from_before_a_loss_or_this_process_is_the_stores_to_answer() {
    let line = RoomLine::default();
    assert!(
        !line.given_before_loss(1),
        "nothing known: the edge answers"
    );
    line.note_loss(100);
    // Up to SEEN_AHEAD past the loss: an instance whose clock is ahead stamped it.
    assert!(line.given_before_loss(100 + SEEN_AHEAD));
    assert!(!line.given_before_loss(101 + SEEN_AHEAD));
    line.note_start(200);
    assert!(line.given_before_loss(199), "from before this process");
    assert!(!line.given_before_loss(200));
    // Kept over a reload.
    let next = RoomLine::default();
    next.inherit(&line);
    assert!(next.given_before_loss(199) && next.given_before_loss(105));
    assert!(!next.given_before_loss(200));
}
