//! Locking the origin to anteroom (`[[upstream]] origin-secret`): anteroom adds the secret
//! header to every request it sends the origin, replacing any copy a client sent, and the
//! snippets in docs/origin-lock/ — run here as they are, in a real nginx and a real Apache
//! httpd in front of the app — refuse every request without it.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

const SECRET: &str = "test-origin-secret-0123456789-abcdef";
const HEADER: &str = "x-anteroom-secret";
const TOKEN: &str = "origin-lock-admin-token-0123456789";

/// The default upstream and a room on it, after an `[[upstream]]` named `shop`.
const SALE: &str = r#"
[default]
upstream = "shop"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 100
max-active = 100
"#;

/// anteroom in front of `upstream` with the secret `value` (`env:...` or written out) and the
/// upstream's `extra` lines.
fn config_with(upstream: std::net::SocketAddr, value: &str, extra: &str) -> String {
    format!(
        r#"
[cookie]
keys = ["{KEY}"]

[admin]
token = "{TOKEN}"

[[upstream]]
name = "shop"
addr = "{upstream}"
origin-secret = {{ header = "X-Anteroom-Secret", value = "{value}" }}
{extra}
{SALE}"#
    )
}

fn start_anteroom_with(upstream: std::net::SocketAddr, extra: &str) -> Proxy {
    Proxy::start_with(
        &config_with(upstream, "env:TEST_ORIGIN_SECRET", extra),
        &[("ANTEROOM_LOG", "warn"), ("TEST_ORIGIN_SECRET", SECRET)],
        &[],
    )
}

fn start_anteroom(upstream: std::net::SocketAddr) -> Proxy {
    start_anteroom_with(upstream, "")
}

/// A server in front of the app (nginx or Apache), stopped on drop.
struct Front {
    child: Child,
    _dir: tempfile::TempDir,
    addr: std::net::SocketAddr,
}

impl Drop for Front {
    /// `TERM` first: nginx's master and Apache's parent stop their workers on it, where a
    /// `KILL` left the workers running (and listening) after every test run. `KILL` only if
    /// the parent has not exited within five seconds.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        if exited_within(&mut self.child, Duration::from_secs(5)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The snippet in docs/origin-lock/ with its three placeholders filled in.
fn snippet(file: &str, listen: &str, app: std::net::SocketAddr) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/origin-lock")
        .join(file);
    std::fs::read_to_string(&path)
        .unwrap()
        .replace("SECRET", SECRET)
        .replace("LEGACY_APP", &app.to_string())
        .replace("LISTEN", listen)
}

fn need(tool: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(dir).join(tool);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{tool} is not installed: scripts/test installs it (apt-get install nginx-light apache2)"
    );
}

async fn answers(addr: std::net::SocketAddr) -> bool {
    client().get(format!("http://{addr}/")).send().await.is_ok()
}

/// Starts `program` with the configuration `conf(dir, listen)` written to `dir/file` and the
/// arguments `args(dir)`, and waits until it answers.
async fn front(
    program: &str,
    file: &str,
    conf: impl Fn(&str, &str) -> String,
    args: impl Fn(&str) -> Vec<String>,
) -> Front {
    let dir = tempfile::tempdir().unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let d = dir.path().display().to_string();
    std::fs::write(dir.path().join(file), conf(&d, &addr.to_string())).unwrap();
    let child = Command::new(need(program))
        .args(args(&d))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut front = Front {
        child,
        _dir: dir,
        addr,
    };
    let what = format!("{program} answers");
    eventually(Duration::from_secs(20), &what, || async move {
        answers(addr).await.then_some(())
    })
    .await;
    assert!(
        front.child.try_wait().unwrap().is_none(),
        "{program} exited"
    );
    front
}

async fn nginx(app: std::net::SocketAddr) -> Front {
    nginx_running(move |listen| snippet("nginx.conf", listen, app)).await
}

/// nginx with the `server { }` block `server(listen)` in its `http { }` block.
async fn nginx_running(server: impl Fn(&str) -> String) -> Front {
    let conf = |d: &str, listen: &str| {
        format!(
            "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\n  access_log off;\n{}\n}}\n",
            server(listen)
        )
    };
    let args = |d: &str| {
        vec![
            "-p".into(),
            d.into(),
            "-c".into(),
            format!("{d}/nginx.conf"),
        ]
    };
    front("nginx", "nginx.conf", conf, args).await
}

