//! From the file mirror to the validated [`Config`]: defaults, `env:NAME`, and cross-field checks.
//!
//! Every check that can fail names the key it is about; [`super::load`] turns the key into a
//! `file:line:col`. Checks collect all problems rather than stopping at the first, so an
//! operator fixes a broken file in one round.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::file::*;
use super::limits::share_upstream_caps;
use super::locate::KeyPath;
use super::model::*;
use crate::client::ClientHeader;
use crate::cookie::CookieKey;
use crate::route::{OtherHosts, PathMatching};

/// The longest a timeout of a connection or of a stopping process is taken for.
const HOUR: Duration = Duration::from_secs(3600);

/// A problem found while validating, before it is given a position.
#[derive(Debug)]
pub struct Problem {
    pub key: KeyPath,
    pub what: String,
    pub fix: String,
}

pub(super) struct Builder<'a> {
    pub problems: Vec<Problem>,
    /// What is allowed but likely regretted: told by `check` and logged by `run`.
    pub warnings: Vec<Problem>,
    /// The directory of the config file, for relative template paths.
    pub base_dir: &'a Path,
    /// Upstreams the file names whose build failed (told at their own keys): a reference to
    /// one is no second problem (found by review: an address that did not resolve was
    /// followed by "unknown upstream" at every room that named it).
    pub broken_upstreams: Vec<String>,
    /// The values read from the environment or from a file (`env:`, `file:`): a secret in the
    /// wrong place (a Redis URL as a duration, a token as a role) is never quoted back by a
    /// key's problem, which `check`, the log and `/readyz` show (found by re-review).
    pub hidden: Vec<(KeyPath, String)>,
}

pub(super) fn k(path: &str) -> KeyPath {
    KeyPath::root().key(path)
}

