//! Queue tickets of a draw's places tossed in beside the visitor's own (a sibling site's
//! cookies of the same name): before the opening the draw is sealed and says nothing of which
//! place is earlier, so every registration the request holds stays held and the visitor's own
//! cookies are left as they are; after it, the earlier place counts, as for any ticket (found
//! by re-review: a drawn place counted for nothing after the opening too, and a registrant's
//! ticket tossed in first took the place of a visitor at the head of the line).

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anteroom::event::time;
use common::*;
use serde_json::Value;

const SECRET: &str = "draw-secret-for-the-tests-0123456789abcdef";
const STATUS: &str = "/.anteroom/status?room=sale";

fn at(secs: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    time::format(now.saturating_add_signed(secs * 1_000_000), 0)
}

/// One slot, a short `abandon-after`, a draw that opens in `opens_in` seconds.
fn config(origin: std::net::SocketAddr, opens_in: i64) -> String {
    format!(
        r#"{base}
[draw]
secret = "{SECRET}"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 50
max-active = 1
claim-ttl = "60s"
tick = "50ms"
abandon-after = "3s"
throttled-poll = "1s"
poll = [ {{ every = "1s" }} ]

[[room.event]]
name = "drop"
prequeue-from = "{from}"
opens-at = "{opens}"
draw = true
"#,
        base = base_config(origin),
        from = at(-1),
        opens = at(opens_in)
    )
}

/// A status poll with `cookie` as sent: the reply and the cookies it sets.
async fn poll(proxy: &Proxy, cookie: &str) -> (Value, Jar) {
    let resp = client()
        .get(proxy.url(STATUS))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    let mut set = Jar::default();
    set.absorb(&resp);
    (resp.json().await.unwrap(), set)
}

/// `jar`'s poll, the cookies it is given kept.
async fn poll_as(proxy: &Proxy, jar: &mut Jar) -> Value {
    let (v, set) = poll(proxy, &jar.header()).await;
    for name in ["anteroom_vid", "anteroom_q.sale"] {
        if let Some(value) = set.get(name) {
            jar.set(name, value);
        }
    }
    v
}

/// The cookies of `tossed` sent before `own`'s, as a browser sends a sibling site's cookies
/// for a longer path.
fn tossed_first(tossed: &Jar, own: &Jar) -> String {
    format!("{}; {}", tossed.header(), own.header())
}

async fn registrations(proxy: &Proxy) -> u64 {
    let resp = client()
        .get(proxy.url("/.anteroom/event?room=sale"))
        .send()
        .await
        .unwrap();
    let doc: Value = resp.json().await.unwrap();
    doc["registrations"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tossed_registration_moves_nobody_back_before_or_after_the_opening() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(&config(origin.addr, 9));
    let mut jars: Vec<Jar> = (0..5).map(|_| Jar::default()).collect();
    for jar in jars.iter_mut() {
        assert_eq!(poll_as(&proxy, jar).await["state"], "prequeue");
    }
    eventually(Duration::from_secs(5), "five registrations counted", || {
        let proxy = &proxy;
        async move { (registrations(proxy).await == 5).then_some(()) }
    })
    .await;
    // Before the opening: the request speaks for one registration and sets neither cookie
    // (which would replace the visitor's own with the other), and polls that carry both
    // keep both, past abandon-after.
    let (tossed, own) = (jars[0].clone(), jars[1].clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < deadline {
        let (v, set) = poll(&proxy, &tossed_first(&tossed, &own)).await;
        assert_eq!(v["state"], "prequeue", "{v}");
        assert!(
            set.get("anteroom_q.sale").is_none() && set.get("anteroom_vid").is_none(),
            "a cookie of the visitor's set: {}",
            set.header()
        );
        for jar in jars.iter_mut().skip(2) {
            assert_eq!(poll_as(&proxy, jar).await["state"], "prequeue");
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert_eq!(registrations(&proxy).await, 5, "a registration was swept");
    // The opening: everyone is placed by the draw.
    let places = eventually(
        Duration::from_secs(20),
        "one let in, everyone else placed",
        || {
            let mut jars = jars.clone();
            let proxy = &proxy;
            async move {
                let mut places = Vec::new();
                for jar in jars.iter_mut() {
                    let v = poll_as(proxy, jar).await;
                    places.push(match v["state"].as_str() {
                        Some("admitted") => 0,
                        Some("waiting") => v["position"].as_u64()?,
                        _ => return None,
                    });
                }
                let mut sorted = places.clone();
                sorted.sort_unstable();
                (sorted == [0, 1, 2, 3, 4]).then_some(places)
            }
        },
    )
    .await;
    // A registrant's ticket tossed in before the visitor's own: the earlier place counts,
    // whichever it is, and the cookies given back are its.
    let first = places.iter().position(|p| *p == 1).unwrap();
    let last = places.iter().position(|p| *p == 4).unwrap();
    let (v, set) = poll(&proxy, &tossed_first(&jars[last], &jars[first])).await;
    assert_eq!(
        (&v["state"], &v["position"]),
        (&"waiting".into(), &1.into()),
        "{v}"
    );
    assert_eq!(set.get("anteroom_vid"), jars[first].get("anteroom_vid"));
    let (v, set) = poll(&proxy, &tossed_first(&jars[first], &jars[last])).await;
    assert_eq!(v["position"], 1, "moved forward to the tossed place: {v}");
    assert_eq!(set.get("anteroom_vid"), jars[first].get("anteroom_vid"));
}
