//! The CLI commands: `run`, `check`, `demo`. `main.rs` parses arguments and calls these.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use crate::config::{self, Config, StoreBackend};
use crate::server;

/// `anteroom check --config FILE`: validate and summarise, or explain what is wrong.
pub fn check(path: &Path) -> ExitCode {
    match config::load(path) {
        Ok(c) => {
            print!("{}", summary(&c));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// `anteroom run --config FILE`: serve until a signal says stop.
pub fn run(path: &Path) -> ExitCode {
    let config = match config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    tracing::info!(config = %path.display(), listen = %config.listen.http, rooms = config.rooms.len(), "starting");
    match server::build(config) {
        Ok((server, _)) => server.run_forever(),
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
        "  listen    http {}  admin {}",
        c.listen.http, c.listen.admin
    );
    let store = match &c.store.backend {
        StoreBackend::Memory => "memory (one instance)".to_string(),
        StoreBackend::Redis { .. } => "redis".to_string(),
        StoreBackend::RedisCluster { urls } => format!("redis cluster ({} seed nodes)", urls.len()),
    };
    let _ = writeln!(s, "  store     {store}, timeout {}", dur(c.store.timeout));
    let ids: Vec<&str> = c.cookie.keys.iter().map(|k| k.id()).collect();
    let _ = writeln!(
        s,
        "  cookie    {} key(s), signing with {}",
        ids.len(),
        ids.first().unwrap_or(&"-")
    );
    let _ = writeln!(
        s,
        "  admin     {}",
        if c.admin.token.is_some() {
            "token set"
        } else {
            "no token (admin API refuses every call)"
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
            "  upstream  {} -> {}{}{default}",
            u.name,
            u.addr,
            if u.tls { " tls" } else { "" }
        );
    }
    for r in &c.rooms {
        let p = &r.params;
        let hosts: Vec<String> = r
            .hosts
            .iter()
            .map(|h| match h {
                crate::route::HostPattern::Any => "*".to_string(),
                crate::route::HostPattern::Exact(x) => x.clone(),
                crate::route::HostPattern::Suffix(x) => format!("*{x}"),
            })
            .collect();
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
    }
    if c.rooms.is_empty() {
        let _ = writeln!(
            s,
            "  (no rooms: every request passes straight to the default upstream)"
        );
    }
    s
}
