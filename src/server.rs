//! Assembles the Pingora server: the proxy service, the admission loop, and (for the demo) more.

use std::net::TcpListener;
use std::sync::Arc;

use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::Server;
use pingora::services::background::background_service;

use pingora::services::listening::Service;

use crate::admin::AdminApp;
use crate::admission::AdmissionLoop;
use arc_swap::ArcSwap;
use pingora::server::{RunArgs, ShutdownSignal, ShutdownSignalWatch};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::Notify;

use crate::app::{Core, Current, Shared};
use crate::clock::{Clock, SystemClock};
use crate::config::{Config, StoreBackend};
use crate::proxy::Proxy;
use crate::store::memory::MemoryStore;
use crate::store::redis::{RedisStore, Target};
use crate::store::Store;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{file}: store: {what}")]
    Store { file: String, what: String },
    #[error("cannot listen on {addr} ({key}): {source}\n  fix: stop whatever uses that port, or change {key}")]
    Listen {
        addr: std::net::SocketAddr,
        key: &'static str,
        source: std::io::Error,
    },
    #[error("{0}")]
    Pages(String),
    #[error("{0}")]
    UpgradeSock(String),
}

/// Claims on `[server] upgrade-sock` that keep instances off each other's socket: "serving" is
/// held by the instance that serves (so a second instance configured with the same socket
/// refuses to start instead of one day taking over the other's listeners), "waiting" by a
/// `run --upgrade` process while it waits for the sockets (so two never wait at once: the
/// second would unlink the first's socket). A claim is a Unix socket bound in Linux's abstract
/// namespace under a digest of the path: no file is left behind, and it is released when its
/// process exits, however it exits. (Elsewhere there is no claim and no refusal.)
mod sock_claim {
    /// The claim, held while the value lives.
    pub struct Claim(#[allow(dead_code)] Option<std::os::unix::net::UnixListener>);

    #[cfg(target_os = "linux")]
    fn bind(sock: &str, what: &str) -> std::io::Result<std::os::unix::net::UnixListener> {
        use sha2::{Digest, Sha256};
        use std::os::linux::net::SocketAddrExt;
        let digest: String = Sha256::digest(sock.as_bytes())[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let name = format!("anteroom-upgrade-sock-{digest}-{what}");
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        std::os::unix::net::UnixListener::bind_addr(&addr)
    }

    #[cfg(not(target_os = "linux"))]
    fn bind(_sock: &str, _what: &str) -> std::io::Result<std::os::unix::net::UnixListener> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }

    /// Takes the claim without waiting: `Err` when another process holds it. A claim that
    /// cannot be made for another reason is a warning, not a reason not to start.
    pub fn try_take(sock: &str, what: &str) -> Result<Claim, ()> {
        match bind(sock, what) {
            Ok(l) => Ok(Claim(Some(l))),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(()),
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => Ok(Claim(None)),
            Err(e) => {
                tracing::warn!(sock, error = %e, "cannot claim upgrade-sock; two instances sharing it will not be noticed");
                Ok(Claim(None))
            }
        }
    }

    /// Takes the claim once its holder (the process being replaced, which drains for its grace
    /// period) has exited, and keeps it for the life of this process; `meanwhile` (the
    /// "waiting" claim) is held until then, so that there is no moment at which neither claim
    /// is held and another instance could take the socket.
    pub fn take_when_free(sock: String, what: &'static str, meanwhile: Claim) {
        let _ = std::thread::Builder::new()
            .name("upgrade-sock claim".into())
            .spawn(move || loop {
                match try_take(&sock, what) {
                    Ok(claim) => {
                        std::mem::forget(claim);
                        drop(meanwhile);
                        return;
                    }
                    Err(()) => std::thread::park_timeout(std::time::Duration::from_millis(100)),
                }
            });
    }
}

/// Claims the upgrade socket for this instance (see [`sock_claim`]). An instance that serves
/// holds "serving" for its life. A `--upgrade` process holds "waiting" from its start until it
/// holds "serving" (once the process it replaces has exited): between the two, a new instance
/// that took the freed "serving" claim still finds "waiting" held and is refused.
fn claim_upgrade_sock(sock: &str, upgrade: bool) -> Result<(), StartError> {
    let shared = || {
        StartError::UpgradeSock(format!(
            "another running anteroom uses upgrade-sock {sock} ([server] upgrade-sock)\n  \
             fix: give each instance on this host its own upgrade-sock (or leave it unset: \
             the default is one per listen.http), or upgrade that instance with run --upgrade"
        ))
    };
    if !upgrade {
        let serving = sock_claim::try_take(sock, "serving").map_err(|()| shared())?;
        // An upgrade in flight holds "waiting" until it holds "serving".
        drop(sock_claim::try_take(sock, "waiting").map_err(|()| shared())?);
        // Held for the life of the process.
        std::mem::forget(serving);
        return Ok(());
    }
    match sock_claim::try_take(sock, "waiting") {
        Ok(waiting) => {
            sock_claim::take_when_free(sock.to_string(), "serving", waiting);
            Ok(())
        }
        Err(()) => Err(StartError::UpgradeSock(format!(
            "another process is already waiting on upgrade-sock {sock} to take over \
             ([server] upgrade-sock)\n  fix: stop it, or send SIGQUIT to the running instance \
             so that it hands its sockets over"
        ))),
    }
}

/// Creates the store the config asks for.
pub fn make_store(config: &Config, clock: Arc<dyn Clock>) -> Result<Arc<dyn Store>, StartError> {
    match &config.store.backend {
        StoreBackend::Memory => Ok(Arc::new(MemoryStore::new(clock))),
        StoreBackend::Redis { url } => redis_store(config, Target::Single(url.clone())),
        StoreBackend::RedisCluster { urls } => redis_store(config, Target::Cluster(urls.clone())),
        StoreBackend::RedisSentinel { urls, master } => redis_store(
            config,
            Target::Sentinel {
                sentinels: urls.clone(),
                master: master.clone(),
            },
        ),
    }
}

fn redis_store(config: &Config, target: Target) -> Result<Arc<dyn Store>, StartError> {
    match RedisStore::new(target, config.store.timeout) {
        Ok(s) => Ok(Arc::new(s)),
        Err(what) => Err(StartError::Store {
            file: config.source.clone(),
            what,
        }),
    }
}

/// Fails early, with the key to change, if a listen address is taken.
pub fn check_listen(addr: std::net::SocketAddr, key: &'static str) -> Result<(), StartError> {
    TcpListener::bind(addr)
        .map(drop)
        .map_err(|source| StartError::Listen { addr, key, source })
}

fn server_conf(config: &Config) -> ServerConf {
    let s = &config.server;
    ServerConf {
        threads: s.threads,
        work_stealing: s.work_stealing,
        grace_period_seconds: Some(s.grace_period.as_secs()),
        graceful_shutdown_timeout_seconds: Some(s.shutdown_timeout.as_secs().max(1)),
        upgrade_sock: s.upgrade_sock.clone(),
        ..ServerConf::default()
    }
}

/// The visitor-side connection's buffers. Pingora writes through a 1460-byte buffer by
/// default: a response whose header and body together are larger (the waiting page with its
/// cookies, ~2 KiB; most shop pages' first chunk) goes out in two `send`s and two TCP segments,
/// which measured ~5 µs of kernel time per waiting page (docs/BENCHMARKS.md). 4 KiB holds the
/// waiting page and its header in one, for 2.6 KiB more per open connection.
fn buffers() -> L4BufferSettings {
    L4BufferSettings {
        read: None,
        write: Some(4 * 1024),
    }
}

/// A built server and what further services need to share its state.
pub struct Built {
    pub server: Server,
    pub current: Current,
    /// Tells the admission loop that `current` changed.
    pub reloaded: Arc<Notify>,
}

/// A server with the proxy, the admission loop and the admin API, ready for more services.
///
/// With `upgrade`, the listening sockets come from the running process (Pingora's graceful
/// upgrade, over `[server] upgrade-sock`) instead of being bound here.
pub fn build(config: Config, upgrade: bool) -> Result<Built, StartError> {
    if !upgrade {
        check_listen(config.listen.http, "listen.http")?;
        check_listen(config.listen.admin, "listen.admin")?;
        if let Some(https) = config.listen.https {
            check_listen(https, "listen.https")?;
        }
    }
    let admin_addr = config.listen.admin.to_string();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = make_store(&config, clock.clone())?;
    let conf = server_conf(&config);
    let config_sock = config.server.upgrade_sock.clone();
    let http = config.listen.http.to_string();
    let https = config.listen.https.map(|a| a.to_string());
    let client_timeout = config.server.client_timeout;
    let core = Arc::new(Core::new(&config, store, clock).map_err(StartError::Pages)?);
    let shared = Shared::new(core, config, None).map_err(StartError::Pages)?;
    // Queue tickets from before this process may name places a loss of the store's data took,
    // which it did not see: each is the store's to answer once (`RoomLine::given_before_loss`).
    let started = shared.clock.now_secs();
    for r in &shared.rooms {
        r.line.note_start(started);
    }
    let current: Current = Arc::new(ArcSwap::from_pointee(shared));
    let reloaded = Arc::new(Notify::new());

    let opt = upgrade.then(|| Opt {
        upgrade: true,
        ..Opt::default()
    });
    claim_upgrade_sock(&config_sock, upgrade)?;
    let mut server = Server::new_with_opt_and_conf(opt, conf);
    // With --upgrade, this waits until the running process sends its sockets.
    server.bootstrap();
    let mut proxy = pingora::proxy::http_proxy_service_with_name(
        &server.configuration,
        Proxy::new(current.clone()),
        "anteroom proxy",
    );
    // An HTTP/2 connection with no stream open closes after `client-timeout`, as an idle
    // HTTP/1.1 one does (Pingora's keepalive setting does nothing for HTTP/2: found by review,
    // such a connection stayed open for good). Read at start: a reload does not change it.
    if let Some(app) = proxy.app_logic_mut() {
        let mut options = pingora::apps::HttpServerOptions::default();
        options.h2_idle_timeout = Some(client_timeout);
        app.server_options = Some(options);
    }
    proxy.add_listener(ListenerConfig::tcp(&http).l4_buffer(buffers()));
    if let Some(https) = &https {
        let tls = crate::edge::tls::settings(current.load().core.tls.clone())
            .map_err(|e| StartError::Pages(format!("the HTTPS listener: {e}")))?;
        proxy.add_listener(ListenerConfig::tcp(https).tls(tls).l4_buffer(buffers()));
    }
    server.add_service(proxy);
    server.add_service(background_service(
        "admission",
        AdmissionLoop::new(current.clone(), reloaded.clone()),
    ));
    server.add_service(background_service(
        "origins",
        crate::origins::service::OriginsService::new(current.clone()),
    ));
    let mut admin = Service::new("anteroom admin".to_string(), AdminApp::new(current.clone()));
    admin.add_tcp(&admin_addr);
    server.add_service(admin);
    Ok(Built {
        server,
        current,
        reloaded,
    })
}

/// Signals: SIGTERM and SIGINT both shut down gracefully (stop accepting after the grace
/// period, give in-flight requests `shutdown-timeout`, exit 0); SIGQUIT hands the listening
/// sockets to a new process started with `--upgrade` (Pingora's graceful upgrade).
struct Signals {
    grace: std::time::Duration,
    shutdown: std::time::Duration,
    current: Current,
}

impl Signals {
    /// Before the listeners close (SIGTERM, SIGINT): while orders of this process are in
    /// flight or their ends owed to the store (Redis not answering), it keeps serving and
    /// retrying for up to `shutdown-timeout`. Their record lives in this process alone, and a
    /// confirm that dies with it leaves the admission to the store's grace period, after which
    /// the kept cookie orders again (found by review: a restart during an outage let one
    /// admission order twice). What is still owed at the exit is logged ([`report_owed`]).
    ///
    /// Not before an upgrade's handover (SIGQUIT): the new process waits only about five
    /// seconds for the sockets (Pingora's tries, not configurable here), and a wait before it
    /// left nothing listening (found by review). The old process retries while it drains
    /// after the handover (five seconds and `grace-period`).
    async fn settle_owed(&self) {
        let left = owed(&self.current);
        if left.is_empty() {
            return;
        }
        tracing::warn!(
            orders = left.iter().flat_map(|(_, n)| n).sum::<usize>(),
            wait = %humantime::format_duration(self.shutdown),
            "orders whose end the store has not heard yet: serving on while they settle, for up to the shutdown timeout"
        );
        let until = std::time::Instant::now() + self.shutdown;
        while std::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            if owed(&self.current).is_empty() {
                tracing::info!("every order settled");
                return;
            }
        }
    }
}

