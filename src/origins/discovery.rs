//! The servers of an upstream from its `addrs`: addresses as they are, names resolved again at
//! every discovery. A name that does not resolve keeps the addresses it had (a DNS hiccup takes
//! no server out); the health check is what takes a dead one out.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Mutex;

use pingora::lb::discovery::ServiceDiscovery;
use pingora::lb::Backend;

pub struct Names {
    names: Vec<String>,
    /// Per name, the addresses it had last (at first: what the configuration resolved).
    known: Mutex<HashMap<String, Vec<SocketAddr>>>,
    /// The first discovery answers from `known` without a lookup.
    first: Mutex<bool>,
}

impl Names {
    pub fn new(names: Vec<String>, resolved: &[(String, Vec<SocketAddr>)]) -> Self {
        Self {
            names,
            known: Mutex::new(resolved.iter().cloned().collect()),
            first: Mutex::new(true),
        }
    }

    fn backends(&self) -> BTreeSet<Backend> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known
            .values()
            .flatten()
            .filter_map(|a| Backend::new(&a.to_string()).ok())
            .collect()
    }
}

#[async_trait::async_trait]
impl ServiceDiscovery for Names {
    async fn discover(&self) -> pingora::Result<(BTreeSet<Backend>, HashMap<u64, bool>)> {
        let first = std::mem::replace(
            &mut *self.first.lock().unwrap_or_else(|e| e.into_inner()),
            false,
        );
        if !first {
            for name in &self.names {
                // An address needs no lookup; a name does (tokio's resolver, off the workers).
                let found: Vec<SocketAddr> = match name.parse::<SocketAddr>() {
                    Ok(a) => vec![a],
                    Err(_) => match tokio::net::lookup_host(name.as_str()).await {
                        Ok(addrs) => addrs.collect(),
                        Err(e) => {
                            tracing::warn!(name, error = %e, "an origin server's name did not resolve; its known addresses stay");
                            continue;
                        }
                    },
                };
                if !found.is_empty() {
                    let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
                    known.insert(name.clone(), found);
                }
            }
        }
        Ok((self.backends(), HashMap::new()))
    }
}

/// Runs `f` when it completes without waiting (the first discovery does); otherwise leaves it
/// to the background service.
pub fn now<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_discovery_answers_from_the_configuration_at_once() {
        let a: SocketAddr = "127.0.0.1:9001".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:9002".parse().unwrap();
        let names = Names::new(
            vec!["127.0.0.1:9001".into(), "shop.invalid:9002".into()],
            &[
                ("127.0.0.1:9001".into(), vec![a]),
                ("shop.invalid:9002".into(), vec![b]),
            ],
        );
        let (found, _) = now(names.discover()).expect("no waiting").expect("found");
        let addrs: Vec<String> = found.iter().map(|b| b.addr.to_string()).collect();
        assert_eq!(addrs, ["127.0.0.1:9001", "127.0.0.1:9002"]);
    }

    #[tokio::test]
    async fn a_name_that_stops_resolving_keeps_its_addresses_and_one_that_resolves_is_read_again() {
        let old: SocketAddr = "127.0.0.1:9002".parse().unwrap();
        let stale: SocketAddr = "10.9.9.9:80".parse().unwrap();
        let names = Names::new(
            vec!["shop.invalid:9002".into(), "localhost:80".into()],
            &[
                ("shop.invalid:9002".into(), vec![old]),
                ("localhost:80".into(), vec![stale]),
            ],
        );
        names.discover().await.unwrap();
        let (found, _) = names.discover().await.unwrap();
        let addrs: Vec<String> = found.iter().map(|b| b.addr.to_string()).collect();
        assert!(addrs.contains(&"127.0.0.1:9002".to_string()), "{addrs:?}");
        assert!(
            !addrs.contains(&"10.9.9.9:80".to_string()),
            "localhost resolved anew: {addrs:?}"
        );
        assert!(
            addrs.iter().any(|a| a == "127.0.0.1:80" || a == "[::1]:80"),
            "{addrs:?}"
        );
    }
}
