//! The conformance suite on Redis: standalone, and a three-master cluster.

#[path = "../common/mod.rs"]
mod common;
#[path = "../conformance/mod.rs"]
mod conformance;

use std::sync::Arc;
use std::time::Duration;

use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::Store;
use common::redis::{RedisCluster, RedisServer};

mod connections;
mod markers;
mod outage;
mod restart_probe;

/// Kept only so the servers live (and are killed) with the harness.
#[allow(dead_code)]
enum Servers {
    Single(RedisServer),
    Cluster(RedisCluster),
}

struct Redis {
    _servers: Servers,
    store: Arc<RedisStore>,
}

impl Redis {
    fn standalone() -> Self {
        let server = RedisServer::start();
        let store = RedisStore::new(Target::Single(server.url()), Duration::from_secs(2)).unwrap();
        store.freeze_clock();
        Self {
            _servers: Servers::Single(server),
            store: Arc::new(store),
        }
    }

    fn cluster() -> Self {
        let cluster = RedisCluster::start();
        let store =
            RedisStore::new(Target::Cluster(cluster.urls()), Duration::from_secs(2)).unwrap();
        store.freeze_clock();
        Self {
            _servers: Servers::Cluster(cluster),
            store: Arc::new(store),
        }
    }
}

impl Redis {
    fn ports(&self) -> Vec<u16> {
        match &self._servers {
            Servers::Single(s) => vec![s.port],
            Servers::Cluster(c) => c.nodes.iter().map(|n| n.port).collect(),
        }
    }
}

impl conformance::Harness for Redis {
    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    fn wall_secs(&self) -> u64 {
        self.store.now_secs()
    }

    fn advance(&self, by: Duration) {
        self.store.shift_clock(by);
    }

    fn let_time_pass(&self, by: Duration) {
        self.store.shift_clock(by);
        for port in self.ports() {
            common::redis::age_keys(port, by);
        }
    }

    fn step_back(&self, by: Duration) {
        self.store.step_clock_back(by);
    }

    fn wipe(&self) {
        for port in self.ports() {
            let reply = common::redis::raw(port, "FLUSHALL");
            assert!(
                reply.is_some_and(|r| r.starts_with("+OK")),
                "FLUSHALL on {port}"
            );
        }
    }
}

mod standalone {
    use super::*;
    conformance_suite!(Redis::standalone());

    #[test]
    fn properties_under_random_traffic() {
        conformance::properties::random_traffic(&Redis::standalone(), 100);
    }
}

mod cluster {
    use super::*;
    conformance_suite!(Redis::cluster());

    #[test]
    fn properties_under_random_traffic() {
        conformance::properties::random_traffic(&Redis::cluster(), 50);
    }
}

