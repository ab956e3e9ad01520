//! A draw whose event is cancelled after its pre-queue began, on every backend: its
//! registrants keep their drawn places and go in by them, the store tells the draw's order out
//! (its seed may then be published), and nobody is placed by it again, should an event of its
//! id come back.

use std::time::Duration;

use anteroom::event::draw::{self, RegTicket};
use anteroom::store::{Admission, EventsArg, LineDraw, RoomPatch, VisitorId};

use super::events::{admit, admit_all, event, join, seed};
use super::{room, Harness};

pub async fn a_cancelled_draw_is_out_and_places_nobody_again(h: &dyn Harness) {
    let s = h.store();
    let p = room("cancelled-draw", 100.0, 1000);
    // Nobody is let in until the checks below are made.
    let cap = |m: Option<u64>| RoomPatch {
        max_active: Some(m),
        ..Default::default()
    };
    s.update_room_state(&p, &cap(Some(0))).await.unwrap();
    let e = event(h, "drop", 60, true);
    let a = EventsArg::of(std::slice::from_ref(&e));
    let registrants: Vec<VisitorId> = (0..12).map(|_| VisitorId::random()).collect();
    for v in &registrants {
        let joined = join(&*s, &p, &a, *v).await;
        assert!(
            matches!(joined, Admission::Registered { drawn: true, .. }),
            "{joined:?}"
        );
    }
    let r = admit(&*s, &p, &a).await;
    assert_eq!(
        r.line_draw.as_ref().map(|d| (d.id.clone(), d.out)),
        Some((e.id(), false)),
        "sealed during its pre-queue"
    );
    // The line's epoch: the registrants' places are in it.
    let epoch = r.line_draw.as_ref().map_or(0, |d| d.epoch);
    match join(&*s, &p, &a, registrants[0]).await {
        Admission::Registered { place, .. } => assert_eq!(place.epoch, epoch),
        other => panic!("{other:?}"),
    }
    // Cancelled: the events no longer hold it, and its order is out.
    let none = EventsArg::of(&[]);
    h.advance(Duration::from_millis(100));
    let r = admit(&*s, &p, &none).await;
    let out = Some(LineDraw {
        id: e.id(),
        out: true,
        epoch,
    });
    assert_eq!(r.line_draw, out, "out once cancelled");
    // An event of its id back (its seed may be public by now): it places nobody by the draw.
    h.advance(Duration::from_millis(100));
    let newcomer = VisitorId::random();
    let joined = join(&*s, &p, &a, newcomer).await;
    assert!(
        matches!(joined, Admission::Registered { drawn: false, .. }),
        "a draw whose order is out places nobody: {joined:?}"
    );
    assert_eq!(admit(&*s, &p, &a).await.line_draw, out, "out stays out");
    // Cancelled again and the shop open: the registrants go in by the draw, then the newcomer.
    s.update_room_state(&p, &cap(None)).await.unwrap();
    let order = admit_all(h, &p, &none, 13, 60).await;
    let sd = seed(&p, &e);
    let mut drawn: Vec<(u64, RegTicket, VisitorId)> = registrants
        .iter()
        .map(|v| {
            let t = draw::ticket(&p.name, &e.id(), *v);
            (draw::key(&sd, &t), t, *v)
        })
        .collect();
    drawn.sort();
    let mut expected: Vec<VisitorId> = drawn.iter().map(|d| d.2).collect();
    expected.push(newcomer);
    assert_eq!(
        order, expected,
        "the cancelled draw's order, then the newcomer"
    );
    // Its list is the registrants' tickets in the draw's order.
    let list: Vec<RegTicket> = drawn.iter().map(|d| d.1).collect();
    assert_eq!(s.draw_list(&p, &e.id(), 0, 100).await.unwrap(), list);

    // A later draw in the emptied line, cancelled too; then the first event back once more:
    // still nobody is placed by its draw, and its list stays as published (found by
    // re-review: the store kept the last draw out only, and the first placed again).
    let later = event(h, "later", 60, true);
    let b = EventsArg::of(std::slice::from_ref(&later));
    let joined = join(&*s, &p, &b, VisitorId::random()).await;
    assert!(
        matches!(joined, Admission::Registered { drawn: true, .. }),
        "{joined:?}"
    );
    h.advance(Duration::from_millis(100));
    let r = admit(&*s, &p, &none).await;
    assert_eq!(r.line_draw.map(|d| (d.id, d.out)), Some((later.id(), true)));
    admit_all(h, &p, &none, 1, 20).await;
    let again = VisitorId::random();
    let joined = join(&*s, &p, &a, again).await;
    assert!(
        matches!(joined, Admission::Registered { drawn: false, .. }),
        "an older draw whose order is out places nobody: {joined:?}"
    );
    assert_eq!(s.draw_list(&p, &e.id(), 0, 100).await.unwrap(), list);
}
