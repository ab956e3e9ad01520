//! Property tests any backend must pass: random traffic against a model of the line.
//!
//! Checked after every step: positions agree with join order (so none ever goes up), no FIFO
//! inversion (the admit step takes exactly the front of the line), active never exceeds
//! max-active, and over the whole run any window holds at most rate × window + burst
//! admissions; and nobody orders more often than they came to the line (a place bought by
//! waiting buys one order, also when the visitor was let in meanwhile by the `local` policy
//! while the store was away, or ordered under `open` where the store saw only the confirm).
//! Nobody stops polling for long here (abandon-after is an hour), which keeps the
//! model exact on every backend; the memory store's own test covers abandonment too.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anteroom::store::{
    Admission, Consumed, Order, RequestId, RoomParams, Settle, Settled, VisitorId,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::Harness;

#[derive(Debug, Clone)]
pub enum Op {
    /// Visitor n arrives or polls.
    Join(usize),
    Advance(u64),
    Admit,
    /// Visitor n places an order: on a cookie the store may never have counted if a local
    /// admission let them in (vouched), else on the store's own admission.
    Consume(usize),
    /// Visitor n, in line, is let in by the `local` policy while the store is away: they hold
    /// a signed cookie the store never counted (and still hold their place as far as the store
    /// knows). `true`: the store stays away until the order went through (`open`), and only
    /// its confirm ever arrives.
    LocalAdmit(usize, bool),
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..40usize).prop_map(Op::Join),
        3 => (1..400u64).prop_map(Op::Advance),
        3 => Just(Op::Admit),
        1 => (0..40usize).prop_map(Op::Consume),
        1 => (0..40usize, any::<bool>()).prop_map(|(n, unseen)| Op::LocalAdmit(n, unseen)),
    ]
}