/// A room whose keys are in another key layout than this version's (a rolling upgrade across an
/// incompatible change): every call on it is refused with an error that says so, and nothing
/// in the room is changed.
/// After the store lost the room's data (an empty restart), a join through an instance that had
/// seen the old generation lets nobody in at once, before that instance's next admit has
/// noticed the loss and re-asserted the room's state (which may be a held line): the newcomer
/// queues as paused. Before, a flood that reached the empty store first walked in on the fast
/// path, a whole batch of it, through a held line (tests/redis_recovery/
/// `a_held_line_stays_held_while_newcomers_flood_an_empty_restart`, now and then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_store_lost_the_room_nobody_walks_in_before_the_next_admit() {
    use anteroom::store::{Admission, VisitorId};
    let server = RedisServer::start();
    let store = RedisStore::new(Target::Single(server.url()), Duration::from_secs(2)).unwrap();
    let p = conformance::room("lost", 100.0, 100);
    store.admit(&p).await.unwrap();
    common::redis::raw(server.port, "FLUSHALL").unwrap();
    for _ in 0..5 {
        let a = store.join(&p, VisitorId::random()).await.unwrap();
        assert!(matches!(a, Admission::Paused { .. }), "{a:?}");
    }
    // The next admit sees the new generation (and, knowing the old one, holds the line until the
    // state is re-asserted); a store that never lost anything lets a newcomer in at once.
    let fresh = RedisStore::new(Target::Single(server.url()), Duration::from_secs(2)).unwrap();
    let q = conformance::room("fresh", 100.0, 100);
    assert_eq!(
        fresh.join(&q, VisitorId::random()).await.unwrap(),
        Admission::Entered
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_in_another_key_layout_is_refused_loudly() {
    let server = RedisServer::start();
    let store = RedisStore::new(Target::Single(server.url()), Duration::from_secs(2)).unwrap();
    let p = conformance::room("layout", 10.0, 10);
    let v = anteroom::store::VisitorId::random();
    store.join(&p, v).await.unwrap();
    let key = format!("{{anteroom:{}}}:room", p.name);
    assert_eq!(
        common::redis::raw(server.port, &format!("HGET {key} layout")).as_deref(),
        Some("$1\r\n2\r\n"),
        "a join that is the room's first call records the layout too (found by review)"
    );
    let r = store.admit(&p).await.unwrap();
    assert_eq!(r.active, 1);
    assert_eq!(
        common::redis::raw(server.port, &format!("HGET {key} layout")).as_deref(),
        Some("$1\r\n2\r\n"),
        "admit records the layout (2: slot 0 marks a registration, since events)"
    );
    common::redis::raw(server.port, &format!("HSET {key} layout 99")).unwrap();
    let refused = |e: anteroom::store::StoreError| {
        assert!(e.is_layout_refusal(), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("layout 99") && text.contains("speaks layout 2"),
            "{text}"
        );
    };
    refused(store.admit(&p).await.unwrap_err());
    refused(
        store
            .join(&p, anteroom::store::VisitorId::random())
            .await
            .unwrap_err(),
    );
    refused(store.touch(&p, v).await.unwrap_err());
    refused(store.stats(&p).await.unwrap_err());
    refused(store.room_state(&p).await.unwrap_err());
    let order = anteroom::store::Order {
        request: anteroom::store::RequestId::random(),
        grace: Duration::from_secs(10),
        vouched: true,
        cookie_life: Duration::from_secs(600),
        cookie_expires: 0,
        generation: None,
        events_version: None,
    };
    refused(store.consume(&p, v, &order).await.unwrap_err());
    let how = anteroom::store::Settle::Confirm;
    refused(store.settle(&p, v, &order.request, how).await.unwrap_err());
    refused(store.runtime_events(&p).await.unwrap_err());
    refused(store.draw_list(&p, "drop", 0, 10).await.unwrap_err());
    // A room of the version before events (layout 1) is refused the same way.
    common::redis::raw(server.port, &format!("HSET {key} layout 1")).unwrap();
    let text = store.admit(&p).await.unwrap_err().to_string();
    assert!(
        text.contains("layout 1") && text.contains("speaks layout 2"),
        "{text}"
    );
    // Back to this version's layout, the room is as it was.
    common::redis::raw(server.port, &format!("HSET {key} layout 2")).unwrap();
    let st = store.stats(&p).await.unwrap();
    assert_eq!((st.active, st.joined_total), (1, 1));
    assert_eq!(
        store.consume(&p, v, &order).await.unwrap(),
        anteroom::store::Consumed::Won
    );
}

/// Instances that run a room with different `abandon-after` (a SIGHUP that reached one first):
/// the line is swept by the longest, so a visitor who polls the instance with the longer one
/// (its liveness refreshed every quarter of it) is not dropped by the other's sweep (found by
/// review: 20 s on two instances, 100 s on the third, and visitors polling every second lost
/// their place). Once no instance has reported the longer value for as long as it is, the
/// shorter one holds again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_line_is_swept_by_the_longest_abandon_after_of_the_instances() {
    use anteroom::store::{Admission, VisitorId};
    let server = RedisServer::start();
    let short = RedisStore::new(Target::Single(server.url()), Duration::from_secs(2)).unwrap();
    let long = RedisStore::new(Target::Single(server.url()), Duration::from_secs(2)).unwrap();
    short.freeze_clock();
    long.freeze_clock();
    let mut p = conformance::room("sweep", 100.0, 1);
    p.abandon_after = Duration::from_secs(10);
    // The slot stays taken for the whole test: the visitor waits until swept.
    p.session_ttl = Duration::from_secs(3600);
    p.claim_ttl = Duration::from_secs(3600);
    let mut q = p.clone();
    q.abandon_after = Duration::from_secs(100);
    let step = |by: Duration| {
        short.shift_clock(by);
        long.shift_clock(by);
    };
    assert_eq!(
        short.join(&p, VisitorId::random()).await.unwrap(),
        Admission::Entered,
        "the one slot, taken"
    );
    let polling = VisitorId::random();
    assert!(matches!(
        long.join(&q, polling).await.unwrap(),
        Admission::Waiting { position: 1, .. }
    ));
    // 30 s of ticks on both instances; the visitor polls the long one at 0 and 25 s only.
    for _ in 0..30 {
        step(Duration::from_secs(1));
        short.admit(&p).await.unwrap();
        long.admit(&q).await.unwrap();
    }
    assert_eq!(short.stats(&p).await.unwrap().abandoned_total, 0);
    assert!(matches!(
        long.join(&q, polling).await.unwrap(),
        Admission::Waiting { position: 1, .. }
    ));
    // The long instance stops (or is reloaded): the long value holds for its own length after
    // its last report (a visitor noted last under it may be that long from their next note;
    // found by review, a restart with a lower value swept the line), then the short one does.
    for _ in 0..90 {
        step(Duration::from_secs(1));
        short.admit(&p).await.unwrap();
    }
    assert_eq!(short.stats(&p).await.unwrap().abandoned_total, 0);
    for _ in 0..30 {
        step(Duration::from_secs(1));
        short.admit(&p).await.unwrap();
    }
    assert_eq!(short.stats(&p).await.unwrap().abandoned_total, 1);
}

