use super::*;

#[test]
fn percentile_is_nearest_rank() {
    let v: Vec<u64> = (1..=100).collect();
    assert_eq!(percentile(&v, 50.0), Some(50));
    assert_eq!(percentile(&v, 99.0), Some(99));
    assert_eq!(percentile(&v, 100.0), Some(100));
    assert_eq!(percentile(&v, 0.0), Some(1));
    assert_eq!(percentile(&[7], 99.0), Some(7));
    assert_eq!(percentile::<u64>(&[], 50.0), None);
    // Ten values: p50 is the 5th, p99 the 10th.
    let v: Vec<u64> = (10..=100).step_by(10).collect();
    assert_eq!(percentile(&v, 50.0), Some(50));
    assert_eq!(percentile(&v, 99.0), Some(100));
}

#[test]
fn summarize_sorts_and_converts_to_ms() {
    let s = summarize(vec![3000, 1000, 2000, 250_000]);
    assert_eq!(s.count, 4);
    assert_eq!(s.p50, Some(2.0));
    assert_eq!(s.p99, Some(250.0));
    assert_eq!(s.max, Some(250.0));
    let e = summarize(vec![]);
    assert_eq!((e.count, e.p50, e.max), (0, None, None));
}

fn w(join_sent: u64, join_done: u64, admitted: Option<u64>, last_waiting_sent: u64) -> Waited {
    Waited {
        join_sent,
        join_done,
        admitted_done: admitted,
        last_waiting_sent,
    }
}

#[test]
fn fifo_inversion_is_found() {
    // A joins at 0..10 and is still told "waiting" for a request sent at 500.
    // B joins at 20 (after A's join was answered) and is admitted at 300 < 500.
    let a = w(0, 10, Some(600), 500);
    let b = w(20, 30, Some(300), 250);
    assert_eq!(fifo_inversions(&[a, b]), 1);
    assert_eq!(fifo_inversions(&[b, a]), 1);
}

#[test]
fn fifo_near_misses_are_not_inversions() {
    let a = w(0, 10, Some(600), 500);
    // Joined while A's join was still in flight (join_sent == A.join_done): not strictly after.
    let concurrent = w(10, 40, Some(300), 250);
    assert_eq!(fifo_inversions(&[a, concurrent]), 0);
    // Admitted exactly when A sent its last waiting request: not before it.
    let tie = w(20, 30, Some(500), 400);
    assert_eq!(fifo_inversions(&[a, tie]), 0);
    // Never admitted.
    let never = w(20, 30, None, 900);
    assert_eq!(fifo_inversions(&[a, never]), 0);
    // Admitted after A's last waiting answer: fine.
    let later = w(20, 30, Some(501), 450);
    assert_eq!(fifo_inversions(&[a, later]), 0);
    // B joined earlier than A and was admitted first: the right order.
    let earlier = w(0, 5, Some(100), 50);
    let a2 = w(6, 12, Some(600), 500);
    assert_eq!(fifo_inversions(&[earlier, a2]), 0);
}

#[test]
fn fifo_counts_victims_not_pairs_and_uses_the_minimum_after_the_join() {
    // Two victims (A1, A2) overtaken by the same C; D, admitted first, joined before A2
    // finished joining and so cannot count against A2 on its own.
    let a1 = w(0, 10, Some(900), 800);
    let a2 = w(5, 50, Some(950), 700);
    let d = w(40, 45, Some(100), 90);
    let c = w(60, 70, Some(600), 500);
    assert_eq!(fifo_inversions(&[a1, a2, d, c]), 2);
    // Without C, A1 is still overtaken by D (40 > 10, 100 < 800); A2 is not (40 <= 50).
    assert_eq!(fifo_inversions(&[a1, a2, d]), 1);
    // A victim that was never admitted still counts.
    let lost = w(0, 10, None, 800);
    assert_eq!(fifo_inversions(&[lost, c]), 1);
}