/// Per room with any, the orders of this process the store has not heard the end of: in flight,
/// confirms owed, origin commands owed.
fn owed(current: &Current) -> Vec<(String, [usize; 3])> {
    use crate::room::owed::Owing;
    current
        .load()
        .core
        .owed
        .all()
        .into_iter()
        .map(|(room, o)| {
            let n = |k| o.count(k);
            (
                room,
                [n(Owing::InFlight), n(Owing::Confirm), n(Owing::Command)],
            )
        })
        .filter(|(_, n)| n.iter().any(|&n| n > 0))
        .collect()
}

/// At the exit: what the store never heard, room by room and by what it means.
fn report_owed(current: &Current) {
    for (room, [in_flight, confirms, commands]) in owed(current) {
        let room = room.as_str();
        if in_flight > 0 {
            tracing::error!(
                room,
                orders = in_flight,
                "stopped with orders still at the shop: the store gives those admissions back after their grace period"
            );
        }
        if confirms > 0 {
            tracing::error!(
                room,
                orders = confirms,
                "stopped with orders that went through whose confirm the store never heard: once their grace period has run, each of those admissions can order once more"
            );
        }
        if commands > 0 {
            tracing::error!(
                room,
                commands,
                "stopped with origin commands (complete, revoke) the store never heard: those admissions stand as if the shop had not ended them"
            );
        }
    }
}

