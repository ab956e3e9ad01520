//! Test harness: a real origin HTTP server (hyper) and the real `anteroom` binary, each on a free
//! loopback port, stopped on drop. Readiness is polled with a deadline, never slept through.
#![allow(dead_code)]

use std::io::Read;
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod browser;
pub mod capped;
pub mod challenge;
pub mod commands;
pub mod faults;
pub mod local;
pub mod origin;
pub mod raw;
pub mod redis;
pub mod sale;
pub mod sentinel;
pub mod shop;
pub mod tls;

#[allow(unused_imports)] // each test crate uses some of them
pub use origin::{big_body, Origin, Seen};

/// The cookie key every test config uses.
pub const KEY: &str = "test-key-0123456789-0123456789-0123456789";
/// A second key, for rotation and other-key tests.
pub const OTHER_KEY: &str = "other-key-abcdefghij-abcdefghij-abcdefghij";

/// Sends process `pid` a signal by name (`HUP`, `TERM`, `INT`, `QUIT`).
pub fn signal_pid(pid: u32, name: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{name} failed");
}

/// How `child` exited, if it did within `limit`.
pub fn exited_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
    None
}

/// A port nobody listens on right now, and one this test process has not handed out before:
/// tests run in parallel, and two of them picking the same just-freed port (one for a proxy's
/// admin listener, one as an address where nobody listens) made one talk to the other.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = StdListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A loopback port where nobody listens, for as long as this lives: the socket is bound but not
/// listening, so connections to it are refused and nothing else (a test's listener bound to
/// port 0, another process) can take the port meanwhile. `listen` turns it into a listener
/// on the same port, for a server that comes up later.
pub struct ClosedPort(tokio::net::TcpSocket);

impl ClosedPort {
    pub fn new() -> ClosedPort {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
        ClosedPort(socket)
    }

    pub fn addr(&self) -> SocketAddr {
        self.0.local_addr().unwrap()
    }

    /// Starts listening on the port (inside a Tokio runtime).
    pub fn listen(self) -> tokio::net::TcpListener {
        self.0.listen(1024).unwrap()
    }
}

/// The `[cookie]`, `[[upstream]]` and `[default]` part of a config, for an origin.
pub fn base_config(origin: SocketAddr) -> String {
    format!(
        r#"
[cookie]
keys = ["{KEY}"]

[[upstream]]
name = "shop"
addr = "{origin}"

[default]
upstream = "shop"
"#
    )
}

/// A running `anteroom run` process.
pub struct Proxy {
    child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub dir: tempfile::TempDir,
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_anteroom"))
}

impl Proxy {
    /// Starts the proxy with `config` plus a `[listen]` table on free ports; waits until it
    /// accepts connections.
    pub fn start(config: &str) -> Proxy {
        Self::start_with(config, &[("ANTEROOM_LOG", "warn")], &[])
    }

    /// Starts with extra environment variables and arguments before `run`.
    pub fn start_with(config: &str, env: &[(&str, &str)], args: &[&str]) -> Proxy {
        // A port picked as free can be taken by another test before anteroom binds it: then
        // anteroom says so and exits, and we try other ports.
        for _ in 0..5 {
            let mut proxy = Self::launch(config, env, args);
            match proxy.wait_ready() {
                Ok(()) => return proxy,
                Err(stderr) if stderr.contains("cannot listen") => continue,
                Err(stderr) => panic!("anteroom exited: {stderr}"),
            }
        }
        panic!("anteroom found no free ports in 5 attempts");
    }

