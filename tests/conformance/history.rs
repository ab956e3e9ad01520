//! The audit of operators' changes: recorded with the change, each named field from what to
//! what, newest first, once per change however often it is retried, and kept to its bound.

use anteroom::store::history::{Actor, KEEP};
use anteroom::store::{EventChange, RoomPatch, VisitorId};
use serde_json::{json, Value};

use super::events::event;
use super::{line_up, occupy, room, waiting_pos, Harness};

fn actor(id: &str) -> Actor {
    Actor {
        id: id.to_string(),
        by: "oncall".to_string(),
        client: "10.0.0.7:51234".to_string(),
    }
}

/// A JSON value as a number when it is one (backends write 100 or 100.0 alike).
fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

pub async fn every_change_is_recorded_once_with_before_and_after(h: &dyn Harness) {
    let s = h.store();
    let p = room("hist", 50.0, 10);
    assert!(s.changes(&p, 10).await.unwrap().is_empty());
    // A read or an unrecorded update leaves no entry.
    s.room_state(&p).await.unwrap();
    let pause = RoomPatch {
        queue_all: Some(true),
        admit_per_second: Some(Some(20.0)),
        ..RoomPatch::default()
    };
    s.change_room_state(&p, &pause, &actor("c1")).await.unwrap();
    // A retry of the same change (same id) is not recorded again.
    s.change_room_state(&p, &pause, &actor("c1")).await.unwrap();
    let back = RoomPatch {
        queue_all: Some(false),
        admit_per_second: Some(None),
        ..RoomPatch::default()
    };
    s.change_room_state(&p, &back, &actor("c2")).await.unwrap();
    line_up(&*s, &p, 3).await;
    assert_eq!(s.clear_waiting_by(&p, &actor("c3")).await.unwrap(), 3);
    s.clear_waiting_by(&p, &actor("c3")).await.unwrap();

    let changes = s.changes(&p, 10).await.unwrap();
    let ids: Vec<&str> = changes.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["c3", "c2", "c1"], "{changes:?}");
    assert!(changes
        .iter()
        .all(|c| c.by == "oncall" && c.client == "10.0.0.7:51234"));
    assert!(changes.windows(2).all(|w| w[0].at_ms >= w[1].at_ms));
    assert!(
        changes[2].at_ms > 1_600_000_000_000,
        "milliseconds since the epoch"
    );

    let c1 = &changes[2].changes;
    assert_eq!(c1.len(), 2, "{c1:?}");
    assert_eq!(
        (c1[0].field.as_str(), &c1[0].from, &c1[0].to),
        ("queue_all", &json!(false), &json!(true))
    );
    assert_eq!(c1[1].field, "admit_per_second");
    assert_eq!(
        (c1[1].from.clone(), num(&c1[1].to)),
        (Value::Null, Some(20.0))
    );
    let c2 = &changes[1].changes;
    assert_eq!(
        (num(&c2[1].from), c2[1].to.clone()),
        (Some(20.0), Value::Null),
        "{c2:?}"
    );
    let c3 = &changes[0].changes;
    assert_eq!(
        (c3[0].field.as_str(), num(&c3[0].from), num(&c3[0].to)),
        ("waiting", Some(3.0), Some(0.0))
    );
    assert_eq!(s.changes(&p, 1).await.unwrap().len(), 1);
}

pub async fn the_history_keeps_the_newest(h: &dyn Harness) {
    let s = h.store();
    let p = room("histmax", 50.0, 10);
    for i in 0..KEEP + 5 {
        let flip = RoomPatch {
            queue_all: Some(i % 2 == 0),
            ..RoomPatch::default()
        };
        s.change_room_state(&p, &flip, &actor(&format!("k{i}")))
            .await
            .unwrap();
    }
    let changes = s.changes(&p, KEEP + 50).await.unwrap();
    assert_eq!(changes.len(), KEEP);
    assert_eq!(changes[0].id, format!("k{}", KEEP + 4));
    assert_eq!(changes[KEEP - 1].id, "k5");
}