async fn run(
    h: &dyn Harness,
    ops: Vec<Op>,
    rate: f64,
    max_active: u64,
) -> Result<(), TestCaseError> {
    let store = h.store();
    let p = RoomParams {
        name: Arc::from(
            format!("prop-{}", VisitorId::random())
                .get(..20)
                .unwrap_or("prop"),
        ),
        admit_per_second: rate,
        max_active,
        max_waiting: 1_000,
        session_ttl: Duration::from_secs(3),
        claim_ttl: Duration::from_secs(1),
        abandon_after: Duration::from_secs(3600),
        tick: Duration::from_millis(100),
        queueing: Default::default(),
    };
    let ids: Vec<VisitorId> = (0..40).map(|_| VisitorId::random()).collect();
    let index: HashMap<VisitorId, usize> = ids.iter().enumerate().map(|(i, v)| (*v, i)).collect();
    let mut line: Vec<usize> = Vec::new();
    let mut last_position: HashMap<usize, u64> = HashMap::new();
    // (model time in µs, wall clock before the step, wall clock after it) of every admission.
    let mut admissions: Vec<(u64, Instant, Instant)> = Vec::new();
    let mut t = 0u64;
    // Times each visitor came to the line as a newcomer (a place, or the fast path), orders
    // each made, and who holds a cookie the store never counted.
    let mut came = vec![0u32; ids.len()];
    let mut ordered = vec![0u32; ids.len()];
    let mut local = vec![false; ids.len()];
    for op in ops {
        let step_started = Instant::now();
        match op {
            Op::Join(n) => {
                let was_waiting = line.contains(&n);
                let admission = store.join(&p, ids[n]).await.unwrap();
                match &admission {
                    Admission::Waiting { position, .. } => {
                        let position = *position;
                        if let Some(last) = last_position.get(&n) {
                            prop_assert!(
                                position <= *last,
                                "position went up: {last} -> {position}"
                            );
                        }
                        last_position.insert(n, position);
                        if !was_waiting {
                            line.push(n);
                            came[n] += 1;
                        }
                        let expected = line.iter().position(|x| *x == n).unwrap() as u64 + 1;
                        prop_assert_eq!(position, expected, "position disagrees with join order");
                    }
                    Admission::Admitted | Admission::Entered => {
                        prop_assert!(
                            !was_waiting,
                            "admitted while waiting, outside the admit step"
                        );
                        if matches!(admission, Admission::Entered) {
                            came[n] += 1;
                        }
                    }
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            Op::Advance(ms) => {
                h.advance(Duration::from_millis(ms));
                t += ms * 1000;
            }
            Op::Admit => {
                let r = store.admit(&p).await.unwrap();
                for a in &r.admitted_visitors {
                    let n = index[&a.vid];
                    let pos = line.iter().position(|x| *x == n);
                    prop_assert_eq!(
                        pos,
                        Some(0),
                        "FIFO inversion: visitor {} admitted from {:?}",
                        n,
                        pos
                    );
                    line.remove(0);
                    last_position.remove(&n);
                }
            }
            Op::Consume(n) => {
                let order = Order {
                    request: RequestId::random(),
                    grace: Duration::from_secs(60),
                    vouched: local[n],
                    cookie_life: p.session_ttl,
                    cookie_expires: 0,
                    generation: None,
                    events_version: None,
                };
                if store.consume(&p, ids[n], &order).await.unwrap() == Consumed::Won {
                    let how = Settle::Confirm;
                    let done = store.settle(&p, ids[n], &order.request, how).await.unwrap();
                    prop_assert_eq!(done, Settled::Done);
                    ordered[n] += 1;
                    local[n] = false;
                    // The order used the admission up, whichever gave it: the place too.
                    line.retain(|x| *x != n);
                    last_position.remove(&n);
                }
            }
            Op::LocalAdmit(n, unseen) => {
                if line.contains(&n) {
                    if unseen {
                        let confirm = Settle::Confirm;
                        let done = store
                            .settle(&p, ids[n], &RequestId::random(), confirm)
                            .await;
                        prop_assert_eq!(done.unwrap(), Settled::Done);
                        ordered[n] += 1;
                        line.retain(|x| *x != n);
                        last_position.remove(&n);
                    } else {
                        local[n] = true;
                    }
                }
            }
        }
        let st = store.stats(&p).await.unwrap();
        prop_assert!(
            st.active <= max_active,
            "active {} > max {}",
            st.active,
            max_active
        );
        prop_assert_eq!(st.waiting, line.len() as u64);
        for n in 0..ids.len() {
            prop_assert!(
                ordered[n] <= came[n],
                "visitor {} ordered {} times, came to the line {} times",
                n,
                ordered[n],
                came[n]
            );
        }
        while (admissions.len() as u64) < st.admitted_total {
            admissions.push((t, step_started, Instant::now()));
        }
    }
    // Any window holds at most rate × window + burst admissions. The window is measured in the
    // model's time plus the wall-clock time that may really have passed (a Redis clock keeps
    // running): from before the step of the first admission to after the step of the last,
    // the most the store can have seen between them. (Measured from step start to step start,
    // a step that took a millisecond on a loaded machine made a lawful pair look too close:
    // "2 admissions in 0.999 s at 1/s".)
    let burst = p.burst(rate);
    for i in 0..admissions.len() {
        for j in i..admissions.len() {
            let span = (admissions[j].0 - admissions[i].0) as f64 / 1e6
                + admissions[j]
                    .2
                    .duration_since(admissions[i].1)
                    .as_secs_f64();
            let count = (j - i + 1) as f64;
            prop_assert!(
                count <= rate * span + burst + 1e-9,
                "{count} admissions in {span}s at {rate}/s (burst {burst})"
            );
        }
    }
    Ok(())
}

/// Runs `cases` random traffic cases against `h`, all on one runtime (a Redis connection lives
/// on the runtime that made it).
pub fn random_traffic(h: &dyn Harness, cases: u32) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        proptest::collection::vec(op(), 1..300),
        prop_oneof![Just(1.0), Just(5.0), Just(20.0), Just(100.0)],
        1..6u64,
    );
    let result = runner.run(&strategy, |(ops, rate, max_active)| {
        rt.block_on(run(h, ops, rate, max_active))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
