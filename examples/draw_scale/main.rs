//! The draw at scale (issue 17, item 3), for `bench/draw`: N visitors register into a drawn
//! event's pre-queue through the real Redis store, the store's clock is moved past the opening,
//! and the admit ticks over the opening and the reading of the draw's list are timed: at the
//! client, by Redis (INFO commandstats per call, SLOWLOG for every command over 1 ms), and as
//! Redis' main thread's CPU time ([`observe`]). The target: no single Redis command over
//! ~50 ms with 200,000 registered.
//!
//!     cargo run --release --example draw_scale -- redis://127.0.0.1:6379 200000 64 1000 out.json
//!
//! Arguments: REDIS_URL VISITORS CONCURRENCY RATE OUT_JSON (RATE: the event's admissions per
//! second). Prints a report; writes its figures as JSON to OUT_JSON. Exits 1 when the draw is
//! not what the seed orders (the list, or the first admitted), not when a time target is
//! missed: that is a figure to report.

mod observe;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anteroom::event::draw::{self, RegTicket};
use anteroom::event::{AfterClose, Event, Phase};
use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::{
    Admission, AdmitContext, AdmitReport, Draw, EventsArg, JoinContext, RoomParams, Store,
    VisitorId,
};
use observe::{err, longest, machine, ms, stolen, Admin, Res, Slow, Usage};
use serde_json::json;

const ROOM: &str = "draw";
const EVENT: &str = "drop";
/// What an instance reads per call of the list (src/admission/events.rs `LIST_PAGE`).
const LIST_PAGE: u64 = 5_000;
/// The first admitted checked against the draw's order.
const CHECK: usize = 1_000;
/// Admit ticks over the pre-queue, and at least this many after the opening.
const TICKS: usize = 5;
/// The target for any single Redis command (issue 17, item 3).
const TARGET_MS: f64 = 50.0;

struct Visitor {
    vid: VisitorId,
    ticket: RegTicket,
    key: u64,
}

/// The room, its drawn event and who registers.
struct Bench {
    store: Arc<RedisStore>,
    p: RoomParams,
    event: Event,
    events: Arc<EventsArg>,
    /// What every admit tick carries (as an instance's loop passes the events near now).
    ctx: AdmitContext,
    visitors: Arc<Vec<Visitor>>,
}

/// An admit tick with Redis' own time for it (INFO commandstats, reset just before: exact for
/// the one call, and free of the cost SLOWLOG would add by logging every command inside it).
struct Timed {
    report: AdmitReport,
    client: Duration,
    redis_us: f64,
    /// Redis' main thread meanwhile: on a CPU, and waiting for one.
    used: Usage,
}

impl Bench {
    async fn tick(&self, label: &str) -> Res<(AdmitReport, Duration)> {
        let t = Instant::now();
        let r = self
            .store
            .admit_with(&self.p, &self.ctx)
            .await
            .map_err(|e| format!("{label}: {e}"))?;
        Ok((r, t.elapsed()))
    }

    async fn timed_tick(&self, admin: &mut Admin, label: &str) -> Res<Timed> {
        admin.cmd::<()>(&["CONFIG", "RESETSTAT"]).await?;
        let before = admin.usage();
        let (report, client) = self.tick(label).await?;
        let used = admin.usage() - before;
        let (calls, redis_us) = admin.evalsha().await?;
        if calls != 1.0 {
            return Err(format!("{label}: {calls} EVALSHA where one was sent"));
        }
        Ok(Timed {
            report,
            client,
            redis_us,
            used,
        })
    }

