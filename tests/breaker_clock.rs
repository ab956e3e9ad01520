//! The store circuit breaker measures its cooldown on the monotonic clock: a step of the wall
//! clock back (NTP, a restored VM) must not keep it open.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anteroom::app::Core;
use anteroom::breaker::BreakerState;
use anteroom::clock::{Clock, ManualClock};
use anteroom::store::redis::{RedisStore, Target};
use anteroom::store::{Store, StoreError};
use common::*;

#[tokio::test]
async fn a_wall_clock_step_back_does_not_hold_the_breaker_open() {
    let text = format!(
        r#"{base}
[store]
breaker-failures = 2
breaker-cooldown = "1s"
timeout = "200ms"

[[room]]
name = "sale"
paths = ["/products"]
admit-per-second = 10
max-active = 10
"#,
        base = base_config("127.0.0.1:9".parse().unwrap())
    );
    let config = anteroom::config::parse(&text, "test.toml", Path::new(env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let p = config.rooms[0].params.clone();
    // Nothing listens there: every call fails.
    let nobody = ClosedPort::new();
    let store = Arc::new(
        RedisStore::new(
            Target::Single(format!("redis://{}", nobody.addr())),
            Duration::from_millis(200),
        )
        .unwrap(),
    );
    let clock = Arc::new(ManualClock::new());
    let core = Core::new(&config, store.clone(), clock.clone()).unwrap();
    for _ in 0..2 {
        let r = core.store_call("stats", "sale", store.stats(&p)).await;
        assert!(
            matches!(
                r,
                Err(StoreError::Unavailable { .. }) | Err(StoreError::Timeout { .. })
            ),
            "{r:?}"
        );
    }
    assert_eq!(
        core.breaker("sale").state(clock.mono_micros()),
        BreakerState::Open
    );
    // Another room's breaker is its own (on a Redis Cluster its slot may be on a healthy node).
    assert_eq!(
        core.breaker("other").state(clock.mono_micros()),
        BreakerState::Closed
    );
    let r = core.store_call("stats", "sale", store.stats(&p)).await;
    assert!(
        matches!(r, Err(StoreError::BreakerOpen { .. })),
        "fails fast: {r:?}"
    );

    // The wall clock steps back half a minute while the cooldown passes.
    clock.step_wall_back(Duration::from_secs(30));
    clock.advance(Duration::from_millis(1100));
    assert_eq!(
        core.breaker("sale").state(clock.mono_micros()),
        BreakerState::HalfOpen
    );
    // Only the admission loop's call probes a half-open breaker (see `Core::store_call`).
    let r = core
        .store_call(anteroom::app::PROBE_OP, "sale", store.stats(&p))
        .await;
    assert!(
        !matches!(r, Err(StoreError::BreakerOpen { .. })),
        "after the cooldown a probe goes out, whatever the wall clock did: {r:?}"
    );
}
