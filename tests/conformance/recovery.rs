//! Recovery from a store that lost its data: the store generation that `admit` keeps and
//! reports, the admit step of an instance that knew another generation, and `hold_back`.

use std::time::Duration;

use anteroom::store::{Admission, AdmitContext, RoomPatch, VisitorId};

use super::{line_up, room, Harness};

pub async fn admit_reports_a_generation_and_a_new_one_after_a_wipe(h: &dyn Harness) {
    let s = h.store();
    let p = room("gen", 100.0, 10);
    let first = s.admit(&p).await.unwrap();
    assert!(!first.generation.is_empty());
    assert!(first.new_generation, "the first admit of a room makes it");
    h.advance(Duration::from_millis(100));
    let again = s.admit(&p).await.unwrap();
    assert_eq!(again.generation, first.generation);
    assert!(!again.new_generation);
    h.wipe();
    h.advance(Duration::from_millis(100));
    let after = s.admit(&p).await.unwrap();
    assert_ne!(after.generation, first.generation, "a new generation");
    assert!(after.new_generation, "flagged new");
    assert!(
        !after.state.queue_all,
        "a caller that knew nothing holds nothing"
    );
    h.advance(Duration::from_millis(100));
    let later = s.admit(&p).await.unwrap();
    assert_eq!(later.generation, after.generation);
    assert!(!later.new_generation);
}

pub async fn an_admit_that_knew_another_generation_admits_nobody(h: &dyn Harness) {
    let s = h.store();
    let p = room("stale", 100.0, 10);
    let generation = s.admit(&p).await.unwrap().generation;
    line_up(&*s, &p, 3).await;
    h.advance(Duration::from_millis(100));
    let other = AdmitContext {
        known_generation: Some("not-this-one".into()),
        hold_back: 0,
        ..Default::default()
    };
    let r = s.admit_with(&p, &other).await.unwrap();
    assert_eq!(
        r.admitted, 0,
        "the caller must re-assert the room's state first"
    );
    assert_eq!(r.waiting, 3);
    assert_eq!(r.generation, generation);
    h.advance(Duration::from_millis(100));
    let known = AdmitContext {
        known_generation: Some(generation),
        hold_back: 0,
        ..Default::default()
    };
    assert_eq!(s.admit_with(&p, &known).await.unwrap().admitted, 3);
}

pub async fn hold_back_keeps_slots_of_max_active_free(h: &dyn Harness) {
    let s = h.store();
    let p = room("holdback", 100.0, 3);
    line_up(&*s, &p, 3).await;
    h.advance(Duration::from_millis(100));
    let ctx = AdmitContext {
        known_generation: None,
        hold_back: 2,
        ..Default::default()
    };
    let r = s.admit_with(&p, &ctx).await.unwrap();
    assert_eq!(r.admitted, 1, "3 - 2 held back");
    assert_eq!(r.held_back, 2, "the call tells what it held back");
    h.advance(Duration::from_millis(100));
    assert_eq!(s.admit_with(&p, &ctx).await.unwrap().admitted, 0);
    h.advance(Duration::from_millis(100));
    assert_eq!(s.admit(&p).await.unwrap().admitted, 2, "nothing held back");
}

pub async fn hold_back_applies_to_the_fast_path_too(h: &dyn Harness) {
    let s = h.store();
    let p = room("holdfast", 100.0, 3);
    let ctx = AdmitContext {
        known_generation: None,
        hold_back: 2,
        ..Default::default()
    };
    s.admit_with(&p, &ctx).await.unwrap();
    h.advance(Duration::from_millis(100));
    assert_eq!(
        s.join(&p, VisitorId::random()).await.unwrap(),
        Admission::Entered,
        "0 active + 2 held back < 3"
    );
    assert!(
        !matches!(
            s.join(&p, VisitorId::random()).await.unwrap(),
            Admission::Entered
        ),
        "1 active + 2 held back = 3"
    );
    h.advance(Duration::from_millis(100));
    s.admit(&p).await.unwrap();
    let r = s.stats(&p).await.unwrap();
    assert_eq!(
        r.active, 2,
        "released by the next admit, which let the waiter in"
    );
}

