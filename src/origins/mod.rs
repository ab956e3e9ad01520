//! Several origin servers behind one upstream (`addrs`): chosen round robin or by visitor
//! (`balance`), taken out when their health check fails and put back when it passes
//! (`health-check`), their names re-resolved (`resolve-every`). Pingora's load-balancing
//! parts do the choosing and the checking; [`service`] runs the checks and resolutions of the
//! configuration in force, and a request that cannot connect to a server is sent to another
//! (`Proxy::fail_to_connect`), so a server that dies between two checks fails nobody while
//! another is up.

mod discovery;
pub mod service;
pub mod told;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pingora::http::RequestHeader;
use pingora::lb::health_check::{HealthObserve, HttpHealthCheck};
use pingora::lb::selection::{Consistent, RoundRobin};
use pingora::lb::{Backend, Backends, LoadBalancer};

use sha2::{Digest, Sha256};

use crate::config::model::{Balance, OriginSecret, Upstream};

/// How far a choice looks for a server it may use (there are a handful).
const MAX_ITERATIONS: usize = 256;

enum Lb {
    RoundRobin(LoadBalancer<RoundRobin>),
    Visitor(LoadBalancer<Consistent>),
}

impl Lb {
    fn select_with(&self, key: &[u8], accept: impl Fn(&Backend, bool) -> bool) -> Option<Backend> {
        match self {
            Lb::RoundRobin(lb) => lb.select_with(key, MAX_ITERATIONS, accept),
            Lb::Visitor(lb) => lb.select_with(key, MAX_ITERATIONS, accept),
        }
    }

    fn backends(&self) -> &Backends {
        match self {
            Lb::RoundRobin(lb) => lb.backends(),
            Lb::Visitor(lb) => lb.backends(),
        }
    }

    async fn update(&self) -> pingora::Result<()> {
        match self {
            Lb::RoundRobin(lb) => lb.update().await,
            Lb::Visitor(lb) => lb.update().await,
        }
    }
}

/// The servers of one upstream.
pub struct Pool {
    lb: Lb,
    /// What the pool was built from: a reload with the same keeps it (and its health).
    key: Built,
    health_every: Option<Duration>,
    resolve_every: Duration,
    next: Mutex<Due>,
}

/// What a pool and its health checks are built from. A reload that changes any of it builds a
/// new pool: one kept with an old origin-secret, CA or client certificate would check with
/// them after the origin has moved on to the new ones (a rotation), and mark every server down.
#[derive(PartialEq)]
struct Built {
    shape: String,
    secret: Option<OriginSecret>,
    /// SHA-256 over the `ca` and `client-cert` files' certificates and key (DER): compared,
    /// never shown, and no second copy of the key kept.
    tls_files: [u8; 32],
}

fn tls_files_digest(up: &Upstream) -> [u8; 32] {
    let mut h = Sha256::new();
    for c in up.ca.iter().flat_map(|ca| ca.iter()) {
        h.update(b"ca");
        h.update(c.borrow_raw_cert());
    }
    if let Some(ck) = &up.client_cert {
        h.update(b"client");
        h.update(ck.leaf().borrow_raw_cert());
        for c in ck.intermediates() {
            h.update(c.borrow_raw_cert());
        }
        h.update(ck.key());
    }
    h.finalize().into()
}

/// The health check's request: what the origin may insist on from any request of anteroom's —
/// its `Host`, and the `origin-secret` (behind the snippets of docs/origin-lock/ a check
/// without it is a 403, and every server would be marked down).
fn check_request(up: &Upstream, path: &str) -> pingora::Result<RequestHeader> {
    let mut req = RequestHeader::build("GET", path.as_bytes(), None)?;
    req.insert_header("Host", &up.sni)?;
    if let Some(s) = &up.origin_secret {
        req.insert_header(s.name.clone(), s.value.clone())?;
    }
    Ok(req)
}

struct Due {
    health: Instant,
    resolve: Instant,
}

/// Logs a server going down or coming back, and sets its `anteroom_origin_server_up`.
struct Observer {
    upstream: String,
    up: prometheus::IntGaugeVec,
}

#[async_trait::async_trait]
impl HealthObserve for Observer {
    async fn observe(&self, target: &Backend, healthy: bool) {
        let server = target.addr.to_string();
        self.up
            .with_label_values(&[self.upstream.as_str(), server.as_str()])
            .set(i64::from(healthy));
        if healthy {
            tracing::info!(
                upstream = self.upstream,
                server,
                "origin server passes its health check: back in rotation"
            );
        } else {
            tracing::warn!(
                upstream = self.upstream,
                server,
                "origin server fails its health check: out of rotation"
            );
        }
    }
}

fn inet(b: &Backend) -> Option<SocketAddr> {
    b.addr.as_inet().copied()
}

