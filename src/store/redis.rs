//! The Redis backend: the same semantics as the memory store, for any number of proxy
//! instances on one Redis, a Redis Cluster, or a primary found through Sentinel.
//!
//! Each store operation is one Lua script from `lua/` (the file is named after the method),
//! prefixed with `lua/prelude.lua` and embedded in the binary. Scripts run through redis-rs
//! [`Script`]: `EVALSHA`, and a load on `NOSCRIPT`, which also covers a restarted Redis, a
//! failover and each cluster node's own script cache. All of a room's keys share the hash tag
//! `{anteroom:ROOM}`, so every script touches one slot. Queue order and expiry use Redis
//! `TIME`; no proxy clock decides who is first. Silence is measured on the room's liveness
//! clock, kept in the room hash ([`super::liveness`]), and a step back of `TIME` counts as zero
//! elapsed in every script.
//!
//! Retries: `join`, `touch`, `settle`, `finish`, `room_state` and `clear_waiting` are idempotent; `admit`
//! is harmless when repeated (its token bucket was drained by the first run); `consume` carries
//! the order's request id, so a call whose reply was lost and that is sent again still wins,
//! while any other request for the same admission loses.
//!
//! Every call is bounded by the store timeout in [`crate::app::Core::store_call`]; the
//! connection itself is made lazily on first use (inside the caller's runtime) and re-made
//! by redis-rs after a failure.

use std::sync::atomic::AtomicI64;
use std::time::Duration;

use ::redis::cluster::ClusterClient;
use ::redis::{Script, ScriptInvocation, Value};
use async_trait::async_trait;
use tokio::sync::OnceCell;

mod admit_reply;
mod clock;
mod conn;
mod events;
mod history;
mod join_reply;
mod keys;
mod orders;
mod reply;

use admit_reply::AdmitReply;
use conn::Conn;
use join_reply::JoinReply;
use keys::Keys;

use super::sentinel::SentinelConn;
use super::{
    Admission, AdmitContext, AdmitReport, Consumed, Ending, EventChange, JoinContext, Order,
    RequestId, RoomParams, RoomPatch, RoomState, RoomStats, RuntimeEvents, Settle, Settled, Store,
    StoreError, Taking, Touched, VisitorId,
};

/// A script: the prelude, then each named file of `lua/` in order (`admit` has its steps apart).
macro_rules! lua {
    ($($name:literal),+) => {
        concat!(
            include_str!("../../lua/prelude.lua"),
            $(include_str!(concat!("../../lua/", $name, ".lua"))),+
        )
    };
}

/// The scripts, one per store operation.
struct Scripts {
    join: Script,
    admit: Script,
    touch: Script,
    consume: Script,
    settle: Script,
    finish: Script,
    room_state: Script,
    clear_waiting: Script,
    changes: Script,
    stats: Script,
    events: Script,
    change_event: Script,
    draw_list: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            join: Script::new(lua!("join")),
            admit: Script::new(lua!(
                "admit_steps",
                "admit_instances",
                "admit_outage",
                "admit"
            )),
            touch: Script::new(lua!("markers", "touch")),
            consume: Script::new(lua!("markers", "consume")),
            settle: Script::new(lua!("markers", "settle")),
            finish: Script::new(lua!("markers", "finish")),
            room_state: Script::new(lua!("room_state")),
            clear_waiting: Script::new(lua!("clear_waiting")),
            changes: Script::new(lua!("changes")),
            stats: Script::new(lua!("stats")),
            events: Script::new(lua!("events")),
            change_event: Script::new(lua!("change_event")),
            draw_list: Script::new(lua!("draw_list")),
        }
    }
}

/// Where the store lives.
#[derive(Debug, Clone)]
pub enum Target {
    Single(String),
    Cluster(Vec<String>),
    /// The primary the sentinels at these URLs name `master` (see [`super::sentinel`]).
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
}

/// Waiting visitors checked for abandonment per second of ticks (500 per 100 ms tick): a line of
/// a million is swept in about 200 s whatever the tick, well inside the 68 minutes after which
/// the one-second "last seen" slots in the score wrap around.
const SWEEP_PER_SECOND: f64 = 5000.0;

