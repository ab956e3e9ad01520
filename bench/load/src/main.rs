//! anteroom-load: a flash sale against a legacy shop this tool runs itself, bare or behind
//! anteroom. See bench/load/README.md.

mod analysis;
mod arrivals;
mod browser;
mod capacity;
mod chart;
mod eta;
mod report;
mod sampler;
mod shop;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use hyper::header::HeaderValue;
use tokio::sync::watch;

use crate::arrivals::Curve;
use crate::browser::{Browser, Env, Live, Record};
use crate::shop::{Shop, ShopConfig};

#[derive(Debug, Parser)]
#[command(
    name = "anteroom-load",
    about = "Flash-sale load tool: simulated browsers against a legacy shop it runs in-process, bare or behind anteroom"
)]
struct Args {
    /// Where the in-process legacy shop listens.
    #[arg(long, default_value = "127.0.0.1:18081")]
    shop_listen: SocketAddr,
    /// Base URL the browsers use (repeat for several; each request picks one at random).
    /// For no waiting room, the shop itself.
    #[arg(long = "target", required = true, value_name = "URL")]
    targets: Vec<String>,
    /// anteroom admin API base URL, sampled every 20 ms.
    #[arg(long, value_name = "URL")]
    admin: Option<String>,
    /// Bearer token for the admin API.
    #[arg(long, value_name = "TOKEN")]
    admin_token: Option<String>,
    /// Host header to send (default: the target's host:port).
    #[arg(long)]
    host: Option<String>,
    /// The room whose status the browsers poll and the sampler reads.
    #[arg(long, default_value = "sale")]
    room: String,
    #[arg(long, default_value_t = 20_000)]
    visitors: usize,
    /// Arrival window.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    arrive_over: Duration,
    #[arg(long, value_enum, default_value = "ramp")]
    curve: Curve,
    /// Shop workers (concurrent orders).
    #[arg(long, default_value_t = 40)]
    workers: usize,
    /// Time one order holds a worker, in milliseconds.
    #[arg(long, default_value_t = 200)]
    order_ms: u64,
    /// The shop loses workers for a while: AT:WORKERS:FOR, e.g. 30s:15:30s (40 workers, then
    /// 15 from 30 s to 60 s, then 40 again).
    #[arg(long, value_name = "AT:WORKERS:FOR")]
    capacity_drop: Option<capacity::Drop>,
    /// Longest wait for a worker before the shop answers 503.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    shop_queue_timeout: Duration,
    /// The room's configured admission rate (per second), for the report's targets.
    #[arg(long, default_value_t = 175.0)]
    rate: f64,
    /// The room's configured tick, for the report's targets.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    tick: Duration,
    /// Run end, from the start: browsers not done by then are lost.
    #[arg(long, default_value = "180s", value_parser = humantime::parse_duration)]
    deadline: Duration,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Names the run; the output files are DIR/<slug>.json and DIR/<slug>.svg.
    #[arg(long, default_value = "run")]
    label: String,
    /// Output directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    /// No progress line on stderr.
    #[arg(long)]
    quiet: bool,
}

