//! The origin's word on an admission (`Store::finish`), on every backend: `complete` and
//! `revoke` free the slot at once and nothing renews the admission; a revocation is handed back
//! by `admit` to every caller after the number it last saw, once per number, until its cookies
//! have expired; a store that lost its data numbers again and is read from the start.

use std::time::Duration;

use anteroom::store::{
    AdmitContext, Command, Consumed, Ending, Order, RequestId, Revocation, Revocations, RoomParams,
    Settle, Settled, Store, VisitorId,
};

use super::{occupy, room, Harness};

const TTL: Duration = Duration::from_secs(600);

fn ending(h: &dyn Harness, command: Command) -> Ending {
    let now = h.wall_secs();
    Ending::of(command, now, now + TTL.as_secs(), TTL)
}

async fn revoked_after(s: &dyn Store, p: &RoomParams, after: Option<u64>) -> Revocations {
    let ctx = AdmitContext {
        revoked_after: after,
        ..Default::default()
    };
    s.admit_with(p, &ctx).await.unwrap().revoked
}

fn order() -> Order {
    Order {
        request: RequestId::random(),
        grace: Duration::from_secs(10),
        vouched: true,
        cookie_life: TTL,
        cookie_expires: 0,
        generation: None,
        events_version: None,
    }
}

pub async fn completing_frees_the_slot_and_nothing_renews_it(h: &dyn Harness) {
    let s = h.store();
    let p = room("complete", 100.0, 2);
    let (a, b) = (occupy(&*s, &p).await, occupy(&*s, &p).await);
    s.finish(&p, a, &ending(h, Command::Complete))
        .await
        .unwrap();
    assert_eq!(
        s.stats(&p).await.unwrap().active,
        1,
        "the slot is free at once"
    );
    assert!(!s.touch(&p, a).await.unwrap(), "renewal after complete");
    assert_eq!(s.consume(&p, a, &order()).await.unwrap(), Consumed::Used);
    assert!(
        s.touch(&p, b).await.unwrap(),
        "the other session is untouched"
    );
    // Told twice (a retried call): the same.
    s.finish(&p, a, &ending(h, Command::Complete))
        .await
        .unwrap();
    assert_eq!(s.stats(&p).await.unwrap().active, 1);
    // Complete is not a revocation.
    assert_eq!(
        revoked_after(&*s, &p, Some(0)).await,
        Revocations::default()
    );
    // A freed slot takes the next visitor.
    assert_eq!(
        s.join(&p, VisitorId::random()).await.unwrap(),
        anteroom::store::Admission::Entered
    );
}

pub async fn an_order_in_flight_is_settled_by_the_origins_word(h: &dyn Harness) {
    let s = h.store();
    let p = room("inflight", 100.0, 2);
    let v = occupy(&*s, &p).await;
    let o = order();
    assert_eq!(s.consume(&p, v, &o).await.unwrap(), Consumed::Won);
    s.finish(&p, v, &ending(h, Command::Complete))
        .await
        .unwrap();
    assert_eq!(s.stats(&p).await.unwrap().active, 0);
    // The order's own settlement finds nothing left to settle, and gives nothing back.
    assert_eq!(
        s.settle(&p, v, &o.request, Settle::GiveBack).await.unwrap(),
        Settled::Gone
    );
    h.advance(Duration::from_secs(11));
    assert!(!s.touch(&p, v).await.unwrap(), "nor does its deadline");
    assert_eq!(s.stats(&p).await.unwrap().active, 0);
}

pub async fn a_revocation_is_handed_back_once_per_number(h: &dyn Harness) {
    let s = h.store();
    let p = room("revoke", 100.0, 5);
    let (a, b) = (occupy(&*s, &p).await, occupy(&*s, &p).await);
    assert_eq!(revoked_after(&*s, &p, None).await, Revocations::default());
    let ea = ending(h, Command::Revoke);
    s.finish(&p, a, &ea).await.unwrap();
    assert_eq!(s.stats(&p).await.unwrap().active, 1);
    assert!(!s.touch(&p, a).await.unwrap(), "renewal after revoke");
    let first = revoked_after(&*s, &p, Some(0)).await;
    let ra = Revocation {
        vid: a,
        until: ea.until,
    };
    assert_eq!(first.list, vec![ra]);
    assert!(first.last > 0);
    // Asked after it: nothing new, the same number.
    let again = revoked_after(&*s, &p, Some(first.last)).await;
    assert_eq!((again.list.len(), again.last), (0, first.last));
    // Not asked: nothing (and no number).
    assert_eq!(revoked_after(&*s, &p, None).await, Revocations::default());
    let eb = ending(h, Command::Revoke);
    s.finish(&p, b, &eb).await.unwrap();
    let next = revoked_after(&*s, &p, Some(first.last)).await;
    let rb = Revocation {
        vid: b,
        until: eb.until,
    };
    assert_eq!(next.list, vec![rb]);
    assert!(next.last > first.last);
    // A retried revoke is numbered again and kept once.
    s.finish(&p, a, &ea).await.unwrap();
    let retried = revoked_after(&*s, &p, Some(next.last)).await;
    assert_eq!(retried.list, vec![ra]);
    assert_eq!(revoked_after(&*s, &p, Some(0)).await.list, vec![rb, ra]);
    assert_eq!(s.stats(&p).await.unwrap().active, 0);
}

