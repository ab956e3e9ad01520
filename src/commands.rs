//! The CLI commands: `run`, `check`, `rooms`, `room`, `health` (`demo` lives in
//! [`crate::demo`]). `main.rs` parses arguments and calls these.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::admin::client::{self as admin_client, Target};

use crate::config::{self, Config, StoreBackend};
use crate::route::{OtherHosts, PathMatching};
use crate::server;

/// Writes to stdout like `print!`; a reader that went away (`anteroom check | head`) ends the
/// command quietly with SIGPIPE's exit status (141), as a C tool would, not with a panic.
macro_rules! out {
    ($($t:tt)*) => { write_out(format_args!($($t)*)) };
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($t:tt)*) => { write_out(format_args!("{}\n", format_args!($($t)*))) };
}

fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
    }
}

/// `anteroom check --config FILE [--connect]`: validate and summarise, or explain what is
/// wrong; with `connect`, also reach the store and the upstreams (exit 1 if one fails).
pub fn check(path: &Path, connect: bool) -> ExitCode {
    match config::load(path) {
        Ok(c) => {
            for w in &c.warnings {
                eprintln!("warning: {w}");
            }
            out!("{}", summary(&c));
            if !connect {
                outln!("  (nothing was connected to, only host names looked up: --connect reaches the store and the upstreams)");
                return ExitCode::SUCCESS;
            }
            let reached = crate::probe::reach(&c);
            out!("{}", crate::probe::report(&reached));
            if reached.iter().all(|r| r.ok) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// `anteroom run --config FILE [--upgrade]`: serve until a signal says stop.
pub fn run(path: &Path, upgrade: bool) -> ExitCode {
    crate::reload::catch_early_hangups();
    let config = match config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    tracing::info!(
        config = %path.display(),
        public = %config.listen.http,
        admin = %config.listen.admin,
        store = %config.store.backend,
        rooms = config.rooms.len(),
        upgrade,
        "starting"
    );
    match server::build(config, upgrade) {
        Ok(mut built) => {
            let reloader = crate::reload::Reloader::new(
                built.current.clone(),
                path.to_path_buf(),
                built.reloaded.clone(),
            );
            built
                .server
                .add_service(pingora::services::background::background_service(
                    "reload", reloader,
                ));
            server::serve(built.server)
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

fn dur(d: std::time::Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The one-screen summary `check` prints.
pub fn summary(c: &Config) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: OK", c.source);
    let _ = writeln!(
        s,
        "  listen    http {}  admin {}{}",
        c.listen.http,
        c.listen.admin,
        match c.listen.https {
            Some(a) if c.listen.redirect_http => format!("  https {a} (plain HTTP redirected)"),
            Some(a) => format!("  https {a}"),
            None => String::new(),
        }
    );
    for t in &c.tls {
        let hosts: Vec<String> = t.hosts.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            s,
            "  tls       {} -> {} (expires {})",
            hosts.join(", "),
            t.cert.display(),
            t.expires
        );
    }
    let store = match &c.store.backend {
        StoreBackend::Memory => "memory (one instance)".to_string(),
        StoreBackend::Redis { .. } => c.store.backend.to_string(),
        StoreBackend::RedisCluster { urls } => format!("redis cluster ({} seed nodes)", urls.len()),
        StoreBackend::RedisSentinel { urls, master } => {
            format!(
                "redis via sentinel, master {master} ({} sentinels)",
                urls.len()
            )
        }
    };
    let _ = writeln!(s, "  store     {store}, timeout {}", dur(c.store.timeout));
    let ids: Vec<&str> = c.cookie.keys.iter().map(|k| k.id()).collect();
    let _ = writeln!(
        s,
        "  cookie    {} key(s), signing with {}",
        ids.len(),
        ids.first().unwrap_or(&"-")
    );
    let tokens: Vec<String> = c
        .admin
        .tokens
        .iter()
        .map(|t| format!("{} ({})", t.label, t.role.as_str()))
        .collect();
    let _ = writeln!(
        s,
        "  admin     {}",
        if tokens.is_empty() {
            "no token (admin API refuses every call)".to_string()
        } else {
            format!("tokens: {}", tokens.join(", "))
        }
    );
    for (i, u) in c.upstreams.iter().enumerate() {
        let default = if i == c.default_upstream {
            "  (default)"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  upstream  {} -> {}{}{default}{}{}{}",
            u.name,
            if u.addrs.is_empty() {
                u.addr.to_string()
            } else {
                u.addrs.join(", ")
            },
            if u.tls { " tls" } else { "" },
            match (&u.health_check, u.addrs.len() > 1) {
                (Some(h), _) => format!(
                    ", {} balance, health check GET {} every {}",
                    if u.balance == crate::config::model::Balance::Visitor {
                        "visitor"
                    } else {
                        "round-robin"
                    },
                    h.path,
                    humantime::format_duration(h.every)
                ),
                (None, true) => format!(
                    ", {} balance, no health check",
                    if u.balance == crate::config::model::Balance::Visitor {
                        "visitor"
                    } else {
                        "round-robin"
                    }
                ),
                (None, false) => String::new(),
            },
            u.admit_per_second
                .map(|c| format!(", all its rooms together at most {c}/s"))
                .unwrap_or_default(),
            u.origin_secret
                .as_ref()
                .map(|o| format!(", proves itself with {} (secret not shown)", o.name))
                .unwrap_or_default()
        );
    }
    for r in &c.rooms {
        let p = &r.params;
        let hosts: Vec<String> = r.hosts.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            s,
            "  room {:<8} hosts {}  paths {}  -> {}",
            p.name,
            hosts.join(","),
            r.paths.join(", "),
            c.upstreams[r.upstream].name
        );
        let _ = writeln!(
            s,
            "            admit {}/s (at most {} per {} tick), max-active {}, max-waiting {}",
            p.admit_per_second,
            p.burst(p.admit_per_second),
            dur(p.tick),
            p.max_active,
            p.max_waiting
        );
        let consume: Vec<String> = r
            .consume
            .iter()
            .map(|c| format!("{} {}", c.method, c.path))
            .collect();
        let _ = writeln!(
            s,
            "            session {}, claim {}, abandon {}, on-store-error {}, consume [{}]{}",
            dur(p.session_ttl),
            dur(p.claim_ttl),
            dur(p.abandon_after),
            r.on_store_error.as_str(),
            consume.join(", "),
            r.template
                .as_ref()
                .map(|t| format!(", template {}", t.display()))
                .unwrap_or_default()
        );
        if let Some(a) = r.autopilot {
            let _ = writeln!(
                s,
                "            autopilot: the rate follows the origin between {}/s and {}/s (starts at {}/s): p90 under {}, errors under {} %, one step per {}",
                a.min_rate,
                p.admit_per_second,
                crate::admission::autopilot::start_rate(&a, p.admit_per_second),
                dur(a.target_latency),
                a.max_error_rate * 100.0,
                dur(a.window)
            );
        }
        if let Some(cap) = r.origin_cap {
            let _ = writeln!(
                s,
                "            origin: at most {} in flight per instance, the rest wait up to {} (then 503)",
                cap.max_inflight,
                dur(cap.queue_timeout)
            );
        }
        match r.queueing {
            crate::config::QueueMethod::Fifo => {}
            crate::config::QueueMethod::Random => {
                let _ = writeln!(
                    s,
                    "            queueing random: each admission drawn from the whole line"
                );
            }
            crate::config::QueueMethod::Passthrough => {
                let _ = writeln!(s, "            queueing passthrough: a dry run, everyone let in, those the line would hold counted");
            }
            crate::config::QueueMethod::Reject => {
                let _ = writeln!(
                    s,
                    "            queueing reject: nobody queues; newcomers get the closed page ({})",
                    r.closed_status
                );
            }
        }
        if let Some(c) = &r.join_challenge {
            let _ = writeln!(
                s,
                "            join challenge: {} zero bits; without a solution at most {} new a client per {}",
                c.difficulty,
                c.no_script_per_ip,
                dur(c.no_script_per)
            );
        }
        if r.origin_commands {
            let _ = writeln!(
                s,
                "            origin commands: Anteroom-Command complete | revoke obeyed (and removed)"
            );
        }
        for e in &r.events {
            use crate::event::time::format;
            let _ = writeln!(
                s,
                "            event {}: pre-queue {}, opens {}{}{}{}",
                e.name,
                format(e.prequeue_from, e.utc_offset),
                format(e.opens_at, e.utc_offset),
                e.closes_at
                    .map(|c| format!(
                        ", closes {} ({} the line)",
                        format(c, e.utc_offset),
                        e.after_close.as_str()
                    ))
                    .unwrap_or_default(),
                if e.draw { ", places drawn" } else { "" },
                e.admit_per_second
                    .map(|r| format!(", {r}/s while it runs"))
                    .unwrap_or_default(),
            );
        }
    }
    if c.rooms.is_empty() {
        let _ = writeln!(
            s,
            "  (no rooms: every request passes straight to the default upstream)"
        );
    }
    let _ = writeln!(s, "  routing   {}", routing_summary(c));
    s
}

/// How odd spellings and other hosts are treated, in one line of the summary.
fn routing_summary(c: &Config) -> String {
    let paths = match c.listen.path_matching {
        PathMatching::Strict => "path-matching strict (spellings origins read differently: 400)",
        PathMatching::Lenient => "path-matching lenient (queued in the room any reading falls in)",
    };
    let bound = c.rooms.iter().any(|r| {
        c.origin_of(r.upstream) == c.origin_of(c.default_upstream)
            && r.hosts.iter().any(|h| h.is_bound())
    });
    if !bound {
        return paths.to_string();
    }
    let other = match c.listen.other_hosts {
        OtherHosts::Refuse => "refused (400)",
        OtherHosts::Room => "queued in that room",
        OtherHosts::Pass => {
            "passed without a line (the origin must serve each host as its own site)"
        }
    };
    format!(
        "{paths}; host-bound rooms on the default upstream: requests with another or no host on their paths are {other} (other-hosts)"
    )
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Logs to stderr, filtered by `ANTEROOM_LOG` (default `info`; e.g.
/// `info,anteroom::access=off` drops the access log). Pingora's own debug logs print whole
/// request headers, cookies included, and its start and stop steps are ~25 `info` lines, so
/// its crates stay at `warn` unless the filter names them (`ANTEROOM_LOG=debug,pingora_proxy=debug`).
pub fn init_logging(format: LogFormat) {
    let mut spec = std::env::var("ANTEROOM_LOG").unwrap_or_else(|_| "info".to_string());
    // Pingora's own start and stop lines (~25 at each Ctrl-C) say nothing an operator acts on;
    // anteroom logs the start, the signal and the failures itself.
    if !spec.contains("pingora") {
        spec.push_str(",pingora_core=warn,pingora_proxy=warn");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    // The access log is formatted and written off the request path (src/logwriter.rs); if its
    // thread cannot start, access lines go through `tracing` like every other line.
    crate::logwriter::start(matches!(format, LogFormat::Json));
}

/// How the admin commands find the admin API.
#[derive(Debug, Clone)]
pub struct AdminArgs {
    pub config: Option<PathBuf>,
    pub url: String,
    pub token: Option<String>,
}

impl AdminArgs {
    fn target(&self) -> Result<Target, String> {
        self.target_with(self.token.is_none())
    }

    /// `need_token`: whether the file's admin token is read (not for `/healthz`, which needs
    /// none: a container's health check need not hold the token's variable; found by review).
    fn target_with(&self, need_token: bool) -> Result<Target, String> {
        match &self.config {
            Some(path) => {
                let c = config::load_admin(path, need_token).map_err(|e| e.to_string())?;
                let mut t = Target::from_endpoint(&c);
                if self.token.is_some() {
                    t.token = self.token.clone();
                }
                Ok(t)
            }
            None => Target::from_url(&self.url, self.token.clone()),
        }
    }
}

/// What `anteroom room NAME` does.
#[derive(Debug, Clone)]
pub enum RoomAction {
    Show,
    Set(Vec<String>),
    Clear,
    Changes(usize),
    Events,
    EventAdd(serde_json::Value),
    EventChange(String, serde_json::Value),
    EventCancel(String),
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("anteroom: {msg}");
    ExitCode::from(1)
}

/// `anteroom rooms`: a table of every room.
pub fn rooms(args: AdminArgs) -> ExitCode {
    match args.target().and_then(|t| t.json("GET", "/rooms", None)) {
        Ok(v) => {
            out!("{}", admin_client::rooms_table(&v));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `anteroom room NAME [show | set K=V... | clear | changes]`.
pub fn room(args: AdminArgs, name: &str, action: RoomAction) -> ExitCode {
    let path = format!("/rooms/{name}");
    let table = matches!(action, RoomAction::Changes(_));
    let result = args.target().and_then(|t| match action {
        RoomAction::Show => t.json("GET", &path, None),
        RoomAction::Set(pairs) => {
            let body = admin_client::patch_body(&pairs)?;
            t.json("PATCH", &path, Some(&body))
        }
        RoomAction::Clear => t.json("DELETE", &format!("{path}/waiting"), None),
        RoomAction::Changes(limit) => t.json("GET", &format!("{path}/changes?limit={limit}"), None),
        RoomAction::Events => t.json("GET", &format!("{path}/events"), None),
        RoomAction::EventAdd(body) => t.json("POST", &format!("{path}/events"), Some(&body)),
        RoomAction::EventChange(event, body) => {
            t.json("PATCH", &format!("{path}/events/{event}"), Some(&body))
        }
        RoomAction::EventCancel(event) => t.json("DELETE", &format!("{path}/events/{event}"), None),
    });
    match result {
        Ok(v) if table => {
            out!("{}", admin_client::changes_table(&v));
            ExitCode::SUCCESS
        }
        Ok(v) => {
            outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `anteroom verify-draw`: 0 when the draw checks out (and where the ticket is), 1 when not.
pub fn verify_draw(
    event: &str,
    ticket: &str,
    commitment: Option<&str>,
    ca: Option<&Path>,
) -> ExitCode {
    match crate::event::verify::run(event, ticket, commitment, ca) {
        Ok(r) => {
            outln!(
                "The draw of event {:?} in room {:?} checks out:",
                r.event,
                r.room
            );
            outln!(
                "  the seed is the one committed to (sha256 = {})",
                r.commitment
            );
            if commitment.is_none() {
                outln!("  (compare that commitment with the one the countdown page showed before the opening, or pass it as --commitment)");
            }
            outln!(
                "  all {} registrations are listed in the order the seed gives them",
                r.registrations
            );
            outln!(
                "  ticket {ticket} is at place {} of {}",
                r.place,
                r.registrations
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("the draw does not check out: {e}")),
    }
}

/// `anteroom health`: exit 0 when `/healthz` answers 200.
pub fn health(args: AdminArgs) -> ExitCode {
    match args
        .target_with(false)
        .and_then(|t| t.call("GET", "/healthz", None))
    {
        Ok((200, _)) => ExitCode::SUCCESS,
        Ok((status, body)) => fail(format!("/healthz answered {status}: {body}")),
        Err(e) => fail(e),
    }
}
