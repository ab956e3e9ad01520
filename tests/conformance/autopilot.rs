//! The autopilot's keeping in the store: one rate for every caller, started where the caller
//! says, a proposal taken only when decided from the last step, paused by an operator's pin
//! and by the switch, and the rate that admits (not only the one reported).

use std::time::Duration;

use anteroom::store::autopilot::{AutopilotTick, Health, Proposal};
use anteroom::store::{AdmitContext, RoomPatch, Store};

use super::{line_up, room, Harness};

fn tick(report: Health, proposal: Option<Proposal>) -> AdmitContext {
    AdmitContext {
        autopilot: Some(AutopilotTick {
            start: 2.0,
            report,
            proposal,
        }),
        ..Default::default()
    }
}

fn health(requests: u64, p90_ms: u64) -> Health {
    Health {
        requests,
        errors: 1,
        p90: Duration::from_millis(p90_ms),
    }
}

/// Admissions over `ticks` ticks of 100 ms with `ctx`.
async fn admitted_over(
    h: &dyn Harness,
    s: &dyn Store,
    p: &anteroom::store::RoomParams,
    ctx: &AdmitContext,
    ticks: u32,
) -> u64 {
    let mut n = 0;
    for _ in 0..ticks {
        h.advance(Duration::from_millis(100));
        n += s.admit_with(p, ctx).await.unwrap().admitted;
    }
    n
}

pub async fn the_autopilot_keeps_one_rate_that_admits(h: &dyn Harness) {
    let s = h.store();
    let p = room("autopilot", 20.0, 1000);
    line_up(&*s, &p, 200).await;
    // The first call starts the autopilot at the caller's start rate, and the line moves at
    // it, not at the configured 20/s.
    let first = s
        .admit_with(&p, &tick(health(50, 100), None))
        .await
        .unwrap();
    let ap = first.autopilot.clone().expect("an autopilot state");
    assert!(ap.running);
    assert_eq!((ap.rate, ap.reason.as_str()), (Some(2.0), "start"));
    assert_eq!(first.state.autopilot_rate, Some(2.0));
    assert_eq!(p.rate(&first.state), 2.0);
    assert_eq!(ap.health.requests, 50);
    let n = admitted_over(h, &*s, &p, &tick(health(50, 100), None), 20).await;
    assert!((3..=6).contains(&n), "{n} admitted in 2 s at 2/s");
    // A proposal from the last step is taken; one from an older step is dropped.
    let based_on = s
        .admit_with(&p, &tick(health(50, 100), None))
        .await
        .unwrap()
        .autopilot
        .unwrap()
        .changed_at;
    h.advance(Duration::from_millis(100));
    let propose = |rate: f64, based_on: &str| {
        tick(
            health(50, 100),
            Some(Proposal {
                rate,
                reason: "healthy",
                based_on: based_on.to_string(),
                judged_p90: Duration::from_millis(100),
            }),
        )
    };
    let r = s.admit_with(&p, &propose(10.0, &based_on)).await.unwrap();
    let ap = r.autopilot.unwrap();
    assert_eq!(
        (ap.rate, ap.from, ap.reason.as_str()),
        (Some(10.0), Some(2.0), "healthy")
    );
    assert_eq!(ap.judged_p90, Some(Duration::from_millis(100)));
    h.advance(Duration::from_millis(100));
    let r = s.admit_with(&p, &propose(15.0, &based_on)).await.unwrap();
    assert_eq!(
        r.autopilot.unwrap().rate,
        Some(10.0),
        "decided from an older step"
    );
    let n = admitted_over(h, &*s, &p, &tick(health(50, 100), None), 20).await;
    assert!((17..=23).contains(&n), "{n} admitted in 2 s at 10/s");
    // A caller whose file has a lower ceiling (a rolling reload): never above its own (found
    // by review: it admitted at the rate another instance's autopilot had climbed to).
    let low = anteroom::store::RoomParams {
        admit_per_second: 4.0,
        ..p.clone()
    };
    let n = admitted_over(h, &*s, &low, &tick(health(50, 100), None), 20).await;
    assert!(
        (6..=10).contains(&n),
        "{n} admitted in 2 s under a ceiling of 4/s"
    );
    // An operator's pin wins and pauses it; cleared, it resumes where it was.
    let pinned = s
        .update_room_state(
            &p,
            &RoomPatch {
                admit_per_second: Some(Some(5.0)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(p.rate(&pinned), 5.0);
    h.advance(Duration::from_millis(100));
    let r = s
        .admit_with(&p, &tick(health(50, 100), None))
        .await
        .unwrap();
    assert!(!r.autopilot.unwrap().running);
    assert_eq!(p.rate(&r.state), 5.0);
    let cleared = s
        .update_room_state(
            &p,
            &RoomPatch {
                admit_per_second: Some(None),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(p.rate(&cleared), 10.0, "resumed at its rate");
    // Switched off: the configured rate; back to the config: running again.
    let off = s
        .update_room_state(
            &p,
            &RoomPatch {
                autopilot: Some(Some(false)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((off.autopilot, p.rate(&off)), (Some(false), 20.0));
    h.advance(Duration::from_millis(100));
    let r = s
        .admit_with(&p, &tick(health(50, 100), None))
        .await
        .unwrap();
    assert!(!r.autopilot.unwrap().running);
    assert_eq!(r.state.autopilot, Some(false));
    let on = s
        .update_room_state(
            &p,
            &RoomPatch {
                autopilot: Some(None),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(p.rate(&on), 10.0);
    // A caller without an autopilot in its config (the room's was removed): the configured rate.
    h.advance(Duration::from_millis(100));
    let r = s.admit(&p).await.unwrap();
    assert!(r.autopilot.is_none());
    assert_eq!(p.rate(&r.state), 20.0);
}
