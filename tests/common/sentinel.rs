//! A real Sentinel deployment for tests: a primary, one replica (`--replicaof`) and three
//! `redis-sentinel` processes (quorum 2, a short `down-after-milliseconds`), each on free
//! loopback ports in temp dirs, killed on drop. Every wait polls with a deadline.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;
use super::redis::{raw, RedisServer};

/// The name the sentinels monitor the primary under.
pub const MASTER: &str = "anteroom-primary";

/// One `redis-sentinel` process.
pub struct SentinelProcess {
    child: Child,
    pub port: u16,
    /// Stopped by [`Self::freeze`]: not asked anything more (a question would hang).
    frozen: std::sync::atomic::AtomicBool,
    _dir: tempfile::TempDir,
}

impl SentinelProcess {
    pub fn start(primary: u16, down_after_ms: u64, extra: &str) -> Self {
        for _ in 0..10 {
            let port = free_port();
            let dir = tempfile::tempdir().unwrap();
            let conf = dir.path().join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {MASTER} {down_after_ms}\n\
                     sentinel failover-timeout {MASTER} 3000\n\
                     sentinel parallel-syncs {MASTER} 1\n{extra}",
                    dir = dir.path().display()
                ),
            )
            .unwrap();
            let mut child = Command::new("redis-sentinel")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-sentinel must be installed (scripts/test installs it)");
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                // A sentinel with requirepass answers NOAUTH: it is up all the same.
                if raw(port, "PING")
                    .is_some_and(|r| r.starts_with("+PONG") || r.starts_with("-NOAUTH"))
                {
                    return Self {
                        child,
                        port,
                        frozen: Default::default(),
                        _dir: dir,
                    };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken: try another
                }
                assert!(
                    Instant::now() < deadline,
                    "redis-sentinel on {port} did not answer PING within 10 s"
                );
                std::thread::park_timeout(Duration::from_millis(10));
            }
        }
        panic!("could not start redis-sentinel on a free port in 10 attempts");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops this sentinel with SIGSTOP: it accepts connections (the kernel does) and answers
    /// nothing, as a frozen one or one on a host gone without a reset. (Drop's SIGKILL ends it.)
    pub fn freeze(&self) {
        let ok = Command::new("kill")
            .args(["-STOP", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -STOP the sentinel on {}", self.port);
        self.frozen
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn connection(&self) -> Option<::redis::Connection> {
        if self.frozen.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        ::redis::Client::open(self.url())
            .ok()?
            .get_connection_with_timeout(Duration::from_millis(500))
            .ok()
    }

    /// `SENTINEL MASTER NAME` as a map, if this sentinel answers.
    pub fn master_info(&self) -> Option<HashMap<String, String>> {
        let mut c = self.connection()?;
        ::redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(MASTER)
            .query(&mut c)
            .ok()
    }

    /// The port of the node this sentinel names as the primary.
    pub fn primary_port(&self) -> Option<u16> {
        let mut c = self.connection()?;
        let (_, port): (String, u16) = ::redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER)
            .query(&mut c)
            .ok()?;
        Some(port)
    }
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A primary, a replica and three sentinels, ready: the replica in sync, every sentinel seeing
/// the replica and the two other sentinels.
pub struct SentinelSetup {
    pub primary: RedisServer,
    pub replica: RedisServer,
    pub sentinels: Vec<SentinelProcess>,
}

/// `INFO replication` of a node, as a map.
pub fn replication(port: u16) -> HashMap<String, String> {
    let Ok(client) = ::redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
        return HashMap::new();
    };
    let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
        return HashMap::new();
    };
    let text: String = ::redis::cmd("INFO")
        .arg("replication")
        .query(&mut c)
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The process id of the `redis-server` on `port` (from `INFO server`).
fn process_id(port: u16) -> Option<u32> {
    let client = ::redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut c = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    let text: String = ::redis::cmd("INFO").arg("server").query(&mut c).ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("process_id:"))
        .and_then(|v| v.parse().ok())
}

impl SentinelSetup {
    /// Starts everything; a failover starts `down_after_ms` after the primary stops answering.
    pub fn start(down_after_ms: u64) -> Self {
        let primary = RedisServer::start();
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
        wait_for(Duration::from_secs(20), "the replica to sync", || {
            replication(replica.port)
                .get("master_link_status")
                .is_some_and(|s| s == "up")
        });
        let sentinels: Vec<SentinelProcess> = (0..3)
            .map(|_| SentinelProcess::start(primary.port, down_after_ms, ""))
            .collect();
        // Sentinels find each other through the primary's hello channel (every 2 s) and the
        // replica through the primary's INFO (every 10 s at first): allow for both.
        wait_for(
            Duration::from_secs(40),
            "every sentinel to see the replica and two other sentinels",
            || {
                sentinels.iter().all(|s| {
                    s.master_info().is_some_and(|m| {
                        m.get("num-other-sentinels").map(String::as_str) == Some("2")
                            && m.get("num-slaves").map(String::as_str) == Some("1")
                    })
                })
            },
        );
        Self {
            primary,
            replica,
            sentinels,
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.sentinels.iter().map(SentinelProcess::url).collect()
    }

    /// Stops the primary with SIGSTOP: it keeps its connections open and answers nothing, as a
    /// frozen or partitioned host would. (Drop's SIGKILL ends a stopped process too.)
    pub fn freeze_primary(&self) {
        let pid = process_id(self.primary.port).expect("the primary's process id");
        let ok = Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -STOP {pid}");
    }

    /// `SENTINEL FAILOVER`: the replica is promoted and the live primary demoted to its replica.
    pub fn switch_over(&self) {
        let mut c = self.sentinels[0].connection().expect("a sentinel");
        let reply: String = ::redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(MASTER)
            .query(&mut c)
            .expect("SENTINEL FAILOVER");
        assert_eq!(reply, "OK");
    }

    /// Whether a majority of sentinels name the replica as the primary and it says so itself.
    pub fn replica_promoted(&self) -> bool {
        let named = self
            .sentinels
            .iter()
            .filter(|s| s.primary_port() == Some(self.replica.port))
            .count();
        named >= 2
            && replication(self.replica.port)
                .get("role")
                .is_some_and(|r| r == "master")
    }
}

/// Polls `check` until it holds, or panics after `limit`.
pub fn wait_for(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// A primary watched by one sentinel, without replicas: enough to reach Redis through
/// Sentinel (the conformance suite), ready as soon as the sentinel names the primary.
pub struct OneSentinel {
    pub primary: RedisServer,
    pub sentinel: SentinelProcess,
}

impl OneSentinel {
    pub fn start() -> Self {
        let primary = RedisServer::start();
        let sentinel = SentinelProcess::start(primary.port, 5000, "");
        wait_for(
            Duration::from_secs(10),
            "the sentinel to name the primary",
            || sentinel.primary_port() == Some(primary.port),
        );
        Self { primary, sentinel }
    }

    /// The same with `requirepass PASSWORD` on the primary and the sentinel.
    pub fn with_password(password: &str) -> Self {
        let primary = RedisServer::start();
        let set = raw(primary.port, &format!("CONFIG SET requirepass {password}"));
        assert!(set.is_some_and(|r| r.starts_with("+OK")), "requirepass set");
        let sentinel = SentinelProcess::start(
            primary.port,
            5000,
            &format!("requirepass {password}\nsentinel auth-pass {MASTER} {password}\n"),
        );
        Self { primary, sentinel }
    }
}