#[async_trait::async_trait]
impl ShutdownSignalWatch for Signals {
    async fn recv(&self) -> ShutdownSignal {
        let (Ok(mut quit), Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::quit()),
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::error!("cannot listen for signals; shutting down");
            return ShutdownSignal::FastShutdown;
        };
        let name = tokio::select! {
            _ = quit.recv() => {
                crate::room::owed::stop();
                tracing::info!("SIGQUIT: handing the sockets over to the new process (graceful upgrade)");
                return ShutdownSignal::GracefulUpgrade;
            }
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        self.settle_owed().await;
        crate::room::owed::stop();
        // The one line of a shutdown (Pingora's own are below `warn`).
        tracing::info!(
            signal = name,
            grace_period = %humantime::format_duration(self.grace),
            shutdown_timeout = %humantime::format_duration(self.shutdown),
            "shutting down: the listeners close, requests in flight get the grace period to finish, then the runtimes the shutdown timeout to wind down"
        );
        ShutdownSignal::GracefulTerminate
    }
}

/// Runs until a signal says stop, then exits 0.
pub fn serve(server: Server, current: Current) -> ! {
    let conf = &server.configuration;
    let signals = Signals {
        grace: std::time::Duration::from_secs(conf.grace_period_seconds.unwrap_or(0)),
        shutdown: std::time::Duration::from_secs(
            conf.graceful_shutdown_timeout_seconds.unwrap_or(0),
        ),
        current: current.clone(),
    };
    server.run(RunArgs {
        shutdown_signal: Box::new(signals),
    });
    report_owed(&current);
    std::process::exit(0)
}
