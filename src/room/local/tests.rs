//! Tests of the `local` policy's bucket and the sessions kept while the store is away.

use super::*;

fn admit(share: u64, now: Micros) -> LocalAdmit {
    LocalAdmit {
        vid: VisitorId::random(),
        rate: 1000.0,
        instances: 1,
        tick: Duration::from_millis(100),
        share,
        now,
        session_ttl: Duration::from_secs(10),
        heard_at: None,
    }
}

#[test]
fn local_sessions_count_against_the_share_until_they_run_out() {
    let b = LocalBucket::default();
    let t = 1_000_000_000;
    assert!(b.try_admit(&admit(2, t), None).is_some());
    assert!(b.try_admit(&admit(2, t), None).is_some());
    assert!(b.try_admit(&admit(2, t), None).is_none(), "share used");
    assert_eq!(b.active(t), 2);
    let later = t + micros(Duration::from_secs(10));
    assert_eq!(b.active(later), 0, "both sessions ran out");
    assert!(b.try_admit(&admit(2, later), None).is_some());
}

#[test]
fn local_sessions_are_registered_once() {
    let b = LocalBucket::default();
    let a = admit(5, 1);
    assert!(!b.unregistered(a.vid));
    assert!(b.try_admit(&a, None).is_some());
    assert!(b.unregistered(a.vid));
    b.registered(a.vid);
    assert!(!b.unregistered(a.vid));
    assert_eq!(b.active(1), 1, "still counts against the share");
    let c = admit(5, 1);
    assert!(b.try_admit(&c, None).is_some());
    assert_eq!(b.active(1 + micros(Duration::from_secs(10))), 0);
    assert!(!b.unregistered(c.vid), "ran out: nothing to register");
}

/// A session kept running while the store cannot renew it counts once, is told to the
/// store, and runs to its new end, not its first one (found by review r95b: an admitted
/// visitor's cookie ran out during a long outage).
#[test]
fn a_kept_session_runs_to_its_new_end_and_is_told() {
    let b = LocalBucket::default();
    let a = admit(5, 1);
    assert!(b.try_admit(&a, None).is_some());
    b.registered(a.vid);
    let ttl = Duration::from_secs(10);
    let half = 1 + micros(ttl) / 2;
    b.keep(a.vid, half, ttl);
    assert!(b.unregistered(a.vid), "to be told");
    // Told with when it runs out here: the store stretches a used admission's marker past it
    // (found by review r97b).
    assert_eq!(b.unregistered_some(8), vec![(a.vid, half + micros(ttl))]);
    assert_eq!(b.active(half), 1, "counted once");
    let first_end = 1 + micros(ttl);
    assert_eq!(b.active(first_end), 1, "runs past its first end");
    assert!(b.unregistered(a.vid));
    let kept = LocalBucket::default();
    kept.keep(a.vid, 1, ttl);
    assert_eq!(
        kept.untold(),
        1,
        "a visitor admitted through the store, kept here"
    );
    for _ in 0..100 {
        b.keep(a.vid, half + 1, ttl);
    }
    assert_eq!(
        b.inner.lock().unwrap().sessions.len(),
        1,
        "kept again at once: no more entries"
    );
    assert_eq!(b.active(half + micros(ttl)), 0, "ran out at its new end");
    assert!(!b.unregistered(a.vid));
}

#[test]
fn an_unrenewed_admission_is_kept_while_the_store_is_away_or_near_its_end() {
    let away = Some(Duration::from_secs(5));
    assert_eq!(
        kept_life(true, 290, 600, away, None),
        Some(600),
        "the breaker open"
    );
    assert_eq!(
        kept_life(false, 290, 600, away, None),
        None,
        "a failed call: asked again later"
    );
    assert_eq!(
        kept_life(false, 149, 600, away, None),
        Some(600),
        "under a quarter left"
    );
}

/// No cookie kept running here outlives [`KEEP_AT_MOST`] after the store last answered, however
/// long the store has been away and whatever the session's length; an instance that never
/// heard from the store keeps nothing (found by review r99a: kept without end, a copy of a
/// used cookie outlived the store's record of its use).
#[test]
fn a_kept_cookie_never_outlives_the_bound_after_the_store_last_answered() {
    assert_eq!(kept_life(true, 10, 600, None, None), None, "never heard");
    for away_s in [0, 1, 599, 3000, 3599, 3600, 3601, 100_000] {
        for ttl in [1, 60, 600, 7200] {
            let life = kept_life(true, 0, ttl, Some(Duration::from_secs(away_s)), None);
            if let Some(life) = life {
                assert!(
                    life >= 1 && life <= ttl,
                    "{away_s} s away, ttl {ttl}: {life}"
                );
                assert!(
                    away_s + life <= KEEP_AT_MOST.as_secs(),
                    "{away_s} s away, ttl {ttl}: kept {life} s"
                );
            } else {
                assert!(
                    away_s >= KEEP_AT_MOST.as_secs() - 1,
                    "{away_s} s away: not kept"
                );
            }
        }
    }
}

/// A reload hands the rate's tokens over with the sessions: a new room's bucket started
/// full, and reloads during an outage each let a burst in (found by review).
#[test]
fn a_reload_does_not_refill_the_rate() {
    let slow = |now| LocalAdmit {
        rate: 1.0,
        ..admit(1_000, now)
    };
    let old = LocalBucket::default();
    assert!(old.try_admit(&slow(1), None).is_some());
    assert!(
        old.try_admit(&slow(1), None).is_none(),
        "a second's worth used"
    );
    let new = LocalBucket::default();
    new.inherit(&old);
    assert!(
        new.try_admit(&slow(1), None).is_none(),
        "the reload refilled the bucket"
    );
    assert_eq!(new.active(1), 1, "the session came over too");
}

