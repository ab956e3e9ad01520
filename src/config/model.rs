//! The validated configuration: typed, cross-checked, with every default applied.
//!
//! Nothing here can be wrong in a way the operator could have caught at boot: upstream names are
//! indices, durations are `Duration`s, secrets are resolved. The rest of the program reads only
//! these types, never the file mirror.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use super::rules::{BypassRule, CrawlerPolicy, OriginSecret};

use crate::cookie::CookieKey;
use crate::route::{HostPattern, OtherHosts, PathMatching};
use crate::store::RoomParams;

/// Where the public proxy listens unless `listen.http` says otherwise.
pub const DEFAULT_HTTP: &str = "127.0.0.1:8080";
/// The admin API listens on loopback by default: it must never face the internet by accident.
pub const DEFAULT_ADMIN: &str = "127.0.0.1:9180";
/// A store call that takes longer than this is treated as a store error.
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_millis(250);
/// The shortest `[store] timeout` taken: a call over loopback takes a good part of it.
pub const MIN_STORE_TIMEOUT: Duration = Duration::from_millis(1);
/// The longest `[store] timeout`: each request may wait this long on a stalled store.
pub const MAX_STORE_TIMEOUT: Duration = Duration::from_secs(10);
/// Consecutive store failures that open the circuit breaker.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// How long an open breaker fails store calls at once before letting a probe through.
pub const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(1);
/// Idle time after which an admitted session ends.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(600);
/// An admitted visitor who does not come back within this gives the slot back.
/// Long enough for a hidden tab (one poll a minute, see [`claim_ttl_least`]) to collect its
/// turn: 60 s, the old default, was not (found by review).
pub const DEFAULT_CLAIM_TTL: Duration = Duration::from_secs(90);
/// A waiting visitor who stops polling for this long loses the place. Five minutes, as
/// Cloudflare keeps a place after the last refresh: long enough for a tab whose timers the
/// browser throttles while it is hidden (Chrome: once a minute after five minutes hidden) and
/// for a missed poll or two, short enough that the line does not fill with people who left.
pub const DEFAULT_ABANDON_AFTER: Duration = Duration::from_secs(300);
/// How often a throttled browser still runs a hidden tab's timers (Chrome's intensive
/// throttling: once a minute). `abandon-after` must leave room for it.
pub const DEFAULT_THROTTLED_POLL: Duration = Duration::from_secs(60);
/// The page waits up to this fraction longer than the poll interval it is given (the ±20 %
/// jitter of `page::poll_interval`).
pub const POLL_JITTER: f64 = 0.2;
/// `abandon-after` must cover this many of the longest gaps between polls: one poll may fail
/// (a network blip, a slow store) without costing the place.
pub const POLLS_PER_ABANDON: u32 = 2;
/// The Redis store keeps "last seen" in one-second slots that wrap after 68 minutes.
pub const MAX_ABANDON_AFTER: Duration = Duration::from_secs(30 * 60);
/// The longest `session-ttl`: a month (a session is renewed while used, so this is idle time).
pub const MAX_SESSION_TTL: Duration = Duration::from_secs(30 * 86_400);
/// The longest `claim-ttl`: an hour to collect a turn.
pub const MAX_CLAIM_TTL: Duration = Duration::from_secs(3_600);
/// The longest queue a room accepts before new visitors get `full`.
pub const DEFAULT_MAX_WAITING: u64 = 1_000_000;
/// How long a request may wait at the proxy for a slot under `max-origin-inflight`.
pub const DEFAULT_ORIGIN_QUEUE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most `origin-queue-timeout` may be.
pub const MAX_ORIGIN_QUEUE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the admission loop admits a batch (the seed's 100 ms scheduler).
pub const DEFAULT_TICK: Duration = Duration::from_millis(100);
/// HTTP status of the waiting page; some CDNs prefer 503 so nothing caches it.
pub const DEFAULT_WAITING_STATUS: u16 = 200;
/// HMAC keys shorter than this are refused: `openssl rand -base64 32` gives 44 characters.
pub const MIN_COOKIE_KEY_LEN: usize = 32;
/// Worker threads of the proxy service where the number of cores cannot be read.
pub const DEFAULT_THREADS: usize = 2;

/// Worker threads of the proxy service by default: one per core the process may run on (its
/// CPU affinity and cgroup quota). Measured on the admitted path (docs/BENCHMARKS.md, "The
/// `[server]` defaults"): one thread costs the least CPU per request, since fewer wake-ups
/// cross threads, but it caps the proxy at one core, and the polls of a long line need
/// several; with fewer threads than cores the rest of the machine sits idle under load.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(DEFAULT_THREADS, std::num::NonZeroUsize::get)
}
/// After SIGTERM or SIGINT the listeners close and in-flight requests get this long to finish
/// (Pingora waits the whole period).
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(5);
/// Then the runtimes get this long to wind down before the process exits.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The whole validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from, for messages.
    pub source: String,
    /// What the file allows but is likely regretted (`file:line:col: key: ...` with a fix):
    /// `check` prints them, `run` logs them.
    pub warnings: Vec<String>,
    pub listen: Listen,
    pub store: StoreConfig,
    pub cookie: CookieConfig,
    pub admin: AdminConfig,
    pub server: ServerSettings,
    pub upstreams: Vec<Upstream>,
    /// Index into `upstreams` for requests outside every room.
    pub default_upstream: usize,
    pub rooms: Vec<RoomConfig>,
    /// `[[tls]]`, loaded and checked; the first is the certificate for clients without SNI.
    pub tls: Vec<crate::edge::tls::TlsCert>,
    /// `[draw] secret`: seeds the draws of events (required by an event with `draw = true`).
    pub draw_secret: Option<DrawSecret>,
}