    /// Starts the process on free ports without waiting for it (see [`Proxy::wait_ready`]).
    pub fn launch(config: &str, env: &[(&str, &str)], args: &[&str]) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let admin = free_port();
        let text = format!(
            "[listen]\nhttp = \"127.0.0.1:{port}\"\nadmin = \"127.0.0.1:{admin}\"\n{config}"
        );
        let path = dir.path().join("anteroom.toml");
        std::fs::write(&path, text).unwrap();
        let log = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
        let child = Command::new(binary())
            .args(args)
            .args(["run", "--config"])
            .arg(&path)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Proxy {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            admin: SocketAddr::from(([127, 0, 0, 1], admin)),
            dir,
        }
    }

    /// Waits until both listeners accept; `Err(stderr)` if the process exited first.
    pub fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Err(self.stderr());
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok()
                && TcpStream::connect_timeout(&self.admin, Duration::from_millis(200)).is_ok()
            {
                return Ok(());
            }
            std::thread::yield_now();
            std::thread::park_timeout(Duration::from_millis(20));
        }
        panic!(
            "anteroom did not listen on {} within 30 s: {}",
            self.addr,
            self.stderr()
        );
    }

    pub fn stderr(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join("stderr.log")) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{}", self.admin, path)
    }

    /// The config file the process runs with.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("anteroom.toml")
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends a signal by name (`HUP`, `TERM`, `INT`).
    pub fn signal(&self, name: &str) {
        signal_pid(self.child.id(), name);
    }

    /// Waits for the process to exit, up to `limit`; returns its exit code.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        exited_within(&mut self.child, limit).and_then(|s| s.code())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP client that keeps no cookies and follows no redirects: tests set cookies by hand.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// The `name=value` pairs of every `Set-Cookie` in a response.
pub fn set_cookies(resp: &reqwest::Response) -> Vec<(String, String, String)> {
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| {
            let (pair, attrs) = v.split_once(';').unwrap_or((v, ""));
            let (k, val) = pair.split_once('=')?;
            Some((
                k.trim().to_string(),
                val.trim().to_string(),
                attrs.to_string(),
            ))
        })
        .collect()
}

/// A visitor: the cookies a browser would keep for the proxy.
#[derive(Debug, Default, Clone)]
pub struct Jar(pub Vec<(String, String)>);

