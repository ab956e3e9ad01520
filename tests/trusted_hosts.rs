//! Host readings from a trusted proxy (`X-Forwarded-Host`, `X-Host`, `X-Original-Host`,
//! `Forwarded: host=`) beside the `Host` the origin gets: a reading that names no room is
//! another host, which `other-hosts` decides, whatever another reading names.

mod common;

use common::raw::{assert_held, get, occupy, raw};
use common::{base_config, Origin, Proxy};

/// Two host-bound rooms on one origin protect `/products`: the shop's, full, and a cheap one
/// that lets everyone in.
fn two_sites(origin: &Origin) -> Proxy {
    Proxy::start(&format!(
        r#"trusted-proxies = ["127.0.0.0/8"]

[[room]]
name = "sale"
upstream = "shop"
hosts = ["shop.test"]
paths = ["/products", "/orders"]
admit-per-second = 1
max-active = 1
consume = ["POST /orders"]

[[room]]
name = "other"
upstream = "shop"
hosts = ["other.test"]
paths = ["/products", "/orders"]
admit-per-second = 1000
max-active = 1000
{base}"#,
        base = base_config(origin.addr)
    ))
}

/// Found by review: behind a trusted proxy, `Host: 127.0.0.1` with `X-Host: other.test` went
/// to other.test's line, let in at once, and reached the origin with the `Host` it serves as
/// its default site — the shop's, at its protected path.
#[tokio::test]
async fn a_host_the_origin_reads_that_names_no_room_is_not_hidden_by_a_claim_that_does() {
    let origin = Origin::start().await;
    let proxy = two_sites(&origin);
    occupy(&proxy, "shop.test").await;
    for (host, claim) in [
        ("127.0.0.1", "X-Forwarded-Host: other.test"),
        ("127.0.0.1", "X-Host: other.test"),
        ("www.shop.test", "X-Original-Host: other.test"),
        ("127.0.0.1", "Forwarded: for=1.2.3.4;host=other.test"),
        // The origin may trust the claim and read the shop's other name.
        ("other.test", "X-Forwarded-Host: www.shop.test"),
    ] {
        let what = format!("Host: {host} with {claim}");
        assert_held(
            &proxy,
            &origin,
            &get("/products/1", host, &format!("{claim}\r\n")),
            &what,
        )
        .await;
        let order = format!(
            "POST /orders HTTP/1.1\r\nHost: {host}\r\n{claim}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        );
        assert_held(&proxy, &origin, &order, &format!("an order, {what}")).await;
    }
    // No Host at all: the origin serves its default site.
    assert_held(
        &proxy,
        &origin,
        "GET /products/1 HTTP/1.0\r\nX-Forwarded-Host: other.test\r\n\r\n",
        "HTTP/1.0 without Host, X-Forwarded-Host: other.test",
    )
    .await;
    // Readings that agree go to their room; the rest of the site is outside both.
    let r = raw(
        &proxy,
        &get(
            "/products/1",
            "other.test",
            "X-Forwarded-Host: other.test\r\n",
        ),
    )
    .await;
    assert!(r.reached_origin(), "{r:?}");
    let r = raw(
        &proxy,
        &get("/about", "127.0.0.1", "X-Forwarded-Host: other.test\r\n"),
    )
    .await;
    assert!(r.reached_origin(), "{r:?}");
}

/// A load balancer that puts its own name in `Host` in front of one site: the claim names the
/// room, and the room holds the line (the origin's default site is that room's).
#[tokio::test]
async fn a_proxy_that_names_itself_in_host_in_front_of_one_site_is_routed_by_its_claim() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&format!(
        r#"trusted-proxies = ["127.0.0.0/8"]

[[room]]
name = "sale"
upstream = "shop"
hosts = ["shop.test"]
paths = ["/products", "/orders"]
admit-per-second = 1
max-active = 1
{base}"#,
        base = base_config(origin.addr)
    ));
    occupy(&proxy, "shop.test").await;
    let r = raw(
        &proxy,
        &get(
            "/products/1",
            "lb.internal",
            "X-Forwarded-Host: shop.test\r\n",
        ),
    )
    .await;
    assert!(
        r.status == 200 && !r.reached_origin() && r.body.contains("anteroom"),
        "waits in the shop's line: {r:?}"
    );
}