#[derive(Debug, Clone)]
pub struct Listen {
    pub http: SocketAddr,
    pub admin: SocketAddr,
    /// Peers whose `X-Forwarded-For` / `Forwarded` / `X-Forwarded-Proto` / `X-Forwarded-Host`
    /// are believed.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The one forwarding header the trusted proxies append the client's address to.
    pub client_header: crate::client::ClientHeader,
    /// How spellings of a path that origins read differently are treated.
    pub path_matching: PathMatching,
    /// What a request whose host names no room gets on a path a host-bound room protects.
    pub other_hosts: OtherHosts,
    /// The HTTPS listener (`[[tls]]` has its certificates).
    pub https: Option<SocketAddr>,
    /// Plain HTTP is answered with a 308 to HTTPS.
    pub redirect_http: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreBackend {
    Memory,
    Redis {
        url: String,
    },
    RedisCluster {
        urls: Vec<String>,
    },
    /// A primary and its replicas watched by Sentinel: the sentinels' URLs and the name they
    /// monitor the primary under.
    RedisSentinel {
        urls: Vec<String>,
        master: String,
    },
}

/// A Redis URL without its password, for logs and summaries.
/// A Redis URL as logs and diagnostics may show it: whatever precedes the host (user and
/// password) left out, also when the URL is misspelt.
pub(crate) fn without_secret(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, host))) => format!("{scheme}://{host}"),
        (None, Some((_, host))) => format!("…@{host}"),
        _ => url.to_string(),
    }
}

