//! The one-screen summary `anteroom check` prints of a valid file.

use std::fmt::Write as _;

use crate::config::{Config, StoreBackend};
use crate::route::{OtherHosts, PathMatching};

fn dur(d: std::time::Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The one-screen summary `check` prints.
pub(super) fn summary(c: &Config) -> String {
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
    // Who may name the client's address: shown, as who skips a line is (review).
    if !c.listen.trusted_proxies.is_empty() {
        let nets: Vec<String> = c
            .listen
            .trusted_proxies
            .iter()
            .map(ToString::to_string)
            .collect();
        let _ = writeln!(
            s,
            "  trusted   {} (their forwarding headers are believed)",
            nets.join(", ")
        );
    }
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
            dur(r.abandon_after),
            r.on_store_error.as_str(),
            consume.join(", "),
            r.template
                .as_ref()
                .map(|t| format!(", template {}", t.display()))
                .unwrap_or_default()
        );
        if !r.bypass.is_empty() {
            let rules: Vec<String> = r.bypass.iter().map(|b| b.label()).collect();
            let _ = writeln!(s, "            past the line: {}", rules.join(", "));
        }
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
        if let Some(j) = &r.join_limit {
            let _ = writeln!(
                s,
                "            join limit: {} new visitors a client per {} (then 429)",
                j.per_ip,
                dur(j.per)
            );
        }
        if r.waiting_status != 200 || r.crawlers == crate::config::model::CrawlerPolicy::Wait {
            let _ = writeln!(
                s,
                "            waiting page status {}; search crawlers {}",
                r.waiting_status,
                match r.crawlers {
                    crate::config::model::CrawlerPolicy::Refuse => "refused (503)",
                    crate::config::model::CrawlerPolicy::Wait => "shown the waiting page",
                }
            );
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
        if let Some(d) = r.order_receipt {
            let _ = writeln!(
                s,
                "            order receipt: GET and HEAD pass for {} after an order",
                dur(d)
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