async fn apache(app: std::net::SocketAddr) -> Front {
    let m = "/usr/lib/apache2/modules";
    let conf = |d: &str, listen: &str| {
        format!(
            "ServerRoot \"{d}\"\nServerName localhost\nDefaultRuntimeDir \"{d}\"\nPidFile \"{d}/httpd.pid\"\nErrorLog \"{d}/error.log\"\nLogLevel warn\n\
             LoadModule mpm_event_module {m}/mod_mpm_event.so\nLoadModule authz_core_module {m}/mod_authz_core.so\n\
             LoadModule proxy_module {m}/mod_proxy.so\nLoadModule proxy_http_module {m}/mod_proxy_http.so\n\
             LoadModule headers_module {m}/mod_headers.so\nUser www-data\nGroup www-data\n{}\n",
            snippet("apache.conf", listen, app)
        )
    };
    let args = |d: &str| {
        vec![
            "-f".into(),
            format!("{d}/httpd.conf"),
            "-DFOREGROUND".into(),
        ]
    };
    front("apache2", "httpd.conf", conf, args).await
}

/// What the app saw of the secret header on its last request.
fn secret_seen(app: &Origin) -> Vec<Vec<u8>> {
    let seen = app.requests();
    let last = seen.last().expect("the app was asked");
    last.headers
        .iter()
        .filter(|(k, _)| k == HEADER)
        .map(|(_, v)| v.clone())
        .collect()
}

#[tokio::test]
async fn every_request_to_the_origin_carries_the_secret_and_only_ours() {
    let app = Origin::start().await;
    let proxy = start_anteroom(app.addr);
    for (path, guess) in [
        ("/elsewhere", None),
        ("/products/1", None),
        ("/elsewhere", Some("a-guess")),
        ("/products/2", Some(SECRET)),
    ] {
        let mut req = client().get(proxy.url(path));
        if let Some(g) = guess {
            req = req.header("X-Anteroom-Secret", g);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        assert_eq!(
            secret_seen(&app),
            vec![SECRET.as_bytes().to_vec()],
            "{path} with {guess:?}: exactly our secret, once"
        );
    }
}

async fn the_front_lets_only_anteroom_through(front: &Front, app: &Origin) {
    let direct = |value: Option<&'static str>| {
        let mut req = client().get(format!("http://{}/products/1", front.addr));
        if let Some(v) = value {
            req = req.header("X-Anteroom-Secret", v);
        }
        req
    };
    let before = app.requests().len();
    let upper: &'static str = Box::leak(SECRET.to_uppercase().into_boxed_str());
    for value in [None, Some("a-guess"), Some(""), Some(upper)] {
        let resp = direct(value).send().await.unwrap();
        assert_eq!(resp.status(), 403, "straight to the origin with {value:?}");
    }
    assert_eq!(app.requests().len(), before, "the app saw none of them");

    let proxy = start_anteroom(front.addr);
    for path in ["/elsewhere", "/products/1"] {
        let resp = client().get(proxy.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path} through anteroom");
        assert_eq!(
            resp.headers().get("x-origin").map(|v| v.as_bytes()),
            Some(&b"yes"[..]),
            "{path}: the app answered"
        );
        assert!(
            secret_seen(app).is_empty(),
            "{path}: the app never sees the secret"
        );
    }
}

#[tokio::test]
async fn trace_never_reaches_an_origin_that_gets_the_secret() {
    let app = Origin::start().await;
    let proxy = start_anteroom(app.addr);
    // Spelled as some origin still reads TRACE: without case (Werkzeug and others upper-case
    // the method), or as a method override.
    let spellings: [(&[u8], Option<&str>); 4] = [
        (b"TRACE", None),
        (b"trace", None),
        (b"Trace", None),
        (b"GET", Some("trace")),
    ];
    for path in ["/elsewhere", "/products/1"] {
        for (method, spelled) in spellings {
            let mut req = client().request(
                reqwest::Method::from_bytes(method).unwrap(),
                proxy.url(path),
            );
            if let Some(m) = spelled {
                req = req.header("x-http-method-override", m);
            }
            let resp = req.send().await.unwrap();
            let said = (String::from_utf8_lossy(method), spelled);
            assert_eq!(resp.status(), 405, "{path} {said:?}");
            let body = resp.text().await.unwrap();
            assert!(!body.contains(SECRET), "{path} {said:?}: {body}");
        }
    }
    assert!(app.requests().is_empty(), "the origin was never asked");
}

