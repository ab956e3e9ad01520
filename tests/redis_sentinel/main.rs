//! Redis Sentinel for real: a primary, a replica and three sentinels; mid-sale the primary is
//! killed (`kill -9`), frozen (`SIGSTOP`: a host that stops answering without closing its
//! connections), or handed over by `SENTINEL FAILOVER` (it lives on, demoted to a replica), and
//! the real `anteroom` binary must follow the promoted replica.

#[path = "../common/mod.rs"]
mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::sentinel::{SentinelSetup, MASTER};
use common::*;
use serde_json::Value;

mod stale;

fn config(origin: std::net::SocketAddr, sentinels: &[String]) -> String {
    let list: Vec<String> = sentinels.iter().map(|u| format!("\"{u}\"")).collect();
    format!(
        r#"{base}
[store]
backend = "redis"
redis-sentinel = [{list}]
sentinel-master = "{MASTER}"
timeout = "250ms"
breaker-failures = 3
breaker-cooldown = "300ms"

[[room]]
name = "sale"
paths = ["/products"]
tick = "100ms"
admit-per-second = 3
max-active = 1000
abandon-after = "120s"
on-store-error = "closed"
"#,
        base = base_config(origin),
        list = list.join(", ")
    )
}

/// One status poll: `None` when the proxy did not answer with JSON.
async fn status(c: &reqwest::Client, base: &str, jar: &mut Jar) -> Option<Value> {
    let mut req = c.get(format!("{base}/.anteroom/status?room=sale"));
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    let resp = req.send().await.ok()?;
    jar.absorb(&resp);
    resp.json().await.ok()
}

/// The room's admission counter on one Redis node.
async fn admitted_on(c: &mut ::redis::aio::MultiplexedConnection) -> u64 {
    ::redis::cmd("HGET")
        .arg("{anteroom:sale}:room")
        .arg("admitted")
        .query_async::<Option<u64>>(c)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

type Logs = Arc<Mutex<HashMap<usize, Vec<Seen>>>>;

fn record(logs: &Logs, n: usize, v: &Option<Value>) -> bool {
    let seen = match v {
        Some(v) => Seen {
            at: Instant::now(),
            state: v["state"].as_str().unwrap_or("?").to_string(),
            position: v["position"].as_u64(),
        },
        None => Seen {
            at: Instant::now(),
            state: "error".into(),
            position: None,
        },
    };
    let admitted = seen.state == "admitted";
    logs.lock().unwrap().entry(n).or_default().push(seen);
    admitted
}

/// Visitor `n` polls every 250 ms until admitted or stopped; gives its cookies back.
fn poll(
    n: usize,
    mut jar: Jar,
    stop: &Arc<AtomicBool>,
    logs: &Logs,
    base: &str,
) -> tokio::task::JoinHandle<(usize, Jar)> {
    let (stop, logs, base) = (stop.clone(), logs.clone(), base.to_string());
    tokio::spawn(async move {
        let c = client();
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if record(&logs, n, &status(&c, &base, &mut jar).await) {
                break;
            }
        }
        (n, jar)
    })
}

/// What one waiting visitor saw, poll by poll.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    state: String,
    position: Option<u64>,
}

