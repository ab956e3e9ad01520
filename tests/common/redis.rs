//! Real `redis-server`s for tests: standalone or a three-master cluster, each on free ports in
//! a temp dir, killed on drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// One `redis-server` process.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
    args: Vec<String>,
}

/// Sends one inline command and returns the raw reply (enough for PING and CLUSTER INFO).
pub fn raw(port: u16, command: &str) -> Option<String> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
            .ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(format!("{command}\r\n").as_bytes()).ok()?;
    let mut buf = vec![0u8; 8192];
    let n = s.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Runs down the life of every key on the server at `port` by `by`, as time in which the
/// server ran and nothing reached it would (a key whose life is shorter goes): the conformance
/// harness moves the scripts' clock, while keys expire in Redis's own time.
pub fn age_keys(port: u16, by: Duration) {
    let client = ::redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut c = client.get_connection().unwrap();
    let by_ms = i64::try_from(by.as_millis()).unwrap();
    let keys: Vec<Vec<u8>> = ::redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    for k in keys {
        let left: i64 = ::redis::cmd("PTTL").arg(&k).query(&mut c).unwrap();
        if left < 0 {
            continue;
        }
        if left <= by_ms {
            let _: i64 = ::redis::cmd("DEL").arg(&k).query(&mut c).unwrap();
        } else {
            let _: i64 = ::redis::cmd("PEXPIRE")
                .arg(&k)
                .arg(left - by_ms)
                .query(&mut c)
                .unwrap();
        }
    }
}

impl RedisServer {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts with extra `redis-server` arguments (e.g. `["--appendonly", "yes"]`). A port that
    /// turns out to be taken (another test got it first) is replaced by a new one.
    pub fn start_with(extra: &[&str]) -> Self {
        // Cluster nodes also listen on port + 10000 (the cluster bus), which must be a valid,
        // free port too.
        let cluster = extra.contains(&"--cluster-enabled");
        for _ in 0..10 {
            let port = loop {
                let p = free_port();
                if !cluster
                    || (p <= 55535 && std::net::TcpListener::bind(("127.0.0.1", p + 10000)).is_ok())
                {
                    break p;
                }
            };
            let dir = tempfile::tempdir().unwrap();
            let mut args: Vec<String> = vec![
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
                "--save".into(),
                "".into(),
                "--appendonly".into(),
                "no".into(),
                "--dir".into(),
                dir.path().display().to_string(),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            let mut server = Self {
                child: None,
                port,
                dir,
                args,
            };
            if server.try_start() {
                return server;
            }
        }
        panic!("could not start redis-server on a free port in 10 attempts");
    }

    /// (Re)starts the process on the same port and directory.
    pub fn restart(&mut self) {
        assert!(
            self.try_start(),
            "redis-server on port {} did not come back",
            self.port
        );
    }

    /// Starts the process; `false` if it exited (its port was taken) instead of answering.
    fn try_start(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (scripts/test installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if raw(self.port, "PING").is_some_and(|r| r.starts_with("+PONG")) {
                return true;
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    self.child = None;
                    return false;
                }
            }
            std::thread::park_timeout(Duration::from_millis(10));
        }
        panic!(
            "redis-server on port {} did not answer PING within 10 s",
            self.port
        );
    }

    /// SIGSTOP (`pause`) or SIGCONT (`resume`): a paused Redis keeps its connections open and
    /// answers nothing, as a frozen host or a long fork would. (Drop's SIGKILL ends a stopped
    /// process too.)
    pub fn signal(&self, pause: bool) {
        let pid = self.child.as_ref().expect("redis-server running").id();
        let sig = if pause { "-STOP" } else { "-CONT" };
        let ok = std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid}");
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A three-master Redis Cluster.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Three masters, each started with `extra` arguments too.
    pub fn start_with(extra: &[&str]) -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                let mut args = vec![
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                ];
                args.extend_from_slice(extra);
                RedisServer::start_with(&args)
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli must be installed");
        assert!(
            out.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        for n in &nodes {
            loop {
                if raw(n.port, "CLUSTER INFO").is_some_and(|r| r.contains("cluster_state:ok")) {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster did not reach state ok");
                std::thread::park_timeout(Duration::from_millis(50));
            }
        }
        Self { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}

/// A client connection to the server at `url`.
pub async fn connect(url: &str) -> ::redis::aio::MultiplexedConnection {
    ::redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// INFO commandstats: calls of EVALSHA and EVAL so far (every store operation is one script).
pub async fn script_calls(conn: &mut ::redis::aio::MultiplexedConnection) -> u64 {
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}