fn trim_base(u: &str) -> Result<String, String> {
    let u = u.trim_end_matches('/');
    if !u.starts_with("http://") {
        return Err(format!("{u}: only http:// URLs are supported"));
    }
    u.parse::<hyper::Uri>().map_err(|e| format!("{u}: {e}"))?;
    Ok(u.to_string())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run(Args::parse()).await {
        eprintln!("anteroom-load: {e}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.visitors == 0 || args.workers == 0 {
        return Err("--visitors and --workers must be at least 1".into());
    }
    let targets = args
        .targets
        .iter()
        .map(|t| trim_base(t))
        .collect::<Result<Vec<_>, _>>()?;
    let admin = args.admin.as_deref().map(trim_base).transpose()?;
    let host = args
        .host
        .as_deref()
        .map(HeaderValue::from_str)
        .transpose()
        .map_err(|e| format!("--host: {e}"))?;
    std::fs::create_dir_all(&args.out)?;
    let slug = analysis::slug(&args.label);
    let json_path = args.out.join(format!("{slug}.json"));
    let svg_path = args.out.join(format!("{slug}.svg"));

    let listener = tokio::net::TcpListener::bind(args.shop_listen)
        .await
        .map_err(|e| format!("shop: cannot listen on {}: {e}", args.shop_listen))?;

    let arrivals = arrivals::arrivals(args.curve, args.visitors, args.arrive_over, args.seed);
    let t0 = Instant::now();
    let deadline = t0 + args.deadline;
    let (stop_tx, stop_rx) = watch::channel(false);

    let shop = Shop::new(
        ShopConfig {
            workers: args.workers,
            order_time: Duration::from_millis(args.order_ms),
            queue_timeout: args.shop_queue_timeout,
            drop: args.capacity_drop,
        },
        t0,
    );
    let server = tokio::spawn(shop::serve(shop.clone(), listener, stop_rx.clone()));

    let sampler = admin.as_ref().map(|a| {
        let s = sampler::Sampler {
            client: browser::client(),
            url: format!("{a}/rooms/{}", args.room),
            token: args.admin_token.clone(),
            t0,
        };
        tokio::spawn(s.run(stop_rx.clone()))
    });

    let live = Arc::new(Live::default());
    let env = Arc::new(Env {
        client: browser::client(),
        targets,
        host,
        room: args.room.clone(),
        t0,
        live: live.clone(),
    });

    let progress = (!args.quiet).then(|| {
        let live = live.clone();
        let shop = shop.clone();
        let mut stop = stop_rx.clone();
        let total = args.visitors;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => return,
                }
                let (req, orders, errors) = shop.totals();
                eprintln!(
                    "t={:>5.1}s arrived {}/{} waiting {} ordered {} gave up {} | shop {} requests {} orders {} 5xx {} in flight",
                    t0.elapsed().as_secs_f64(),
                    live.arrived.load(Ordering::Relaxed),
                    total,
                    live.waiting.load(Ordering::Relaxed),
                    live.ordered.load(Ordering::Relaxed),
                    live.gave_up.load(Ordering::Relaxed),
                    req,
                    orders,
                    errors,
                    shop.current_in_flight(),
                );
            }
        })
    });

    // Watches the tool's own timer lateness: a stall of the load generator is reported, not
    // mistaken for the system's latency.
    let watchdog = {
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut h = report::ToolHealth::default();
            let period = Duration::from_millis(50);
            loop {
                let start = Instant::now();
                tokio::select! {
                    _ = tokio::time::sleep(period) => {}
                    _ = stop.changed() => return h,
                }
                let lag = start.elapsed().saturating_sub(period);
                let lag_ms = lag.as_secs_f64() * 1000.0;
                h.max_timer_lag_ms = h.max_timer_lag_ms.max(lag_ms);
                if lag > Duration::from_millis(100) {
                    h.lags_over_100ms += 1;
                    h.lagged_s += lag.as_secs_f64();
                    eprintln!(
                        "t={:>5.1}s the load tool stalled for {lag_ms:.0} ms",
                        t0.elapsed().as_secs_f64()
                    );
                }
            }
        })
    };

    let handles: Vec<_> = arrivals
        .iter()
        .enumerate()
        .map(|(i, &at)| {
            let env = env.clone();
            let seed = args
                .seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(i as u64 + 1);
            tokio::spawn(async move {
                let mut b = Browser::new(env, seed, at);
                let mut rec = Record::default();
                let _ = tokio::time::timeout_at(deadline.into(), b.run(&mut rec)).await;
                b.finish();
                rec
            })
        })
        .collect();
    let mut records = Vec::with_capacity(handles.len());
    for h in handles {
        records.push(h.await?);
    }
    let duration_us = t0.elapsed().as_micros() as u64;

    let _ = stop_tx.send(true);
    let samples = match sampler {
        Some(h) => Some(h.await?),
        None => None,
    };
    if let Some(p) = progress {
        let _ = p.await;
    }
    let _ = server.await;
    let health = watchdog.await?;
    let shop_stats = shop.stats();

    let parameters = report::Parameters {
        shop_listen: args.shop_listen.to_string(),
        targets: env.targets.clone(),
        admin,
        host: args.host.clone(),
        room: args.room.clone(),
        visitors: args.visitors,
        arrive_over_s: args.arrive_over.as_secs_f64(),
        curve: args.curve,
        workers: args.workers,
        order_ms: args.order_ms,
        shop_queue_timeout_s: args.shop_queue_timeout.as_secs_f64(),
        rate: args.rate,
        tick_ms: args.tick.as_secs_f64() * 1000.0,
        deadline_s: args.deadline.as_secs_f64(),
        seed: args.seed,
    };
    let mut report = report::build(
        &args.label,
        parameters,
        duration_us,
        &records,
        &shop_stats,
        samples.as_ref(),
    );
    report.load_tool = health;
    report.capacity = args.capacity_drop.map(|d| {
        capacity::analyse(
            &d,
            args.workers,
            args.order_ms,
            report.timeline.bucket_ms,
            &report.timeline.buckets,
        )
    });
    std::fs::write(&json_path, serde_json::to_vec_pretty(&report)?)?;
    chart::write(&report, &svg_path).map_err(|e| format!("chart: {e}"))?;
    print!("{}", report::summary(&report));
    if let Some(c) = &report.capacity {
        print!("{}", capacity::summary(c));
    }
    println!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(())
}