/// A failover that lost the revocation log's newest writes, to a replica whose clock is behind:
/// the new primary numbers the next revocation below what an instance already read, and the
/// one after it above. The instance, whose last entry is gone without a trim, reads the log
/// from the start and learns both (found by re-review: it skipped the first for good, and that
/// cookie kept working until it expired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocations_numbered_below_a_lost_entry_are_not_skipped() {
    use anteroom::store::finish::{Command, Ending};
    use anteroom::store::{AdmitContext, VisitorId};
    let server = RedisServer::start();
    let store = RedisStore::new(Target::Single(server.url()), Duration::from_secs(2)).unwrap();
    let p = conformance::room("lost-revokes", 100.0, 10);
    let revoke = |v: VisitorId| {
        let now = store.now_secs();
        let ending = Ending::of(Command::Revoke, now, now + 600, Duration::from_secs(600));
        let store = &store;
        let p = &p;
        async move { store.finish(p, v, &ending).await.unwrap() }
    };
    let read = |after: u64| {
        let ctx = AdmitContext {
            revoked_after: Some(after),
            ..Default::default()
        };
        let (store, p) = (&store, &p);
        async move { store.admit_with(p, &ctx).await.unwrap().revoked }
    };
    let (first, second, third) = (
        VisitorId::random(),
        VisitorId::random(),
        VisitorId::random(),
    );
    revoke(first).await;
    let seen = read(0).await.last;
    assert!(seen > 0);
    // The failover: the entry read last, and the number it moved the sequence to, are lost.
    let earlier = seen - 10_000_000;
    for cmd in [
        format!(
            "ZREMRANGEBYSCORE {{anteroom:{0}}}:revoked {seen} {seen}",
            p.name
        ),
        format!("HSET {{anteroom:{0}}}:room revoke_seq {earlier}", p.name),
    ] {
        assert!(
            common::redis::raw(server.port, &cmd).is_some_and(|r| r.starts_with(':')),
            "{cmd}"
        );
    }
    store.step_clock_back(Duration::from_secs(20));
    revoke(second).await;
    store.shift_clock(Duration::from_secs(60));
    revoke(third).await;
    let got: Vec<VisitorId> = read(seen).await.list.iter().map(|r| r.vid).collect();
    assert!(
        got.contains(&second),
        "the one numbered below the caller's last: {got:?}"
    );
    assert!(got.contains(&third));
}
