//! The conformance suite on Redis: standalone, and a three-master cluster.

mod common;
mod conformance;

use std::sync::Arc;
use std::time::Duration;

use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::Store;
use common::redis::{RedisCluster, RedisServer};

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
        Self {
            _servers: Servers::Single(server),
            store: Arc::new(store),
        }
    }

    fn cluster() -> Self {
        let cluster = RedisCluster::start();
        let store =
            RedisStore::new(Target::Cluster(cluster.urls()), Duration::from_secs(2)).unwrap();
        Self {
            _servers: Servers::Cluster(cluster),
            store: Arc::new(store),
        }
    }
}

impl conformance::Harness for Redis {
    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    fn advance(&self, by: Duration) {
        self.store.shift_clock(by);
    }

    fn wipe(&self) {
        let ports: Vec<u16> = match &self._servers {
            Servers::Single(s) => vec![s.port],
            Servers::Cluster(c) => c.nodes.iter().map(|n| n.port).collect(),
        };
        for port in ports {
            let reply = common::redis::raw(port, "FLUSHALL").unwrap_or_default();
            assert!(reply.starts_with("+OK"), "FLUSHALL on {port}: {reply}");
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
