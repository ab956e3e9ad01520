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

mod takeover;
use takeover::{takeovers, Takeover};

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
        let rooms = new.rooms.len();
        // Checked before the new rooms are built: building them takes state over from the
        // old ones (the liveness batch, the recovery window), which a refusal must leave.
        let lines = lines_of_gone_rooms(&old, &new).await;
        let taken = takeovers(&old, &new).await;
        let frozen = frozen_changes(&old, &new, &self.path, &lines, &taken);
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
        self.current.store(Arc::new(shared));
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

/// What a reload may not change, as the admin API may not (`schedule::frozen`): an event whose
/// pre-queue has begun keeps its start and its draw, and while one that draws is still in the
/// schedule the `[draw] secret` stays — each would change or void a commitment already
/// published and place registrants by a seed nobody can check (found by review: a SIGHUP
/// moved a begun pre-queue and emptied its registrations). Cancelling such an event (leaving
/// it out of the file) stays allowed, as the API's DELETE is.
fn frozen_changes(
    old: &Shared,
    new: &config::Config,
    path: &std::path::Path,
    lines: &[Line],
    taken: &[Takeover],
) -> Vec<config::ConfigError> {
    use config::locate::{KeyPath, Located};
    let text = crate::files::read_regular_text(path, crate::files::MAX_CONFIG).unwrap_or_default();
    let located = Located::new(&text);
    let file = path.display().to_string();
    let error = |key: KeyPath, problem: String, fix: String| {
        let (line, col) = located
            .span_of(&key)
            .map_or((0, 0), |s| located.line_col(s.start));
        config::ConfigError {
            file: file.clone(),
            line,
            col,
            key: key.to_string(),
            problem,
            fix,
        }
    };
    let local = crate::clock::Clock::now_micros(&crate::clock::SystemClock);
    let secret = |c: &config::Config| c.draw_secret.as_ref().map(|s| s.0.clone());
    let secret_changed = secret(&old.config) != secret(new);
    let mut out = Vec::new();
    for (i, r) in new.rooms.iter().enumerate() {
        let Some(o) = old.rooms.iter().find(|o| o.name() == r.name()) else {
            continue;
        };
        let now = o.events.store_now(local);
        // The new schedule as the new room would build it: its file's events with the
        // store's runtime changes, which a reload keeps.
        let runtime = o.events.runtime();
        let before = o.events.schedule();
        let (after, _) =
            crate::event::schedule::Schedule::build(&r.events, &runtime.events, runtime.version);
        // A room that keeps no line has no events (`check` refuses them in the file, the admin
        // API at run time): nor may a reload make one such while a runtime event is still to
        // come or running (found by review: switched to passthrough in a pre-queue, the room
        // let its registrants in before the opening).
        if matches!(
            r.queueing,
            config::QueueMethod::Reject | config::QueueMethod::Passthrough
        ) {
            let running = after
                .events
                .iter()
                .filter(|e| e.closes_at.is_none_or(|c| c > now))
                .map(|e| format!("{:?}", e.name))
                .collect::<Vec<_>>();
            if !running.is_empty() {
                out.push(error(
                    KeyPath::root().key("room").index(i).key("queueing"),
                    format!(
                        "room {:?} has events not yet closed ({}): queueing = {:?} keeps no line for them",
                        r.name(),
                        running.join(", "),
                        r.queueing.as_str()
                    ),
                    format!(
                        "keep queueing = \"fifo\" until they have closed, or cancel them first (`anteroom room {} event cancel NAME`)",
                        r.name()
                    ),
                ));
            }
        }
        for e in before.events.iter().filter(|e| now >= e.prequeue_from) {
            let room = KeyPath::root().key("room").index(i);
            let at = |field: &str| match r.events.iter().position(|x| x.name == e.name) {
                Some(j) => room.key("event").index(j).key(field),
                None => room.key("event"),
            };
            if let Some(p) = after
                .events
                .iter()
                .find(|x| x.name == e.name)
                .and_then(|x| crate::event::schedule::frozen(e, x, now))
            {
                out.push(error(
                    at(p.field),
                    format!("event {:?}: {}", e.name, p.what),
                    p.fix,
                ));
            }
            if secret_changed && e.draw && after.events.iter().any(|x| x.id() == e.id()) {
                out.push(error(
                    KeyPath::root().key("draw").key("secret"),
                    format!(
                        "cannot change while event {:?} of room {:?} draws: its seed, commitment and list were made with the old secret",
                        e.name,
                        r.name()
                    ),
                    "keep the secret until the event is out of the file (its draw can then no longer be checked here)".into(),
                ));
            }
        }
    }
    // A room gone from the file (removed, or renamed: the store keys a line by the room's
    // name) while people wait in its line, or while its line is held: they would lose their
    // place (their polls answered 404), and its paths would open past the hold (found by
    // review: a renamed room's newcomers walked in while the old line stayed held in Redis).
    // Admitted visitors of a room whose paths another room of the new file takes (a rename,
    // a path moved to another room, a room nested inside) would meet that room's line: their
    // cookies are signed for the old room (found by review: a rename with nobody waiting sent
    // every admitted visitor back to the line, and their turns came due to 404s; re-review: so
    // did a path moved between two rooms that keep their names); so would the visitors waiting
    // in a room that keeps its name, at their turn (found by re-review). A room simply removed
    // opens its paths to its admitted visitors instead, which costs them nothing.
    for t in taken {
        // Where the file gives them away: the taking room's paths (a room nested inside, a
        // path moved to it), else the room itself.
        let at = |name: &str| new.rooms.iter().position(|r| r.name() == name);
        let by = t.by.as_deref().and_then(at);
        let key = match (by, at(&t.room)) {
            (Some(i), _) | (None, Some(i)) => KeyPath::root().key("room").index(i).key("paths"),
            (None, None) => KeyPath::root().key("room"),
        };
        let who = match (t.active, t.waiting) {
            (a, 0) => format!("{a} admitted visitors hold its sessions"),
            (0, w) => format!("{w} visitors wait in its line"),
            (a, w) => format!("{a} admitted visitors hold its sessions and {w} wait in its line"),
        };
        let gone = if t.gone {
            ", which is gone from the file,"
        } else {
            ""
        };
        let problem = match &t.by {
            Some(by) => format!(
                "room {by:?} would take {} from room {:?}{gone} while {who}: they would meet room {by:?}'s line, their admissions and places being room {:?}'s",
                t.at, t.room, t.room
            ),
            None => format!(
                "{} of room {:?}{gone} would be refused (its readings would fall in two rooms) while {who}",
                t.at, t.room
            ),
        };
        out.push(error(
            key,
            problem,
            format!(
                "leave {1} with room {0:?} until its sessions have ended and its line is empty (`anteroom room {0}` shows `active` and `waiting`; a session lasts session-ttl), then move it",
                t.room, t.at
            ),
        ));
    }
    for (o, line) in gone(old, new).zip(lines) {
        let &Line { waiting, held, .. } = line;
        if waiting == 0 && !held {
            continue;
        }
        let what = match (waiting, held) {
            (0, _) => "its line is held (queue_all)".to_string(),
            (n, false) => format!("{n} visitors wait in its line"),
            (n, true) => format!("{n} visitors wait in its held line"),
        };
        out.push(error(
            KeyPath::root().key("room"),
            format!(
                "room {:?} is gone from the file (removed or renamed) while {what}: they would lose their place, and its paths would open",
                o.name()
            ),
            format!(
                "keep the room under its name until its line is empty and not held (`anteroom room {0} clear` empties it, `anteroom room {0} set queue_all=false` releases the hold), then remove or rename it",
                o.name()
            ),
        ));
    }
    out
}

