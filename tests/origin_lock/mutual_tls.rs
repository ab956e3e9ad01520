//! HTTPS to the origin with a client certificate: nginx (docs/origin-lock/nginx-mtls.conf)
//! serves only a client whose certificate the client CA signed; anteroom shows its own, and
//! checks the origin's against the `ca` it is given.

use super::*;
use common::tls::TestCa;

struct Certs {
    _dirs: Vec<tempfile::TempDir>,
    origin_ca: PathBuf,
    server: (PathBuf, PathBuf),
    client_ca: PathBuf,
    client: (PathBuf, PathBuf),
    stranger: (PathBuf, PathBuf),
}

fn certs() -> Certs {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let origin_ca = TestCa::new(dirs[0].path());
    let client_ca = TestCa::new(dirs[1].path());
    let other_ca = TestCa::new(dirs[2].path());
    Certs {
        origin_ca: origin_ca.ca(),
        server: origin_ca.issue("origin", &["DNS:origin.test"]),
        client_ca: client_ca.ca(),
        client: client_ca.issue("anteroom", &["DNS:anteroom.test"]),
        stranger: other_ca.issue("stranger", &["DNS:anteroom.test"]),
        _dirs: dirs,
    }
}

async fn nginx_mtls(app: std::net::SocketAddr, c: &Certs) -> Front {
    let snippet = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/origin-lock/nginx-mtls.conf"),
    )
    .unwrap();
    let (cert, key, ca) = (
        c.server.0.display().to_string(),
        c.server.1.display().to_string(),
        c.client_ca.display().to_string(),
    );
    nginx_running(move |listen| {
        snippet
            .replace("SERVER_CERT", &cert)
            .replace("SERVER_KEY", &key)
            .replace("CLIENT_CA", &ca)
            .replace("LEGACY_APP", &app.to_string())
            .replace("LISTEN", listen)
    })
    .await
}

fn anteroom(front: std::net::SocketAddr, ca: &Path, client: Option<&(PathBuf, PathBuf)>) -> Proxy {
    anteroom_with(front, ca, client, "")
}

/// With the upstream's `extra` lines.
fn anteroom_with(
    front: std::net::SocketAddr,
    ca: &Path,
    client: Option<&(PathBuf, PathBuf)>,
    extra: &str,
) -> Proxy {
    let client = client
        .map(|(c, k)| {
            format!(
                "client-cert = {{ cert = \"{}\", key = \"{}\" }}\n",
                c.display(),
                k.display()
            )
        })
        .unwrap_or_default();
    Proxy::start(&format!(
        r#"
[cookie]
keys = ["{KEY}"]

[admin]
token = "{TOKEN}"

[[upstream]]
name = "shop"
addr = "{front}"
tls = true
sni = "origin.test"
ca = "{ca}"
{client}{extra}
{SALE}"#,
        ca = ca.display()
    ))
}

/// curl straight to the origin's front, trusting its CA, with or without a client pair.
fn direct(front: std::net::SocketAddr, c: &Certs, pair: Option<&(PathBuf, PathBuf)>) -> u16 {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "10",
        "--cacert",
    ])
    .arg(&c.origin_ca)
    .args([
        "--resolve",
        &format!("origin.test:{}:127.0.0.1", front.port()),
    ]);
    if let Some((cert, key)) = pair {
        cmd.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    let out = cmd
        .arg(format!("https://origin.test:{}/products/1", front.port()))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
}

#[tokio::test]
async fn the_origin_serves_anteroom_and_nobody_without_its_certificate() {
    let c = certs();
    let app = Origin::start().await;
    let front = nginx_mtls(app.addr, &c).await;
    // Straight to the origin: no certificate, or one from another CA, is refused.
    assert_eq!(direct(front.addr, &c, None), 400);
    assert_eq!(direct(front.addr, &c, Some(&c.stranger)), 400);
    assert!(app.requests().is_empty(), "the app saw none of them");

    let proxy = anteroom(front.addr, &c.origin_ca, Some(&c.client));
    for path in ["/elsewhere", "/products/1"] {
        let resp = client().get(proxy.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path} through anteroom");
        assert_eq!(
            resp.headers()["x-origin"],
            "yes",
            "{path}: the app answered"
        );
    }
    assert_eq!(app.requests().len(), 2);
}

/// The health checks show the certificate too: nginx would refuse them (400) without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_show_the_client_certificate() {
    let c = certs();
    let app = Origin::start().await;
    let front = nginx_mtls(app.addr, &c).await;
    let proxy = anteroom_with(front.addr, &c.origin_ca, Some(&c.client), HEALTH_CHECK);
    health_checks_pass(&proxy, &app, front.addr, 3).await;
}

#[tokio::test]
async fn without_the_pair_or_with_another_ca_anteroom_does_not_get_through() {
    let c = certs();
    let app = Origin::start().await;
    let front = nginx_mtls(app.addr, &c).await;
    // No client certificate: the origin refuses anteroom too.
    let bare = anteroom(front.addr, &c.origin_ca, None);
    let resp = client().get(bare.url("/elsewhere")).send().await.unwrap();
    assert_ne!(resp.status(), 200);
    // The origin's certificate is checked against `ca`: a CA that did not sign it fails
    // the handshake (anteroom's error page), it is not waved through.
    let wrong = anteroom(front.addr, &c.client_ca, Some(&c.client));
    let resp = client().get(wrong.url("/elsewhere")).send().await.unwrap();
    assert_eq!(resp.status(), 502, "{:?}", resp.headers());
    assert!(app.requests().is_empty(), "the app was never asked");
}
