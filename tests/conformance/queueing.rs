//! Queueing methods on every backend: `random` lets in a random visitor of the line each time
//! (arriving first buys nothing), still at the rate, one tick's batch at a time, everyone
//! exactly once, nobody abandoned.

use std::collections::HashSet;
use std::time::Duration;

use anteroom::store::{Admission, Queueing, VisitorId};

use super::{line_up, room, Harness};

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
