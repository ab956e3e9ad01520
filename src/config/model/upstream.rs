//! An upstream as the proxy runs it: its servers, how one is chosen, its timeouts and TLS.

use std::net::SocketAddr;
use std::time::Duration;

use super::OriginSecret;

#[derive(Debug, Clone)]
pub struct Upstream {
    pub name: String,
    /// The server (`addr`), or the first of `addrs`: where a request goes when no pool
    /// chooses.
    pub addr: SocketAddr,
    /// `addrs` as written (empty with `addr`): the servers, names re-resolved.
    pub addrs: Vec<String>,
    /// Each entry of `addrs` (or `addr`) with the addresses it resolved to at load.
    pub resolved: Vec<(String, Vec<SocketAddr>)>,
    pub balance: Balance,
    pub health_check: Option<HealthCheck>,
    pub resolve_every: Duration,
    pub tls: bool,
    pub sni: String,
    /// Giving up on connecting: the visitor gets a 504 page.
    pub connect_timeout: Duration,
    /// Giving up on a silent origin (between reads): 504.
    pub read_timeout: Duration,
    pub write_timeout: Duration,
    /// Replace the origin's own 5xx responses with anteroom's error page.
    pub error_pages: bool,
    /// `admit-per-second` of the upstream: the most all its rooms together admit per second
    /// (each room's rate is cut to its share of it at load, see `config::limits`).
    pub admit_per_second: Option<f64>,
    /// Added to every request to this upstream (`origin-secret`), replacing any a client sent.
    pub origin_secret: Option<OriginSecret>,
    /// The CA the origin's certificate is checked against (`ca`), else the system's roots.
    pub ca: Option<std::sync::Arc<pingora::protocols::tls::CaType>>,
    /// The certificate and key anteroom shows the origin (`client-cert`, mutual TLS).
    pub client_cert: Option<std::sync::Arc<pingora::utils::tls::CertKey>>,
}

/// How a request's server is chosen among an upstream's `addrs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    RoundRobin,
    /// By visitor id (consistent hashing): a visitor stays on one server while it is up.
    Visitor,
}

/// `health-check = { path, every }`: a GET of `path` on every server; a server whose answer is
/// not a 200 (or that does not answer within the connect timeout) is out until one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    pub path: String,
    pub every: Duration,
}

pub const DEFAULT_HEALTH_EVERY: Duration = Duration::from_secs(5);
pub const DEFAULT_RESOLVE_EVERY: Duration = Duration::from_secs(30);

/// Connecting to an origin that does not answer fails after this.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// An origin silent this long in the middle of a response fails it.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
