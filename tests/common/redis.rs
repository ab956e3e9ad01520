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

/// A TCP forwarder in front of a Redis on `port`, for faults between a store and its Redis:
/// connections numbered below `swallow_below` lose what they are sent (calls that only time
/// out), and every reply but a connection's first (its hand-shake) is held back by `delay_ms`
/// (calls that run in Redis, their answers late). With a `mark` ([`Front::start_marking`]),
/// the replies to requests that contain it are held back by `marked_delay_ms` from when they
/// come, the others only as long as the order of replies needs (one connection answers in
/// order). On a thread of its own, so that a test that blocks a worker cannot stall it; it
/// stops with the process.
pub struct Front {
    pub addr: std::net::SocketAddr,
    pub connections: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub swallow_below: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub marked_delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The length of the one RESP value (a request or a reply) at the start of `b`, once it is
/// all there; an inline command or an unknown type counts to the end of its line.
fn resp_len(b: &[u8]) -> Option<usize> {
    let eol = b.windows(2).position(|w| w == b"\r\n")?;
    let head = || -> Option<i64> { std::str::from_utf8(&b[1..eol]).ok()?.parse().ok() };
    match b.first()? {
        b'$' | b'!' | b'=' => match head()? {
            n if n < 0 => Some(eol + 2),
            n => {
                let total = eol + 2 + n as usize + 2;
                (b.len() >= total).then_some(total)
            }
        },
        t @ (b'*' | b'~' | b'>' | b'%' | b'|') => match head()? {
            n if n < 0 => Some(eol + 2),
            n => {
                let count = if matches!(t, b'%' | b'|') { 2 * n } else { n };
                let mut at = eol + 2;
                for _ in 0..count {
                    at += resp_len(&b[at..])?;
                }
                Some(at)
            }
        },
        _ => Some(eol + 2),
    }
}

impl Front {
    pub fn start(port: u16) -> Self {
        Self::start_marking(port, b"")
    }

    /// [`Front::start`], holding back the replies to requests that contain `mark` by
    /// `marked_delay_ms` (e.g. `}:configs`, a key only the admit call names).
    pub fn start_marking(port: u16, mark: &'static [u8]) -> Self {
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
            marked_delay_ms: Arc::new(AtomicU64::new(0)),
        };
        let (n, cut, delay, marked) = (
            front.connections.clone(),
            front.swallow_below.clone(),
            front.delay_ms.clone(),
            front.marked_delay_ms.clone(),
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
                    let (cut, delay, marked) = (cut.clone(), delay.clone(), marked.clone());
                    if !mark.is_empty() {
                        tokio::spawn(Self::forward_marking(client, port, mark, marked));
                        continue;
                    }
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

    /// One connection through a marking front: requests are read one by one for the mark,
    /// replies one by one, each released when its hold ends but never before the one before.
    async fn forward_marking(
        mut client: tokio::net::TcpStream,
        port: u16,
        mark: &'static [u8],
        marked_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio::sync::mpsc::unbounded_channel;
        let Ok(mut redis) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
            return;
        };
        let (mut cr, mut cw) = client.split();
        let (mut rr, mut rw) = redis.split();
        let (flags, mut flag_of) = unbounded_channel::<bool>();
        let (out, mut to_write) = unbounded_channel::<(Vec<u8>, tokio::time::Instant)>();
        let up = async {
            let (mut buf, mut pending) = ([0u8; 4096], Vec::new());
            while let Ok(k) = cr.read(&mut buf).await {
                if k == 0 || rw.write_all(&buf[..k]).await.is_err() {
                    break;
                }
                pending.extend_from_slice(&buf[..k]);
                while let Some(len) = resp_len(&pending) {
                    let hit = pending[..len].windows(mark.len()).any(|w| w == mark);
                    let _ = flags.send(hit);
                    pending.drain(..len);
                }
            }
        };
        let down = async {
            let (mut buf, mut pending) = ([0u8; 4096], Vec::new());
            let mut last = tokio::time::Instant::now();
            while let Ok(k) = rr.read(&mut buf).await {
                if k == 0 {
                    break;
                }
                pending.extend_from_slice(&buf[..k]);
                while let Some(len) = resp_len(&pending) {
                    let hold = match flag_of.recv().await {
                        Some(true) => Duration::from_millis(marked_ms.load(Ordering::SeqCst)),
                        _ => Duration::ZERO,
                    };
                    last = last.max(tokio::time::Instant::now() + hold);
                    let _ = out.send((pending.drain(..len).collect(), last));
                }
            }
        };
        let write = async {
            while let Some((reply, at)) = to_write.recv().await {
                tokio::time::sleep_until(at).await;
                if cw.write_all(&reply).await.is_err() {
                    break;
                }
            }
        };
        tokio::select! { _ = up => {}, _ = down => {}, _ = write => {} }
    }
}

/// A TCP forwarder in front of a Redis on `port` that holds back by `delay` every request
/// containing one of `marks` (and, in order, what follows it on that connection): a call that
/// reaches Redis late while its caller waits for the answer. On threads of its own; it stops
/// with the process.
pub struct SlowRequests {
    pub addr: std::net::SocketAddr,
}

impl SlowRequests {
    pub fn start(port: u16, marks: &'static [&'static [u8]], delay: Duration) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(redis) = TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                let (mut from_client, mut to_redis) =
                    (client.try_clone().unwrap(), redis.try_clone().unwrap());
                let (mut from_redis, mut to_client) = (redis, client);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from_client.read(&mut buf) {
                        let marked = marks
                            .iter()
                            .any(|m| buf[..n].windows(m.len()).any(|w| w == *m));
                        if marked {
                            // The fault injected: the request arrives late.
                            std::thread::sleep(delay);
                        }
                        if to_redis.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from_redis, &mut to_client);
                });
            }
        });
        Self { addr }
    }
}
