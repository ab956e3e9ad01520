//! `[[upstream]] addr` or `addrs`, `balance`, `health-check` and `resolve-every`: the servers
//! of an upstream and how one is chosen (see [`crate::origins`]). Part of [`super::build`].

use std::net::{SocketAddr, ToSocketAddrs};

use super::build::Builder;
use super::file::UpstreamFile;
use super::locate::KeyPath;
use super::model::{Balance, HealthCheck, DEFAULT_HEALTH_EVERY, DEFAULT_RESOLVE_EVERY};

/// The servers of an upstream as the configuration names them.
pub(super) struct Servers {
    /// The first address of the first entry.
    pub addr: SocketAddr,
    /// The first entry as written (its host part is the default `sni`).
    pub first: String,
    /// `addrs` as written; empty with `addr`.
    pub addrs: Vec<String>,
    pub resolved: Vec<(String, Vec<SocketAddr>)>,
}

impl Builder<'_> {
    pub(super) fn upstream_servers(&mut self, p: &KeyPath, u: &UpstreamFile) -> Option<Servers> {
        let entries: Vec<(KeyPath, &str)> = match (&u.addr, &u.addrs) {
            (Some(a), None) => vec![(p.key("addr"), a.as_str())],
            (None, Some(list)) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, a)| (p.key("addrs").index(i), a.as_str()))
                .collect(),
            (Some(_), Some(_)) => {
                self.fail(
                    p.key("addrs"),
                    "is given with addr",
                    "use addr for one server or addrs for several, not both",
                );
                return None;
            }
            _ => {
                self.fail(
                    p.key("addr"),
                    "is required (or addrs, for several servers)",
                    "add addr = \"127.0.0.1:9000\", or addrs = [\"10.0.0.5:8080\", \"10.0.0.6:8080\"]",
                );
                return None;
            }
        };
        let mut resolved = Vec::new();
        for (key, raw) in &entries {
            let text = self.string(key, raw)?;
            // A URL's parts: said as such, not as a name that does not resolve (review).
            if let Some(part) = not_host_port(&text) {
                self.fail(
                    key.clone(),
                    format!("{text:?} has {part}: addr takes host:port only"),
                    "write host:port, e.g. \"127.0.0.1:9000\" (for HTTPS to the shop add tls = true)",
                );
                return None;
            }
            let found: Vec<SocketAddr> = match text.parse::<SocketAddr>() {
                Ok(a) => vec![a],
                Err(_) => text
                    .to_socket_addrs()
                    .map(|it| it.collect())
                    .unwrap_or_default(),
            };
            if found.is_empty() {
                self.fail(
                    key.clone(),
                    format!("{text:?} is not an address that resolves here"),
                    "write host:port (e.g. \"127.0.0.1:9000\" or \"shop.internal:80\") with a name that resolves where anteroom (or check) runs",
                );
                return None;
            }
            if found.iter().any(|a| a.port() == 0) {
                self.fail(
                    key.clone(),
                    format!("{text:?} names port 0, on which no server can be reached"),
                    "write the port the shop listens on, e.g. \"127.0.0.1:9000\"",
                );
                return None;
            }
            if resolved.iter().any(|(t, _)| t == &text) {
                self.fail(
                    key.clone(),
                    format!("{text:?} is listed twice"),
                    "list each server once",
                );
                return None;
            }
            resolved.push((text, found));
        }
        let (first, addrs) = resolved.first().map(|(t, a)| (t.clone(), a.clone()))?;
        Some(Servers {
            addr: *addrs.first()?,
            first,
            addrs: if u.addrs.is_some() {
                resolved.iter().map(|(t, _)| t.clone()).collect()
            } else {
                Vec::new()
            },
            resolved,
        })
    }

    pub(super) fn upstream_balance(&mut self, p: &KeyPath, u: &UpstreamFile) -> Balance {
        match u.balance.as_deref() {
            None | Some("round-robin") => Balance::RoundRobin,
            Some("visitor") => Balance::Visitor,
            Some(other) => {
                self.fail(
                    p.key("balance"),
                    format!("unknown value {other:?}"),
                    "use \"round-robin\" or \"visitor\" (a visitor stays on one server)",
                );
                Balance::RoundRobin
            }
        }
    }

    pub(super) fn upstream_health(&mut self, p: &KeyPath, u: &UpstreamFile) -> Option<HealthCheck> {
        let h = u.health_check.as_ref()?;
        let hp = p.key("health-check");
        let path = self.string(&hp.key("path"), &h.path)?;
        if !path.starts_with('/') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            self.fail(
                hp.key("path"),
                format!("{path:?} is not a path"),
                "write the path the origin answers 200 on, e.g. path = \"/health\"",
            );
            return None;
        }
        let every = self.duration_at_most(
            &hp.key("every"),
            h.every.as_deref(),
            (
                DEFAULT_HEALTH_EVERY,
                std::time::Duration::from_secs(3600),
                false,
            ),
            "a server that went down would be sent requests that long before a check saw it",
        );
        Some(HealthCheck { path, every })
    }

    pub(super) fn upstream_resolve_every(
        &mut self,
        p: &KeyPath,
        u: &UpstreamFile,
    ) -> std::time::Duration {
        self.duration_at_most(
            &p.key("resolve-every"),
            u.resolve_every.as_deref(),
            (
                DEFAULT_RESOLVE_EVERY,
                std::time::Duration::from_secs(86_400),
                false,
            ),
            "a shop's new address would go unseen that long",
        )
    }
}

/// What in an upstream `addr` is not host:port: a scheme, a path or user information.
fn not_host_port(text: &str) -> Option<&'static str> {
    if text.contains("://") {
        Some("a scheme")
    } else if text.contains('@') {
        Some("user information")
    } else if text.contains('/') {
        Some("a path")
    } else {
        None
    }
}