impl std::fmt::Display for StoreBackend {
    /// What a log line or a summary says of the store: the kind and where, never a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |urls: &[String]| {
            urls.iter()
                .map(|u| without_secret(u))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            StoreBackend::Memory => write!(f, "memory (one instance)"),
            StoreBackend::Redis { url } => write!(f, "redis {}", without_secret(url)),
            StoreBackend::RedisCluster { urls } => write!(f, "redis cluster {}", list(urls)),
            StoreBackend::RedisSentinel { urls, master } => {
                write!(f, "redis via sentinel {}, master {master}", list(urls))
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub backend: StoreBackend,
    pub timeout: Duration,
    /// Consecutive failures that open the circuit breaker.
    pub breaker_failures: u32,
    /// How long the open breaker fails calls fast before a probe.
    pub breaker_cooldown: Duration,
}

#[derive(Clone)]
pub struct CookieConfig {
    /// The first key signs; every key verifies.
    pub keys: Vec<CookieKey>,
    /// `Some` forces the `Secure` attribute on or off; `None` sets it when served over TLS.
    pub secure: Option<bool>,
}

impl fmt::Debug for CookieConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id()).collect();
        f.debug_struct("CookieConfig")
            .field("key_ids", &ids)
            .field("secure", &self.secure)
            .finish()
    }
}

pub use super::admin::{AdminConfig, AdminRole, AdminToken};

#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub threads: usize,
    pub work_stealing: bool,
    pub grace_period: Duration,
    pub shutdown_timeout: Duration,
    /// Unix socket over which a new process takes the listening sockets (`run --upgrade`).
    pub upgrade_sock: String,
    /// A visitor's connection idle (between requests) or stalled (sending a body, reading the
    /// response) this long is closed.
    pub client_timeout: Duration,
    /// Request headers larger than this (names and values together) get 431.
    pub max_header_bytes: usize,
}

/// Idle and stalled visitor connections are closed after this.
pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
/// Like nginx's default large header buffers (4 × 8 KiB).
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 32 * 1024;
/// The least `max-header-bytes` taken: below, ordinary browser requests are refused.
pub const MIN_HEADER_BYTES: u64 = 1024;
/// The most `[server] threads` taken (found by review: 100,000 passed `check`).
pub const MAX_THREADS: usize = 1024;

/// Where `anteroom run --upgrade` waits for the running process's sockets when
/// `upgrade-sock` is not set: one per public address, so that instances on one host never
/// meet on one socket (a SIGQUIT to one would hand its sockets to another's new process),
/// while the old and the new process of one instance (same config) always do.
pub fn default_upgrade_sock(http: SocketAddr) -> String {
    let ip: String = http
        .ip()
        .to_string()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("/tmp/anteroom_upgrade_{ip}_{}.sock", http.port())
}

pub use upstream::{
    Balance, HealthCheck, Upstream, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEALTH_EVERY,
    DEFAULT_READ_TIMEOUT, DEFAULT_RESOLVE_EVERY, DEFAULT_WRITE_TIMEOUT,
};

/// What a room does when the store cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorePolicy {
    /// Let everyone through (counted): the shop takes the risk.
    Open,
    /// Everyone without an admission waits on a `paused` page and keeps polling.
    Closed,
    /// Each instance admits at its share of the rate from an in-process bucket.
    Local,
}

impl StorePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            StorePolicy::Open => "open",
            StorePolicy::Closed => "closed",
            StorePolicy::Local => "local",
        }
    }
}

/// A request that uses up the admission, such as `POST /orders`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumeRoute {
    pub method: http::Method,
    /// A path prefix, matched on segment boundaries like room paths.
    pub path: String,
}

/// One poll tier: visitors at a position below `below` poll `every`.
#[derive(Debug, Clone, PartialEq)]
pub struct PollTier {
    pub below: Option<u64>,
    pub every: Duration,
}

#[derive(Debug, Clone)]
pub struct JoinLimit {
    pub per_ip: u32,
    pub per: Duration,
}