pub async fn revocations_expire_with_their_cookies(h: &dyn Harness) {
    let s = h.store();
    let p = room("expire", 100.0, 5);
    let v = occupy(&*s, &p).await;
    let e = ending(h, Command::Revoke);
    s.finish(&p, v, &e).await.unwrap();
    assert_eq!(revoked_after(&*s, &p, Some(0)).await.list.len(), 1);
    // Still there just before its time (and the trim margin), gone after.
    let left = e.until - h.wall_secs();
    h.advance(Duration::from_secs(left));
    assert_eq!(revoked_after(&*s, &p, Some(0)).await.list.len(), 1);
    h.advance(anteroom::store::finish::TRIM_MARGIN + Duration::from_secs(5));
    assert_eq!(revoked_after(&*s, &p, Some(0)).await.list, vec![]);
}

pub async fn a_store_that_lost_its_revocations_is_read_from_the_start(h: &dyn Harness) {
    let s = h.store();
    let p = room("relost", 100.0, 5);
    for _ in 0..3 {
        let v = occupy(&*s, &p).await;
        s.finish(&p, v, &ending(h, Command::Revoke)).await.unwrap();
    }
    let before = revoked_after(&*s, &p, Some(0)).await;
    assert_eq!(before.list.len(), 3);
    h.wipe();
    // An admission the store no longer knows is ended all the same (its cookie still verifies).
    let v = VisitorId::random();
    let e = ending(h, Command::Revoke);
    s.finish(&p, v, &e).await.unwrap();
    let after = revoked_after(&*s, &p, Some(before.last)).await;
    assert_eq!(
        after.list,
        vec![Revocation {
            vid: v,
            until: e.until
        }],
        "a caller ahead of the store's numbers still learns the new revocation"
    );
    assert!(after.last < before.last);
}

/// A caller that knew the store's earlier generation reads the revocation log from the start,
/// also once the new numbers have caught up with its old one (found by review: an instance
/// away during a data loss came back with its old number 1, the new log already at 2, and
/// never learned the new revocation numbered 1).
pub async fn a_caller_of_an_earlier_generation_reads_the_revocations_from_the_start(
    h: &dyn Harness,
) {
    let s = h.store();
    let p = room("regen", 100.0, 5);
    let v = occupy(&*s, &p).await;
    s.finish(&p, v, &ending(h, Command::Revoke)).await.unwrap();
    let known = s.admit_with(&p, &AdmitContext::default()).await.unwrap();
    let old_last = revoked_after(&*s, &p, Some(0)).await.last;
    assert!(old_last > 0);
    h.wipe();
    // (A generation is named by its time: the new one is made later.)
    h.advance(Duration::from_secs(1));
    // Two revocations after the loss: numbered 1 and 2 in the new log.
    let (b, c) = (VisitorId::random(), VisitorId::random());
    for v in [b, c] {
        s.finish(&p, v, &ending(h, Command::Revoke)).await.unwrap();
    }
    let ctx = AdmitContext {
        known_generation: Some(known.generation.clone()),
        revoked_after: Some(old_last),
        ..Default::default()
    };
    let r = s.admit_with(&p, &ctx).await.unwrap();
    let vids: Vec<VisitorId> = r.revoked.list.iter().map(|x| x.vid).collect();
    assert_eq!(vids, vec![b, c], "{:?}", r.revoked);
}

/// The log is numbered by the store's clock (µs), above its last number: a store restored from
/// an older copy (a snapshot, a failover that lost writes) keeps its generation but forgets its
/// count, and a count would hand the numbers an instance had read out again, which it would
/// skip for good (found by review). By the clock, a later revocation is numbered above them.
pub async fn revocations_are_numbered_by_the_store_clock(h: &dyn Harness) {
    let s = h.store();
    let p = room("clocked", 100.0, 5);
    let first = VisitorId::random();
    s.finish(&p, first, &ending(h, Command::Revoke))
        .await
        .unwrap();
    let seen = revoked_after(&*s, &p, Some(0)).await.last;
    h.advance(Duration::from_secs(5));
    let later = VisitorId::random();
    s.finish(&p, later, &ending(h, Command::Revoke))
        .await
        .unwrap();
    let r = revoked_after(&*s, &p, Some(seen)).await;
    let vids: Vec<VisitorId> = r.list.iter().map(|x| x.vid).collect();
    assert_eq!(vids, vec![later]);
    assert!(
        r.last >= seen + 5_000_000,
        "numbered by the clock: {seen} then {}",
        r.last
    );
}

/// A session the store holds longer than the cookie the command came with (renewed through an
/// instance with a longer `session-ttl`, whose cookie lives as long) stays ended that long too:
/// the marker and the revocation last past its deadline here. Before, they lasted only as long
/// as the commanding instance's own cookie and session-ttl said, and the longer cookie then
/// browsed and ordered again (found by review).
pub async fn an_ending_outlasts_a_session_renewed_for_longer_elsewhere(h: &dyn Harness) {
    let s = h.store();
    let mut long = room("long-ended", 100.0, 5);
    long.session_ttl = Duration::from_secs(200);
    let mut short = long.clone();
    short.session_ttl = Duration::from_secs(10);
    let v = occupy(&*s, &long).await;
    assert!(s.touch(&long, v).await.unwrap(), "renewed for 200 s");
    let now = h.wall_secs();
    let told = Ending::of(Command::Revoke, now, now + 10, short.session_ttl);
    let until = s.finish(&short, v, &told).await.unwrap();
    assert!(
        until >= now + 200 + 60,
        "past the session here: {until} (now {now}, told {})",
        told.until
    );
    let log = revoked_after(&*s, &short, Some(0)).await;
    assert_eq!(log.list, vec![Revocation { vid: v, until }]);
    h.advance(Duration::from_secs(100));
    assert_eq!(
        s.consume(&short, v, &order()).await.unwrap(),
        Consumed::Used,
        "the longer cookie orders nothing"
    );
    assert!(!s.touch(&long, v).await.unwrap(), "nor renews");
}