#[test]
fn fifo_matches_brute_force() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..200 {
        let n = rng.usize(1..30);
        let v: Vec<Waited> = (0..n)
            .map(|_| {
                let js = rng.u64(0..1000);
                let jd = js + rng.u64(0..50);
                let lw = jd + rng.u64(0..500);
                let ad = if rng.bool() {
                    Some(lw + rng.u64(0..100))
                } else if rng.bool() {
                    Some(jd + rng.u64(0..100))
                } else {
                    None
                };
                w(js, jd, ad, lw)
            })
            .collect();
        let brute = v
            .iter()
            .filter(|a| {
                v.iter().any(|b| {
                    b.join_sent > a.join_done
                        && b.admitted_done.is_some_and(|t| t < a.last_waiting_sent)
                })
            })
            .count();
        assert_eq!(fifo_inversions(&v), brute);
    }
}

fn sample(t_ms: u64, waiting: u64, admitted: u64) -> Sample {
    Sample {
        sent_us: t_ms * 1000,
        done_us: t_ms * 1000,
        waiting: Some(waiting),
        active: Some(0),
        admitted_total: Some(admitted),
    }
}

#[test]
fn max_increase_only_counts_pairs_within_the_window() {
    // 20 ms samples; 10 admissions at each 100 ms tick (at 50, 150, 250 ...).
    let s: Vec<Sample> = (0..20)
        .map(|i| {
            let t = i * 20;
            sample(t, 5, 10 * ((t + 50) / 100))
        })
        .collect();
    let (max, _) = max_increase_within(&s, 100_000).unwrap();
    // A pair 100 ms apart straddles exactly one tick, except (40, 140) etc. which see one;
    // (40 -> 140): values 0 -> 10 at t=40? (40+50)/100 = 0, (140+50)/100 = 1: one tick.
    assert_eq!(max, 10);
    // With a 120 ms window, (40 -> 160) spans two ticks: 0 -> 20.
    assert_eq!(max_increase_within(&s, 120_000).unwrap().0, 20);
}

#[test]
fn max_increase_uses_request_brackets_conservatively() {
    // The later sample's request ends 101 ms after the earlier one was sent: not a pair.
    let a = Sample {
        sent_us: 0,
        done_us: 2_000,
        waiting: Some(1),
        active: None,
        admitted_total: Some(0),
    };
    let b = Sample {
        sent_us: 90_000,
        done_us: 101_000,
        waiting: Some(1),
        active: None,
        admitted_total: Some(50),
    };
    let c = Sample {
        sent_us: 60_000,
        done_us: 61_000,
        waiting: Some(1),
        active: None,
        admitted_total: Some(7),
    };
    assert_eq!(max_increase_within(&[a, b], 100_000), None);
    // With c between them, (a, c) gives 7 and (c, b) gives 43.
    let (m, at) = max_increase_within(&[a, c, b], 100_000).unwrap();
    assert_eq!(m, 43);
    assert_eq!(at, 95_500);
    // Samples without admitted_total are skipped.
    let mut stale = c;
    stale.admitted_total = None;
    assert_eq!(max_increase_within(&[a, stale, b], 100_000), None);
}

#[test]
fn burst_limit_is_ceil_plus_one() {
    assert_eq!(burst_limit(175.0, 100_000), 19);
    assert_eq!(burst_limit(200.0, 100_000), 21);
    assert_eq!(burst_limit(30.0, 100_000), 4);
    assert_eq!(burst_limit(1.0, 100_000), 2);
    assert_eq!(burst_limit(250.0, 50_000), 14);
}

#[test]
fn steady_rate_starts_after_warmup_and_stops_when_the_queue_empties() {
    // Queue from t=1 s; 100/s admitted from 1 s to 10 s at 20 ms samples; queue empty at 10 s.
    let mut s = vec![sample(0, 0, 1000), sample(500, 0, 1000)];
    for i in 0..=450 {
        let t = 1000 + i * 20;
        let admitted = 1000 + (t - 1000) / 10; // 100 per second
        let waiting = if t < 10_000 { 50 } else { 0 };
        s.push(sample(t, waiting, admitted));
    }
    let r = steady_rate(&s, 2_000_000, 60_000_000).unwrap();
    assert!((r.rate - 100.0).abs() < 1e-9, "{r:?}");
    assert!((r.start_s - 3.0).abs() < 1e-9);
    // Last sample still queued is at 9.98 s.
    assert!((r.window_s - 6.98).abs() < 1e-9, "{r:?}");
    // The cap limits the window.
    let r = steady_rate(&s, 2_000_000, 1_000_000).unwrap();
    assert!((r.window_s - 1.0).abs() < 1e-9);
    assert_eq!(r.admitted, 100);
}

