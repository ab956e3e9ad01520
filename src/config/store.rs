//! Validation of the `[store]` table: the backend and where it lives (one Redis, a cluster, or
//! a primary found through Sentinel), the timeout and the circuit breaker. Part of
//! [`super::build`].
//!
//! `backend = "redis"` takes exactly one of `redis-url`, `redis-cluster` and `redis-sentinel`;
//! `sentinel-master` goes with `redis-sentinel` and nothing else. Each mistake names the key
//! to change, so `anteroom check` points at its line.

use super::build::{k, Builder};
use super::file::*;
use super::locate::KeyPath;
use super::model::*;

impl Builder<'_> {
    pub(super) fn store(&mut self, s: StoreFile) -> StoreConfig {
        let key = k("store");
        let timeout = self.duration(
            &key.key("timeout"),
            s.timeout.as_deref(),
            DEFAULT_STORE_TIMEOUT,
        );
        let backend_name = s.backend.as_deref().unwrap_or("memory");
        let backend = match backend_name {
            "memory" => {
                if let Some(name) = address_keys(&s).first() {
                    self.fail(
                        key.key(name),
                        "is set but backend is \"memory\"",
                        format!("set backend = \"redis\", or remove {name}"),
                    );
                } else if s.sentinel_master.is_some() {
                    self.fail(
                        key.key("sentinel-master"),
                        "is set but backend is \"memory\"",
                        "remove sentinel-master (it names the primary that redis-sentinel finds)",
                    );
                }
                StoreBackend::Memory
            }
            "redis" => self.redis_backend(&key, &s),
            other => {
                self.fail(
                    key.key("backend"),
                    format!("unknown backend {other:?}"),
                    "use \"memory\" (one instance) or \"redis\" (several instances)",
                );
                StoreBackend::Memory
            }
        };
        let breaker_failures = self
            .positive(
                &key.key("breaker-failures"),
                s.breaker_failures,
                Some(u64::from(DEFAULT_BREAKER_FAILURES)),
            )
            .min(1000) as u32;
        let breaker_cooldown = self.duration(
            &key.key("breaker-cooldown"),
            s.breaker_cooldown.as_deref(),
            DEFAULT_BREAKER_COOLDOWN,
        );
        StoreConfig {
            backend,
            timeout,
            breaker_failures,
            breaker_cooldown,
        }
    }

    /// `backend = "redis"`: exactly one way to find Redis.
    fn redis_backend(&mut self, key: &KeyPath, s: &StoreFile) -> StoreBackend {
        let set = address_keys(s);
        if set.len() > 1 {
            self.fail(
                key.key(set[1]),
                format!("is set together with {}", set[0]),
                "use exactly one of redis-url (one Redis), redis-cluster (a cluster) \
                 or redis-sentinel (a primary and replicas watched by Sentinel)",
            );
            return StoreBackend::Memory;
        }
        if s.sentinel_master.is_some() && s.redis_sentinel.is_none() {
            self.fail(
                key.key("sentinel-master"),
                "is set without redis-sentinel",
                "add redis-sentinel = [\"redis://127.0.0.1:26379\", ...], or remove sentinel-master",
            );
        }
        if let Some(url) = &s.redis_url {
            let url = self.string(&key.key("redis-url"), url).unwrap_or_default();
            self.redis_url(&key.key("redis-url"), &url);
            return StoreBackend::Redis { url };
        }
        if let Some(urls) = &s.redis_cluster {
            if let Some(urls) = self.url_list(key, "redis-cluster", urls, "7001") {
                return StoreBackend::RedisCluster { urls };
            }
            return StoreBackend::Memory;
        }
        if let Some(urls) = &s.redis_sentinel {
            let urls = self.url_list(key, "redis-sentinel", urls, "26379");
            let master = match &s.sentinel_master {
                None => {
                    self.fail(
                        key.key("redis-sentinel"),
                        "is set without sentinel-master",
                        "add sentinel-master = \"NAME\", the name the sentinels monitor \
                         (`sentinel monitor NAME host port quorum` in sentinel.conf)",
                    );
                    None
                }
                Some(raw) => {
                    let p = key.key("sentinel-master");
                    let name = self.string(&p, raw).unwrap_or_default();
                    if name.trim().is_empty() || name.chars().any(char::is_whitespace) {
                        self.fail(
                            p,
                            format!("{name:?} is not a master name"),
                            "write the name the sentinels monitor, e.g. \"mymaster\"",
                        );
                        None
                    } else {
                        Some(name)
                    }
                }
            };
            return match (urls, master) {
                (Some(urls), Some(master)) => StoreBackend::RedisSentinel { urls, master },
                _ => StoreBackend::Memory,
            };
        }
        self.fail(
            key.key("backend"),
            "is \"redis\" but no Redis address is set",
            "add redis-url = \"redis://127.0.0.1:6379\" (or redis-cluster = [...], \
             or redis-sentinel = [...] with sentinel-master)",
        );
        StoreBackend::Memory
    }

    /// A non-empty list of Redis URLs under `[store] NAME`.
    fn url_list(
        &mut self,
        key: &KeyPath,
        name: &str,
        urls: &[String],
        port: &str,
    ) -> Option<Vec<String>> {
        if urls.is_empty() {
            self.fail(
                key.key(name),
                "is empty",
                format!("list at least one address, like [\"redis://127.0.0.1:{port}\"]"),
            );
            return None;
        }
        let mut out = Vec::new();
        for (i, u) in urls.iter().enumerate() {
            let p = key.key(name).index(i);
            let u = self.string(&p, u).unwrap_or_default();
            self.redis_url(&p, &u);
            out.push(u);
        }
        Some(out)
    }

    /// A Redis URL as the client that `run` starts will read it (its own parser), so a URL that
    /// passes `check` connects. The URL is told without its password.
    fn redis_url(&mut self, key: &KeyPath, url: &str) {
        let shown = super::model::without_secret(url);
        let problem = if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            format!("{shown:?} is not a Redis URL")
        } else {
            match ::redis::IntoConnectionInfo::into_connection_info(url) {
                Ok(_) => return,
                Err(e) => format!("{shown:?} does not parse as a Redis URL ({e})"),
            }
        };
        self.fail(
            key.clone(),
            problem,
            "write it like \"redis://127.0.0.1:6379\" or \"redis://:PASSWORD@HOST:PORT/DB\" (rediss:// for TLS)",
        );
    }
}

/// The address keys that are set, in the order the file format documents them.
fn address_keys(s: &StoreFile) -> Vec<&'static str> {
    [
        ("redis-url", s.redis_url.is_some()),
        ("redis-cluster", s.redis_cluster.is_some()),
        ("redis-sentinel", s.redis_sentinel.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}
