//! HTTP/2 spellings of the host, over anteroom's own TLS listener: the room is chosen by
//! `:authority` (an HTTP/2 request may carry no `Host`), a `Host` that disagrees with it is
//! refused, and another host on a path a host-bound room protects gets the same refusal as over
//! HTTP/1.1. A raw HTTP/2 client (h2 over rustls), since curl will not send what a script can.

#[path = "../common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::tls::TestCa;
use common::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

mod slots;

/// One HTTP/2 GET of `uri` with `host` (when given) as a header; the status and set cookies.
async fn h2_get(
    port: u16,
    ca: &std::path::Path,
    uri: &str,
    host: Option<&str>,
) -> (u16, Vec<String>) {
    let mut req = http::Request::builder().uri(uri);
    if let Some(h) = host {
        req = req.header("host", h);
    }
    h2_send(port, ca, req.body(()).unwrap(), None).await
}

/// One HTTP/2 request, with `body` in a DATA frame after its headers when given; the status
/// (0 when the stream was reset) and set cookies.
async fn h2_send(
    port: u16,
    ca: &std::path::Path,
    req: http::Request<()>,
    body: Option<&'static [u8]>,
) -> (u16, Vec<String>) {
    let (mut client, _conn) = h2_connect(port, ca).await;
    let (resp, mut stream) = client.send_request(req, body.is_none()).unwrap();
    if let Some(b) = body {
        stream
            .send_data(bytes::Bytes::from_static(b), true)
            .unwrap();
    }
    let Ok(resp) = resp.await else {
        return (0, Vec::new());
    };
    let cookies = resp
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    (resp.status().as_u16(), cookies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_is_chosen_by_authority_and_a_disagreeing_host_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    let (proxy, port, ca_pem) = https_proxy(dir.path(), &origin).await;
    let url = |host: &str, path: &str| format!("https://{host}:{port}{path}");

    // No Host header at all: :authority names the room, whose cookie the answer sets.
    let (status, cookies) = h2_get(port, &ca_pem, &url("shop.test", "/products/1"), None).await;
    assert_eq!(status, 200);
    assert!(
        cookies.iter().any(|c| c.starts_with("anteroom_sale=")),
        "in the room: {cookies:?}"
    );
    // A Host that says otherwise, either way round: refused, never routed on one of them.
    for (authority, host) in [("shop.test", "other.test"), ("other.test", "shop.test")] {
        let (status, cookies) =
            h2_get(port, &ca_pem, &url(authority, "/products/1"), Some(host)).await;
        assert_eq!(status, 400, ":authority {authority}, Host {host}");
        assert!(cookies.is_empty());
    }
    // Another host on the room's path: the default `other-hosts = "refuse"`, as over HTTP/1.1.
    let (status, _) = h2_get(port, &ca_pem, &url("other.test", "/products/1"), None).await;
    assert_eq!(status, 400);
    // Outside the room's paths another host is just passed on.
    let (status, _) = h2_get(port, &ca_pem, &url("other.test", "/about"), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        origin.count("/products"),
        1,
        "only the request in the room reached the shop's products: {:?}",
        origin.requests()
    );
    drop(proxy);
}

/// Starts anteroom with its HTTPS listener for `shop.test` (certificate from a test CA in
/// `dir`) in front of `origin`, with a room on `/products`; its port and the CA's file.
async fn https_proxy(dir: &std::path::Path, origin: &Origin) -> (Proxy, u16, std::path::PathBuf) {
    https_proxy_with(dir, origin, "", "").await
}

/// The same, with `server` lines before the file's tables (`[server]`, `[admin]`, upstream
/// settings) and `room` lines in the room.
async fn https_proxy_with(
    dir: &std::path::Path,
    origin: &Origin,
    server: &str,
    room: &str,
) -> (Proxy, u16, std::path::PathBuf) {
    https_proxy_env(dir, origin, server, room, &[]).await
}

/// [`https_proxy_with`] with environment variables for the proxy.
async fn https_proxy_env(
    dir: &std::path::Path,
    origin: &Origin,
    server: &str,
    room: &str,
    env: &[(&str, &str)],
) -> (Proxy, u16, std::path::PathBuf) {
    https_proxy_at(dir, origin.addr, server, room, env).await
}

/// [`https_proxy_env`] in front of an origin at `origin`.
async fn https_proxy_at(
    dir: &std::path::Path,
    origin: SocketAddr,
    server: &str,
    room: &str,
    env: &[(&str, &str)],
) -> (Proxy, u16, std::path::PathBuf) {
    let ca = TestCa::new(dir);
    let (cert, key) = ca.issue("shop", &["DNS:shop.test"]);
    let port = free_port();
    let proxy = Proxy::start_with(
        &format!(
            r#"https = "127.0.0.1:{port}"
{server}
{base}
[[room]]
name = "sale"
hosts = ["shop.test"]
paths = ["/products"]
admit-per-second = 100
max-active = 100
{room}

[[tls]]
hosts = ["shop.test"]
cert = "{}"
key = "{}"
"#,
            cert.display(),
            key.display(),
            base = base_config(origin)
        ),
        env,
        &[],
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    eventually(
        std::time::Duration::from_secs(20),
        "the HTTPS listener",
        || async move { tokio::net::TcpStream::connect(addr).await.ok().map(|_| ()) },
    )
    .await;
    (proxy, port, ca.ca())
}

/// A GET with a DATA frame and a length is refused as over HTTP/1.1 (see
/// tests/request_bodies.rs): over HTTP/2 it reached an HTTP/1.1 shop with a `Content-Length`
/// and its body (found by review). Without a length (a client may end a GET with an empty DATA
/// frame) it goes on chunked, on an origin connection that ends with its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_with_a_body_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    let (proxy, port, ca) = https_proxy(dir.path(), &origin).await;
    let smuggled: &[u8] = b"POST /products/order HTTP/1.1\r\nHost: shop.test\r\n\r\n";
    for path in ["/public", "/products/1"] {
        let req = http::Request::builder()
            .uri(format!("https://shop.test:{port}{path}"))
            .header("content-length", smuggled.len())
            .body(())
            .unwrap();
        let (status, _) = h2_send(port, &ca, req, Some(smuggled)).await;
        assert!(status == 400 || status == 0, "{path} with a body: {status}");
    }
    assert!(origin.requests().is_empty(), "{:?}", origin.requests());
    // No length: an empty DATA frame at the end, or a body sent chunked.
    for body in [&b""[..], smuggled] {
        let uri = format!("https://shop.test:{port}/public");
        let req = http::Request::builder().uri(uri).body(()).unwrap();
        assert_eq!(h2_send(port, &ca, req, Some(body)).await.0, 200);
    }
    let seen = origin.requests();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for s in &seen {
        assert_eq!(s.uri, "/public", "{seen:?}");
        assert_eq!(s.header("connection").as_deref(), Some("close"), "{s:?}");
    }
    // Without one, as ever.
    let (status, _) = h2_get(port, &ca, &format!("https://shop.test:{port}/public"), None).await;
    assert_eq!(status, 200);
    drop(proxy);
}

/// Over HTTP/2 a body needs no length header: a "preflight" with one is no preflight, and the
/// room's `{ preflight = true }` rule does not send it past the line (found by review: it did,
/// body and all, past a full room). A preflight as browsers send it does go past.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preflight_with_a_body_is_no_preflight() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    let (proxy, port, ca) =
        https_proxy_with(dir.path(), &origin, "", "bypass = [{ preflight = true }]").await;
    let preflight = || {
        http::Request::builder()
            .method("OPTIONS")
            .uri(format!("https://shop.test:{port}/products/1"))
            .header("origin", "https://app.shop.test")
            .header("access-control-request-method", "POST")
            .body(())
            .unwrap()
    };
    // The room has room: with a body the request goes through the line (a newcomer let in,
    // given an admission), not past it.
    let smuggled: &[u8] = b"POST /products/order HTTP/1.1\r\n";
    let (status, cookies) = h2_send(port, &ca, preflight(), Some(smuggled)).await;
    assert_eq!(status, 200);
    assert!(
        cookies.iter().any(|c| c.starts_with("anteroom_sale=")),
        "through the line: {cookies:?}"
    );
    let (status, cookies) = h2_send(port, &ca, preflight(), None).await;
    assert_eq!(status, 200);
    assert!(
        !cookies.iter().any(|c| c.starts_with("anteroom_")),
        "past the line: {cookies:?}"
    );
    let seen = origin.requests();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].method, "OPTIONS", "{seen:?}");
    drop(proxy);
}