    /// 1. Registrations, CONCURRENCY in flight, with the pre-queue already seen by an admit (as
    ///    an instance's ticks see it from its start). Returns the longest command and figures.
    async fn register(&self, admin: &mut Admin, conc: usize) -> Res<(Slow, serde_json::Value)> {
        let n = self.visitors.len();
        let (r, _) = self.tick("first admit").await?;
        let seen = r.event.as_ref().map(|e| e.phase);
        if seen != Some(Phase::Prequeue) {
            return Err(format!("expected the pre-queue, the store says {seen:?}"));
        }
        admin.reset().await?;
        let mem_before = admin.used_memory().await?;
        println!("== registration: {n} visitors, {conc} at a time, through join_with");
        let next = Arc::new(AtomicUsize::new(0));
        let (use0, machine0, started) = (admin.usage(), machine(), Instant::now());
        let mut tasks = Vec::new();
        for _ in 0..conc {
            let (store, p, events, visitors, next) = (
                self.store.clone(),
                self.p.clone(),
                self.events.clone(),
                self.visitors.clone(),
                next.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut slowest = Duration::ZERO;
                while let Some(v) = visitors.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let d = [Some(Draw {
                        ticket: v.ticket,
                        key: v.key,
                    })];
                    let ctx = JoinContext {
                        gate: None,
                        events: Some(&events),
                        draws: &d,
                        events_version: None,
                        ..Default::default()
                    };
                    let t = Instant::now();
                    match store.join_with(&p, v.vid, &ctx).await {
                        Ok(Admission::Registered { drawn: true, .. }) => {}
                        Ok(other) => return Err(format!("a registration answered {other:?}")),
                        Err(e) => return Err(e.to_string()),
                    }
                    slowest = slowest.max(t.elapsed());
                }
                Ok(slowest)
            }));
        }
        let mut slowest = Duration::ZERO;
        for t in tasks {
            slowest = slowest.max(t.await.map_err(err)??);
        }
        let secs = started.elapsed().as_secs_f64();
        let used = admin.usage() - use0;
        let steal = stolen(machine0);
        let (calls, join_us) = admin.evalsha().await?;
        let p999 = admin
            .info_field("latencystats", "latency_percentiles_usec_evalsha:", "p99.9")
            .await?;
        let log = admin.slowlog().await?;
        let worst = longest(&log);
        admin.cmd::<()>(&["SLOWLOG", "RESET"]).await?;
        let mem_after = admin.used_memory().await?;
        let waiting_key = format!("{{anteroom:{ROOM}}}:waiting");
        let list_key = format!("{{anteroom:{ROOM}}}:drawn:{}", self.event.id());
        let waiting: u64 = admin.cmd(&["ZCARD", &waiting_key]).await?;
        let listed: u64 = admin.cmd(&["ZCARD", &list_key]).await?;
        let waiting_mem: f64 = admin.cmd(&["MEMORY", "USAGE", &waiting_key]).await?;
        let list_mem: f64 = admin.cmd(&["MEMORY", "USAGE", &list_key]).await?;
        let bytes = (mem_after - mem_before) / n as f64;
        let cpu_us = used.cpu_ms * 1e3 / n as f64;
        println!(
            "registered {n} in {secs:.1} s: {:.0} registrations/s; Redis {join_us:.1} µs per \
             join (usec_per_call of {calls:.0} EVALSHA; p99.9 {p999:.0} µs), {cpu_us:.1} µs of \
             its main thread's CPU per registration; slowest call at the client {:.1} ms",
            n as f64 / secs,
            ms(slowest)
        );
        println!(
            "Redis commands over 1 ms while registering: {}, longest {:.2} ms ({}); Redis waited \
             {:.0} ms for a core in {secs:.1} s; the hypervisor stole {steal:.0} % of the \
             machine's CPU time",
            log.len(),
            worst.us as f64 / 1e3,
            worst.what,
            used.runq_ms
        );
        println!(
            "in line {waiting}, in the draw's list {listed}; used_memory {mem_before:.0} -> \
             {mem_after:.0}: {bytes:.1} bytes per registration (MEMORY USAGE, sampled: line \
             {:.1}, list {:.1} per entry)",
            waiting_mem / waiting.max(1) as f64,
            list_mem / listed.max(1) as f64
        );
        if waiting != n as u64 || listed != n as u64 {
            return Err(format!(
                "{n} registered, but the line holds {waiting} and the list {listed}"
            ));
        }
        let figures = json!({
            "registrations_per_s": n as f64 / secs,
            "register_secs": secs,
            "join_usec_per_call": join_us,
            "join_p999_usec": p999,
            "join_cpu_usec": cpu_us,
            "register_over_1ms": log.len(),
            "register_longest_ms": worst.us as f64 / 1e3,
            "register_runq_ms": used.runq_ms,
            "register_steal_pct": steal,
            "bytes_per_registration": bytes,
        });
        Ok((worst, figures))
    }

    /// 2. The ticks of the pre-queue (every instance's loop runs through it; nobody is let in).
    async fn prequeue(&self, admin: &mut Admin) -> Res<(Slow, serde_json::Value)> {
        admin.reset().await?;
        let mut ticks = Vec::new();
        for _ in 0..TICKS {
            tokio::time::sleep(self.p.tick).await;
            let t = self.timed_tick(admin, "pre-queue tick").await?;
            if t.report.admitted != 0 {
                return Err("a pre-queue tick admitted someone".into());
            }
            ticks.push(t);
        }
        let worst = longest(&admin.slowlog().await?);
        let redis = ticks.iter().map(|t| t.redis_us / 1e3).fold(0.0, f64::max);
        let cpu = ticks.iter().map(|t| t.used.cpu_ms).fold(0.0, f64::max);
        println!(
            "\n== pre-queue ticks ({TICKS}): up to {redis:.2} ms in Redis ({cpu:.2} ms on a CPU), \
             {:.1} ms at the client",
            ticks.iter().map(|t| ms(t.client)).fold(0.0, f64::max),
        );
        let figures = json!({
            "prequeue_tick_redis_max_ms": redis,
            "prequeue_tick_cpu_max_ms": cpu,
        });
        Ok((worst, figures))
    }

    /// 3. The opening: the store's clock moved past opens-at; the first tick records it and
    ///    admits the first batch, the next ones go on until CHECK are in. The list's script is
    ///    loaded first, as a running instance would have it loaded. Returns who was let in.
    async fn opening(&self, admin: &mut Admin) -> Res<(Vec<VisitorId>, Slow, serde_json::Value)> {
        admin
            .cmd::<String>(&[
                "SCRIPT",
                "LOAD",
                concat!(
                    include_str!("../../lua/prelude.lua"),
                    include_str!("../../lua/draw_list.lua")
                ),
            ])
            .await?;
        let shift = self.event.opens_at + 100_000 - admin.now_us().await?;
        self.store.shift_clock(Duration::from_micros(shift));
        admin.reset().await?;
        let (use0, machine0) = (admin.usage(), machine());
        let opening = self.timed_tick(admin, "opening tick").await?;
        match &opening.report.event {
            Some(e) if e.phase == Phase::Open && e.opened_at.is_some() => {}
            other => return Err(format!("the opening tick saw {other:?}")),
        }
        let mut admitted: Vec<VisitorId> = opening
            .report
            .admitted_visitors
            .iter()
            .map(|a| a.vid)
            .collect();
        let mut after = Vec::new();
        while after.len() < TICKS || admitted.len() < CHECK.min(self.visitors.len()) {
            if after.len() > 100 * TICKS {
                return Err(format!(
                    "only {} admitted after the opening",
                    admitted.len()
                ));
            }
            tokio::time::sleep(self.p.tick).await;
            let t = self.timed_tick(admin, "tick after the opening").await?;
            admitted.extend(t.report.admitted_visitors.iter().map(|a| a.vid));
            after.push(t);
        }
        let used = admin.usage() - use0;
        let steal = stolen(machine0);
        let log = admin.slowlog().await?;
        let worst = longest(&log);
        let redis = after.iter().map(|t| t.redis_us / 1e3).fold(0.0, f64::max);
        let mean = after.iter().map(|t| t.redis_us / 1e3).sum::<f64>() / after.len() as f64;
        let client = after.iter().map(|t| ms(t.client)).fold(0.0, f64::max);
        let cpu = after.iter().map(|t| t.used.cpu_ms).fold(0.0, f64::max);
        println!(
            "\n== the opening, {} registered, {} admitted/s\n\
             opening tick: {:.2} ms in Redis ({:.2} ms on a CPU, {:.2} ms waiting for one), \
             {:.1} ms at the client, {} admitted",
            self.visitors.len(),
            self.p.admit_per_second,
            opening.redis_us / 1e3,
            opening.used.cpu_ms,
            opening.used.runq_ms,
            ms(opening.client),
            opening.report.admitted
        );
        println!(
            "{} ticks after it: {mean:.2} ms in Redis on average, up to {redis:.2} ms ({cpu:.2} \
             ms on a CPU at most, {client:.1} ms at the client); {} admitted in all",
            after.len(),
            admitted.len()
        );
        println!(
            "opening window: {} Redis commands over 1 ms, longest {:.2} ms ({}); Redis waited \
             {:.0} ms for a core; {steal:.0} % of the machine's CPU time stolen",
            log.len(),
            worst.us as f64 / 1e3,
            worst.what,
            used.runq_ms
        );
        let figures = json!({
            "opening_tick_redis_ms": opening.redis_us / 1e3,
            "opening_tick_cpu_ms": opening.used.cpu_ms,
            "opening_tick_runq_ms": opening.used.runq_ms,
            "opening_tick_client_ms": ms(opening.client),
            "opening_tick_admitted": opening.report.admitted,
            "ticks_after": after.len(),
            "tick_after_redis_mean_ms": mean,
            "tick_after_redis_max_ms": redis,
            "tick_after_cpu_max_ms": cpu,
            "tick_after_client_max_ms": client,
            "opening_window_longest_ms": worst.us as f64 / 1e3,
            "opening_window_runq_ms": used.runq_ms,
            "opening_window_steal_pct": steal,
        });
        Ok((admitted, worst, figures))
    }

    /// 4. The draw's list, in pages, as every instance reads it once after the opening.
    async fn read_list(&self, admin: &mut Admin) -> Res<(Vec<RegTicket>, Slow, serde_json::Value)> {
        admin.reset().await?;
        let mut list: Vec<RegTicket> = Vec::with_capacity(self.visitors.len());
        let (mut redis, mut cpu, mut client, mut total) =
            (0.0f64, 0.0f64, Duration::ZERO, Duration::ZERO);
        let mut pages = 0;
        loop {
            admin.cmd::<()>(&["CONFIG", "RESETSTAT"]).await?;
            let (before, t) = (admin.usage(), Instant::now());
            let page = self
                .store
                .draw_list(&self.p, &self.event.id(), list.len() as u64, LIST_PAGE)
                .await
                .map_err(err)?;
            let d = t.elapsed();
            cpu = cpu.max((admin.usage() - before).cpu_ms);
            redis = redis.max(admin.evalsha().await?.1 / 1e3);
            client = client.max(d);
            total += d;
            pages += 1;
            let short = (page.len() as u64) < LIST_PAGE;
            list.extend(page);
            if short {
                break;
            }
        }
        let worst = longest(&admin.slowlog().await?);
        println!(
            "\n== the draw's list: {} tickets in {pages} pages of {LIST_PAGE}, {:.0} ms of calls; \
             longest page {redis:.2} ms in Redis ({cpu:.2} ms on a CPU at most), {:.1} ms at the \
             client",
            list.len(),
            ms(total),
            ms(client)
        );
        let figures = json!({
            "list_pages": pages,
            "list_total_ms": ms(total),
            "list_page_redis_max_ms": redis,
            "list_page_cpu_max_ms": cpu,
            "list_page_client_max_ms": ms(client),
        });
        Ok((list, worst, figures))
    }

    /// 5. The draw as the seed orders it: the list whole, the first admitted by their keys (two
    ///    registrations with one key are ordered by ticket in the list, by visitor id in the
    ///    line: only then may their tickets differ at a place).
    fn check(&self, list: &[RegTicket], admitted: &[VisitorId]) -> (bool, bool) {
        let mut expected: Vec<(u64, RegTicket)> =
            self.visitors.iter().map(|v| (v.key, v.ticket)).collect();
        expected.sort_unstable();
        let list_ok =
            list.len() == expected.len() && list.iter().zip(&expected).all(|(t, (_, e))| t == e);
        let by_vid: HashMap<VisitorId, &Visitor> =
            self.visitors.iter().map(|v| (v.vid, v)).collect();
        let check = CHECK.min(expected.len());
        let mut order_ok = admitted.len() >= check;
        let mut ties = 0;
        for (vid, (key, ticket)) in admitted.iter().zip(&expected).take(check) {
            match by_vid.get(vid) {
                Some(v) if v.key == *key => ties += usize::from(v.ticket != *ticket),
                _ => order_ok = false,
            }
        }
        println!(
            "\n== check: the list in the seed's order: {}; the first {check} admitted in draw \
             order: {}{}",
            if list_ok { "yes" } else { "NO" },
            if order_ok { "yes" } else { "NO" },
            if ties > 0 {
                format!(" ({ties} shared a key with a neighbour)")
            } else {
                String::new()
            }
        );
        (list_ok, order_ok)
    }
}

