//! `anteroom check --connect`: after the file is valid, reach what it names once — the store
//! (one `stats` call per room, through the same timeout as at run time) and every upstream (a
//! TCP connection within its `connect-timeout`) — and say of each whether it answered.
//! `check` alone never touches the network.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::{Clock, SystemClock};
use crate::config::{Config, StoreBackend};

/// One thing reached, or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    pub what: String,
    pub ok: bool,
    pub detail: String,
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The store: `stats` of every room (the room's figures are worth seeing), or of a room that
/// does not exist when the file has none (an answer is an answer).
async fn store(config: &Config) -> Reached {
    let what = format!("store     {}", config.store.backend);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = match crate::server::make_store(config, clock) {
        Ok(s) => s,
        Err(e) => {
            return Reached {
                what,
                ok: false,
                detail: e.to_string(),
            }
        }
    };
    let fallback;
    let params: Vec<&crate::store::RoomParams> = if config.rooms.is_empty() {
        fallback = crate::store::RoomParams {
            name: "anteroom-check".into(),
            admit_per_second: 1.0,
            max_active: 1,
            max_waiting: 1,
            session_ttl: Duration::from_secs(1),
            claim_ttl: Duration::from_secs(1),
            abandon_after: Duration::from_secs(1),
            tick: Duration::from_millis(100),
            queueing: Default::default(),
        };
        vec![&fallback]
    } else {
        config.rooms.iter().map(|r| &r.params).collect()
    };
    let started = Instant::now();
    let mut rooms = Vec::new();
    for p in params {
        match tokio::time::timeout(config.store.timeout, store.stats(p)).await {
            Ok(Ok(st)) if !config.rooms.is_empty() => rooms.push(format!(
                "room {}: {} waiting, {} active",
                p.name, st.waiting, st.active
            )),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Reached {
                    what,
                    ok: false,
                    detail: format!("does not answer: {e}"),
                }
            }
            Err(_) => {
                return Reached {
                    what,
                    ok: false,
                    detail: format!(
                        "does not answer within store.timeout ({})",
                        humantime::format_duration(config.store.timeout)
                    ),
                }
            }
        }
    }
    let mut detail = if config.store.backend == StoreBackend::Memory {
        "in this process: nothing to reach".to_string()
    } else {
        format!("answers in {}", ms(started.elapsed()))
    };
    if !rooms.is_empty() {
        let _ = write!(detail, " ({})", rooms.join("; "));
    }
    Reached {
        what,
        ok: true,
        detail,
    }
}

/// Every server of an upstream (each address of `addr` or of each entry of `addrs`).
async fn upstream(u: &crate::config::Upstream) -> Vec<Reached> {
    let mut out = Vec::new();
    for addr in u.resolved.iter().flat_map(|(_, a)| a) {
        out.push(server(u, *addr).await);
    }
    if out.is_empty() {
        out.push(server(u, u.addr).await);
    }
    out
}

async fn server(u: &crate::config::Upstream, addr: std::net::SocketAddr) -> Reached {
    let what = format!("upstream  {} {}", u.name, addr);
    let started = Instant::now();
    match tokio::time::timeout(u.connect_timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Reached {
            what,
            ok: true,
            detail: format!(
                "connects in {}{}",
                ms(started.elapsed()),
                if u.tls { " (TCP; TLS not tried)" } else { "" }
            ),
        },
        Ok(Err(e)) => Reached {
            what,
            ok: false,
            detail: format!("cannot connect: {e}"),
        },
        Err(_) => Reached {
            what,
            ok: false,
            detail: format!(
                "no connection within connect-timeout ({})",
                humantime::format_duration(u.connect_timeout)
            ),
        },
    }
}

/// Reaches the store, then every upstream.
pub fn reach(config: &Config) -> Vec<Reached> {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return vec![Reached {
                what: "connect".into(),
                ok: false,
                detail: format!("cannot start a runtime: {e}"),
            }]
        }
    };
    runtime.block_on(async {
        let mut out = vec![store(config).await];
        for u in &config.upstreams {
            out.extend(upstream(u).await);
        }
        out
    })
}

/// The report `check --connect` prints under the summary.
pub fn report(reached: &[Reached]) -> String {
    let mut s = String::from("  connect\n");
    for r in reached {
        let _ = writeln!(
            s,
            "    {} {}: {}",
            if r.ok { "ok  " } else { "FAIL" },
            r.what,
            r.detail
        );
    }
    s
}
