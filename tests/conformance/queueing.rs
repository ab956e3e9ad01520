//! Queueing methods on every backend: `random` lets in a random visitor of the line each time
//! (arriving first buys nothing), still at the rate, one tick's batch at a time, everyone
//! exactly once, nobody abandoned.

use std::collections::HashSet;
use std::time::Duration;

use anteroom::store::{Admission, Queueing, VisitorId};

use super::{line_up, occupy, room, waiting_pos, Harness};

pub async fn random_admits_anyone_in_line_at_the_rate_each_once(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("random", 100.0, 1000);
    p.queueing = Queueing::Random;
    let line = line_up(&*s, &p, 40).await;
    let burst = p.burst(p.admit_per_second) as usize;
    let mut order: Vec<VisitorId> = Vec::new();
    for _ in 0..20 {
        if order.len() == line.len() {
            break;
        }
        h.advance(Duration::from_millis(100));
        let r = s.admit(&p).await.unwrap();
        assert!(r.admitted_visitors.len() <= burst, "a tick's batch at most");
        assert_eq!(r.abandoned, 0);
        order.extend(r.admitted_visitors.iter().map(|a| a.vid));
    }
    assert_eq!(order.len(), line.len(), "everyone let in");
    let once: HashSet<VisitorId> = order.iter().copied().collect();
    assert_eq!(once.len(), line.len(), "each exactly once");
    assert!(line.iter().all(|v| once.contains(v)));
    // The first batch drawn from all 40, not the 10 who came first (by chance: 1 in
    // 847,660,528), and the whole order is not the arrival order.
    let first: HashSet<VisitorId> = order[..burst].iter().copied().collect();
    let front: HashSet<VisitorId> = line[..burst].iter().copied().collect();
    assert_ne!(first, front, "the first batch is not the front of the line");
    assert_ne!(order, line);
    // Each claims the admission as in a line kept in order.
    for v in &order {
        assert_eq!(s.join(&p, *v).await.unwrap(), Admission::Admitted);
    }
}

/// A random draw tells every caller, whatever its own method, until the drawn visitors' claims
/// have run out: an instance still on `fifo` beside one on `random` (or one just switched from
/// it) then asks the store for its visitors' polls instead of answering from its copy of the
/// line, which would tell a drawn visitor to wait on (found by review).
pub async fn a_random_draw_is_told_to_every_caller_until_its_claims_run_out(h: &dyn Harness) {
    let s = h.store();
    let mut random = room("drawn-told", 100.0, 1000);
    random.queueing = Queueing::Random;
    let mut fifo = random.clone();
    fifo.queueing = Queueing::Fifo;
    line_up(&*s, &random, 20).await;
    h.advance(Duration::from_millis(100));
    assert!(
        !s.admit(&fifo).await.unwrap().random_recent,
        "nothing drawn yet"
    );
    h.advance(Duration::from_millis(100));
    let r = s.admit(&random).await.unwrap();
    assert!(r.admitted > 0 && r.random_recent, "{} drawn", r.admitted);
    h.advance(Duration::from_millis(100));
    assert!(
        s.admit(&fifo).await.unwrap().random_recent,
        "told to a fifo caller"
    );
    // A gap (the store away, every instance stopped) moves the claims on, and the draw's
    // window with them (found by re-review: it ran out while the claims lived on).
    h.advance(random.claim_ttl + Duration::from_secs(30));
    assert!(
        s.admit(&fifo).await.unwrap().random_recent,
        "past a gap, as long as the claims"
    );
    for _ in 0..((random.claim_ttl + random.tick * 3).as_millis() / 1000 + 1) {
        h.advance(Duration::from_secs(1));
        s.admit(&fifo).await.unwrap();
    }
    assert!(
        !s.admit(&fifo).await.unwrap().random_recent,
        "once the claims have run out"
    );
}