/// The Redis store.
pub struct RedisStore {
    target: Target,
    timeout: Duration,
    /// The connection, made on first use; replaced by a new one after [`TIMEOUTS_TO_RECONNECT`]
    /// calls in a row timed out (see [`RedisStore::run`]).
    conn: std::sync::Arc<arc_swap::ArcSwap<OnceCell<Conn>>>,
    /// Per room, its calls in a row that timed out (see `note_timeouts`).
    timeouts: std::sync::Mutex<std::collections::HashMap<String, u32>>,
    /// A new connection is being made beside the one in use.
    remaking: std::sync::Arc<std::sync::atomic::AtomicBool>,
    scripts: Scripts,
    /// Added to Redis `TIME` in every script; always 0 outside tests.
    skew_us: AtomicI64,
    /// Test hook: the time (unix µs) this store's clock was frozen at, 0 if it runs.
    frozen_us: AtomicI64,
    /// Per room, its Redis `TIME` minus this host's wall clock (µs), the largest an admit
    /// reply showed (each one shows it less the reply's way back): what the deadline of a call
    /// is written in (`clock_arg_until`).
    redis_ahead: std::sync::Mutex<std::collections::HashMap<String, i64>>,
    /// This process in the instances heartbeat set.
    instance: String,
    /// Per room, the store generation this process's last admit saw. A join passes it, so that
    /// a store that lost the room's data (an empty restart) lets nobody in on the fast path
    /// before this process's next admit has noticed the loss and held the line (join.lua).
    generations: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

fn unavailable(op: &'static str, room: &str, reason: impl ToString) -> StoreError {
    StoreError::Unavailable {
        op,
        room: room.to_string(),
        reason: reason.to_string(),
    }
}

/// ARGV[13..21] of `admit.lua`: the autopilot's report and proposal ('' when none).
fn autopilot_args(inv: &mut ScriptInvocation<'_>, ap: Option<&super::autopilot::AutopilotTick>) {
    let Some(ap) = ap else {
        for _ in 13..=21 {
            inv.arg("");
        }
        return;
    };
    inv.arg("1")
        .arg(ap.start)
        .arg(ap.report.requests)
        .arg(ap.report.errors)
        .arg(micros(ap.report.p90));
    match &ap.proposal {
        Some(p) => inv
            .arg(p.rate)
            .arg(p.reason)
            .arg(&p.based_on)
            .arg(micros(p.judged_p90)),
        None => inv.arg("").arg("").arg("").arg(""),
    };
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// This host's wall clock, unix µs.
fn wall_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| micros(d) as i64)
        .unwrap_or(0)
}

impl RedisStore {
    /// Checks the URLs; connects on first use.
    pub fn new(target: Target, timeout: Duration) -> Result<Self, String> {
        match &target {
            Target::Single(url) => {
                ::redis::Client::open(url.as_str()).map_err(|e| format!("redis-url: {e}"))?;
            }
            Target::Cluster(urls) => {
                ClusterClient::new(urls.iter().map(String::as_str))
                    .map_err(|e| format!("redis-cluster: {e}"))?;
            }
            Target::Sentinel { sentinels, master } => {
                SentinelConn::new(sentinels, master, timeout)
                    .map_err(|e| format!("redis-sentinel: {e}"))?;
            }
        }
        Ok(Self {
            target,
            timeout,
            conn: std::sync::Arc::new(arc_swap::ArcSwap::from_pointee(OnceCell::new())),
            timeouts: std::sync::Mutex::default(),
            remaking: std::sync::Arc::default(),
            scripts: Scripts::new(),
            skew_us: AtomicI64::new(0),
            frozen_us: AtomicI64::new(0),
            redis_ahead: std::sync::Mutex::default(),
            instance: format!("{:016x}", fastrand::u64(..)),
            generations: std::sync::Mutex::default(),
        })
    }

    fn generation_seen(&self, room: &str) -> Option<String> {
        self.generations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(room)
            .cloned()
    }
}

