//! Orders while the room is switched off (everyone passes): an admission is used up, a place
//! in line is taken, as an order does whatever let it through.

use super::*;

/// An order that carries an admission while the room is switched off (everyone passes) uses it
/// up: once the room is on again, the kept cookie orders no more (found by re-review r90c: one
/// admission, three orders across an off and on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_while_the_room_is_off_uses_its_admission() {
    let shop = Shop::start().await;
    let proxy = Proxy::start(&config(shop.addr, "", "max-active = 10"));
    let mut jar = admitted(&proxy).await;
    let mut kept = jar.clone();
    switch_room(&proxy, TOKEN, "sale", false).await;
    assert_eq!(order(&proxy, &mut jar).await, 200, "the order while off");
    assert!(
        jar.get("anteroom_sale").is_none(),
        "the order clears the cookie"
    );
    switch_room(&proxy, TOKEN, "sale", true).await;
    assert_eq!(order(&proxy, &mut kept).await, 409, "the kept cookie");
    assert_eq!(shop.orders(), 1, "the shop saw one order");
}

/// An order without an admission while the room is switched off, by a visitor in line, takes
/// them out of the line as an order let through under `open` does: once the room is on again,
/// their place buys no second order (found by review r95b: the place was kept, its turn came,
/// and the visitor ordered twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_from_the_line_while_the_room_is_off_takes_the_place() {
    let shop = Shop::start().await;
    let room = "max-active = 1\nsession-ttl = \"60s\"";
    let proxy = Proxy::start(&config(shop.addr, "", room));
    let _inside = admitted(&proxy).await;
    let mut first = Jar::default();
    let mut second = Jar::default();
    for jar in [&mut first, &mut second] {
        let v = get_json(&proxy, "/.anteroom/status?room=sale", jar)
            .await
            .unwrap();
        assert_eq!(v["state"], "waiting", "the room is full: {v}");
    }
    switch_room(&proxy, TOKEN, "sale", false).await;
    assert_eq!(order(&proxy, &mut first).await, 200, "everyone passes");
    assert_eq!(shop.orders(), 1);
    switch_room(&proxy, TOKEN, "sale", true).await;
    // Settled by the shop's answer: the one who ordered is in line no more, the other is first.
    eventually(Duration::from_secs(10), "the order settled", || {
        let (proxy, mut second) = (&proxy, second.clone());
        async move {
            let v = get_json(proxy, "/.anteroom/status?room=sale", &mut second).await?;
            (v["position"] == 1).then_some(())
        }
    })
    .await;
    let v = get_json(&proxy, "/.anteroom/status?room=sale", &mut first)
        .await
        .unwrap();
    assert_ne!(v["position"], 1, "the place that bought the order: {v}");
}