/// How the primary goes away.
#[derive(Debug, Clone, Copy)]
enum Failure {
    Killed,
    Frozen,
    SwitchedOver,
    /// The first sentinel of the list freezes, then the primary is killed: the two others
    /// promote the replica, and the proxy must find it through them (found by review: the
    /// sentinels' answers were taken in the list's order, and the frozen first one held every
    /// lookup until the store's timeout, for as long as it stayed frozen).
    KilledWithTheFirstSentinelFrozen,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_follows_a_failover_when_the_primary_is_killed() {
    sale_through_a_failover(Failure::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_follows_a_failover_when_the_primary_freezes() {
    sale_through_a_failover(Failure::Frozen).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_follows_a_switchover_to_the_replica() {
    sale_through_a_failover(Failure::SwitchedOver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_follows_a_failover_while_the_first_sentinel_is_frozen() {
    sale_through_a_failover(Failure::KilledWithTheFirstSentinelFrozen).await;
}

async fn sale_through_a_failover(how: Failure) {
    let mut setup = tokio::task::block_in_place(|| SentinelSetup::start(1000));
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, &setup.urls()));
    let base = proxy.url("");
    let c = client();

    // The first visitors are admitted at once (nobody waits yet).
    let mut admitted = Vec::new();
    for _ in 0..3 {
        let mut jar = Jar::default();
        let deadline = Instant::now() + Duration::from_secs(10);
        while status(&c, &base, &mut jar)
            .await
            .map(|v| v["state"] == "admitted")
            != Some(true)
        {
            assert!(Instant::now() < deadline, "admitted within 10 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        admitted.push(jar);
    }
    // Then a line forms: 30 visitors at 3 admissions a second.
    let logs: Logs = Arc::default();
    let mut line = Vec::new();
    for n in 0..30 {
        let mut jar = Jar::default();
        let v = status(&c, &base, &mut jar).await.expect("a status");
        assert!(v["state"] == "waiting" || v["state"] == "admitted", "{v}");
        record(&logs, n, &Some(v));
        line.push(jar);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicU64::new(0));
    let browsed = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    // Admitted visitors browse all along: their cookie is checked locally.
    for jar in admitted {
        let (stop, failures, browsed, base) = (
            stop.clone(),
            failures.clone(),
            browsed.clone(),
            base.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let c = client();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let ok = match c
                    .get(format!("{base}/products/{i}"))
                    .header("cookie", jar.header())
                    .send()
                    .await
                {
                    Ok(r) if r.status() == 200 => r
                        .text()
                        .await
                        .is_ok_and(|t| t == format!("origin GET /products/{i}")),
                    _ => false,
                };
                if !ok {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                browsed.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    // Waiting visitors poll every 250 ms until admitted.
    let mut pollers = Vec::new();
    for (n, jar) in line.into_iter().enumerate() {
        pollers.push(poll(n, jar, &stop, &logs, &base));
    }
    // Newcomers keep joining until the primary dies: the joins of its last moments are the
    // writes asynchronous replication can lose.
    let killing = Arc::new(AtomicBool::new(false));
    let newcomers = {
        let (killing, stop, logs, base) =
            (killing.clone(), stop.clone(), logs.clone(), base.clone());
        tokio::spawn(async move {
            let c = client();
            let mut pollers = Vec::new();
            let mut n = 30;
            while !killing.load(Ordering::Relaxed) {
                let mut jar = Jar::default();
                if let Some(v) = status(&c, &base, &mut jar).await {
                    record(&logs, n, &Some(v));
                    pollers.push(poll(n, jar, &stop, &logs, &base));
                    n += 1;
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            pollers
        })
    };

    // Mid-sale: the line moves, then the primary dies.
    let admitted_count = |logs: &HashMap<usize, Vec<Seen>>, after: Instant| {
        logs.values()
            .filter(|l| l.iter().any(|s| s.state == "admitted" && s.at > after))
            .count()
    };
    let started = Instant::now();
    eventually(Duration::from_secs(10), "admissions from the line", || {
        let n = admitted_count(&logs.lock().unwrap(), started);
        async move { (n >= 2).then_some(()) }
    })
    .await;
    killing.store(true, Ordering::Relaxed);
    match how {
        Failure::Killed => setup.primary.kill(),
        Failure::Frozen => setup.freeze_primary(),
        Failure::SwitchedOver => setup.switch_over(),
        Failure::KilledWithTheFirstSentinelFrozen => {
            setup.sentinels[0].freeze();
            setup.primary.kill();
        }
    }
    let killed = Instant::now();

    let promoted = tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !setup.replica_promoted() {
            assert!(Instant::now() < deadline, "no promotion within 30 s");
            std::thread::park_timeout(Duration::from_millis(20));
        }
        Instant::now()
    });
    // Admitting again means admissions recorded on the new primary: after a switchover the
    // old one still answers (and accepts writes that will be discarded) for some seconds.
    let mut new_primary = ::redis::Client::open(setup.replica.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let counted = admitted_on(&mut new_primary).await;
    let again = eventually(
        Duration::from_secs(20),
        "an admission recorded on the new primary",
        || {
            let mut c = new_primary.clone();
            async move { (admitted_on(&mut c).await > counted).then(Instant::now) }
        },
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "a waiting visitor admitted after the promotion",
        || {
            let n = admitted_count(&logs.lock().unwrap(), promoted);
            async move { (n >= 1).then_some(()) }
        },
    )
    .await;
    // Let every waiting visitor poll at least twice on the new primary.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    pollers.extend(newcomers.await.unwrap());
    let mut jars = Vec::new();
    for p in pollers {
        jars.push(p.await.unwrap());
    }
    // One last poll each, in join order and in quick succession: the line must still be in
    // join order; a visitor behind someone who joined later lost the place and joined again.
    let mut order = Vec::new();
    for (n, mut jar) in jars {
        if let Some(v) = status(&c, &base, &mut jar).await {
            if let Some(p) = v["position"].as_u64() {
                order.push((n, p));
            }
        }
    }
    order.sort();
    let behind_later: HashSet<usize> = order
        .iter()
        .enumerate()
        .filter(|(i, (_, p))| order[i + 1..].iter().any(|(_, later)| later < p))
        .map(|(_, (n, _))| *n)
        .collect();
    let out_of_order = behind_later.len();
    let joined_just_before = logs
        .lock()
        .unwrap()
        .values()
        .filter(|l| {
            l.first()
                .is_some_and(|s| s.at < killed && s.at + Duration::from_millis(250) > killed)
        })
        .count();

    // A place is lost when a visitor's position goes up across the failover: the new primary
    // never had its join (asynchronous replication) and it joined again at the back.
    let logs = logs.lock().unwrap();
    let mut lost = behind_later;
    let mut kept = 0;
    let mut errors = 0;
    for (n, log) in logs.iter() {
        errors += log.iter().filter(|s| s.state == "error").count();
        let before = log
            .iter()
            .rev()
            .find(|s| s.at < killed && s.position.is_some());
        let after = log
            .iter()
            .find(|s| s.at > promoted && (s.position.is_some() || s.state == "admitted"));
        match (before, after) {
            (Some(b), Some(a)) if a.state != "admitted" && a.position > b.position => {
                lost.insert(*n);
            }
            (Some(_), Some(_)) => kept += 1,
            _ => {}
        }
        // Every visitor still waiting at the end still has a place.
        let last = log.last().expect("a poll");
        assert!(
            last.state == "admitted" || last.position.is_some(),
            "a visitor lost the line: {log:?}"
        );
    }
    for l in proxy
        .stderr()
        .lines()
        .filter(|l| l.contains("store::sentinel"))
    {
        println!("LOG {l}");
    }
    println!(
        "sentinel failover ({how:?}): promotion {:.1} s after the failure, admitting again {:.1} s after the \
         promotion; {} requests by admitted visitors, {} failed; {} visitors in line, \
         {joined_just_before} of them joined in the last 250 ms before the failure; waiting \
         places kept {kept}, lost to asynchronous replication {} \
         ({out_of_order} out of join order); {errors} status polls without JSON",
        (promoted - killed).as_secs_f64(),
        (again - promoted).as_secs_f64(),
        browsed.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
        logs.len(),
        lost.len(),
    );
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "admitted visitors never noticed the failover"
    );
    assert!(
        again - promoted < Duration::from_secs(10),
        "admitting again within seconds of the promotion"
    );
    assert!(
        kept > 0,
        "some waiting visitors were followed across the failover"
    );
    assert_eq!(errors, 0, "every status poll got an answer");
}