/// A room that rejects lets nobody of a line left from before in: the proxy answers them
/// "closed" before any store call, so a claim made for them could never be collected (found by
/// review: the store ran the room as fifo, and the front of the line lost its turn). Switched
/// back, the line goes on in its order.
pub async fn a_room_that_rejects_admits_nobody_of_the_line_left(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("rejects", 100.0, 1000);
    let line = line_up(&*s, &p, 5).await;
    p.queueing = Queueing::Reject;
    for _ in 0..5 {
        h.advance(Duration::from_millis(200));
        assert_eq!(s.admit(&p).await.unwrap().admitted, 0, "nobody let in");
    }
    assert_eq!(s.stats(&p).await.unwrap().waiting, 5);
    p.queueing = Queueing::Fifo;
    h.advance(Duration::from_millis(200));
    let r = s.admit(&p).await.unwrap();
    let first: Vec<VisitorId> = r.admitted_visitors.iter().map(|a| a.vid).collect();
    assert!(!first.is_empty());
    assert_eq!(first[..], line[..first.len()], "in the line's order");
}

pub async fn passthrough_lets_everyone_in_and_counts_who_would_have_queued(h: &dyn Harness) {
    let s = h.store();
    let mut p = room("dryrun", 10.0, 2);
    // One visitor in line from before the switch (the line held meanwhile).
    let before = line_up(&*s, &p, 1).await[0];
    p.queueing = Queueing::Passthrough;
    let joined = s.stats(&p).await.unwrap().joined_total;
    assert_eq!(
        s.join(&p, before).await.unwrap(),
        Admission::EnteredFromLine,
        "in line before: no newcomer"
    );
    let st = s.stats(&p).await.unwrap();
    assert_eq!(
        (st.waiting, st.would_have_queued),
        (0, 0),
        "walked in: {st:?}"
    );
    assert_eq!(st.joined_total, joined, "not a new visitor");
    // A newcomer a second later walks in too; the next ones find no token, then no slot.
    h.advance(Duration::from_secs(1));
    let a = VisitorId::random();
    assert_eq!(s.join(&p, a).await.unwrap(), Admission::Entered);
    assert_eq!(s.stats(&p).await.unwrap().would_have_queued, 0);
    for _ in 0..3 {
        assert_eq!(
            s.join(&p, VisitorId::random()).await.unwrap(),
            Admission::Entered
        );
    }
    h.advance(Duration::from_secs(1));
    assert_eq!(
        s.join(&p, VisitorId::random()).await.unwrap(),
        Admission::Entered,
        "past max-active too"
    );
    let st = s.stats(&p).await.unwrap();
    assert_eq!(st.would_have_queued, 4, "{st:?}");
    assert_eq!((st.waiting, st.active), (0, 6));
    // An admitted visitor's poll is a poll, not a new entry.
    assert_eq!(s.join(&p, a).await.unwrap(), Admission::Admitted);
    assert_eq!(s.stats(&p).await.unwrap().would_have_queued, 4);
    // Nothing for the admission loop to do.
    assert_eq!(s.admit(&p).await.unwrap().admitted, 0);
}

/// A line that has not emptied for longer than its offsets' time range (about 25 days on
/// Redis, where an offset is microseconds since the line's epoch) stays first come, first
/// served. Before, every later arrival got the same last offset, and their order came from
/// when each last polled (found by review).
pub async fn a_line_that_never_empties_stays_in_order_past_its_offsets_time_range(h: &dyn Harness) {
    let s = h.store();
    let p = room("old-line", 100.0, 1);
    occupy(&*s, &p).await;
    let first = VisitorId::random();
    assert_eq!(waiting_pos(&s.join(&p, first).await.unwrap()), Some(1));
    h.advance(Duration::from_secs(26 * 86_400));
    let (b, c) = (VisitorId::random(), VisitorId::random());
    assert_eq!(waiting_pos(&s.join(&p, b).await.unwrap()), Some(2));
    h.advance(Duration::from_secs(1));
    assert_eq!(waiting_pos(&s.join(&p, c).await.unwrap()), Some(3));
    // B polls later than C: still ahead of C.
    h.advance(Duration::from_secs(1));
    assert_eq!(waiting_pos(&s.join(&p, c).await.unwrap()), Some(3));
    h.advance(Duration::from_secs(1));
    assert_eq!(waiting_pos(&s.join(&p, b).await.unwrap()), Some(2));
    assert_eq!(waiting_pos(&s.join(&p, c).await.unwrap()), Some(3));
}
