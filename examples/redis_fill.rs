//! Fills a room's line with N waiting visitors through the real Redis store, for
//! `bench/redis-scale` (memory per waiting visitor). The room is held (`queue_all`), so nobody
//! is admitted while it fills.
//!
//!     cargo run --release --example redis_fill -- redis://127.0.0.1:6379 bench 1000000 64

use std::sync::Arc;
use std::time::{Duration, Instant};

use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::{RoomParams, RoomPatch, Store, VisitorId};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: redis_fill REDIS_URL ROOM VISITORS CONCURRENCY");
        std::process::exit(2);
    }
    let (url, room) = (&args[1], &args[2]);
    let (n, conc): (u64, u64) = match (args[3].parse(), args[4].parse()) {
        (Ok(n), Ok(c)) if c > 0 => (n, c),
        _ => {
            eprintln!("VISITORS and CONCURRENCY are positive numbers");
            std::process::exit(2);
        }
    };
    let store = match RedisStore::new(Target::Single(url.clone()), Duration::from_secs(5)) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let p = RoomParams {
        name: room.as_str().into(),
        admit_per_second: 175.0,
        max_active: 2000,
        max_waiting: u64::MAX / 2,
        session_ttl: Duration::from_secs(600),
        claim_ttl: Duration::from_secs(60),
        abandon_after: Duration::from_secs(1800),
        tick: Duration::from_millis(100),
        queueing: Default::default(),
    };
    if let Err(e) = store
        .update_room_state(
            &p,
            &RoomPatch {
                queue_all: Some(true),
                ..Default::default()
            },
        )
        .await
    {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..conc {
        let (store, p) = (store.clone(), p.clone());
        let share = n / conc + u64::from(t < n % conc);
        tasks.push(tokio::spawn(async move {
            for _ in 0..share {
                if let Err(e) = store.join(&p, VisitorId::random()).await {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "joined {n} visitors in {secs:.1} s ({:.0} joins/s through the store)",
        n as f64 / secs
    );
}
