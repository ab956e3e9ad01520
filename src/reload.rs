//! Live reload: SIGHUP re-reads the config file. A valid file applies to new requests without
//! dropping connections (rooms, paths, rates, upstreams, templates, cookie keys); an invalid one
//! is refused, each problem logged with file, line and key, and the running config kept.
//! Listeners, the store and `[server]` settings are fixed at start: a change to them is logged
//! and needs a restart (or a graceful upgrade).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::Notify;

use crate::app::{Current, Shared};
use crate::config;

mod caps;
mod frozen;
mod listeners;
mod takeover;
use frozen::{frozen_changes, gone, lines_of_gone_rooms, runtime_now};
use takeover::takeovers;

/// A SIGHUP caught before the reloader listened.
static EARLY_HANGUP: AtomicBool = AtomicBool::new(false);
/// The early catcher, removed once the reloader listens.
static EARLY_CATCHER: Mutex<Option<signal_hook_registry::SigId>> = Mutex::new(None);

/// Catches SIGHUP from the first line of `anteroom run` until the reloader listens, which then
/// applies one caught meanwhile. The signal's default action ends the process: a reload sent
/// while it started (a config run right after a restart, a test under load) ended it, or,
/// ignored, would be lost.
pub fn catch_early_hangups() {
    let mut catcher = EARLY_CATCHER.lock().unwrap_or_else(|e| e.into_inner());
    if catcher.is_some() {
        return;
    }
    let hup = SignalKind::hangup().as_raw_value();
    // SAFETY: the action only stores to an atomic, which is async-signal-safe.
    let caught = unsafe {
        signal_hook_registry::register(hup, || EARLY_HANGUP.store(true, Ordering::SeqCst))
    };
    match caught {
        Ok(id) => *catcher = Some(id),
        Err(e) => tracing::warn!(error = %e, "cannot catch SIGHUP while starting"),
    }
}

/// Ends the early catching (the reloader listens); whether a SIGHUP came meanwhile.
fn take_early_hangup() -> bool {
    if let Some(id) = EARLY_CATCHER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        signal_hook_registry::unregister(id);
    }
    EARLY_HANGUP.swap(false, Ordering::SeqCst)
}

pub struct Reloader {
    current: Current,
    path: PathBuf,
    reloaded: Arc<Notify>,
}

impl Reloader {
    pub fn new(current: Current, path: PathBuf, reloaded: Arc<Notify>) -> Self {
        Self {
            current,
            path,
            reloaded,
        }
    }

    /// Loads the file and swaps it in; returns why not when it cannot. The outcome is noted
    /// for `/readyz` and the metrics.
    pub async fn reload(&self) -> Result<usize, String> {
        use futures_util::FutureExt;
        // A reload that fails inside anteroom is refused like any other, and the next one runs
        // (found by review: a panic while building a file stopped every later reload, unseen).
        let result = match std::panic::AssertUnwindSafe(self.try_reload())
            .catch_unwind()
            .await
        {
            Ok(result) => result,
            Err(panic) => {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let e = format!(
                    "the reload failed inside anteroom ({why}); the running configuration stays \
                     — please report it with the file"
                );
                tracing::error!(error = e, "reload refused");
                Err(e)
            }
        };
        self.current.load().core.note_reload(&result);
        result
    }

