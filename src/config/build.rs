//! From the file mirror to the validated [`Config`]: defaults, `env:NAME`, and cross-field checks.
//!
//! Every check that can fail names the key it is about; [`super::load`] turns the key into a
//! `file:line:col`. Checks collect all problems rather than stopping at the first, so an
//! operator fixes a broken file in one round.

use std::collections::HashSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::file::*;
use super::locate::KeyPath;
use super::model::*;
use crate::cookie::CookieKey;
use crate::route::{path_covers, HostPattern};
use crate::store::RoomParams;

/// A problem found while validating, before it is given a position.
#[derive(Debug)]
pub struct Problem {
    pub key: KeyPath,
    pub what: String,
    pub fix: String,
}

pub(super) struct Builder<'a> {
    pub problems: Vec<Problem>,
    /// The directory of the config file, for relative template paths.
    pub base_dir: &'a Path,
}

fn k(path: &str) -> KeyPath {
    KeyPath::root().key(path)
}

impl Builder<'_> {
    fn fail(&mut self, key: KeyPath, what: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(Problem {
            key,
            what: what.into(),
            fix: fix.into(),
        });
    }

    /// Resolves `env:NAME` to the variable's value.
    fn string(&mut self, key: &KeyPath, raw: &str) -> Option<String> {
        match raw.strip_prefix("env:") {
            None => Some(raw.to_string()),
            Some(name) => match std::env::var(name) {
                Ok(v) if !v.is_empty() => Some(v),
                Ok(_) => {
                    self.fail(
                        key.clone(),
                        format!("environment variable {name} is empty"),
                        format!("set {name} to a value, or write the value inline"),
                    );
                    None
                }
                Err(_) => {
                    self.fail(
                        key.clone(),
                        format!("environment variable {name} is not set"),
                        format!("export {name}=..., or write the value inline"),
                    );
                    None
                }
            },
        }
    }

    /// Like [`Self::duration`], but "0s" is allowed.
    fn duration_or_zero(
        &mut self,
        key: &KeyPath,
        raw: Option<&str>,
        default: Duration,
    ) -> Duration {
        match raw.map(str::trim) {
            Some("0" | "0s" | "0ms") => Duration::ZERO,
            other => self.duration(key, other, default),
        }
    }

    fn duration(&mut self, key: &KeyPath, raw: Option<&str>, default: Duration) -> Duration {
        let Some(raw) = raw else { return default };
        let Some(text) = self.string(key, raw) else {
            return default;
        };
        match humantime::parse_duration(text.trim()) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                self.fail(
                    key.clone(),
                    "must be longer than zero",
                    "write a positive duration such as \"250ms\", \"60s\" or \"10m\"",
                );
                default
            }
            Err(e) => {
                self.fail(
                    key.clone(),
                    format!("{text:?} is not a duration ({e})"),
                    "write a duration such as \"250ms\", \"60s\" or \"10m\"",
                );
                default
            }
        }
    }

    fn socket(&mut self, key: &KeyPath, raw: Option<&str>, default: &str) -> SocketAddr {
        let fallback: SocketAddr = default
            .parse()
            .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
        let text = match raw {
            None => return fallback,
            Some(raw) => match self.string(key, raw) {
                Some(t) => t,
                None => return fallback,
            },
        };
        match text.parse::<SocketAddr>() {
            Ok(a) => a,
            Err(_) => {
                self.fail(
                    key.clone(),
                    format!("{text:?} is not an IP address with a port"),
                    "write it like \"127.0.0.1:8080\" or \"[::]:8080\"",
                );
                fallback
            }
        }
    }

    /// `10.0.0.0/8`, `2001:db8::/32`, or a single address.
    fn cidrs(&mut self, key: &KeyPath, raw: &[String]) -> Vec<ipnet::IpNet> {
        let mut out = Vec::new();
        for (i, r) in raw.iter().enumerate() {
            let Some(text) = self.string(&key.index(i), r) else {
                continue;
            };
            let parsed = text
                .parse::<ipnet::IpNet>()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from));
            match parsed {
                Ok(n) => out.push(n),
                Err(_) => self.fail(
                    key.index(i),
                    format!("{text:?} is not an address or CIDR range"),
                    "write it like \"10.0.0.0/8\", \"192.0.2.10\" or \"2001:db8::/32\"",
                ),
            }
        }
        out
    }

    fn positive(&mut self, key: &KeyPath, raw: Option<i64>, default: Option<u64>) -> u64 {
        match (raw, default) {
            (Some(v), _) if v >= 1 => v as u64,
            (Some(v), _) => {
                self.fail(
                    key.clone(),
                    format!("must be at least 1, not {v}"),
                    "write a positive whole number",
                );
                default.unwrap_or(1)
            }
            (None, Some(d)) => d,
            (None, None) => {
                self.fail(key.clone(), "is required", "add it to this [[room]]");
                1
            }
        }
    }

    pub fn config(&mut self, f: FileConfig, source: &str) -> Config {
        let listen_f = f.listen.unwrap_or_default();
        let listen = Listen {
            http: self.socket(
                &k("listen").key("http"),
                listen_f.http.as_deref(),
                DEFAULT_HTTP,
            ),
            admin: self.socket(
                &k("listen").key("admin"),
                listen_f.admin.as_deref(),
                DEFAULT_ADMIN,
            ),
            trusted_proxies: self.cidrs(
                &k("listen").key("trusted-proxies"),
                &listen_f.trusted_proxies,
            ),
        };
        if listen.http == listen.admin {
            self.fail(
                k("listen").key("admin"),
                "is the same address as listen.http",
                "give the admin API its own port",
            );
        }
        let store = self.store(f.store.unwrap_or_default());
        let cookie = self.cookie(f.cookie);
        let admin = self.admin(f.admin.unwrap_or_default());
        let server = self.server(f.server.unwrap_or_default());
        let upstreams = self.upstreams(&f.upstream);
        let default_upstream = self.default_upstream(f.default.as_ref(), &upstreams);
        let rooms = self.rooms(&f.room, &upstreams, default_upstream);
        Config {
            source: source.to_string(),
            listen,
            store,
            cookie,
            admin,
            server,
            upstreams,
            default_upstream,
            rooms,
        }
    }

    fn store(&mut self, s: StoreFile) -> StoreConfig {
        let key = k("store");
        let timeout = self.duration(
            &key.key("timeout"),
            s.timeout.as_deref(),
            DEFAULT_STORE_TIMEOUT,
        );
        let backend_name = s.backend.as_deref().unwrap_or("memory");
        let backend = match backend_name {
            "memory" => {
                if s.redis_url.is_some() || s.redis_cluster.is_some() {
                    self.fail(
                        key.key("backend"),
                        "is \"memory\" but Redis addresses are set",
                        "set backend = \"redis\", or remove redis-url / redis-cluster",
                    );
                }
                StoreBackend::Memory
            }
            "redis" => match (&s.redis_url, &s.redis_cluster) {
                (Some(url), None) => {
                    let url = self.string(&key.key("redis-url"), url).unwrap_or_default();
                    self.redis_url(&key.key("redis-url"), &url);
                    StoreBackend::Redis { url }
                }
                (None, Some(urls)) if !urls.is_empty() => {
                    let mut out = Vec::new();
                    for (i, u) in urls.iter().enumerate() {
                        let p = key.key("redis-cluster").index(i);
                        let u = self.string(&p, u).unwrap_or_default();
                        self.redis_url(&p, &u);
                        out.push(u);
                    }
                    StoreBackend::RedisCluster { urls: out }
                }
                (Some(_), Some(_)) => {
                    self.fail(
                        key.key("redis-cluster"),
                        "is set together with redis-url",
                        "use redis-url for one Redis, or redis-cluster for a cluster, not both",
                    );
                    StoreBackend::Memory
                }
                _ => {
                    self.fail(
                        key.key("backend"),
                        "is \"redis\" but no Redis address is set",
                        "add redis-url = \"redis://127.0.0.1:6379\" (or redis-cluster = [...])",
                    );
                    StoreBackend::Memory
                }
            },
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

    fn redis_url(&mut self, key: &KeyPath, url: &str) {
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            self.fail(
                key.clone(),
                format!("{url:?} is not a Redis URL"),
                "write it like \"redis://127.0.0.1:6379\" (or rediss:// for TLS)",
            );
        }
    }

    fn cookie(&mut self, c: Option<CookieFile>) -> CookieConfig {
        let key = k("cookie");
        let Some(c) = c else {
            self.fail(
                key.key("keys"),
                "the [cookie] table is missing: admissions cannot be signed",
                "add [cookie] with keys = [\"env:ANTEROOM_COOKIE_KEY\"] (generate: openssl rand -base64 32)",
            );
            return CookieConfig {
                keys: Vec::new(),
                secure: None,
            };
        };
        if c.keys.is_empty() {
            self.fail(
                key.key("keys"),
                "no cookie key: admissions cannot be signed",
                "add keys = [\"env:ANTEROOM_COOKIE_KEY\"] (generate: openssl rand -base64 32)",
            );
        }
        let mut keys: Vec<CookieKey> = Vec::new();
        for (i, raw) in c.keys.iter().enumerate() {
            let p = key.key("keys").index(i);
            let Some(secret) = self.string(&p, raw) else {
                continue;
            };
            if secret.len() < MIN_COOKIE_KEY_LEN {
                self.fail(
                    p,
                    format!(
                        "is {} bytes long; at least {MIN_COOKIE_KEY_LEN} are needed",
                        secret.len()
                    ),
                    "generate a key with: openssl rand -base64 32",
                );
                continue;
            }
            let Some(ck) = CookieKey::new(secret.as_bytes()) else {
                self.fail(p, "was refused by HMAC-SHA256", "use another key");
                continue;
            };
            if keys.iter().any(|x| x.id() == ck.id()) {
                self.fail(p, "repeats an earlier key", "remove the duplicate");
                continue;
            }
            keys.push(ck);
        }
        CookieConfig {
            keys,
            secure: c.secure,
        }
    }

    fn admin(&mut self, a: AdminFile) -> AdminConfig {
        let key = k("admin").key("token");
        let token = a.token.as_deref().and_then(|raw| self.string(&key, raw));
        if let Some(t) = &token {
            if t.len() < 16 {
                self.fail(
                    key,
                    "is shorter than 16 characters",
                    "use a long random token, e.g. openssl rand -hex 24",
                );
            }
        }
        AdminConfig { token }
    }

    fn server(&mut self, s: ServerFile) -> ServerSettings {
        let key = k("server");
        let threads = match s.threads {
            Some(0) => {
                self.fail(
                    key.key("threads"),
                    "must be at least 1",
                    "set threads = 1 or more",
                );
                DEFAULT_THREADS
            }
            Some(n) => n,
            None => DEFAULT_THREADS,
        };
        ServerSettings {
            threads,
            work_stealing: s.work_stealing.unwrap_or(true),
            grace_period: self.duration_or_zero(
                &key.key("grace-period"),
                s.grace_period.as_deref(),
                DEFAULT_GRACE_PERIOD,
            ),
            shutdown_timeout: self.duration(
                &key.key("shutdown-timeout"),
                s.shutdown_timeout.as_deref(),
                DEFAULT_SHUTDOWN_TIMEOUT,
            ),
            upgrade_sock: s
                .upgrade_sock
                .as_deref()
                .and_then(|raw| self.string(&key.key("upgrade-sock"), raw))
                .unwrap_or_else(|| DEFAULT_UPGRADE_SOCK.to_string()),
            client_timeout: self.duration(
                &key.key("client-timeout"),
                s.client_timeout.as_deref(),
                DEFAULT_CLIENT_TIMEOUT,
            ),
            max_header_bytes: self.positive(
                &key.key("max-header-bytes"),
                s.max_header_bytes,
                Some(DEFAULT_MAX_HEADER_BYTES),
            ) as usize,
        }
    }

    fn upstreams(&mut self, ups: &[UpstreamFile]) -> Vec<Upstream> {
        let mut out: Vec<Upstream> = Vec::new();
        if ups.is_empty() {
            self.fail(
                k("upstream"),
                "no [[upstream]] is defined: there is no shop to send visitors to",
                "add [[upstream]] with name = \"shop\" and addr = \"127.0.0.1:9000\"",
            );
        }
        for (i, u) in ups.iter().enumerate() {
            let p = k("upstream").index(i);
            if u.name.is_empty() || out.iter().any(|o| o.name == u.name) {
                self.fail(
                    p.key("name"),
                    format!("upstream name {:?} is empty or used twice", u.name),
                    "give every [[upstream]] its own name",
                );
            }
            let Some(addr_text) = self.string(&p.key("addr"), &u.addr) else {
                continue;
            };
            let addr = match addr_text.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => addr_text
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut it| it.next()),
            };
            let Some(addr) = addr else {
                self.fail(
                    p.key("addr"),
                    format!("{addr_text:?} is not an address that resolves"),
                    "write host:port, e.g. \"127.0.0.1:9000\" or \"shop.internal:80\"",
                );
                continue;
            };
            let host = addr_text
                .rsplit_once(':')
                .map(|(h, _)| h)
                .unwrap_or(&addr_text);
            let sni = u
                .sni
                .clone()
                .unwrap_or_else(|| host.trim_matches(['[', ']']).to_string());
            let connect_timeout = self.duration(
                &p.key("connect-timeout"),
                u.connect_timeout.as_deref(),
                DEFAULT_CONNECT_TIMEOUT,
            );
            let read_timeout = self.duration(
                &p.key("read-timeout"),
                u.read_timeout.as_deref(),
                DEFAULT_READ_TIMEOUT,
            );
            let write_timeout = self.duration(
                &p.key("write-timeout"),
                u.write_timeout.as_deref(),
                DEFAULT_WRITE_TIMEOUT,
            );
            out.push(Upstream {
                name: u.name.clone(),
                addr,
                tls: u.tls.unwrap_or(false),
                sni,
                connect_timeout,
                read_timeout,
                write_timeout,
                error_pages: u.error_pages.unwrap_or(true),
            });
        }
        out
    }

    fn upstream_index(&mut self, key: KeyPath, name: &str, ups: &[Upstream]) -> usize {
        match ups.iter().position(|u| u.name == name) {
            Some(i) => i,
            None => {
                let known: Vec<&str> = ups.iter().map(|u| u.name.as_str()).collect();
                self.fail(
                    key,
                    format!("unknown upstream {name:?}"),
                    format!("use one of the [[upstream]] names: {}", known.join(", ")),
                );
                0
            }
        }
    }

    fn default_upstream(&mut self, d: Option<&DefaultFile>, ups: &[Upstream]) -> usize {
        match d {
            Some(d) => self.upstream_index(k("default").key("upstream"), &d.upstream, ups),
            None if ups.len() <= 1 => 0,
            None => {
                self.fail(
                    k("default"),
                    "several upstreams but no [default] upstream for requests outside every room",
                    "add [default] with upstream = \"NAME\"",
                );
                0
            }
        }
    }

    fn rooms(
        &mut self,
        rooms: &[RoomFile],
        ups: &[Upstream],
        default_up: usize,
    ) -> Vec<RoomConfig> {
        let mut out: Vec<RoomConfig> = Vec::new();
        let mut names = HashSet::new();
        // (host, path, room index) already claimed, for overlap checks.
        let mut claimed: Vec<(HostPattern, String, usize)> = Vec::new();
        for (i, r) in rooms.iter().enumerate() {
            let p = k("room").index(i);
            if !valid_room_name(&r.name) {
                self.fail(
                    p.key("name"),
                    format!("{:?} is not a valid room name", r.name),
                    "use 1-32 characters of a-z, 0-9, '-' and '_', starting with a letter or digit (it becomes the cookie name)",
                );
            } else if !names.insert(r.name.clone()) {
                self.fail(
                    p.key("name"),
                    format!("room {:?} is defined twice", r.name),
                    "give every [[room]] its own name",
                );
            }
            let upstream = match &r.upstream {
                Some(n) => self.upstream_index(p.key("upstream"), n, ups),
                None => default_up,
            };
            let hosts = self.hosts(&p, r.hosts.as_deref());
            let paths = self.paths(&p, &r.paths);
            for (pi, path) in paths.iter().enumerate() {
                for h in &hosts {
                    if let Some((_, _, other)) = claimed
                        .iter()
                        .find(|(oh, op, _)| op == path && oh.overlaps(h))
                    {
                        let other_name = rooms.get(*other).map(|o| o.name.as_str()).unwrap_or("?");
                        self.fail(
                            p.key("paths").index(pi),
                            format!("path {path:?} is already claimed by room {other_name:?} for an overlapping host"),
                            "give each path to one room, or separate the rooms by hosts",
                        );
                    }
                }
            }
            for path in &paths {
                for h in &hosts {
                    claimed.push((h.clone(), path.clone(), i));
                }
            }
            let rate = match r.admit_per_second {
                Some(v) if v.is_finite() && v > 0.0 && v <= 1_000_000.0 => v,
                Some(v) => {
                    self.fail(
                        p.key("admit-per-second"),
                        format!("must be above 0 and at most 1000000, not {v}"),
                        "size it from what the shop can take, e.g. 175",
                    );
                    1.0
                }
                None => {
                    self.fail(
                        p.key("admit-per-second"),
                        "is required",
                        "add admit-per-second = N: how many visitors per second the shop can take",
                    );
                    1.0
                }
            };
            let max_active = self.positive(&p.key("max-active"), r.max_active, None);
            let max_waiting = self.positive(
                &p.key("max-waiting"),
                r.max_waiting,
                Some(DEFAULT_MAX_WAITING),
            );
            let session_ttl = self.duration(
                &p.key("session-ttl"),
                r.session_ttl.as_deref(),
                DEFAULT_SESSION_TTL,
            );
            let claim_ttl = self.duration(
                &p.key("claim-ttl"),
                r.claim_ttl.as_deref(),
                DEFAULT_CLAIM_TTL,
            );
            let abandon_after = self.duration(
                &p.key("abandon-after"),
                r.abandon_after.as_deref(),
                DEFAULT_ABANDON_AFTER,
            );
            if abandon_after > MAX_ABANDON_AFTER {
                self.fail(
                    p.key("abandon-after"),
                    "must be at most 30m",
                    "a visitor silent that long has left; use a few times the slowest poll interval",
                );
            }
            let tick = self.duration(&p.key("tick"), r.tick.as_deref(), DEFAULT_TICK);
            if tick < Duration::from_millis(10) || tick > Duration::from_secs(10) {
                self.fail(
                    p.key("tick"),
                    "must be between 10ms and 10s",
                    "the seed's 100ms is a good start",
                );
            }
            let poll = self.poll(&p, r.poll.as_deref());
            if let Some(slowest) = poll.iter().map(|t| t.every).max() {
                if abandon_after <= slowest {
                    self.fail(
                        p.key("abandon-after"),
                        format!(
                            "({}) is not longer than the slowest poll interval ({}): visitors who do poll would lose their place",
                            humantime::format_duration(abandon_after),
                            humantime::format_duration(slowest)
                        ),
                        "make abandon-after several times the slowest poll interval",
                    );
                }
            }
            let on_store_error = match r.on_store_error.as_deref() {
                None | Some("local") => StorePolicy::Local,
                Some("open") => StorePolicy::Open,
                Some("closed") => StorePolicy::Closed,
                Some(other) => {
                    self.fail(
                        p.key("on-store-error"),
                        format!("unknown policy {other:?}"),
                        "use \"open\", \"closed\" or \"local\"",
                    );
                    StorePolicy::Local
                }
            };
            let consume = self.consume(&p, &r.consume, &paths);
            let template = r
                .template
                .as_ref()
                .and_then(|t| self.template(&p.key("template"), t));
            let join_limit = r.join_limit.as_ref().and_then(|j| {
                let jp = p.key("join-limit");
                let per = self.duration(&jp.key("per"), Some(&j.per), Duration::from_secs(60));
                if j.per_ip < 1 || j.per_ip > i64::from(u32::MAX) {
                    self.fail(
                        jp.key("per-ip"),
                        "must be at least 1",
                        "e.g. join-limit = { per-ip = 30, per = \"1m\" }",
                    );
                    return None;
                }
                Some(JoinLimit {
                    per_ip: j.per_ip as u32,
                    per,
                })
            });
            let waiting_status = match r.waiting_status {
                None => DEFAULT_WAITING_STATUS,
                Some(s) if (200..=599).contains(&s) => s as u16,
                Some(s) => {
                    self.fail(
                        p.key("waiting-status"),
                        format!("{s} is not an HTTP status"),
                        "use 200 (default) or 503",
                    );
                    DEFAULT_WAITING_STATUS
                }
            };
            let texts = self.texts(&p, r.texts.as_ref());
            out.push(RoomConfig {
                params: RoomParams {
                    name: Arc::from(r.name.as_str()),
                    admit_per_second: rate,
                    max_active,
                    max_waiting,
                    session_ttl,
                    claim_ttl,
                    abandon_after,
                    tick,
                },
                upstream,
                hosts,
                paths,
                on_store_error,
                consume,
                template,
                poll,
                join_limit,
                waiting_status,
                texts,
            });
        }
        out
    }

    fn texts(
        &mut self,
        p: &KeyPath,
        overrides: Option<
            &std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
        >,
    ) -> std::collections::BTreeMap<String, crate::texts::TextSet> {
        let mut all = std::collections::BTreeMap::new();
        for lang in crate::texts::LANGUAGES {
            if let Some(t) = crate::texts::builtin(lang) {
                all.insert(lang.to_string(), t);
            }
        }
        for (lang, texts) in overrides.into_iter().flatten() {
            let lp = p.key("texts").key(lang);
            let Some(set) = all.get_mut(lang) else {
                self.fail(
                    lp,
                    format!("no built-in language {lang:?}"),
                    format!("use one of: {}", crate::texts::LANGUAGES.join(", ")),
                );
                continue;
            };
            for (key, raw) in texts {
                let kp = lp.key(key);
                if !crate::texts::is_key(key) {
                    let known: Vec<&str> = crate::texts::TEXTS.iter().map(|t| t.0).collect();
                    self.fail(
                        kp,
                        format!("unknown text {key:?}"),
                        format!("use one of: {}", known.join(", ")),
                    );
                    continue;
                }
                if let Some(v) = self.string(&kp, raw) {
                    set.insert(key.clone(), v);
                }
            }
        }
        all
    }

    fn hosts(&mut self, p: &KeyPath, hosts: Option<&[String]>) -> Vec<HostPattern> {
        let Some(hosts) = hosts else {
            return vec![HostPattern::Any];
        };
        if hosts.is_empty() {
            self.fail(
                p.key("hosts"),
                "is empty: the room would match nothing",
                "use [\"*\"] for every host",
            );
        }
        let mut out = Vec::new();
        for (i, h) in hosts.iter().enumerate() {
            match HostPattern::parse(h) {
                Some(hp) => out.push(hp),
                None => self.fail(
                    p.key("hosts").index(i),
                    format!("{h:?} is not a host pattern"),
                    "use \"*\", \"shop.example.com\" or \"*.example.com\"",
                ),
            }
        }
        out
    }

    fn paths(&mut self, p: &KeyPath, paths: &[String]) -> Vec<String> {
        if paths.is_empty() {
            self.fail(
                p.key("paths"),
                "is missing or empty: the room would protect nothing",
                "list the path prefixes to protect, e.g. paths = [\"/products\", \"/orders\"]",
            );
        }
        let mut out: Vec<String> = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            let key = p.key("paths").index(i);
            if !path.starts_with('/') {
                self.fail(
                    key,
                    format!("{path:?} does not start with '/'"),
                    "write a path prefix such as \"/products\"",
                );
            } else if path.starts_with("/.anteroom") {
                self.fail(
                    key,
                    "the /.anteroom/ prefix is reserved",
                    "protect other paths",
                );
            } else if out.contains(path) {
                self.fail(
                    key,
                    format!("{path:?} is listed twice"),
                    "remove the duplicate",
                );
            } else {
                out.push(path.clone());
            }
        }
        out
    }

    fn poll(&mut self, p: &KeyPath, tiers: Option<&[PollFile]>) -> Vec<PollTier> {
        let Some(tiers) = tiers else {
            return default_poll();
        };
        let key = p.key("poll");
        if tiers.is_empty() {
            self.fail(
                key,
                "is empty",
                "remove it for the defaults, or list tiers like [{ every = \"5s\" }]",
            );
            return default_poll();
        }
        let mut out = Vec::new();
        let mut last_below = 0u64;
        for (i, t) in tiers.iter().enumerate() {
            let tp = key.index(i);
            let every = self.duration(&tp.key("every"), Some(&t.every), Duration::from_secs(5));
            let below = match t.below {
                None => None,
                Some(b) if b >= 1 && (b as u64) > last_below => {
                    last_below = b as u64;
                    Some(b as u64)
                }
                Some(b) => {
                    self.fail(
                        tp.key("below"),
                        format!("{b} is not above the previous tier's bound"),
                        "list tiers from the front of the line backwards, with growing `below`",
                    );
                    None
                }
            };
            let last = i + 1 == tiers.len();
            if below.is_none() && !last && t.below.is_none() {
                self.fail(
                    tp.clone(),
                    "only the last tier may leave out `below`",
                    "add below = N to this tier",
                );
            }
            if last && t.below.is_some() {
                self.fail(
                    tp.key("below"),
                    "the last tier must cover everyone behind it",
                    "remove `below` from the last tier, e.g. { every = \"5s\" }",
                );
            }
            out.push(PollTier { below, every });
        }
        out
    }

    fn consume(&mut self, p: &KeyPath, routes: &[String], paths: &[String]) -> Vec<ConsumeRoute> {
        let mut out = Vec::new();
        for (i, raw) in routes.iter().enumerate() {
            let key = p.key("consume").index(i);
            let Some((method, path)) = raw.trim().split_once(' ') else {
                self.fail(
                    key,
                    format!("{raw:?} is not \"METHOD /path\""),
                    "write it like \"POST /orders\"",
                );
                continue;
            };
            let method = match http::Method::from_bytes(method.trim().as_bytes()) {
                Ok(m) => m,
                Err(_) => {
                    self.fail(
                        key,
                        format!("{method:?} is not an HTTP method"),
                        "write it like \"POST /orders\"",
                    );
                    continue;
                }
            };
            let path = path.trim();
            if !path.starts_with('/') {
                self.fail(
                    key,
                    format!("{path:?} does not start with '/'"),
                    "write it like \"POST /orders\"",
                );
                continue;
            }
            if !paths.iter().any(|rp| path_covers(rp, path)) {
                self.fail(
                    key,
                    format!("{path:?} is outside the room's paths, so it would never be checked"),
                    "add its prefix to `paths`, or move the rule to the room that protects it",
                );
                continue;
            }
            out.push(ConsumeRoute {
                method,
                path: path.to_string(),
            });
        }
        out
    }

    fn template(&mut self, key: &KeyPath, raw: &str) -> Option<PathBuf> {
        let text = self.string(key, raw)?;
        let given = PathBuf::from(&text);
        let candidates = if given.is_absolute() {
            vec![given]
        } else {
            vec![self.base_dir.join(&given), given]
        };
        match candidates.iter().find(|c| c.is_file()) {
            Some(found) => {
                let checked = std::fs::read_to_string(found)
                    .map_err(|e| format!("cannot read {}: {e}", found.display()))
                    .and_then(|text| crate::page::check_template(&text));
                match checked {
                    Ok(()) => Some(found.clone()),
                    Err(why) => {
                        self.fail(
                            key.clone(),
                            format!("template {} does not render: {why}", found.display()),
                            "fix the template (the README lists the variables it may use)",
                        );
                        None
                    }
                }
            }
            None => {
                let tried: Vec<String> =
                    candidates.iter().map(|c| c.display().to_string()).collect();
                self.fail(
                    key.clone(),
                    format!("template file not found (looked at {})", tried.join(" and ")),
                    "fix the path (relative paths are looked up next to the config file, then in the working directory)",
                );
                None
            }
        }
    }
}

/// Room names become cookie names and Redis hash tags, so they stay plain.
pub fn valid_room_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_')
}