impl Jar {
    pub fn absorb(&mut self, resp: &reqwest::Response) {
        for (k, v, attrs) in set_cookies(resp) {
            self.0.retain(|(n, _)| n != &k);
            if !(v.is_empty() || attrs.contains("Max-Age=0")) {
                self.0.push((k, v));
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn set(&mut self, name: &str, value: &str) {
        self.0.retain(|(n, _)| n != name);
        self.0.push((name.to_string(), value.to_string()));
    }

    pub fn header(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A GET of `path` with `jar`'s cookies, asking for JSON; the jar takes the answer's cookies.
/// `None` when the answer is not JSON (the origin's own page for a visitor let in).
pub async fn get_json(proxy: &Proxy, path: &str, jar: &mut Jar) -> Option<serde_json::Value> {
    let mut req = client()
        .get(proxy.url(path))
        .header("accept", "application/json");
    if !jar.0.is_empty() {
        req = req.header("cookie", jar.header());
    }
    let resp = req.send().await.unwrap();
    jar.absorb(&resp);
    resp.json().await.ok()
}

/// One admin API call: the status and the body's text.
pub async fn admin_call(
    proxy: &Proxy,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> (u16, String) {
    let mut req = client().request(method, proxy.admin_url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// Switches the room `room` on or off through the admin API (`PATCH {"enabled": on}`).
pub async fn switch_room(proxy: &Proxy, token: &str, room: &str, on: bool) {
    let (status, body) = admin_call(
        proxy,
        reqwest::Method::PATCH,
        &format!("/rooms/{room}"),
        Some(token),
        Some(serde_json::json!({ "enabled": on })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// An admin API answer as JSON (the admin token given); `None` when none came or it is not JSON.
pub async fn admin_json(proxy: &Proxy, path: &str, token: &str) -> Option<serde_json::Value> {
    client()
        .get(proxy.admin_url(path))
        .bearer_auth(token)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()
}

/// An instance's `/metrics` text (the admin token given).
pub async fn metrics_text(proxy: &Proxy, token: &str) -> String {
    client()
        .get(proxy.admin_url("/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// `/readyz`'s `last_reload`.
async fn last_reload(proxy: &Proxy) -> Option<serde_json::Value> {
    client()
        .get(proxy.admin_url("/readyz"))
        .send()
        .await
        .ok()?
        .json::<serde_json::Value>()
        .await
        .ok()
        .map(|v| v["last_reload"].clone())
}

/// Sends SIGHUP and waits for `/readyz` to tell a reload applied since: `last_reload`.
#[allow(dead_code)]
pub async fn reload_applied(proxy: &Proxy) -> serde_json::Value {
    let before = last_reload(proxy).await.unwrap_or_default();
    proxy.signal("HUP");
    eventually(Duration::from_secs(10), "a reload applied", || async {
        let now = last_reload(proxy).await?;
        (now != before && now["applied"] == true).then_some(now)
    })
    .await
}

/// Sends SIGHUP and waits for `/readyz` to tell the outcome of a reload since: `last_reload`
/// (`applied`, and a refusal's `error`).
#[allow(dead_code)]
pub async fn reload_outcome(proxy: &Proxy) -> serde_json::Value {
    let before = last_reload(proxy).await.unwrap_or_default();
    proxy.signal("HUP");
    eventually(Duration::from_secs(10), "a reload's outcome", || async {
        let now = last_reload(proxy).await?;
        (now != before && !now.is_null()).then_some(now)
    })
    .await
}

/// The value of the first sample of metric `name` whose labels include `label`
/// (`result="solved"`), 0 when there is none.
pub async fn metric(proxy: &Proxy, token: &str, name: &str, label: &str) -> u64 {
    metrics_text(proxy, token)
        .await
        .lines()
        .find(|l| l.starts_with(name) && l.contains(label))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or(0)
}

/// Polls every visitor in `jars` (as their page's script would, a few times a second) until
/// all are admitted.
pub async fn until_all_admitted(proxy: &Proxy, room: &str, jars: &mut [Jar], limit: Duration) {
    let mut done = vec![false; jars.len()];
    let deadline = Instant::now() + limit;
    while done.iter().any(|d| !d) {
        assert!(
            Instant::now() < deadline,
            "{} of {} still waiting",
            done.iter().filter(|d| !**d).count(),
            jars.len()
        );
        for (jar, done) in jars.iter_mut().zip(done.iter_mut()) {
            if !*done {
                let s = get_json(proxy, &format!("/.anteroom/status?room={room}"), jar).await;
                *done = s.is_some_and(|s| s["state"] == "admitted");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A visitor let in at once (the room's line is empty): their jar, with the admission cookie.
pub async fn admitted_at_once(proxy: &Proxy, room: &str) -> Jar {
    let mut jar = Jar::default();
    let resp = client()
        .get(proxy.url(&format!("/.anteroom/status?room={room}")))
        .send()
        .await
        .unwrap();
    jar.absorb(&resp);
    assert!(
        jar.get(&format!("anteroom_{room}")).is_some(),
        "admitted at once"
    );
    jar
}

/// Waits until the room's admission loop has been heard once: its first tick sets the rate in
/// force (`anteroom_admit_rate`), written as `rate` prints.
pub async fn first_tick(proxy: &Proxy, token: &str, room: &str, rate: &str) {
    let line = format!("anteroom_admit_rate{{room=\"{room}\"}} {rate}");
    eventually(Duration::from_secs(10), "the first tick", || async {
        let m = metrics_text(proxy, token).await;
        m.lines().any(|l| l.starts_with(&line)).then_some(())
    })
    .await;
}

/// Polls `check` until it returns `Some`, or panics after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// An RFC 3339 time `secs` from now (negative: ago), in UTC: an event's instants in a config.
pub fn utc_in(secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    anteroom::event::time::format(now.saturating_add_signed(secs * 1_000_000), 0)
}