    async fn try_reload(&self) -> Result<usize, String> {
        let mut new = match config::load(&self.path) {
            Ok(c) => c,
            Err(errors) => {
                log_refusal(&errors.0);
                return Err(errors.to_string());
            }
        };
        for w in &new.warnings {
            tracing::warn!("{w}");
        }
        let old = self.current.load_full();
        let o = &old.config;
        let mut fixed = Vec::new();
        if new.listen.http != o.listen.http {
            fixed.push("listen.http");
        }
        if new.listen.admin != o.listen.admin {
            fixed.push("listen.admin");
        }
        if new.listen.https != o.listen.https {
            fixed.push("listen.https");
        }
        if new.store.backend != o.store.backend
            || new.store.timeout != o.store.timeout
            || new.store.breaker_failures != o.store.breaker_failures
            || new.store.breaker_cooldown != o.store.breaker_cooldown
        {
            fixed.push("[store]");
        }
        if new.server.threads != o.server.threads
            || new.server.work_stealing != o.server.work_stealing
            || new.server.grace_period != o.server.grace_period
            || new.server.shutdown_timeout != o.server.shutdown_timeout
            // The default socket follows listen.http, told already (found by review: a change
            // of listen.http alone was told as one of `[server]` too).
            || (new.server.upgrade_sock != o.server.upgrade_sock
                && !(new.server.upgrade_sock == config::default_upgrade_sock(new.listen.http)
                    && o.server.upgrade_sock == config::default_upgrade_sock(o.listen.http)))
            || new.server.client_timeout != o.server.client_timeout
            || new.server.max_header_bytes != o.server.max_header_bytes
        {
            fixed.push("[server]");
        }
        if !fixed.is_empty() {
            tracing::warn!(
                settings = fixed.join(", "),
                "these settings changed but apply only after a restart; the rest is reloaded"
            );
            // What runs is what the running process reports: the listeners' addresses, the
            // store and `[server]`. The rest of `[listen]` (trusted-proxies, path-matching,
            // other-hosts, redirect-http) is read per request and applies now; before, it was
            // kept too, silently (found by review: `other-hosts = "refuse"` stayed "pass").
            new.listen.http = o.listen.http;
            new.listen.admin = o.listen.admin;
            new.listen.https = o.listen.https;
            // The HTTPS listener runs on until a restart: so do its certificates when the new
            // file has none for it (found by review: a file without `https` and `[[tls]]`
            // emptied the table, and every handshake failed while the log said it stays).
            if new.listen.https.is_some() && new.tls.is_empty() {
                new.tls = o.tls.clone();
            }
            new.store = o.store.clone();
            new.server = o.server.clone();
        }
        let looped = listeners::upstreams_at_running_listeners(&new, &self.path);
        if !looped.is_empty() {
            log_refusal(&looped);
            return Err(config::ConfigErrors(looped).to_string());
        }
        let rooms = new.rooms.len();
        // Checked before the new rooms are built: building them takes state over from the
        // old ones (the liveness batch, the recovery window), which a refusal must leave.
        let lines = lines_of_gone_rooms(&old, &new).await;
        let taken = takeovers(&old, &new).await;
        let runtime = runtime_now(&old, &new).await;
        let frozen = frozen_changes(&old, &new, &self.path, &lines, &taken, &runtime);
        if !frozen.is_empty() {
            log_refusal(&frozen);
            return Err(config::ConfigErrors(frozen).to_string());
        }
        let (added, removed, changed) = room_changes(&old, &new);
        let shared = Shared::new(old.core.clone(), new, Some(&old)).map_err(|e| {
            tracing::error!(error = e, "reload refused: the running configuration stays");
            e
        })?;
        // Certificates read anew (a renewed one replaces the old; a broken one refused the
        // whole reload above): new handshakes get them, connections in flight keep theirs.
        shared.core.tls.swap(&shared.config.tls);
        let core = shared.core.clone();
        let uncapped = lifted_gates(&old, &shared);
        self.current.store(Arc::new(shared));
        for gate in uncapped {
            gate.lift();
        }
        core.metrics.forget_rooms(&removed);
        self.reloaded.notify_one();
        tracing::info!(
            config = %self.path.display(),
            rooms,
            added = ?added,
            removed = ?removed,
            changed = ?changed,
            "configuration reloaded"
        );
        Ok(rooms)
    }
}

/// Logs each problem of a refused reload with file, line, column, key and fix.
fn log_refusal(errors: &[config::ConfigError]) {
    for e in errors {
        tracing::error!(
            file = e.file,
            line = e.line,
            col = e.col,
            key = (!e.key.is_empty()).then_some(e.key.as_str()),
            problem = e.problem,
            fix = e.fix,
            "reload refused: the running configuration stays"
        );
    }
}

/// The rooms a reload adds, removes and changes, by name (for the log).
fn room_changes(old: &Shared, new: &config::Config) -> (Vec<String>, Vec<String>, Vec<String>) {
    let named = |name: &str| old.rooms.iter().find(|o| o.name() == name);
    let added = new
        .rooms
        .iter()
        .filter(|r| named(r.name()).is_none())
        .map(|r| r.name().to_string())
        .collect();
    let removed = gone(old, new).map(|o| o.name().to_string()).collect();
    let changed = new
        .rooms
        .iter()
        .filter(|r| named(r.name()).is_some_and(|o| format!("{:?}", o.cfg) != format!("{r:?}")))
        .map(|r| r.name().to_string())
        .collect();
    (added, removed, changed)
}

/// The origin gates the new configuration no longer uses: a room's cap removed, or the room
/// ([`crate::room::gate::OriginGate::lift`]); a gate kept is the new room's own.
fn lifted_gates(old: &Shared, new: &Shared) -> Vec<Arc<crate::room::gate::OriginGate>> {
    old.rooms
        .iter()
        .filter_map(|o| o.gate.clone())
        .filter(|g| {
            !new.rooms
                .iter()
                .any(|r| r.gate.as_ref().is_some_and(|n| Arc::ptr_eq(n, g)))
        })
        .collect()
}

#[async_trait]
impl BackgroundService for Reloader {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut hup = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGHUP: live reload is off");
                return;
            }
        };
        if take_early_hangup() {
            tracing::info!("a SIGHUP came while starting: reloading now");
            let _ = self.reload().await;
        }
        loop {
            tokio::select! {
                got = hup.recv() => {
                    if got.is_none() {
                        return;
                    }
                    let _ = self.reload().await;
                }
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        return;
                    }
                }
            }
        }
    }
}
