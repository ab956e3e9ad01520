//! HTTP/2 spellings of the host, over anteroom's own TLS listener: the room is chosen by
//! `:authority` (an HTTP/2 request may carry no `Host`), a `Host` that disagrees with it is
//! refused, and another host on a path a host-bound room protects gets the same refusal as over
//! HTTP/1.1. A raw HTTP/2 client (h2 over rustls), since curl will not send what a script can.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::tls::TestCa;
use common::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// One HTTP/2 GET of `uri` with `host` (when given) as a header; the status and set cookies.
async fn h2_get(
    port: u16,
    ca: &std::path::Path,
    uri: &str,
    host: Option<&str>,
) -> (u16, Vec<String>) {
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
    let (client, conn) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    let mut req = http::Request::builder().uri(uri);
    if let Some(h) = host {
        req = req.header("host", h);
    }
    let (resp, _) = client.send_request(req.body(()).unwrap(), true).unwrap();
    let resp = resp.await.unwrap();
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
    let ca = TestCa::new(dir.path());
    let (cert, key) = ca.issue("shop", &["DNS:shop.test"]);
    let origin = Origin::start().await;
    let port = free_port();
    let proxy = Proxy::start(&format!(
        r#"https = "127.0.0.1:{port}"
{base}
[[room]]
name = "sale"
hosts = ["shop.test"]
paths = ["/products"]
admit-per-second = 100
max-active = 100

[[tls]]
hosts = ["shop.test"]
cert = "{}"
key = "{}"
"#,
        cert.display(),
        key.display(),
        base = base_config(origin.addr)
    ));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    eventually(
        std::time::Duration::from_secs(20),
        "the HTTPS listener",
        || async move { tokio::net::TcpStream::connect(addr).await.ok().map(|_| ()) },
    )
    .await;
    let ca_pem = ca.ca();
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