async fn run() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, n, conc, rate, out] = args.as_slice() else {
        return Err("usage: draw_scale REDIS_URL VISITORS CONCURRENCY RATE OUT_JSON".into());
    };
    let (n, conc, rate): (usize, usize, f64) = match (n.parse(), conc.parse(), rate.parse()) {
        (Ok(n), Ok(c), Ok(r)) if n > 0 && c > 0 && r > 0.0 => (n, c, r),
        _ => return Err("VISITORS, CONCURRENCY and RATE are positive numbers".into()),
    };
    let mut admin = Admin::connect(url).await?;
    // The pre-queue began a second ago; the opening is an hour away (reached by moving the
    // store's clock, not by waiting).
    let now = admin.now_us().await?;
    let event = Event {
        name: EVENT.into(),
        prequeue_from: now - 1_000_000,
        opens_at: now + 3_600_000_000,
        closes_at: None,
        draw: true,
        after_close: AfterClose::Keep,
        admit_per_second: Some(rate),
        max_active: None,
        utc_offset: 0,
    };
    let events = EventsArg::of(std::slice::from_ref(&event));
    // The store knows an event by its id (name and pre-queue start): its list and tickets too.
    let id = event.id();
    let seed = draw::seed(
        b"bench-draw-secret-0123456789abcdef",
        ROOM,
        EVENT,
        event.prequeue_from,
    );
    let bench = Bench {
        store: Arc::new(RedisStore::new(
            Target::Single(url.clone()),
            Duration::from_secs(10),
        )?),
        p: RoomParams {
            name: ROOM.into(),
            admit_per_second: rate,
            max_active: 10_000_000,
            max_waiting: u64::MAX / 2,
            session_ttl: Duration::from_secs(600),
            claim_ttl: Duration::from_secs(60),
            abandon_after: Duration::from_secs(1800),
            tick: Duration::from_millis(100),
            queueing: Default::default(),
        },
        ctx: AdmitContext {
            events: Some(events.clone()),
            ..Default::default()
        },
        events: Arc::new(events),
        event,
        visitors: Arc::new(
            (0..n)
                .map(|_| {
                    let vid = VisitorId::random();
                    let ticket = draw::ticket(ROOM, &id, vid);
                    let key = draw::key(&seed, &ticket);
                    Visitor { vid, ticket, key }
                })
                .collect(),
        ),
    };

    let (reg_worst, reg) = bench.register(&mut admin, conc).await?;
    let (pre_worst, pre) = bench.prequeue(&mut admin).await?;
    let (admitted, open_worst, open) = bench.opening(&mut admin).await?;
    let (list, list_worst, list_read) = bench.read_list(&mut admin).await?;
    let (list_ok, order_ok) = bench.check(&list, &admitted);

    let around_opening = [&pre_worst, &open_worst, &list_worst]
        .into_iter()
        .max_by_key(|s| s.us)
        .cloned()
        .unwrap_or_default();
    let worst = if reg_worst.us > around_opening.us {
        &reg_worst
    } else {
        &around_opening
    };
    let name = |s: &Slow| {
        if s.us == 0 {
            "none over 1 ms".to_string()
        } else {
            s.what.clone()
        }
    };
    let verdict = |us: u64| {
        if us as f64 / 1e3 <= TARGET_MS {
            "met"
        } else {
            "MISSED"
        }
    };
    println!(
        "\n== longest single Redis command (SLOWLOG, wall time), target <= {TARGET_MS} ms\n\
         around the opening (pre-queue ticks, opening, ticks after, list): {:.2} ms ({}): {}\n\
         while registering: {:.2} ms ({}): {}",
        around_opening.us as f64 / 1e3,
        name(&around_opening),
        verdict(around_opening.us),
        reg_worst.us as f64 / 1e3,
        name(&reg_worst),
        verdict(reg_worst.us),
    );
    let mut figures = json!({
        "registered": n,
        "concurrency": conc,
        "rate": rate,
        "around_opening_longest_ms": around_opening.us as f64 / 1e3,
        "around_opening_longest": name(&around_opening),
        "longest_command_ms": worst.us as f64 / 1e3,
        "longest_command": name(worst),
        "list_in_order": list_ok,
        "first_admitted_in_order": order_ok,
    });
    for part in [reg, pre, open, list_read] {
        if let (Some(all), serde_json::Value::Object(part)) = (figures.as_object_mut(), part) {
            all.extend(part);
        }
    }
    std::fs::write(out, format!("{figures}\n")).map_err(|e| format!("{out}: {e}"))?;
    if !(list_ok && order_ok) {
        return Err("the draw is not in the seed's order".into());
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("draw_scale: {e}");
        std::process::exit(1);
    }
}
