use super::*;
use crate::analysis::Sample;
use crate::arrivals::Curve;

fn params() -> Parameters {
    Parameters {
        shop_listen: "127.0.0.1:1".into(),
        targets: vec!["http://127.0.0.1:2".into()],
        admin: None,
        host: None,
        room: "sale".into(),
        visitors: 3,
        arrive_over_s: 1.0,
        curve: Curve::Flat,
        workers: 1,
        order_ms: 1,
        shop_queue_timeout_s: 1.0,
        rate: 10.0,
        tick_ms: 100.0,
        deadline_s: 5.0,
        seed: 1,
    }
}

#[test]
fn report_adds_up_what_was_recorded() {
    let ordered = Record {
        arrival: Some(10_000),
        join_sent: Some(10_000),
        join_done: Some(12_000),
        last_waiting_sent: Some(400_000),
        admitted_done: Some(450_000),
        ordered_done: Some(700_000),
        // Told position 2 at 130 ms (the counter 40): in at 41 + 1 = 42, read at 460 ms, so
        // the turn is the reading before (150 ms) and the lag 300 ms.
        last_told: Some((130_000, 2)),
        outcome: Outcome::Ordered,
        polls: 2,
        latencies: vec![
            (Class::WaitingPage, 2000),
            (Class::StatusPoll, 1000),
            (Class::StatusPoll, 3000),
            (Class::AdmittedRequest, 5000),
        ],
        ..Record::default()
    };
    let overtaker = Record {
        arrival: Some(20_000),
        join_sent: Some(20_000),
        join_done: Some(21_000),
        last_waiting_sent: Some(100_000),
        admitted_done: Some(150_000),
        outcome: Outcome::GaveUp,
        origin_errors: 4,
        ..Record::default()
    };
    let direct = Record {
        arrival: Some(30_000),
        admitted_done: Some(31_000),
        outcome: Outcome::Unfinished,
        rejected: 2,
        latencies: vec![(Class::DirectRequest, 1000)],
        ..Record::default()
    };
    let late = Record::default();
    let shop = ShopStats {
        requests: vec![1, 0, 0, 0, 0, 0, 0, 2],
        orders: vec![0, 0, 0, 0, 0, 0, 0, 1],
        errors: vec![0, 0, 0, 0, 0, 0, 0, 1],
        order_latency_us: vec![200_000],
        max_in_flight: 2,
    };
    let sample = |t: u64, waiting: u64, admitted: u64| Sample {
        sent_us: t,
        done_us: t,
        waiting: Some(waiting),
        active: Some(0),
        admitted_total: Some(admitted),
    };
    let samples = Samples {
        // Only (120 ms, 150 ms) is a pair within 100 ms: one admission.
        samples: vec![
            sample(0, 0, 40),
            sample(120_000, 1, 40),
            sample(150_000, 1, 41),
            sample(460_000, 0, 42),
        ],
        failures: 3,
        last_error: None,
    };
    let records = [ordered, overtaker, direct, late];
    let r = build("x", params(), 750_000, &records, &shop, Some(&samples));
    assert_eq!(r.visitors.total, 4);
    assert_eq!(r.visitors.arrived, 3);
    assert_eq!(r.visitors.ordered, 1);
    assert_eq!(r.visitors.lost, 2);
    assert_eq!(r.visitors.gave_up, 1);
    assert_eq!(r.visitors.unfinished, 1);
    assert_eq!(r.visitors.waited, 2);
    assert_eq!(r.visitors.rejected_responses, 2);
    assert_eq!(r.visitors.origin_errors_seen_by_clients, 4);
    // The overtaker joined after the first visitor and was admitted before its last wait.
    assert_eq!(r.fifo_inversions, 1);
    assert_eq!(r.fifo_checked, 2);
    assert_eq!(r.latency_ms.status_poll.count, 2);
    assert_eq!(r.latency_ms.status_poll.p99, Some(3.0));
    assert_eq!(r.latency_ms.direct_request.count, 1);
    assert_eq!(r.shop.errors_5xx, 1);
    let a = r.admission.as_ref().unwrap();
    assert_eq!(a.max_in_100ms, Some(1));
    assert_eq!(a.max_in_100ms_within_limit, Some(true));
    assert_eq!(a.max_in_100ms_limit, 2);
    assert_eq!(a.sample_failures, 3);
    let lag = r.discovery_lag_ms.as_ref().unwrap();
    assert_eq!((lag.count, lag.p50), (1, Some(300.0)));
    // Timeline: 8 buckets; arrivals all in bucket 0; queue of 2 then 1 (overtaker admitted
    // in bucket 1) then 0 after 450 ms.
    let t = &r.timeline;
    assert_eq!(t.admissions_source, "admin");
    assert_eq!(t.buckets.len(), 8);
    assert_eq!(t.buckets[0].arrivals, 3);
    let q: Vec<u64> = t.buckets.iter().map(|b| b.queue).collect();
    assert_eq!(q, vec![2, 1, 1, 1, 0, 0, 0, 0]);
    let adm: Vec<u64> = t.buckets.iter().map(|b| b.admissions).collect();
    assert_eq!(adm, vec![0, 1, 0, 0, 1, 0, 0, 0]);
    assert_eq!(t.buckets[1].waiting_admin, Some(1));
    assert_eq!(t.buckets[7].orders, 1);
    assert_eq!(t.buckets[7].origin_requests, 2);
    // Without samples, admissions are the client's.
    let r = build("x", params(), 750_000, &records, &shop, None);
    assert_eq!(r.timeline.admissions_source, "client");
    let adm: Vec<u64> = r.timeline.buckets.iter().map(|b| b.admissions).collect();
    assert_eq!(adm, vec![1, 1, 0, 0, 1, 0, 0, 0]);
    assert!(r.admission.is_none());
    assert!(summary(&r).contains("1 ordered"));
}