#[test]
fn steady_rate_needs_a_queue_past_the_warmup() {
    let s = vec![
        sample(0, 0, 0),
        sample(100, 3, 0),
        sample(1000, 0, 10),
        sample(3000, 0, 10),
    ];
    assert_eq!(steady_rate(&s, 2_000_000, 60_000_000), None);
    let none: Vec<Sample> = (0..10).map(|i| sample(i * 20, 0, i)).collect();
    assert_eq!(steady_rate(&none, 2_000_000, 60_000_000), None);
}

#[test]
fn timeline_bucketing() {
    assert_eq!(bucket_of(0), 0);
    assert_eq!(bucket_of(99_999), 0);
    assert_eq!(bucket_of(100_000), 1);
    assert_eq!(buckets_for(250_000), 3);
    assert_eq!(
        count_per_bucket([0, 50_000, 100_000, 250_000, 900_000], 3),
        vec![2, 1, 1]
    );
    // Joined in bucket 0 and admitted in bucket 2: open at the end of buckets 0 and 1.
    // Joined and admitted within bucket 1: never open at a bucket end.
    // Joined in bucket 1, never admitted: open from bucket 1 on.
    let q = open_at_bucket_end(
        &[
            (10_000, Some(250_000)),
            (120_000, Some(180_000)),
            (150_000, None),
        ],
        4,
    );
    assert_eq!(q, vec![1, 2, 1, 1]);
    // Counter readings: 100 before the run, +5 in bucket 0, +7 in bucket 2, a reset adds 0.
    let r = [
        (1_000, 100),
        (60_000, 105),
        (210_000, 112),
        (310_000, 3),
        (320_000, 4),
    ];
    assert_eq!(counter_deltas(&r, 4), vec![5, 0, 7, 1]);
    assert_eq!(
        last_per_bucket(&r, 4),
        vec![Some(105), None, Some(112), Some(4)]
    );
    let b: Vec<u64> = (0..25).collect();
    assert_eq!(per_second_sum(&b), vec![45, 145, 110]);
    let m = [Some(1), None, Some(3)];
    assert_eq!(per_second_max(&m), vec![Some(3)]);
    assert_eq!(per_second_max(&[None, None]), vec![None]);
}

#[test]
fn a_turn_is_when_the_counter_has_grown_by_the_position() {
    // 10 admissions every 100 ms, read every 20 ms.
    let readings: Vec<(u64, u64)> = (0..50u64).map(|i| (i * 20_000, (i / 5) * 10)).collect();
    // Told position 25 at 110 ms (the counter then: 10): it first reads 35 or more at 400 ms
    // (40), so the turn is the reading before, at 380 ms.
    assert_eq!(turn_at(&readings, 110_000, 25), Some(380_000));
    // Never reached in the run.
    assert_eq!(turn_at(&readings, 110_000, 1_000), None);
    // Told before the first reading: no base to count from.
    assert_eq!(turn_at(&readings[1..], 0, 5), None);
    // Position 1, counter steps right after: the turn is at the told time at the earliest.
    assert_eq!(turn_at(&readings, 95_000, 1), Some(95_000));
    let lags = discovery_lags(&readings, &[(110_000, 25, 500_000), (110_000, 25, 300_000)]);
    assert_eq!(lags, vec![120_000, 0]);
}

#[test]
fn slugs() {
    assert_eq!(slug("no waiting room"), "no-waiting-room");
    assert_eq!(
        slug("Memory store, 2 instances!"),
        "memory-store-2-instances"
    );
    assert_eq!(slug("--"), "run");
}