pub async fn a_loss_noticed_by_a_caller_that_knew_holds_the_line(h: &dyn Harness) {
    let s = h.store();
    let p = room("lost", 100.0, 10);
    let known = s.admit(&p).await.unwrap().generation;
    h.wipe();
    h.advance(Duration::from_millis(100));
    let ctx = AdmitContext {
        known_generation: Some(known.clone()),
        hold_back: 0,
        hold_if_lost: 4,
        ..Default::default()
    };
    let r = s.admit_with(&p, &ctx).await.unwrap();
    assert!(r.new_generation && r.generation != known);
    assert!(r.state.queue_all, "held until the caller re-asserts");
    // The slots of the sessions it forgot are held back from this call, and its answer says
    // so: the caller's line counts them from now, not from its next tick (found on CI: the
    // waiting page said the line moved at the rate into a full room).
    assert_eq!(r.held_back, 4);
    let v = VisitorId::random();
    assert!(
        matches!(s.join(&p, v).await.unwrap(), Admission::Paused { .. }),
        "a newcomer does not walk in"
    );
    // The caller re-asserts what it knew (an open line), and admits again.
    s.update_room_state(
        &p,
        &RoomPatch {
            queue_all: Some(false),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    h.advance(Duration::from_millis(100));
    let now_known = AdmitContext {
        known_generation: Some(r.generation),
        hold_back: 0,
        ..Default::default()
    };
    let r = s.admit_with(&p, &now_known).await.unwrap();
    assert_eq!(
        r.admitted_visitors
            .iter()
            .map(|a| a.vid)
            .collect::<Vec<_>>(),
        vec![v]
    );
}

/// After a data loss every instance re-asserts the state it last knew, each with when an
/// operator last changed it as far as it saw: the newest wins whichever writes first, and an
/// operator's change made since the loss beats them all. Before (found by re-review), each
/// instance wrote its own state whole, and one that had not heard of a change made through
/// another instance undid it when it wrote last.
pub async fn a_reassertion_keeps_the_newest_change_whoever_writes_last(h: &dyn Harness) {
    use anteroom::store::history::Actor;
    use anteroom::store::RoomState;
    let s = h.store();
    let by = |id: &str| Actor {
        id: id.to_string(),
        by: "oncall".to_string(),
        client: "10.0.0.7:51234".to_string(),
    };
    let reassert = |st: &RoomState| RoomPatch {
        enabled: Some(st.enabled),
        queue_all: Some(st.queue_all),
        admit_per_second: Some(st.admit_per_second),
        max_active: Some(st.max_active),
        autopilot: Some(st.autopilot),
        as_of: Some(st.changed_at),
    };
    for (tag, stale_first) in [("newest-a", true), ("newest-b", false)] {
        let p = room(tag, 10.0, 10);
        let stale = s.room_state(&p).await.unwrap();
        let hold = RoomPatch {
            queue_all: Some(true),
            ..RoomPatch::default()
        };
        let changed = s.change_room_state(&p, &hold, &by(tag)).await.unwrap();
        assert!(changed.changed_at > stale.changed_at, "{changed:?}");
        h.wipe();
        let (first, second) = if stale_first {
            (&stale, &changed)
        } else {
            (&changed, &stale)
        };
        s.update_room_state(&p, &reassert(first)).await.unwrap();
        let last = s.update_room_state(&p, &reassert(second)).await.unwrap();
        assert!(last.queue_all, "{tag}: the held line stays held: {last:?}");
        assert!(s.room_state(&p).await.unwrap().queue_all, "{tag}");
        // An operator's change after the loss: no re-assertion of a state before it undoes it.
        let release = RoomPatch {
            queue_all: Some(false),
            ..RoomPatch::default()
        };
        let now = s
            .change_room_state(&p, &release, &by(&format!("{tag}-2")))
            .await
            .unwrap();
        assert!(!now.queue_all);
        let refused = s.update_room_state(&p, &reassert(&changed)).await.unwrap();
        assert!(!refused.queue_all, "{tag}: the store's state is answered");
    }
}

/// The hold a loss puts on the line is the loss's, not an operator's: a re-assertion that is
/// not applied (the store's state is as new as the one it puts back, as after a replica kept
/// the operator's last change but not the last admit steps) leaves the store's state as it was
/// before the hold — released when it was, held when it was. Before (found by review), the
/// hold stayed for good after a Sentinel switchover and the line never moved again.
pub async fn the_hold_a_loss_puts_on_the_line_ends_at_the_reassertion(h: &dyn Harness) {
    use anteroom::store::history::Actor;
    let s = h.store();
    let by = Actor {
        id: "release".to_string(),
        by: "oncall".to_string(),
        client: "10.0.0.7:51234".to_string(),
    };
    for held in [false, true] {
        let p = room("losshold", 100.0, 10);
        // The operator's last change, which the store kept through the loss.
        let change = RoomPatch {
            queue_all: Some(held),
            ..Default::default()
        };
        let at = s
            .change_room_state(&p, &change, &by)
            .await
            .unwrap()
            .changed_at;
        // A caller that knew another generation: the loss holds the line.
        let ctx = AdmitContext {
            known_generation: Some("an-earlier-generation".to_string()),
            ..Default::default()
        };
        let r = s.admit_with(&p, &ctx).await.unwrap();
        assert!(r.new_generation && r.state.queue_all, "{r:?}");
        // It re-asserts that same change: not applied over the store's, which stands.
        let reassert = RoomPatch {
            queue_all: Some(held),
            as_of: Some(at),
            ..Default::default()
        };
        let st = s.update_room_state(&p, &reassert).await.unwrap();
        assert_eq!(st.queue_all, held, "held {held}: {st:?}");
        let a = s.join(&p, VisitorId::random()).await.unwrap();
        assert_eq!(matches!(a, Admission::Entered), !held, "held {held}: {a:?}");
    }
}
