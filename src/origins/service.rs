//! The background service that keeps the pools of the configuration in force: every quarter
//! second it runs what is due (health checks at `health-check.every`, resolutions at
//! `resolve-every`). A reload that keeps an upstream as it was keeps its pool and its health.

use std::time::{Duration, Instant};

use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::app::Current;

pub struct OriginsService {
    current: Current,
}

impl OriginsService {
    pub fn new(current: Current) -> Self {
        Self { current }
    }
}

#[async_trait::async_trait]
impl BackgroundService for OriginsService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let shared = self.current.load_full();
            let now = Instant::now();
            for pool in shared.pools.iter().flatten() {
                pool.maintain(now).await;
            }
            drop(shared);
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }
}
