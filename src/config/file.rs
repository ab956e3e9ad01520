//! The serde mirror of `anteroom.toml`: exactly what an operator may write, nothing validated.
//!
//! Every table rejects unknown keys so that a typo (`admit-per-secnd`) fails at boot instead of
//! silently running with a default. Strings stay strings here (durations, addresses, `env:NAME`):
//! [`super::build`] turns them into typed values and can then point at the key that is wrong.

use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileConfig {
    pub listen: Option<ListenFile>,
    pub store: Option<StoreFile>,
    pub cookie: Option<CookieFile>,
    pub admin: Option<AdminFile>,
    pub server: Option<ServerFile>,
    #[serde(default)]
    pub upstream: Vec<UpstreamFile>,
    pub default: Option<DefaultFile>,
    #[serde(default)]
    pub room: Vec<RoomFile>,
    #[serde(default)]
    pub tls: Vec<TlsFile>,
    /// The secret the draws of events are seeded from (`[draw] secret`).
    pub draw: Option<DrawFile>,
}

/// `[draw]`: what seeds the draws of `[[room.event]]`s with `draw = true`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DrawFile {
    pub secret: Option<String>,
}

/// `[[room.event]]`: a scheduled sale.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EventFile {
    pub name: String,
    /// RFC 3339 with an offset; without it, the event has no pre-queue.
    pub prequeue_from: Option<String>,
    pub opens_at: String,
    pub closes_at: Option<String>,
    pub draw: Option<bool>,
    /// "keep" (default) or "release".
    pub after_close: Option<String>,
    pub admit_per_second: Option<f64>,
    pub max_active: Option<i64>,
    pub template: Option<String>,
    pub texts:
        Option<std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>>,
}

/// `[[tls]]`: a certificate chain and its key, for these hosts.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TlsFile {
    #[serde(default)]
    pub hosts: Vec<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ListenFile {
    pub http: Option<String>,
    pub admin: Option<String>,
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    pub client_header: Option<String>,
    pub path_matching: Option<String>,
    pub other_hosts: Option<String>,
    pub https: Option<String>,
    pub redirect_http: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StoreFile {
    pub backend: Option<String>,
    pub redis_url: Option<String>,
    pub redis_cluster: Option<Vec<String>>,
    /// Sentinel addresses; the primary is asked for by `sentinel_master`.
    pub redis_sentinel: Option<Vec<String>>,
    pub sentinel_master: Option<String>,
    pub timeout: Option<String>,
    pub breaker_failures: Option<i64>,
    pub breaker_cooldown: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CookieFile {
    #[serde(default)]
    pub keys: Vec<String>,
    pub secure: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AdminFile {
    pub token: Option<String>,
    pub tokens: Option<Vec<AdminTokenFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminTokenFile {
    pub label: String,
    pub value: String,
    pub role: String,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerFile {
    pub threads: Option<usize>,
    pub work_stealing: Option<bool>,
    pub grace_period: Option<String>,
    pub shutdown_timeout: Option<String>,
    pub upgrade_sock: Option<String>,
    pub client_timeout: Option<String>,
    pub max_header_bytes: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct UpstreamFile {
    pub name: String,
    /// One server (`addr`) or several (`addrs`).
    pub addr: Option<String>,
    pub addrs: Option<Vec<String>>,
    /// `round-robin` or `visitor` (by visitor id, consistent hashing).
    pub balance: Option<String>,
    pub health_check: Option<HealthCheckFile>,
    /// How often the names of `addrs` are resolved again.
    pub resolve_every: Option<String>,
    pub tls: Option<bool>,
    pub sni: Option<String>,
    pub connect_timeout: Option<String>,
    pub read_timeout: Option<String>,
    pub write_timeout: Option<String>,
    pub error_pages: Option<bool>,
    /// What all rooms on this upstream together may admit per second.
    pub admit_per_second: Option<f64>,
    /// A header added to every request to this upstream, so that it can refuse the rest.
    pub origin_secret: Option<OriginSecretFile>,
    /// With `tls`: the CA that signs the origin's certificate (else the system's roots).
    pub ca: Option<String>,
    /// With `tls`: the certificate anteroom shows the origin (mutual TLS).
    pub client_cert: Option<ClientCertFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HealthCheckFile {
    pub path: String,
    pub every: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClientCertFile {
    pub cert: String,
    pub key: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OriginSecretFile {
    pub header: String,
    pub value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DefaultFile {
    pub upstream: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RoomFile {
    pub name: String,
    pub upstream: Option<String>,
    pub hosts: Option<Vec<String>>,
    #[serde(default)]
    pub paths: Vec<String>,
    pub admit_per_second: Option<f64>,
    pub max_active: Option<i64>,
    pub session_ttl: Option<String>,
    pub claim_ttl: Option<String>,
    pub abandon_after: Option<String>,
    pub throttled_poll: Option<String>,
    pub max_waiting: Option<i64>,
    pub tick: Option<String>,
    pub on_store_error: Option<String>,
    #[serde(default)]
    pub consume: Vec<String>,
    pub template: Option<String>,
    pub poll: Option<Vec<PollFile>>,
    pub join_limit: Option<JoinLimitFile>,
    pub max_origin_inflight: Option<i64>,
    pub origin_queue_timeout: Option<String>,
    pub autopilot: Option<AutopilotFile>,
    pub waiting_status: Option<i64>,
    /// Per language, texts of the waiting page to replace (`[room.texts.ko]`).
    pub texts:
        Option<std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>>,
    /// Requests let past the line (health checks, staff, partners).
    pub bypass: Option<Vec<BypassFile>>,
    /// What a search crawler gets instead of the waiting page: "refuse" (503) or "wait".
    pub crawlers: Option<String>,
    /// The origin's `Anteroom-Command: complete | revoke` response header is obeyed.
    pub origin_commands: Option<bool>,
    /// How long after an order its receipt lets the visitor's GETs through (off without).
    pub order_receipt: Option<String>,
    /// "fifo", "random" or "reject".
    pub queueing: Option<String>,
    /// HTTP status of the "closed" answer (`queueing = "reject"`).
    pub closed_status: Option<i64>,
    /// A proof of work new visitors do before they join the line.
    pub join_challenge: Option<JoinChallengeFile>,
    /// Scheduled sales (`[[room.event]]`).
    #[serde(default)]
    pub event: Vec<EventFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JoinChallengeFile {
    /// Leading zero bits of the hash to find.
    pub difficulty: Option<i64>,
}

/// One `bypass` rule: exactly one of `path`, `client`, `header` (with `equals`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BypassFile {
    pub path: Option<String>,
    pub client: Option<Vec<String>>,
    pub header: Option<String>,
    pub equals: Option<String>,
    pub preflight: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PollFile {
    pub below: Option<i64>,
    pub every: String,
}

/// `autopilot = { target-latency = "800ms", max-error-rate = 0.01, min-rate = 5 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AutopilotFile {
    pub target_latency: String,
    pub max_error_rate: f64,
    pub min_rate: f64,
    pub window: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JoinLimitFile {
    pub per_ip: i64,
    pub per: String,
}
