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
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                ])
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

/// A TCP forwarder in front of a Redis on `port`, for faults between a store and its Redis:
/// connections numbered below `swallow_below` lose what they are sent (calls that only time
/// out), and every reply but a connection's first (its hand-shake) is held back by `delay_ms`
/// (calls that run in Redis, their answers late). On a thread of its own, so that a test that
/// blocks a worker cannot stall it; it stops with the process.
pub struct Front {
    pub addr: std::net::SocketAddr,
    pub connections: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub swallow_below: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Front {
    pub fn start(port: u16) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let front = Front {
            addr: listener.local_addr().unwrap(),
            connections: Arc::new(AtomicU64::new(0)),
            swallow_below: Arc::new(AtomicU64::new(0)),
            delay_ms: Arc::new(AtomicU64::new(0)),
        };
        let (n, cut, delay) = (
            front.connections.clone(),
            front.swallow_below.clone(),
            front.delay_ms.clone(),
        );
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((mut client, _)) = listener.accept().await {
                    let id = n.fetch_add(1, Ordering::SeqCst);
                    let (cut, delay) = (cut.clone(), delay.clone());
                    tokio::spawn(async move {
                        let Ok(mut redis) =
                            tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                        else {
                            return;
                        };
                        let (mut cr, mut cw) = client.split();
                        let (mut rr, mut rw) = redis.split();
                        let up = async {
                            let mut buf = [0u8; 4096];
                            while let Ok(k) = cr.read(&mut buf).await {
                                if k == 0 {
                                    break;
                                }
                                if id >= cut.load(Ordering::SeqCst)
                                    && rw.write_all(&buf[..k]).await.is_err()
                                {
                                    break;
                                }
                            }
                        };
                        let down = async {
                            let mut buf = [0u8; 4096];
                            let mut first = true;
                            while let Ok(k) = rr.read(&mut buf).await {
                                if k == 0 {
                                    break;
                                }
                                let ms = delay.load(Ordering::SeqCst);
                                if !first && ms > 0 {
                                    tokio::time::sleep(Duration::from_millis(ms)).await;
                                }
                                first = false;
                                if cw.write_all(&buf[..k]).await.is_err() {
                                    break;
                                }
                            }
                        };
                        tokio::select! { _ = up => {}, _ = down => {} }
                    });
                }
            });
        });
        front
    }

    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}