impl Builder<'_> {
    pub(super) fn warn(&mut self, key: KeyPath, what: impl Into<String>, fix: impl Into<String>) {
        self.warnings.push(Problem {
            key,
            what: what.into(),
            fix: fix.into(),
        });
    }

    pub(super) fn fail(&mut self, key: KeyPath, what: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(Problem {
            key,
            what: what.into(),
            fix: fix.into(),
        });
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
            client_header: match listen_f.client_header.as_deref() {
                None => ClientHeader::XForwardedFor,
                Some(v) if v.eq_ignore_ascii_case("x-forwarded-for") => ClientHeader::XForwardedFor,
                Some(v) if v.eq_ignore_ascii_case("forwarded") => ClientHeader::Forwarded,
                Some(other) => {
                    self.fail(
                        k("listen").key("client-header"),
                        format!("unknown value {other:?}"),
                        "use \"x-forwarded-for\" or \"forwarded\": the header your load balancer appends the client's address to",
                    );
                    ClientHeader::XForwardedFor
                }
            },
            path_matching: match listen_f.path_matching.as_deref() {
                None | Some("strict") => PathMatching::Strict,
                Some("lenient") => PathMatching::Lenient,
                Some(other) => {
                    self.fail(
                        k("listen").key("path-matching"),
                        format!("unknown value {other:?}"),
                        "use \"strict\" (refuse spellings origins read differently) or \"lenient\" (queue them in the room any reading falls in)",
                    );
                    PathMatching::Strict
                }
            },
            other_hosts: match listen_f.other_hosts.as_deref() {
                None | Some("refuse") => OtherHosts::Refuse,
                Some("room") => OtherHosts::Room,
                Some("pass") => OtherHosts::Pass,
                Some(other) => {
                    self.fail(
                        k("listen").key("other-hosts"),
                        format!("unknown value {other:?}"),
                        "use \"refuse\", \"room\" or \"pass\"",
                    );
                    OtherHosts::Refuse
                }
            },
            https: listen_f
                .https
                .as_deref()
                .map(|raw| self.socket(&k("listen").key("https"), Some(raw), DEFAULT_HTTP)),
            redirect_http: listen_f.redirect_http.unwrap_or(false),
        };
        if let Some(https) = listen.https {
            if same_socket(https, listen.http) || same_socket(https, listen.admin) {
                self.fail(
                    k("listen").key("https"),
                    "takes the socket of listen.http or listen.admin (the same port on an address it covers: 0.0.0.0 and [::] cover every address)",
                    "give HTTPS its own port, e.g. https = \"0.0.0.0:443\"",
                );
            }
        }
        let tls = self.tls(&f.tls, &listen);
        if same_socket(listen.http, listen.admin) {
            self.fail(
                k("listen").key("admin"),
                "takes the socket of listen.http (the same port on an address it covers: 0.0.0.0 and [::] cover every address)",
                "give the admin API its own port",
            );
        }
        let store = self.store(f.store.unwrap_or_default());
        let cookie = self.cookie(f.cookie);
        let admin = self.admin(f.admin.unwrap_or_default());
        let server = self.server(f.server.unwrap_or_default(), listen.http);
        let upstreams = self.upstreams(&f.upstream);
        self.no_upstream_loops_back(&upstreams, &listen);
        let default_upstream = self.default_upstream(f.default.as_ref(), &upstreams);
        let mut rooms = self.rooms(&f.room, &upstreams, default_upstream);
        share_upstream_caps(&mut rooms, &upstreams);
        self.events_within_upstream_caps(&rooms, &upstreams);
        self.warn_stalls_past_the_cap(&rooms, &upstreams, &server, listen.https.is_some());
        self.warn_claims_past_the_cooldown(&rooms, &store);
        self.warn_rooms_ordered_for_other_hosts(&rooms, &upstreams, listen.other_hosts);
        self.trust_not_too_wide(&listen.trusted_proxies, &rooms);
        let draw_secret = self.draw_secret(f.draw.as_ref(), &rooms);
        Config {
            source: source.to_string(),
            warnings: Vec::new(),
            listen,
            store,
            cookie,
            admin,
            server,
            upstreams,
            default_upstream,
            rooms,
            tls,
            draw_secret,
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
            let Some(secret) = self.secret(&p, raw) else {
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

    /// Only what the admin commands need (`anteroom rooms --config FILE`): the admin address
    /// and, unless one was given (`need_token` false), the token. The rest of the file, its
    /// `env:` values (the cookie key, the Redis password) included, is not read.
    pub fn admin_endpoint(&mut self, f: FileConfig, need_token: bool) -> AdminEndpoint {
        let listen = f.listen.unwrap_or_default();
        let addr = self.socket(
            &k("listen").key("admin"),
            listen.admin.as_deref(),
            DEFAULT_ADMIN,
        );
        let token = if need_token {
            self.own_token_only(f.admin.unwrap_or_default())
        } else {
            None
        };
        AdminEndpoint { addr, token }
    }

    fn server(&mut self, s: ServerFile, http: SocketAddr) -> ServerSettings {
        let key = k("server");
        let threads = match s.threads {
            Some(0) => {
                self.fail(
                    key.key("threads"),
                    "must be at least 1",
                    "set threads = 1 or more",
                );
                default_threads()
            }
            Some(n) if n > MAX_THREADS => {
                self.fail(
                    key.key("threads"),
                    format!("{n} is more than {MAX_THREADS}"),
                    "set it to the machine's cores (or leave it out for that default)",
                );
                default_threads()
            }
            Some(n) => n,
            None => default_threads(),
        };
        ServerSettings {
            threads,
            work_stealing: s.work_stealing.unwrap_or(true),
            grace_period: self.duration_at_most(
                &key.key("grace-period"),
                s.grace_period.as_deref(),
                (DEFAULT_GRACE_PERIOD, HOUR, true),
                "a stopping process would stay that long",
            ),
            shutdown_timeout: self.duration_at_most(
                &key.key("shutdown-timeout"),
                s.shutdown_timeout.as_deref(),
                (DEFAULT_SHUTDOWN_TIMEOUT, HOUR, false),
                "a stopping process would stay that long",
            ),
            upgrade_sock: s
                .upgrade_sock
                .as_deref()
                .and_then(|raw| self.string(&key.key("upgrade-sock"), raw))
                .filter(|path| {
                    let named = !path.is_empty();
                    if !named {
                        self.fail(
                            key.key("upgrade-sock"),
                            "is empty",
                            "name a socket path such as \"/tmp/anteroom-upgrade.sock\", or leave it out for the default",
                        );
                    }
                    named
                })
                .unwrap_or_else(|| default_upgrade_sock(http)),
            client_timeout: self.duration_at_most(
                &key.key("client-timeout"),
                s.client_timeout.as_deref(),
                (DEFAULT_CLIENT_TIMEOUT, HOUR, false),
                "an idle client would hold its connection that long",
            ),
            max_header_bytes: self.header_bytes(&key.key("max-header-bytes"), s.max_header_bytes),
        }
    }

    /// `trusted-proxies` wider than any load balancer's network lets every client name its own
    /// address (found by review: with `0.0.0.0/0` a forged `X-Forwarded-For` passed a `client`
    /// bypass rule every time): refused beside a `client` bypass rule, a warning otherwise
    /// (`join-limit` counts by what clients write then).
    fn trust_not_too_wide(&mut self, trusted: &[ipnet::IpNet], rooms: &[RoomConfig]) {
        let Some(wide) = Self::too_wide(trusted) else {
            return;
        };
        let key = k("listen").key("trusted-proxies");
        let fix = "list only your load balancers' addresses or networks, e.g. [\"10.0.0.0/24\"]";
        match rooms
            .iter()
            .find(|r| r.bypass.iter().any(|b| matches!(b, BypassRule::Client(_))))
        {
            Some(r) => self.fail(
                key,
                format!("{wide}: any client could write the address room {:?}'s client bypass rule lets past the line", r.name()),
                fix,
            ),
            None => self.warn(
                key,
                format!("{wide}: any client can name its own address, which join-limit then counts by"),
                fix,
            ),
        }
    }

    /// `[server] max-header-bytes`: at least [`MIN_HEADER_BYTES`] (found by review: 10 passed
    /// `check` and every request was answered 431).
    fn header_bytes(&mut self, key: &KeyPath, raw: Option<i64>) -> usize {
        match raw {
            Some(n) if n < MIN_HEADER_BYTES as i64 => {
                self.fail(
                    key.clone(),
                    format!("{n} is less than {MIN_HEADER_BYTES}: a browser's request with its cookies takes one to two KB"),
                    format!("leave it out for {DEFAULT_MAX_HEADER_BYTES}, or set at least {MIN_HEADER_BYTES}"),
                );
                DEFAULT_MAX_HEADER_BYTES as usize
            }
            Some(n) => n as usize,
            None => DEFAULT_MAX_HEADER_BYTES as usize,
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
            let Some(servers) = self.upstream_servers(&p, u) else {
                self.broken_upstreams.push(u.name.clone());
                continue;
            };
            let host = servers
                .first
                .rsplit_once(':')
                .map(|(h, _)| h)
                .unwrap_or(&servers.first)
                .to_string();
            let sni = u
                .sni
                .clone()
                .unwrap_or_else(|| host.trim_matches(['[', ']']).to_string());
            let connect_timeout = self.duration_at_most(
                &p.key("connect-timeout"),
                u.connect_timeout.as_deref(),
                (DEFAULT_CONNECT_TIMEOUT, Duration::from_secs(60), false),
                "a request would wait that long for a connection to the shop",
            );
            let read_timeout = self.duration_at_most(
                &p.key("read-timeout"),
                u.read_timeout.as_deref(),
                (DEFAULT_READ_TIMEOUT, HOUR, false),
                "a request would wait that long for the shop's answer",
            );
            let write_timeout = self.duration_at_most(
                &p.key("write-timeout"),
                u.write_timeout.as_deref(),
                (DEFAULT_WRITE_TIMEOUT, HOUR, false),
                "a request would wait that long to write to the shop",
            );
            let (ca, client_cert) = self.upstream_tls(&p, u);
            let (balance, health_check) =
                (self.upstream_balance(&p, u), self.upstream_health(&p, u));
            let resolve_every = self.upstream_resolve_every(&p, u);
            out.push(Upstream {
                name: u.name.clone(),
                addr: servers.addr,
                addrs: servers.addrs,
                resolved: servers.resolved,
                balance,
                health_check,
                resolve_every,
                tls: u.tls.unwrap_or(false),
                sni,
                connect_timeout,
                read_timeout,
                write_timeout,
                error_pages: u.error_pages.unwrap_or(true),
                admit_per_second: self.upstream_cap(&p, u.admit_per_second),
                origin_secret: self.origin_secret(&p, u.origin_secret.as_ref()),
                ca,
                client_cert,
            });
        }
        out
    }

    pub(super) fn upstream_index(&mut self, key: KeyPath, name: &str, ups: &[Upstream]) -> usize {
        match ups.iter().position(|u| u.name == name) {
            Some(i) => i,
            None if self.broken_upstreams.iter().any(|b| b == name) => 0,
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

impl Builder<'_> {
    /// An upstream server at one of anteroom's own listeners would send every request back to
    /// anteroom, without end (found by review: one request made 5,856 and 6,472 open files in
    /// 3 s). Its address is anteroom's when it is the listener's, or loopback (or unspecified)
    /// with a listener on every address of the port.
    fn no_upstream_loops_back(&mut self, upstreams: &[Upstream], listen: &Listen) {
        for (i, key, a) in upstreams_at_listeners(upstreams, listen) {
            self.fail(
                k("upstream").index(i).key(key),
                format!("{a} is one of anteroom's own listeners: every request would come back to anteroom"),
                "point the upstream at the shop's own server, on another port",
            );
        }
    }
}

/// The upstreams that would connect to one of `listen`'s listeners: (index, its key, the
/// address). Also judged by a reload against the listeners still running (found by review: a
/// file that moved `listen.http` and pointed the upstream at the old port passed, and each
/// request came back to anteroom, thousands a second).
pub fn upstreams_at_listeners(
    upstreams: &[Upstream],
    listen: &Listen,
) -> Vec<(usize, &'static str, SocketAddr)> {
    let own = [Some(listen.http), Some(listen.admin), listen.https];
    upstreams
        .iter()
        .enumerate()
        .filter_map(|(i, u)| {
            let key = if u.addrs.is_empty() { "addr" } else { "addrs" };
            u.resolved
                .iter()
                .flat_map(|(_, a)| a.iter())
                .find(|a| own.iter().flatten().any(|l| loops_back(**a, *l)))
                .map(|a| (i, key, *a))
        })
        .collect()
}

/// Whether connecting to `upstream` reaches the listener at `listener`.
fn loops_back(upstream: SocketAddr, listener: SocketAddr) -> bool {
    let (u, l) = (upstream.ip().to_canonical(), listener.ip().to_canonical());
    let local = |ip: std::net::IpAddr| ip.is_loopback() || ip.is_unspecified();
    upstream.port() == listener.port()
        && (u == l || (l.is_unspecified() && local(u)) || (u.is_unspecified() && local(l)))
}

/// Whether two listeners would take the same socket: the same port, and the same address or
/// one that covers the other (`0.0.0.0` every IPv4 address; `[::]` every address, IPv4 too on a
/// dual-stack host). Before (found by review), only equal addresses were refused: `http =
/// "0.0.0.0:8080"` beside `admin = "127.0.0.1:8080"` passed check, the public listener never
/// came up, and the health checks, on the admin port, said all was well.
fn same_socket(a: SocketAddr, b: SocketAddr) -> bool {
    // `[::ffff:127.0.0.1]` is 127.0.0.1 (re-review: the mapped spelling passed).
    let (a_ip, b_ip) = (a.ip().to_canonical(), b.ip().to_canonical());
    let covers = |u: std::net::IpAddr, x: std::net::IpAddr| {
        u.is_unspecified() && (u.is_ipv6() || x.is_ipv4())
    };
    a.port() == b.port() && (a_ip == b_ip || covers(a_ip, b_ip) || covers(b_ip, a_ip))
}

#[cfg(test)]
mod tests;
