//! The conformance suite and the property tests on the memory store, driven by a manual clock.

mod conformance;

use std::sync::Arc;
use std::time::Duration;

use anteroom::clock::ManualClock;
use anteroom::store::memory::MemoryStore;
use anteroom::store::Store;

struct Memory {
    clock: Arc<ManualClock>,
    store: Arc<MemoryStore>,
}

impl Memory {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new());
        Self {
            store: Arc::new(MemoryStore::new(clock.clone())),
            clock,
        }
    }
}

impl conformance::Harness for Memory {
    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    fn step_back(&self, by: Duration) {
        self.clock.step_wall_back(by);
    }

    fn wipe(&self) {
        self.store.wipe();
    }

    fn wall_secs(&self) -> u64 {
        use anteroom::clock::Clock;
        self.clock.now_secs()
    }
}

conformance_suite!(Memory::new());

#[test]
fn properties_under_random_traffic() {
    conformance::properties::random_traffic(&Memory::new(), 200);
}

/// Invariants under random traffic: no FIFO inversion, positions never go up, admissions in
/// any window stay within rate × window + burst, active never exceeds max-active.
mod properties {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use anteroom::clock::{Clock, ManualClock};
    use anteroom::store::liveness::{self, Liveness};
    use anteroom::store::memory::MemoryStore;
    use anteroom::store::{Admission, RoomParams, Store, VisitorId};
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// Visitor n arrives or polls.
        Join(usize),
        Advance(u64),
        Admit,
        /// Visitor n places an order.
        Consume(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..40usize).prop_map(Op::Join),
            3 => (1..400u64).prop_map(Op::Advance),
            3 => Just(Op::Admit),
            1 => (0..40usize).prop_map(Op::Consume),
        ]
    }

    #[derive(Default)]
    struct Model {
        /// Waiting visitors in join order, with the last time they were seen (liveness clock).
        line: Vec<(usize, u64)>,
        /// The room's liveness clock: stepped by joins and admits only.
        liveness: Liveness,
        last_position: HashMap<usize, u64>,
        /// Times (µs) of every new admission.
        admissions: Vec<u64>,
    }

    fn run(ops: Vec<Op>, rate: f64, max_active: u64) -> Result<(), TestCaseError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move {
            let clock = Arc::new(ManualClock::new());
            let store = MemoryStore::new(clock.clone());
            let p = RoomParams {
                name: Arc::from("prop"),
                admit_per_second: rate,
                max_active,
                max_waiting: 1_000,
                session_ttl: Duration::from_secs(3),
                claim_ttl: Duration::from_secs(1),
                abandon_after: Duration::from_secs(2),
                tick: Duration::from_millis(100),
                queueing: Default::default(),
            };
            let abandon = 2_000_000u64;
            let cap = liveness::cap(p.tick);
            let ids: Vec<VisitorId> = (0..40).map(|_| VisitorId::random()).collect();
            let index: HashMap<VisitorId, usize> =
                ids.iter().enumerate().map(|(i, v)| (*v, i)).collect();
            let mut m = Model::default();
            for op in ops {
                let now = clock.mono_micros();
                match op {
                    Op::Join(n) => {
                        let was_waiting = m.line.iter().any(|(x, _)| *x == n);
                        let now = m.liveness.step(now, cap, false);
                        let a = store.join(&p, ids[n]).await.unwrap();
                        match a {
                            Admission::Waiting { position, .. } => {
                                if let Some(last) = m.last_position.get(&n) {
                                    prop_assert!(
                                        position <= *last,
                                        "position went up: {last} -> {position}"
                                    );
                                }
                                m.last_position.insert(n, position);
                                match m.line.iter_mut().find(|(x, _)| *x == n) {
                                    Some(e) => e.1 = now,
                                    None => m.line.push((n, now)),
                                }
                                let expected =
                                    m.line.iter().position(|(x, _)| *x == n).unwrap() as u64 + 1;
                                prop_assert_eq!(
                                    position,
                                    expected,
                                    "position disagrees with join order"
                                );
                            }
                            Admission::Admitted | Admission::Entered => {
                                prop_assert!(
                                    !was_waiting,
                                    "admitted while waiting, outside the admit step"
                                );
                                m.last_position.remove(&n);
                            }
                            other => prop_assert!(false, "unexpected {:?}", other),
                        }
                        // A fresh admission (fast path) is recorded by the stats delta below.
                    }
                    Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                    Op::Admit => {
                        m.liveness.step(now, cap, true);
                        let r = store.admit(&p).await.unwrap();
                        for a in &r.admitted_visitors {
                            let n = index[&a.vid];
                            let pos = m.line.iter().position(|(x, _)| *x == n);
                            prop_assert_eq!(
                                pos,
                                Some(0),
                                "FIFO inversion: visitor {} admitted from {:?}",
                                n,
                                pos
                            );
                            m.line.remove(0);
                            m.last_position.remove(&n);
                        }
                    }
                    Op::Consume(n) => {
                        store.use_up(&p, ids[n]).await.unwrap();
                    }
                }
                // Silent waiters drop out of the model exactly when the store drops them: at
                // the next store call after abandon-after has passed on the liveness clock,
                // which only joins and admits move (time moves only here).
                let now = m.liveness.read(clock.mono_micros(), cap, false).value;
                m.line.retain(|(n, seen)| {
                    let keep = seen + abandon > now;
                    if !keep {
                        m.last_position.remove(n);
                    }
                    keep
                });
                let st = store.stats(&p).await.unwrap();
                prop_assert!(
                    st.active <= max_active,
                    "active {} > max {}",
                    st.active,
                    max_active
                );
                prop_assert_eq!(st.waiting, m.line.len() as u64);
                while (m.admissions.len() as u64) < st.admitted_total {
                    m.admissions.push(clock.now_micros());
                }
            }
            // Any window [t_i, t_j] holds at most rate × (t_j − t_i) + burst admissions.
            let burst = p.burst(rate);
            for i in 0..m.admissions.len() {
                for j in i..m.admissions.len() {
                    let span = (m.admissions[j] - m.admissions[i]) as f64 / 1e6;
                    let count = (j - i + 1) as f64;
                    prop_assert!(
                        count <= rate * span + burst + 1e-9,
                        "{count} admissions in {span}s at {rate}/s (burst {burst})"
                    );
                }
            }
            Ok(())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn invariants_hold_under_random_traffic(
            ops in proptest::collection::vec(op(), 1..300),
            rate in prop_oneof![Just(1.0), Just(5.0), Just(20.0), Just(100.0)],
            max_active in 1..6u64,
        ) {
            run(ops, rate, max_active)?;
        }
    }
}
