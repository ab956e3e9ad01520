//! Fairness of the draw, measured (issue 17, item 7) with fixed seeds through the store's real
//! join and admit: over many draws a registrant's place is uncorrelated with when they came
//! within the pre-queue (Spearman's ρ near zero), everyone registered is placed exactly once,
//! and nobody who came after the opening is let in before anyone registered.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use anteroom::clock::{Clock, ManualClock};
use anteroom::event::{draw, AfterClose, Event};
use anteroom::store::memory::MemoryStore;
use anteroom::store::{
    Admission, AdmitContext, Draw, EventsArg, JoinContext, RoomParams, Store, VisitorId,
};

const DRAWS: usize = 120;
const REGISTRANTS: usize = 400;
const LATER: usize = 40;

fn params(i: usize) -> RoomParams {
    RoomParams {
        name: Arc::from(format!("fair-{i}")),
        admit_per_second: 1000.0,
        max_active: 1_000_000,
        max_waiting: 1_000_000,
        session_ttl: Duration::from_secs(600),
        claim_ttl: Duration::from_secs(60),
        abandon_after: Duration::from_secs(600),
        tick: Duration::from_millis(100),
        queueing: Default::default(),
    }
}

/// Spearman's rank correlation of two permutations of 0..n.
fn spearman(a: &[usize], b: &[usize]) -> f64 {
    let n = a.len() as f64;
    let d2: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_are_uncorrelated_with_arrival_and_everyone_is_placed_once() {
    let mut rng = fastrand::Rng::with_seed(17);
    let mut rhos = Vec::new();
    for i in 0..DRAWS {
        let clock = Arc::new(ManualClock::new());
        let store = MemoryStore::new(clock.clone());
        let p = params(i);
        let now = clock.now_micros();
        let e = Event {
            name: "drop".into(),
            prequeue_from: now,
            opens_at: now + 60_000_000,
            closes_at: None,
            draw: true,
            after_close: AfterClose::Keep,
            admit_per_second: None,
            max_active: None,
            utc_offset: 0,
        };
        let secret = format!("fixed-secret-of-draw-{i}-0123456789abcdef");
        let seed = draw::seed(secret.as_bytes(), &p.name, &e.name, e.prequeue_from);
        let arg = EventsArg::of(std::slice::from_ref(&e));
        let join = |vid: VisitorId| {
            let ticket = draw::ticket(&p.name, &e.id(), vid);
            let d = [Some(Draw {
                ticket,
                key: draw::key(&seed, &ticket),
            })];
            let (store, p, arg) = (&store, &p, &arg);
            async move {
                store
                    .join_with(
                        p,
                        vid,
                        &JoinContext {
                            gate: None,
                            events: Some(arg),
                            draws: &d,
                            events_version: None,
                            ..Default::default()
                        },
                    )
                    .await
                    .unwrap()
            }
        };
        // Registrants arrive over the pre-queue, in this order.
        let arrivals: Vec<VisitorId> = (0..REGISTRANTS)
            .map(|_| VisitorId::from_bytes(rng.u128(..).to_be_bytes()))
            .collect();
        for v in &arrivals {
            clock.advance(Duration::from_millis(100));
            assert!(matches!(
                join(*v).await,
                Admission::Registered { drawn: true, .. }
            ));
        }
        clock.advance(Duration::from_secs(30));
        let later: Vec<VisitorId> = (0..LATER)
            .map(|_| VisitorId::from_bytes(rng.u128(..).to_be_bytes()))
            .collect();
        for v in &later {
            clock.advance(Duration::from_millis(10));
            assert!(matches!(join(*v).await, Admission::Waiting { .. }));
        }
        let mut order = Vec::new();
        for _ in 0..200 {
            clock.advance(Duration::from_millis(100));
            let r = store
                .admit_with(
                    &p,
                    &AdmitContext {
                        events: Some(arg.clone()),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            order.extend(r.admitted_visitors.iter().map(|a| a.vid));
            if order.len() == REGISTRANTS + LATER {
                break;
            }
        }
        assert_eq!(
            order.len(),
            REGISTRANTS + LATER,
            "draw {i}: everyone let in"
        );
        let once: HashSet<VisitorId> = order.iter().copied().collect();
        assert_eq!(once.len(), order.len(), "draw {i}: each exactly once");
        let registered: HashSet<VisitorId> = arrivals.iter().copied().collect();
        assert!(
            order[..REGISTRANTS].iter().all(|v| registered.contains(v)),
            "draw {i}: nobody who came after the opening ahead of a registrant"
        );
        assert_eq!(
            &order[REGISTRANTS..],
            &later[..],
            "draw {i}: later arrivals in their order"
        );
        // Place of each registrant against their arrival.
        let place: std::collections::HashMap<VisitorId, usize> =
            order.iter().enumerate().map(|(k, v)| (*v, k)).collect();
        let by_arrival: Vec<usize> = (0..REGISTRANTS).collect();
        let by_place: Vec<usize> = arrivals.iter().map(|v| place[v]).collect();
        rhos.push(spearman(&by_arrival, &by_place));
    }
    // Under independence ρ has mean 0 and standard deviation 1/√(n−1) = 0.05 for n = 400.
    let mean = rhos.iter().sum::<f64>() / rhos.len() as f64;
    let worst = rhos.iter().fold(0.0f64, |m, r| m.max(r.abs()));
    let sd = (rhos.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / rhos.len() as f64).sqrt();
    println!(
        "{DRAWS} draws of {REGISTRANTS}: Spearman ρ mean {mean:+.4}, sd {sd:.4}, largest |ρ| {worst:.4} (independent: mean 0, sd {:.4})",
        1.0 / ((REGISTRANTS - 1) as f64).sqrt()
    );
    assert!(mean.abs() < 0.02, "the mean ρ {mean} (its sd is 0.005)");
    assert!(
        worst < 0.22,
        "no draw correlated with arrival: largest |ρ| {worst}"
    );
    assert!(
        sd > 0.03 && sd < 0.07,
        "ρ spread as for independent orders: {sd}"
    );
}