#[async_trait]
impl Store for RedisStore {
    fn backend(&self) -> &'static str {
        match self.target {
            Target::Single(_) => "redis",
            Target::Cluster(_) => "redis-cluster",
            Target::Sentinel { .. } => "redis-sentinel",
        }
    }

    async fn join_with(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        ctx: &JoinContext<'_>,
    ) -> Result<Admission, StoreError> {
        let gate = ctx.gate;
        let k = Keys::of(&p.name);
        let client_key = format!(
            "{{anteroom:{}}}:joins:{}",
            p.name,
            gate.map(|g| g.client.as_str()).unwrap_or("-")
        );
        let mut inv = self.scripts.join.prepare_invoke();
        inv.key(&k.waiting)
            .key(&k.active)
            .key(&k.room)
            .key(&client_key)
            .key(&k.ended)
            .key(keys::ordered_key(&p.name, vid))
            .key(&k.used)
            .arg(&vid.as_bytes()[..])
            .arg(p.admit_per_second)
            .arg(p.max_active)
            .arg(p.max_waiting)
            .arg(micros(p.session_ttl))
            .arg(micros(p.tick))
            .arg(micros(p.abandon_after))
            .arg(self.clock_arg_until(&p.name))
            .arg(limit_arg(gate))
            .arg(gate.map(|g| micros(g.per)).unwrap_or(0))
            .arg(micros(p.claim_ttl))
            .arg(self.generation_seen(&p.name).unwrap_or_default())
            .arg(p.queueing.as_str());
        events::join_args(&mut inv, &p.name, ctx);
        let JoinReply(admission) = self.run("join", &p.name, &inv).await?;
        Ok(admission)
    }

    async fn admit_with(
        &self,
        p: &RoomParams,
        ctx: &AdmitContext,
    ) -> Result<AdmitReport, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.admit.prepare_invoke();
        // At least as long as it may be away after an outage before it tells the store of the
        // sessions it kept or admitted meanwhile (admit_outage.lua).
        let heartbeat = micros(
            (p.tick * 3)
                .max(Duration::from_secs(5))
                .max(ctx.outage.away),
        );
        inv.key(&k.waiting)
            .key(&k.active)
            .key(&k.room)
            .key(&k.instances)
            .key(&k.configs)
            .key(&k.health)
            .key(&k.revoked)
            .key(&k.ended)
            .key(&k.used)
            .arg(p.admit_per_second)
            .arg(p.max_active)
            .arg(micros(p.claim_ttl))
            .arg(micros(p.tick))
            .arg(micros(p.abandon_after))
            .arg(self.clock_arg_until(&p.name))
            .arg((SWEEP_PER_SECOND * p.tick.as_secs_f64()).ceil().max(100.0) as u64)
            .arg(&self.instance)
            .arg(heartbeat)
            .arg(ctx.known_generation.as_deref().unwrap_or(""))
            .arg(ctx.hold_back)
            .arg(if ctx.events_config.is_empty() {
                ctx.config.clone()
            } else {
                format!("{} {}", ctx.config, ctx.events_config)
            });
        autopilot_args(&mut inv, ctx.autopilot.as_ref());
        match ctx.revoked_after {
            Some(n) => inv.arg(n),
            None => inv.arg(""),
        };
        inv.arg(p.queueing.as_str());
        events::admit_args(&mut inv, &p.name, ctx.events.as_ref());
        inv.arg(ctx.step.number)
            .arg(ctx.step.heard)
            .arg(ctx.step.admits)
            .arg(&ctx.draw_commitments)
            .arg(ctx.hold_if_lost)
            .arg(ctx.outage.untold)
            .arg(if ctx.outage.cut { "1" } else { "" })
            .arg(ctx.outage.instances)
            .arg(micros(ctx.outage.heartbeat_hi));
        for (vid, place) in &ctx.seen {
            inv.arg(&vid.as_bytes()[..]).arg(place.epoch).arg(place.key);
        }
        let AdmitReply(mut report) = self.run("admit", &p.name, &inv).await?;
        self.note_redis_clock(&p.name, report.store_now, wall_us());
        if let Some(seen) = &report.event {
            let (rate, max) = seen.overrides(ctx.events.as_ref());
            report.state.event_rate = rate;
            report.state.event_max_active = max;
        }
        self.generations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.name.to_string(), report.generation.clone());
        Ok(report)
    }

    async fn touch(&self, p: &RoomParams, vid: VisitorId) -> Result<bool, StoreError> {
        Ok(self
            .touch_call(p, vid, None, 0, Taking::Renewal)
            .await?
            .held())
    }

    async fn touch_seen(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        seen: Option<&crate::store::SeenGeneration>,
        expires: u64,
    ) -> Result<Touched, StoreError> {
        self.touch_call(p, vid, seen, expires, Taking::Renewal)
            .await
    }

    async fn register_local(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        seen: Option<&crate::store::SeenGeneration>,
        expires: u64,
    ) -> Result<Touched, StoreError> {
        self.touch_call(p, vid, seen, expires, Taking::Kept).await
    }

    async fn consume(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        order: &Order,
    ) -> Result<Consumed, StoreError> {
        self.consume_call(p, vid, order).await
    }

    async fn settle(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        request: &RequestId,
        how: Settle,
    ) -> Result<Settled, StoreError> {
        self.settle_call(p, vid, request, how).await
    }

    async fn finish(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        ending: &Ending,
    ) -> Result<u64, StoreError> {
        self.finish_call(p, vid, ending).await
    }

    async fn room_state(&self, p: &RoomParams) -> Result<RoomState, StoreError> {
        self.update_room_state(p, &RoomPatch::default()).await
    }

    async fn update_room_state(
        &self,
        p: &RoomParams,
        patch: &RoomPatch,
    ) -> Result<RoomState, StoreError> {
        self.room_state_call(p, patch, None).await
    }

    async fn clear_waiting(&self, p: &RoomParams) -> Result<u64, StoreError> {
        self.clear_call(p, None).await
    }

    async fn change_room_state(
        &self,
        p: &RoomParams,
        patch: &RoomPatch,
        by: &crate::store::history::Actor,
    ) -> Result<RoomState, StoreError> {
        self.room_state_call(p, patch, Some(by)).await
    }

    async fn clear_waiting_by(
        &self,
        p: &RoomParams,
        by: &crate::store::history::Actor,
    ) -> Result<u64, StoreError> {
        self.clear_call(p, Some(by)).await
    }

    async fn changes(
        &self,
        p: &RoomParams,
        limit: usize,
    ) -> Result<Vec<crate::store::history::Change>, StoreError> {
        self.history(p, limit).await
    }

    async fn stats(&self, p: &RoomParams) -> Result<RoomStats, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.stats.prepare_invoke();
        inv.key(&k.waiting)
            .key(&k.active)
            .key(&k.room)
            .key(&k.instances)
            .key(&k.configs)
            .arg(self.clock_arg())
            .arg(micros(p.tick))
            .arg(micros(p.claim_ttl));
        let v: Vec<Value> = self.run("stats", &p.name, &inv).await?;
        reply::stats(&v, &p.name)
    }

    async fn runtime_events(&self, p: &RoomParams) -> Result<RuntimeEvents, StoreError> {
        self.runtime_events_call(p).await
    }

    async fn change_event(
        &self,
        p: &RoomParams,
        name: &str,
        change: &crate::event::schedule::Runtime,
        version: u64,
        before: &serde_json::Value,
        by: &crate::store::history::Actor,
    ) -> Result<EventChange, StoreError> {
        self.change_event_call(p, name, change, version, before, by)
            .await
    }

    async fn draw_list(
        &self,
        p: &RoomParams,
        event: &str,
        from: u64,
        count: u64,
    ) -> Result<Vec<crate::event::draw::RegTicket>, StoreError> {
        self.draw_list_call(p, event, from, count).await
    }
}

/// join.lua's ARGV[9]: the new joins allowed per client and window (0: no limit; -1: past the
/// limit on this instance already, known visitors only), and `:v` after it when a queue ticket
/// vouches for a place held lately (`JoinGate::vouched`).
fn limit_arg(gate: Option<&super::JoinGate>) -> String {
    match gate {
        None => "0".to_string(),
        Some(g) if g.known_only => "-1".to_string(),
        Some(g) if g.vouched => format!("{}:v", g.limit),
        Some(g) => g.limit.to_string(),
    }
}