/// A room's line and sessions as a reload judges a room gone from the file.
struct Line {
    waiting: u64,
    held: bool,
}

/// The line of each room [`gone`] from `new`, in its order: how many wait in it, whether it
/// is held and how many sessions it has, as the store says now, or as the last tick saw it
/// when the store does not answer (found by review: by the last tick's counts alone, a line
/// that formed within the last tick was not seen).
async fn lines_of_gone_rooms(old: &Shared, new: &config::Config) -> Vec<Line> {
    let mut out = Vec::new();
    for o in gone(old, new) {
        let now = old
            .store_call("stats", o.name(), old.store.stats(&o.cfg.params))
            .await;
        out.push(match now {
            Ok(st) => Line {
                waiting: st.waiting,
                held: st.state.queue_all,
            },
            Err(e) => {
                old.warn_store_error(&e);
                Line {
                    waiting: o.live.waiting(),
                    held: o.live.queue_all(),
                }
            }
        });
    }
    out
}

/// The rooms of the running configuration that `new` has no room of the same name for.
fn gone<'a>(
    old: &'a Shared,
    new: &'a config::Config,
) -> impl Iterator<Item = &'a crate::room::Room> + 'a {
    old.rooms
        .iter()
        .filter(|o| !new.rooms.iter().any(|r| r.name() == o.name()))
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
