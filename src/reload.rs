//! Live reload: SIGHUP re-reads the config file. A valid file applies to new requests without
//! dropping connections (rooms, paths, rates, upstreams, templates, cookie keys); an invalid one
//! is refused, each problem logged with file, line and key, and the running config kept.
//! Listeners, the store and `[server]` settings are fixed at start: a change to them is logged
//! and needs a restart (or a graceful upgrade).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::Notify;

use crate::app::{Current, Shared};
use crate::config;

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

    /// Loads the file and swaps it in; returns why not when it cannot.
    pub fn reload(&self) -> Result<usize, String> {
        let mut new = match config::load(&self.path) {
            Ok(c) => c,
            Err(errors) => {
                for e in &errors.0 {
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
                return Err(errors.to_string());
            }
        };
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
            || new.server.upgrade_sock != o.server.upgrade_sock
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
            // What runs is what the running process reports.
            new.listen = o.listen.clone();
            new.store = o.store.clone();
            new.server = o.server.clone();
        }
        let rooms = new.rooms.len();
        let shared = Shared::new(old.core.clone(), new, Some(&old)).map_err(|e| {
            tracing::error!(error = e, "reload refused: the running configuration stays");
            e
        })?;
        // Certificates read anew (a renewed one replaces the old; a broken one refused the
        // whole reload above): new handshakes get them, connections in flight keep theirs.
        shared.core.tls.swap(&shared.config.tls);
        self.current.store(Arc::new(shared));
        self.reloaded.notify_one();
        tracing::info!(config = %self.path.display(), rooms, "configuration reloaded");
        Ok(rooms)
    }
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
        loop {
            tokio::select! {
                got = hup.recv() => {
                    if got.is_none() {
                        return;
                    }
                    let _ = self.reload();
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
