//! The conformance suite on Redis reached through Sentinel: the same cases as on the memory
//! store, standalone Redis and the cluster, every call going through the sentinel connection.

mod common;
mod conformance;

use std::sync::Arc;
use std::time::Duration;

use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::Store;
use common::sentinel::{OneSentinel, MASTER};

struct Sentinel {
    _servers: OneSentinel,
    store: Arc<RedisStore>,
}

impl Sentinel {
    fn start() -> Self {
        let servers = OneSentinel::start();
        let target = Target::Sentinel {
            sentinels: vec![servers.sentinel.url()],
            master: MASTER.to_string(),
        };
        let store = RedisStore::new(target, Duration::from_secs(2)).unwrap();
        assert_eq!(store.backend(), "redis-sentinel");
        store.freeze_clock();
        Self {
            _servers: servers,
            store: Arc::new(store),
        }
    }
}

impl conformance::Harness for Sentinel {
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
        common::redis::age_keys(self._servers.primary.port, by);
    }

    fn step_back(&self, by: Duration) {
        self.store.step_clock_back(by);
    }

    fn wipe(&self) {
        let port = self._servers.primary.port;
        let reply = common::redis::raw(port, "FLUSHALL");
        assert!(
            reply.is_some_and(|r| r.starts_with("+OK")),
            "FLUSHALL on {port}"
        );
    }
}

conformance_suite!(Sentinel::start());

#[test]
fn properties_under_random_traffic() {
    conformance::properties::random_traffic(&Sentinel::start(), 50);
}

/// The password in the sentinel URL authenticates to the sentinel and to the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_password_opens_the_sentinel_and_the_primary() {
    let servers = OneSentinel::with_password("s3cret-pass");
    let store = |url: String| {
        RedisStore::new(
            Target::Sentinel {
                sentinels: vec![url],
                master: MASTER.to_string(),
            },
            Duration::from_secs(2),
        )
        .unwrap()
    };
    let p = conformance::room("auth", 10.0, 10);
    let port = servers.sentinel.port;
    let with = store(format!("redis://:s3cret-pass@127.0.0.1:{port}"));
    // The sentinel learns within a second or so that its primary is up.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut last = with.stats(&p).await.err();
    while last.is_some() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        last = with.stats(&p).await.err();
    }
    assert!(last.is_none(), "with the password: {last:?}");
    let without = store(format!("redis://127.0.0.1:{port}"));
    assert!(without.stats(&p).await.is_err(), "without the password");
}