/// Each outage starts with an empty bucket: the store's let its burst in before it (found
/// by review r83b: a local bucket that started full let one more admission in at each
/// outage, on each instance). Within one outage the tokens come at the share's rate.
#[test]
fn each_outage_starts_with_an_empty_bucket() {
    let heard = std::time::Instant::now();
    let ask = |heard_at| LocalAdmit {
        // A token every half second, one at most in the bucket.
        rate: 2.0,
        heard_at: Some(heard_at),
        ..admit(1_000, 1)
    };
    let b = LocalBucket::default();
    assert!(b.try_admit(&ask(heard), None).is_none(), "a burst at once");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while b.try_admit(&ask(heard), None).is_none() {
        assert!(std::time::Instant::now() < deadline, "no token at the rate");
        std::thread::sleep(Duration::from_millis(5));
    }
    let next = heard + Duration::from_secs(1);
    assert!(
        b.try_admit(&ask(next), None).is_none(),
        "the next outage's burst"
    );
    // Over a reload within the outage, the bucket goes on.
    let new = LocalBucket::default();
    new.inherit(&b);
    while new.try_admit(&ask(next), None).is_none() {
        assert!(std::time::Instant::now() < deadline, "no token at the rate");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        new.try_admit(&ask(next), None).is_none(),
        "refilled by the reload"
    );
}

#[test]
fn a_zero_share_admits_nobody() {
    assert!(LocalBucket::default()
        .try_admit(&admit(0, 1), None)
        .is_none());
}

/// One identity holds one local session: asked again, it is given the session it holds
/// (its remaining life), with no token or slot taken (found by review: one queue ticket
/// replayed took 99 of an instance's 100 local admissions).
#[test]
fn a_visitor_holding_a_local_session_is_given_it_again() {
    let b = LocalBucket::default();
    let t = 1_000_000_000;
    // A burst of 100 tokens (a tick at 1000/s) and a share of 2: a hundred asks that took
    // either would leave nothing for another visitor.
    let one = admit(2, t);
    assert_eq!(
        b.try_admit(&one, None),
        Some(LocalSession {
            life: Duration::from_secs(10),
            fresh: true
        })
    );
    let later = LocalAdmit {
        now: t + 4_000_000,
        ..one
    };
    for _ in 0..100 {
        assert_eq!(
            b.try_admit(&later, None),
            Some(LocalSession {
                life: Duration::from_secs(6),
                fresh: false
            })
        );
    }
    assert_eq!(b.active(t + 4_000_000), 1, "one session, whatever the asks");
    let other = LocalAdmit {
        vid: VisitorId::random(),
        now: t + 1_000_000,
        ..one
    };
    assert!(
        b.try_admit(&other, None).is_some(),
        "a token and a slot were left"
    );
    assert_eq!(b.active(t + 1_000_000), 2);
    let after = LocalAdmit {
        now: t + 10_000_000,
        ..one
    };
    assert!(
        b.try_admit(&after, None).is_some_and(|s| s.fresh),
        "ran out: a new session"
    );
}

/// With a client's gate, its address gets at most the limit of local admissions in a
/// window, and only admissions given count (found by re-review: polls that found no token
/// or no slot counted too, and held a lone visitor for the window).
#[test]
fn a_clients_local_admissions_count_only_when_given() {
    let b = LocalBucket::default();
    let t = 1_000_000_000;
    let gate = JoinGate {
        client: "198.51.100.1".into(),
        limit: 2,
        per: Duration::from_secs(60),
        known_only: false,
        vouched: false,
    };
    let ask = |now| LocalAdmit {
        vid: VisitorId::random(),
        ..admit(1, now)
    };
    assert!(b.try_admit(&ask(t), Some(&gate)).is_some());
    for _ in 0..5 {
        assert!(
            b.try_admit(&ask(t), Some(&gate)).is_none(),
            "the share is full"
        );
    }
    // The session ran out: one of the address's two is left, whatever was refused.
    let later = t + 10_000_000;
    assert!(b.try_admit(&ask(later), Some(&gate)).is_some());
    let after = later + 10_000_000;
    assert!(
        b.try_admit(&ask(after), Some(&gate)).is_none(),
        "two in the window"
    );
    let other = JoinGate {
        client: "198.51.100.2".into(),
        ..gate.clone()
    };
    assert!(b.try_admit(&ask(after), Some(&other)).is_some());
    assert!(
        b.try_admit(&ask(t + 70_000_000), Some(&gate)).is_some(),
        "a new window"
    );
}

/// The store's records outlast their cookies by the same bound the instances keep sessions
/// within (`KEPT_AT_MOST_US` in `lua/prelude.lua`).
#[test]
fn the_scripts_bound_is_the_instances() {
    let line = format!("local KEPT_AT_MOST_US = {}\n", KEEP_AT_MOST.as_micros());
    assert!(
        include_str!("../../../lua/prelude.lua").contains(&line),
        "{line}"
    );
}

/// No cookie kept here alone outlives the start of the next pre-queue: the store ends the
/// sessions it holds then, and not one kept here (review r100b); none is kept in its last second.
#[test]
fn a_kept_cookie_never_outlives_the_next_prequeue_start() {
    let away = Some(Duration::from_secs(5));
    assert_eq!(kept_life(true, 10, 600, away, Some(30)), Some(30));
    assert_eq!(kept_life(true, 10, 600, away, Some(0)), None);
    assert_eq!(kept_life(true, 10, 600, away, Some(5000)), Some(600));
    for until in [1, 59, 600, 3599, 3600, 100_000] {
        let life = kept_life(true, 0, 7200, away, Some(until)).unwrap_or(0);
        assert!(
            life <= until,
            "kept {life} s with the pre-queue {until} s away"
        );
    }
}
