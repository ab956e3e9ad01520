//! The Redis cost of answering status polls at the edge, for `bench/redis-scale`: on a line
//! filled (and held) by `redis_fill`, the Redis time of one admit tick (which samples the line
//! for every instance's snapshot) and of one visitor in the liveness batch, from INFO
//! commandstats (`usec` of EVALSHA, reset before each part).
//!
//!     cargo run --release --example redis_edge_cost -- redis://127.0.0.1:6379 bench 20000
//!
//! Prints one line of JSON: tick_us (an admit that samples the line), reuse_us (one that reuses
//! the sample another instance took within half a tick), flush_us_per_visitor, points.

use std::time::Duration;

use anteroom::store::line::Place;
use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::{AdmitContext, RoomParams, Store, VisitorId};

async fn evalsha_usec(c: &mut ::redis::aio::MultiplexedConnection) -> Result<(f64, f64), String> {
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(c)
        .await
        .map_err(|e| e.to_string())?;
    let line = info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .ok_or("no EVALSHA in commandstats")?;
    let field = |name: &str| -> f64 {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    Ok((field("calls"), field("usec")))
}

async fn reset(c: &mut ::redis::aio::MultiplexedConnection) -> Result<(), String> {
    ::redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(c)
        .await
        .map_err(|e| e.to_string())
}

async fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, room, batch] = args.as_slice() else {
        return Err("usage: redis_edge_cost REDIS_URL ROOM BATCH".into());
    };
    let batch: isize = batch.parse().map_err(|_| "BATCH is a number")?;
    let store = RedisStore::new(Target::Single(url.clone()), Duration::from_secs(10))?;
    let mut c = ::redis::Client::open(url.as_str())
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
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
    let err = |e: anteroom::store::StoreError| e.to_string();

    // One tick: the line is held, so the call admits nobody; it sweeps a slice and samples the
    // line — afresh when the last sample is older than half a tick (the first instance to call
    // in a tick), else it reuses the sample (the other instances).
    const TICKS: u32 = 30;
    let r = store.admit(&p).await.map_err(err)?;
    reset(&mut c).await?;
    for _ in 0..TICKS {
        tokio::time::sleep(p.tick).await;
        store.admit(&p).await.map_err(err)?;
    }
    let (calls, usec) = evalsha_usec(&mut c).await?;
    let tick_us = usec / calls.max(1.0);
    reset(&mut c).await?;
    for _ in 0..TICKS {
        store.admit(&p).await.map_err(err)?;
    }
    let (calls, usec) = evalsha_usec(&mut c).await?;
    let reuse_us = usec / calls.max(1.0);

    // The liveness batch: visitors somewhere in the line, at their places.
    let waiting = format!("{{anteroom:{room}}}:waiting");
    let members: Vec<(Vec<u8>, f64)> = ::redis::cmd("ZRANGE")
        .arg(&waiting)
        .arg(1000)
        .arg(1000 + batch - 1)
        .arg("WITHSCORES")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let seen: Vec<(VisitorId, Place)> = members
        .into_iter()
        .filter_map(|(id, score)| {
            let id: [u8; 16] = id.try_into().ok()?;
            Some((
                VisitorId::from_bytes(id),
                Place {
                    epoch: r.line.epoch,
                    key: (score / 4096.0).floor() as u64,
                },
            ))
        })
        .collect();
    let ctx = AdmitContext {
        seen: seen.clone(),
        ..Default::default()
    };
    const FLUSHES: u32 = 10;
    reset(&mut c).await?;
    for _ in 0..FLUSHES {
        store.admit_with(&p, &ctx).await.map_err(err)?;
    }
    let (calls, usec) = evalsha_usec(&mut c).await?;
    let flush_us = (usec / calls.max(1.0) - reuse_us).max(0.0) / seen.len().max(1) as f64;
    println!(
        "{{\"waiting\": {}, \"points\": {}, \"tick_us\": {tick_us:.1}, \"reuse_us\": {reuse_us:.1}, \"batch\": {}, \"flush_us_per_visitor\": {flush_us:.3}}}",
        r.waiting,
        r.line.points.len(),
        seen.len()
    );
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
