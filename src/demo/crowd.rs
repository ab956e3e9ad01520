//! Simulated visitors for the demo: they join the same line as real browsers (through the store,
//! in-process), poll at the server's interval, shop for a few seconds once admitted, place
//! their order (consuming the admission) and leave.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::app::Shared;
use crate::store::{Admission, RoomParams, VisitorId};

pub struct Crowd {
    shared: Arc<Shared>,
    room: RoomParams,
    visitors: u32,
}

impl Crowd {
    pub fn new(shared: Arc<Shared>, room: RoomParams, visitors: u32) -> Self {
        Self {
            shared,
            room,
            visitors,
        }
    }
}

/// One simulated visitor. Pauses here are the visitor's own pace (polling, shopping), not waits
/// for a condition.
async fn visitor(shared: Arc<Shared>, room: RoomParams) {
    let vid = VisitorId::random();
    loop {
        // In a room with an event, as a browser would: registered in a pre-queue, drawn.
        let r = shared.rooms.iter().find(|r| r.name() == &*room.name);
        let events = r.map_or_else(Default::default, |r| {
            r.events.for_join(vid, shared.clock.now_micros())
        });
        let ctx = events.context(None);
        let joined = shared
            .store_call("join", &room.name, shared.store.join_with(&room, vid, &ctx))
            .await;
        match joined {
            Ok(
                Admission::Admitted
                | Admission::Entered
                | Admission::EnteredFromLine
                | Admission::Open,
            ) => break,
            Ok(Admission::Ended) => return,
            Ok(Admission::Full { .. }) | Err(_) => tokio::time::sleep(Duration::from_secs(5)).await,
            Ok(_) => tokio::time::sleep(Duration::from_millis(800 + fastrand::u64(0..1200))).await,
        }
    }
    tokio::time::sleep(Duration::from_millis(2000 + fastrand::u64(0..4000))).await;
    let _ = shared
        .store_call("consume", &room.name, shared.store.use_up(&room, vid))
        .await;
}

#[async_trait]
impl BackgroundService for Crowd {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..self.visitors {
            let (shared, room) = (self.shared.clone(), self.room.clone());
            tasks.spawn(async move {
                // Arrive over the first seconds, like a crowd at the doors.
                tokio::time::sleep(Duration::from_millis(u64::from(i) * 20)).await;
                visitor(shared, room).await;
            });
        }
        while !*shutdown.borrow() {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
        tasks.abort_all();
    }
}