/// HTTP/2 sends each cookie as a field of its own; the shop gets them as one `Cookie` line
/// joined with "; " (RFC 9113 §8.2.3), ours taken out or not. Before, a request without our
/// cookies reached it as several lines, which servers that join repeated headers with ","
/// (Werkzeug, PHP, gunicorn) read as one cookie (found by review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_fields_reach_the_shop_as_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start().await;
    let (proxy, port, ca) = https_proxy(dir.path(), &origin).await;
    let req = http::Request::builder()
        .uri(format!("https://shop.test:{port}/public"))
        .header("cookie", "shop_session=abc")
        .header("cookie", "cart=42")
        .body(())
        .unwrap();
    assert_eq!(h2_send(port, &ca, req, None).await.0, 200);
    let seen = origin.requests();
    let cookies: Vec<String> = seen[0]
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("cookie"))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(cookies, ["shop_session=abc; cart=42"]);
    drop(proxy);
}

/// The length a stalled POST declares: over what is read whole before the origin slot
/// (64 KiB), so that it streams to the origin and holds its slot.
const STALLED_LEN: usize = 100_000;

/// The admin token the capped rooms' tests configure.
const ADMIN: &str = "admin-token-for-tests-0123456789";

/// An HTTP/2 connection to anteroom's TLS listener, ready for requests.
async fn h2_connect(
    port: u16,
    ca: &std::path::Path,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    h2_connect_with(port, ca, h2::client::Builder::new()).await
}

/// [`h2_connect`] with the client's settings.
async fn h2_connect_with(
    port: u16,
    ca: &std::path::Path,
    builder: h2::client::Builder,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("shop.test").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (client, conn) = builder.handshake(tls).await.unwrap();
    (client.ready().await.unwrap(), tokio::spawn(conn))
}