#[derive(Debug, Clone)]
pub struct RoomConfig {
    /// What the store is told: `abandon_after` there is [`crate::line::sweep_after`] of the
    /// configured one.
    pub params: RoomParams,
    /// `abandon-after` as configured: a visitor silent this long loses the place.
    pub abandon_after: std::time::Duration,
    pub upstream: usize,
    pub hosts: Vec<HostPattern>,
    pub paths: Vec<String>,
    pub on_store_error: StorePolicy,
    pub consume: Vec<ConsumeRoute>,
    /// The operator's waiting-page template, resolved to a file that exists.
    pub template: Option<PathBuf>,
    pub poll: Vec<PollTier>,
    pub join_limit: Option<JoinLimit>,
    /// `max-origin-inflight` with its `origin-queue-timeout`; `None`: no cap.
    pub origin_cap: Option<OriginCap>,
    /// `None`: the rate is `admit-per-second` (or an operator's override).
    pub autopilot: Option<AutopilotConfig>,
    pub waiting_status: u16,
    /// The waiting page's texts per language (built-in, then the operator's overrides).
    pub texts: std::collections::BTreeMap<String, crate::texts::TextSet>,
    /// Requests let past the line, before anything else is decided (see [`BypassRule`]).
    pub bypass: Vec<BypassRule>,
    pub crawlers: CrawlerPolicy,
    /// The origin may end admissions with `Anteroom-Command` (`src/proxy/command.rs`).
    pub origin_commands: bool,
    /// `order-receipt`: GETs after an order pass this long (`src/proxy/receipt.rs`).
    pub order_receipt: Option<Duration>,
    pub queueing: super::QueueMethod,
    /// Status of the "closed" answer of a room that queues nobody.
    pub closed_status: u16,
    /// `join-challenge`: the proof of work asked of new visitors (`src/edge/challenge.rs`).
    pub join_challenge: Option<JoinChallenge>,
    /// `[[room.event]]`, validated (`src/event/`); the store may change them at run time.
    pub events: Vec<crate::event::Event>,
    /// Per event name, the page it shows while it runs (`template`, `texts`), where it has its
    /// own.
    pub event_pages: std::collections::BTreeMap<String, EventPage>,
}

/// An event's own page: its template and its texts (the room's with the event's over them).
#[derive(Debug, Clone)]
pub struct EventPage {
    pub template: Option<PathBuf>,
    pub texts: std::collections::BTreeMap<String, crate::texts::TextSet>,
}

/// `[draw] secret`: what every event's draw is seeded from. Never printed.
#[derive(Clone)]
pub struct DrawSecret(pub Vec<u8>);

impl fmt::Debug for DrawSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DrawSecret(<secret>)")
    }
}

/// `join-challenge`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinChallenge {
    /// Leading zero bits of the hash to find.
    pub difficulty: u32,
    /// New identities per client that may join without a solution (no JavaScript), and the
    /// window: a quarter of `join-limit`, or a default (`challenge::strict_limit`).
    pub no_script_per_ip: u32,
    pub no_script_per: Duration,
}

impl RoomConfig {
    pub fn name(&self) -> &str {
        &self.params.name
    }
}

/// `autopilot`: the admission rate follows the origin's health between `min_rate` and
/// `admit-per-second` (`src/admission/autopilot.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutopilotConfig {
    /// The origin's p90 latency (admitted traffic, all instances) the rate is steered to.
    pub target_latency: Duration,
    /// Share of 5xx, timeouts and refused connections above which the rate is cut.
    pub max_error_rate: f64,
    pub min_rate: f64,
    /// One step at most per window; the health it judges is of the last window.
    pub window: Duration,
}

/// The autopilot's default window: long enough for a few hundred requests at a small shop's
/// rate, short enough to react to a shop that falls behind before its queue fills.
pub const DEFAULT_AUTOPILOT_WINDOW: Duration = Duration::from_secs(2);

/// A room's cap on its requests in flight to the origin, per instance (`src/room/gate.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OriginCap {
    pub max_inflight: usize,
    pub queue_timeout: Duration,
}

