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

    fn advance(&self, by: Duration) {
        self.store.shift_clock(by);
    }
}

conformance_suite!(Sentinel::start());

#[test]
fn properties_under_random_traffic() {
    conformance::properties::random_traffic(&Sentinel::start(), 50);
}