impl Pool {
    /// The pool of `up`, or `None` when it is one address (`addr`, resolved once) with no
    /// health check: such an upstream is connected to directly, as it always was.
    pub fn new(up: &Upstream, gauge: &prometheus::IntGaugeVec) -> Option<Arc<Pool>> {
        if up.addrs.is_empty() && up.health_check.is_none() {
            return None;
        }
        // Each entry as written (`addr`'s too): names are looked up again, addresses stay.
        let names: Vec<String> = if up.resolved.is_empty() {
            vec![up.addr.to_string()]
        } else {
            up.resolved.iter().map(|(text, _)| text.clone()).collect()
        };
        let backends = Backends::new(Box::new(discovery::Names::new(names, &up.resolved)));
        let mut lb = match up.balance {
            Balance::RoundRobin => Lb::RoundRobin(LoadBalancer::from_backends(backends)),
            Balance::Visitor => Lb::Visitor(LoadBalancer::from_backends(backends)),
        };
        if let Some(hc) = &up.health_check {
            let mut check = HttpHealthCheck::new(&up.sni, up.tls);
            match check_request(up, &hc.path) {
                Ok(req) => check.req = req,
                Err(e) => tracing::warn!(
                    upstream = up.name,
                    error = %e,
                    "the health check's request could not be built; checking with a bare GET /"
                ),
            }
            check.peer_template.options.connection_timeout = Some(up.connect_timeout);
            check.peer_template.options.read_timeout =
                Some(up.connect_timeout.max(Duration::from_secs(1)));
            // Checked and shown as a visitor's request is (`proxy::peer`): an origin locked
            // by mutual TLS refuses a check without anteroom's certificate too.
            check.peer_template.options.ca.clone_from(&up.ca);
            check
                .peer_template
                .client_cert_key
                .clone_from(&up.client_cert);
            check.health_changed_callback = Some(Box::new(Observer {
                upstream: up.name.clone(),
                up: gauge.clone(),
            }));
            // In rotation until a check says otherwise.
            for addr in up.resolved.iter().flat_map(|(_, a)| a) {
                gauge
                    .with_label_values(&[up.name.as_str(), addr.to_string().as_str()])
                    .set(1);
            }
            let check = Box::new(told::Checked(check));
            match &mut lb {
                Lb::RoundRobin(lb) => lb.set_health_check(check),
                Lb::Visitor(lb) => lb.set_health_check(check),
            }
        }
        // The first resolution is the one the configuration made: no waiting here.
        discovery::now(lb.update());
        let now = Instant::now();
        Some(Arc::new(Pool {
            lb,
            key: Self::key_of(up),
            health_every: up.health_check.as_ref().map(|h| h.every),
            resolve_every: up.resolve_every,
            next: Mutex::new(Due {
                health: now,
                resolve: now + up.resolve_every,
            }),
        }))
    }

    fn key_of(up: &Upstream) -> Built {
        Built {
            shape: format!(
                "{:?}|{:?}|{:?}|{:?}|{}|{}|{:?}|{:?}",
                up.addrs,
                up.addr,
                up.balance,
                up.health_check,
                up.tls,
                up.sni,
                up.resolve_every,
                up.connect_timeout
            ),
            secret: up.origin_secret.clone(),
            tls_files: tls_files_digest(up),
        }
    }

    /// Whether this pool was built for an upstream configured as `up` (a reload keeps it).
    pub fn serves(&self, up: &Upstream) -> bool {
        self.key == Self::key_of(up)
    }

    /// A server for a request: healthy and not in `avoid` (servers this request could not
    /// connect to). When every server fails its health check, one not in `avoid` all the same
    /// (a check can be wrong; a request that tries loses nothing). `key` is the visitor id for
    /// `balance = "visitor"`.
    pub fn pick(&self, key: &[u8], avoid: &[SocketAddr]) -> Option<SocketAddr> {
        let fresh = |b: &Backend| inet(b).is_some_and(|a| !avoid.contains(&a));
        self.lb
            .select_with(key, |b, healthy| healthy && fresh(b))
            .or_else(|| self.lb.select_with(key, |b, _| fresh(b)))
            .as_ref()
            .and_then(inet)
    }

    /// How many servers the pool has now.
    pub fn len(&self) -> usize {
        self.lb.backends().get_backend().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs what is due: the names' resolution, the health checks.
    pub async fn maintain(&self, now: Instant) {
        let (resolve, health) = {
            let mut d = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let resolve = now >= d.resolve;
            if resolve {
                d.resolve = now + self.resolve_every;
            }
            let health = match self.health_every {
                Some(every) if now >= d.health => {
                    d.health = now + every;
                    true
                }
                _ => false,
            };
            (resolve, health)
        };
        if resolve {
            if let Err(e) = self.lb.update().await {
                tracing::warn!(error = %e, "origin servers could not be resolved again; the known ones stay");
            }
        }
        if health {
            self.lb.backends().run_health_check(true).await;
        }
    }
}