#[tokio::test]
async fn the_nginx_snippet_refuses_requests_that_did_not_come_through_anteroom() {
    let app = Origin::start().await;
    let front = nginx(app.addr).await;
    the_front_lets_only_anteroom_through(&front, &app).await;
}

#[tokio::test]
async fn the_apache_snippet_refuses_requests_that_did_not_come_through_anteroom() {
    let app = Origin::start().await;
    let front = apache(app.addr).await;
    the_front_lets_only_anteroom_through(&front, &app).await;
}

const HEALTH_CHECK: &str = r#"health-check = { path = "/health", every = "200ms" }"#;

/// `anteroom_origin_server_up` of `server`, as /metrics says.
async fn server_up(proxy: &Proxy, server: std::net::SocketAddr) -> Option<i64> {
    let sample = format!("anteroom_origin_server_up{{server=\"{server}\",upstream=\"shop\"}} ");
    metrics_text(proxy, TOKEN)
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&sample)?.trim().parse().ok())
}

/// Waits until `n` more health checks have reached the app (through the front, which lets
/// only requests with the secret or certificate in), with no server taken out of rotation
/// meanwhile; then the server must be up in /metrics and a request must reach the app.
async fn health_checks_pass(proxy: &Proxy, app: &Origin, server: std::net::SocketAddr, n: usize) {
    let out = |p: &Proxy| p.stderr().matches("out of rotation").count();
    let (outs, checks) = (out(proxy), app.count("/health"));
    eventually(
        Duration::from_secs(20),
        &format!("{n} health checks reach the app"),
        || async {
            let taken_out = out(proxy) > outs;
            let up = server_up(proxy, server).await;
            if taken_out || up == Some(0) {
                panic!(
                    "a health check failed, anteroom_origin_server_up = {up:?}: {}",
                    proxy.stderr()
                );
            }
            (app.count("/health") >= checks + n).then_some(())
        },
    )
    .await;
    assert_eq!(server_up(proxy, server).await, Some(1));
    let resp = client().get(proxy.url("/products/1")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers().get("x-origin").map(|v| v.as_bytes()),
        Some(&b"yes"[..]),
        "the app answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_carry_the_secret_through_the_nginx_snippet() {
    let app = Origin::start().await;
    let front = nginx(app.addr).await;
    let proxy = start_anteroom_with(front.addr, HEALTH_CHECK);
    health_checks_pass(&proxy, &app, front.addr, 3).await;
}

/// A secret written in the file and changed on SIGHUP (a rotation): the health checks take
/// the new value, as requests do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_secret_is_the_one_health_checks_send() {
    let app = Origin::start().await;
    let front = nginx(app.addr).await;
    let old = "the-secret-before-the-rotation-0123456789";
    let proxy = Proxy::start_with(
        &config_with(front.addr, old, HEALTH_CHECK),
        &[("ANTEROOM_LOG", "info")],
        &[],
    );
    // nginx knows only the new one: the server is taken out.
    eventually(
        Duration::from_secs(20),
        "the old secret's check fails",
        || async { (server_up(&proxy, front.addr).await == Some(0)).then_some(()) },
    )
    .await;
    let path = proxy.config_path();
    let text = std::fs::read_to_string(&path).unwrap().replace(old, SECRET);
    std::fs::write(&path, text).unwrap();
    proxy.signal("HUP");
    eventually(Duration::from_secs(20), "the reload", || async {
        proxy
            .stderr()
            .contains("configuration reloaded")
            .then_some(())
    })
    .await;
    // Only a check with the new secret reaches the app.
    health_checks_pass(&proxy, &app, front.addr, 3).await;
}

mod mutual_tls;