/// A field set to the value it had, and a clear of an empty line, are not recorded: else any
/// operate token could push the real changes out of the kept history with no-ops (found by
/// review: 200 no-op PATCHes hid who switched the room off).
pub async fn a_change_to_the_same_value_is_no_change(h: &dyn Harness) {
    let s = h.store();
    let p = room("histnoop", 50.0, 10);
    let off = RoomPatch {
        enabled: Some(false),
        ..RoomPatch::default()
    };
    s.change_room_state(&p, &off, &actor("real")).await.unwrap();
    for i in 0..KEEP + 2 {
        s.change_room_state(&p, &off, &actor(&format!("noop{i}")))
            .await
            .unwrap();
    }
    assert_eq!(s.clear_waiting_by(&p, &actor("empty")).await.unwrap(), 0);
    // Two fields named, one of them changed: only that one is recorded.
    let both = RoomPatch {
        enabled: Some(false),
        queue_all: Some(true),
        ..RoomPatch::default()
    };
    s.change_room_state(&p, &both, &actor("half"))
        .await
        .unwrap();
    let changes = s.changes(&p, KEEP).await.unwrap();
    let ids: Vec<&str> = changes.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["half", "real"]);
    let fields: Vec<&str> = changes[0]
        .changes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert_eq!(fields, ["queue_all"]);
}

/// An operator's clear re-sent (a reply lost; cluster clients re-send) clears nothing more:
/// the visitors who joined after the clear keep their places, also when the first call found
/// the line empty. Before, the re-sent call emptied the line again (found by review).
pub async fn a_resent_clear_keeps_who_joined_since(h: &dyn Harness) {
    let s = h.store();
    let p = room("clear-again", 50.0, 1);
    occupy(&*s, &p).await;
    assert_eq!(s.clear_waiting_by(&p, &actor("k0")).await.unwrap(), 0);
    line_up(&*s, &p, 2).await;
    assert_eq!(
        s.clear_waiting_by(&p, &actor("k0")).await.unwrap(),
        0,
        "k0 again"
    );
    assert_eq!(s.stats(&p).await.unwrap().waiting, 2);
    assert_eq!(s.clear_waiting_by(&p, &actor("k1")).await.unwrap(), 2);
    let later = VisitorId::random();
    assert_eq!(waiting_pos(&s.join(&p, later).await.unwrap()), Some(1));
    assert_eq!(
        s.clear_waiting_by(&p, &actor("k1")).await.unwrap(),
        0,
        "k1 again"
    );
    assert_eq!(
        waiting_pos(&s.join(&p, later).await.unwrap()),
        Some(1),
        "kept"
    );
    assert_eq!(s.clear_waiting_by(&p, &actor("k2")).await.unwrap(), 1);
}

pub async fn runtime_event_changes_are_versioned_and_recorded(h: &dyn Harness) {
    let s = h.store();
    let p = room("runtime", 10.0, 10);
    let e = event(h, "added", 60, false);
    let change = anteroom::event::schedule::Runtime {
        event: Some(e.clone()),
        cancelled: false,
    };
    let by = Actor {
        id: "change-1".into(),
        by: "ops".into(),
        client: "127.0.0.1".into(),
    };
    let none = serde_json::Value::Null;
    assert_eq!(
        s.change_event(&p, "added", &change, 0, &none, &by)
            .await
            .unwrap(),
        EventChange::Done(1)
    );
    assert_eq!(
        s.change_event(&p, "added", &change, 0, &none, &by)
            .await
            .unwrap(),
        EventChange::Done(1),
        "a retry finds its change in force"
    );
    let cancel = anteroom::event::schedule::Runtime {
        event: None,
        cancelled: true,
    };
    let by2 = Actor {
        id: "change-2".into(),
        ..by.clone()
    };
    match s
        .change_event(&p, "added", &cancel, 0, &none, &by2)
        .await
        .unwrap()
    {
        EventChange::Conflict(now) => {
            assert_eq!(now.version, 1);
            assert_eq!(now.events.get("added"), Some(&change));
        }
        other => panic!("a change from an old version is refused: {other:?}"),
    }
    assert_eq!(
        s.change_event(&p, "added", &cancel, 1, &none, &by2)
            .await
            .unwrap(),
        EventChange::Done(2)
    );
    let rt = s.runtime_events(&p).await.unwrap();
    assert_eq!((rt.version, rt.events.get("added")), (2, Some(&cancel)));
    let history = s.changes(&p, 10).await.unwrap();
    assert_eq!(history.len(), 2, "each change once: {history:?}");
    assert_eq!(history[0].changes[0].field, "event added");
    assert_eq!(
        history[0].changes[0].to["cancelled"],
        serde_json::Value::Bool(true)
    );
    // An admit tells the version, so that instances read the changes again.
    assert_eq!(s.admit(&p).await.unwrap().events_version, 2);
}
