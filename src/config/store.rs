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
        let mut timeout = self.duration(
            &key.key("timeout"),
            s.timeout.as_deref(),
            DEFAULT_STORE_TIMEOUT,
        );
        // Found by review: "1ns" passed, and every store call timed out.
        if timeout < MIN_STORE_TIMEOUT {
            self.fail(
                key.key("timeout"),
                format!(
                    "{} is shorter than any store call can answer in: every call would time out",
                    humantime::format_duration(timeout)
                ),
                "write at least \"1ms\" (the default is 250ms)",
            );
            timeout = DEFAULT_STORE_TIMEOUT;
        }
        // Found by review r84c: "300d" passed, and while Redis stalled every request waited
        // for it, the `on-store-error` policy never asked.
        if timeout > MAX_STORE_TIMEOUT {
            self.fail(
                key.key("timeout"),
                format!(
                    "{} is longer than a visitor can wait for each request while the store \
                     stalls (at most {})",
                    humantime::format_duration(timeout),
                    humantime::format_duration(MAX_STORE_TIMEOUT)
                ),
                "write a few hundred milliseconds (the default is 250ms)",
            );
            timeout = DEFAULT_STORE_TIMEOUT;
        }
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
        let failures_key = key.key("breaker-failures");
        let mut breaker_failures = self.positive(
            &failures_key,
            s.breaker_failures,
            Some(u64::from(DEFAULT_BREAKER_FAILURES)),
        );
        // Refused, not cut to the bound in silence (found by review: 5000 ran as 1000).
        if breaker_failures > 1000 {
            self.fail(
                failures_key,
                format!("{breaker_failures} is more than 1000: the breaker would hardly ever open"),
                "write at most 1000 (the default is 5)",
            );
            breaker_failures = u64::from(DEFAULT_BREAKER_FAILURES);
        }
        let breaker_failures = breaker_failures as u32;
        let breaker_cooldown = self.duration_at_most(
            &key.key("breaker-cooldown"),
            s.breaker_cooldown.as_deref(),
            (
                DEFAULT_BREAKER_COOLDOWN,
                std::time::Duration::from_secs(300),
                false,
            ),
            "a room would stay held that long after one stall of the store",
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
            if let Some(list) = &urls {
                self.sentinel_count(key, list);
            }
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
    /// Only a node a majority of the listed sentinels names is used: a sentinel listed twice
    /// would count twice (found by review: with one of three listed twice, a stale sentinel
    /// made the majority alone), and with two listed one down leaves no majority.
    fn sentinel_count(&mut self, key: &KeyPath, urls: &[String]) {
        use ::redis::IntoConnectionInfo;
        let mut seen: Vec<String> = Vec::new();
        for (i, u) in urls.iter().enumerate() {
            let Ok(info) = u.as_str().into_connection_info() else {
                continue;
            };
            let addr = info.addr().to_string().to_ascii_lowercase();
            if seen.contains(&addr) {
                self.fail(
                    key.key("redis-sentinel").index(i),
                    format!("lists the sentinel at {addr} a second time"),
                    "list each sentinel once: only a node a majority of the listed sentinels names is used",
                );
            }
            seen.push(addr);
        }
        if urls.len() == 2 {
            self.warn(
                key.key("redis-sentinel"),
                "lists two sentinels: with one of them down there is no majority, and the store is out of reach",
                "list three or more (or one): only a node a majority of the listed sentinels names is used",
            );
        }
    }

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
        let before = self.problems.len();
        for (i, u) in urls.iter().enumerate() {
            let p = key.key(name).index(i);
            let u = self.string(&p, u).unwrap_or_default();
            self.redis_url(&p, &u);
            out.push(u);
        }
        // A cluster's list is also checked whole, by the client `run` builds (found by review:
        // nodes with different passwords or TLS modes passed `check`, then `run` refused).
        if name == "redis-cluster" && self.problems.len() == before {
            if let Err(e) = ::redis::cluster::ClusterClient::new(out.iter().map(String::as_str)) {
                self.fail(
                    key.key(name),
                    format!(
                        "is refused by the Redis cluster client: {}",
                        e.kind_and_detail()
                    ),
                    "give every node the same password and the same scheme (redis:// or rediss://)",
                );
            }
        }
        Some(out)
    }

    /// A Redis URL as the client that `run` starts will read it (its own parser), so a URL that
    /// passes `check` connects. The URL is told without its password.
    fn redis_url(&mut self, key: &KeyPath, url: &str) {
        // A URL that does not parse is not shown: where its password is cannot be told (found
        // by review: "redis://:PASSWORD" without a host was echoed whole).
        let problem = if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            "is not a Redis URL: it does not begin with redis:// or rediss:// (the value is not shown: it may hold a password)".to_string()
        } else {
            match ::redis::IntoConnectionInfo::into_connection_info(url) {
                Ok(info) => {
                    // A Redis has 16 databases unless its `databases` says more: a higher one
                    // passed `check` and failed every connection (found by review).
                    let db = info.redis_settings().db();
                    if db >= 16 {
                        self.warn(
                            key.clone(),
                            format!("names database {db}: a Redis has 16 (0 to 15) unless its databases setting says more"),
                            "use a database from 0 to 15, or check that the server's databases setting covers it (check --connect reaches it)",
                        );
                    }
                    return;
                }
                Err(e) => format!(
                    "does not parse as a Redis URL: {} (the value is not shown: it may hold a password)",
                    e.kind_and_detail()
                ),
            }
        };
        self.fail(
            key.clone(),
            problem,
            "write it like \"redis://127.0.0.1:6379\" or \"redis://:PASSWORD@HOST:PORT/DB\" (rediss:// for TLS)",
        );
    }

    /// A visitor whose turn comes while their polls do not reach the store (an open breaker)
    /// keeps the claim only if the instance's next admission step reaches it within
    /// `claim-ttl`, and that step waits out the breaker's cooldown and two ticks: with a
    /// cooldown as long, such a turn runs out (found by review, with both at 3 s).
    pub(super) fn warn_claims_past_the_cooldown(
        &mut self,
        rooms: &[RoomConfig],
        store: &StoreConfig,
    ) {
        for (i, r) in rooms.iter().enumerate() {
            let wait = store.breaker_cooldown + 2 * r.params.tick;
            if wait >= r.params.claim_ttl {
                let f = humantime::format_duration;
                self.warn(
                    k("room").index(i).key("claim-ttl"),
                    format!(
                        "({}) is not longer than [store] breaker-cooldown ({}) and two ticks: a visitor whose turn comes while the breaker is open loses it",
                        f(r.params.claim_ttl),
                        f(store.breaker_cooldown)
                    ),
                    format!(
                        "make claim-ttl longer than {} (the default is 90s), or lower breaker-cooldown",
                        f(wait)
                    ),
                );
            }
        }
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

/// What a Redis client error says without the text it was given: its kind and detail (the
/// client's messages name no URL, but a detail is cut where a URL could begin).
trait KindAndDetail {
    fn kind_and_detail(&self) -> String;
}

impl KindAndDetail for ::redis::RedisError {
    fn kind_and_detail(&self) -> String {
        let text = self.to_string();
        match text.find("://") {
            Some(i) => text[..text[..i].rfind(' ').unwrap_or(0)].trim().to_string(),
            None => text,
        }
    }
}