/// The default poll tiers, the seed's 1 s / 3 s / 5 s by position.
pub fn default_poll() -> Vec<PollTier> {
    vec![
        PollTier {
            below: Some(100),
            every: Duration::from_secs(1),
        },
        PollTier {
            below: Some(1000),
            every: Duration::from_secs(3),
        },
        PollTier {
            below: None,
            every: Duration::from_secs(5),
        },
    ]
}

/// Why an `abandon-after` would drop visitors who do poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbandonTooShort {
    /// Shorter than two of the slowest tier's polls with their jitter: even a visible tab loses
    /// its place. Carries the least that works.
    ForPolls(Duration),
    /// Shorter than two polls of a tab the browser throttles while hidden.
    ForHiddenTabs(Duration),
}

/// The shortest `claim-ttl` in which a hidden tab whose turn has come still polls: its
/// throttled timer (`throttled-poll`) with the polls' jitter, after the tick that gave the
/// turn. Shorter, a visitor whose tab is in the background when the turn comes loses it and
/// rejoins at the back, while one as silent further back keeps their place (`abandon-after`).
pub fn claim_ttl_least(throttled_poll: Duration, tick: Duration) -> Duration {
    throttled_poll.mul_f64(1.0 + POLL_JITTER) + tick
}

/// Checks `abandon-after` against the gaps between one visitor's polls: the slowest tier plus
/// its jitter (a visible tab), and a throttled hidden tab's timer, each [`POLLS_PER_ABANDON`]
/// times so that one failed poll is not abandonment.
pub fn check_abandon_after(
    abandon_after: Duration,
    slowest_poll: Duration,
    throttled_poll: Duration,
) -> Option<AbandonTooShort> {
    let polls = slowest_poll.mul_f64(1.0 + POLL_JITTER) * POLLS_PER_ABANDON;
    let hidden = throttled_poll * POLLS_PER_ABANDON;
    if abandon_after < polls {
        Some(AbandonTooShort::ForPolls(polls))
    } else if abandon_after < hidden {
        Some(AbandonTooShort::ForHiddenTabs(hidden))
    } else {
        None
    }
}

/// Where the admin API of a config file listens and its token ([`super::load_admin`]).
#[derive(Debug, Clone)]
pub struct AdminEndpoint {
    pub addr: SocketAddr,
    pub token: Option<String>,
}

/// Whether `v` is an admission rate a room, an event, an upstream or an operator may set, per
/// second: at least 0.001 (a visitor in about 17 minutes; below it a line never visibly moves
/// and an ETA is meaningless — `1e-300` told visitors to wait 2^64 seconds), at most 1000000.
pub fn valid_rate(v: f64) -> bool {
    v.is_finite() && (MIN_RATE..=MAX_RATE).contains(&v)
}

/// Whether a `max-active` can be run: at least 1 and at most [`MAX_ACTIVE`]. The store keeps
/// the cap as a Lua number written back as text with 14 significant digits, so a larger one
/// came back changed (found by review: 9007199254740993 was recorded as 9007199254741000).
pub fn valid_max_active(v: u64) -> bool {
    (1..=MAX_ACTIVE).contains(&v)
}

/// The highest `max-active` [`valid_max_active`] takes: a million million sessions.
pub const MAX_ACTIVE: u64 = 1_000_000_000_000;
/// [`valid_max_active`] in words.
pub const MAX_ACTIVE_RULE: &str = "must be at least 1 and at most 1000000000000";

/// The lowest rate [`valid_rate`] takes.
pub const MIN_RATE: f64 = 0.001;
/// The highest rate [`valid_rate`] takes.
pub const MAX_RATE: f64 = 1_000_000.0;

/// A refused number as a message shows it: in scientific notation when plain digits would be
/// a screenful (found by review: `1e308` came back as 309 digits) or lose the value (`1e-300`).
pub fn shown(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// What [`valid_rate`] refuses, for messages.
pub const RATE_RULE: &str = "must be above 0 (at least 0.001) and at most 1000000";

mod upstream;

#[cfg(test)]
mod tests;
