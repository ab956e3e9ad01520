//! The admission loop: a Pingora background service that calls `admit` for every room each tick.
//!
//! Each room ticks on its own timer. With the Redis store every instance runs this loop and the
//! token bucket lives in Redis, so N instances together admit at the configured rate, not N
//! times it. A late tick is not made up for ("delay", not "burst"): the bucket's own refill
//! already credits the elapsed time, capped at one tick's worth.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::time::{interval, MissedTickBehavior};

use crate::app::Shared;

/// The background service.
pub struct AdmissionLoop {
    shared: Arc<Shared>,
}

impl AdmissionLoop {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

/// Ticks one room until shutdown.
async fn run_room(shared: Arc<Shared>, room: usize) {
    let r = &shared.rooms[room];
    let mut timer = interval(r.cfg.params.tick);
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        timer.tick().await;
        match shared
            .store_call("admit", r.name(), shared.store.admit(&r.cfg.params))
            .await
        {
            Ok(report) => {
                if let Some(m) = shared.metrics.room(room) {
                    m.waiting.set(report.waiting as i64);
                    m.active.set(report.active as i64);
                    m.admitted.inc_by(report.admitted);
                    for a in &report.admitted_visitors {
                        m.wait.observe(a.waited.as_secs_f64());
                    }
                }
                if report.admitted > 0 {
                    tracing::debug!(
                        room = r.name(),
                        admitted = report.admitted,
                        waiting = report.waiting,
                        "admitted"
                    );
                }
                r.live.update(&report);
            }
            Err(e) => shared.warn_store_error(&e),
        }
    }
}

#[async_trait]
impl BackgroundService for AdmissionLoop {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tasks = tokio::task::JoinSet::new();
        for room in 0..self.shared.rooms.len() {
            tasks.spawn(run_room(self.shared.clone(), room));
        }
        // Wait for the shutdown signal; a closed channel means the server is gone too.
        while !*shutdown.borrow() {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
        tasks.abort_all();
    }
}
