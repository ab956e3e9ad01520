//! `Core::store_call` and the circuit breaker: a store call dropped mid-flight (an aborted
//! admission task, a client that went away) must not leave the breaker waiting for a probe
//! result that never comes.

use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use anteroom::app::Core;
use anteroom::clock::ManualClock;
use anteroom::store::memory::MemoryStore;
use anteroom::store::StoreError;

const CONFIG: &str = r#"
[listen]
http = "127.0.0.1:1"
admin = "127.0.0.1:2"

[store]
backend = "memory"
breaker-failures = 1
breaker-cooldown = "1s"

[cookie]
keys = ["test-key-0123456789-0123456789-0123456789"]

[[upstream]]
name = "shop"
addr = "127.0.0.1:9"

[default]
upstream = "shop"
"#;

fn failed() -> Result<(), StoreError> {
    Err(StoreError::Unavailable {
        op: "admit",
        room: "sale".into(),
        reason: "test".into(),
    })
}

#[tokio::test]
async fn a_probe_dropped_mid_flight_does_not_wedge_the_breaker() {
    let config = anteroom::config::parse(CONFIG, "test.toml", Path::new(".")).unwrap();
    let clock = Arc::new(ManualClock::new());
    let store = Arc::new(MemoryStore::new(clock.clone()));
    let core = Core::new(&config, store, clock.clone()).unwrap();

    // One failure opens the breaker.
    assert!(core
        .store_call("admit", "sale", async { failed() })
        .await
        .is_err());
    let open = core.store_call("admit", "sale", async { Ok(()) }).await;
    assert!(
        matches!(open, Err(StoreError::BreakerOpen { .. })),
        "{open:?}"
    );

    // Past the cooldown the next call is the probe; it is polled once and then dropped, as
    // an aborted task or a dropped request future would be.
    clock.advance(Duration::from_millis(1100));
    {
        let mut probe = pin!(core.store_call(
            anteroom::app::PROBE_OP,
            "sale",
            std::future::pending::<Result<(), StoreError>>()
        ));
        std::future::poll_fn(|cx| {
            assert!(
                probe.as_mut().poll(cx).is_pending(),
                "the probe is in flight"
            );
            Poll::Ready(())
        })
        .await;
        let blocked = core
            .store_call(anteroom::app::PROBE_OP, "sale", async { Ok(()) })
            .await;
        assert!(
            matches!(blocked, Err(StoreError::BreakerOpen { .. })),
            "one probe at a time: {blocked:?}"
        );
    }

    // The dropped probe gave its slot back: the next call probes, succeeds, closes the breaker.
    let next = core
        .store_call(anteroom::app::PROBE_OP, "sale", async { Ok(()) })
        .await;
    assert!(next.is_ok(), "the breaker is not wedged: {next:?}");
    assert!(core
        .store_call(anteroom::app::PROBE_OP, "sale", async { Ok(()) })
        .await
        .is_ok());
}

#[tokio::test]
async fn only_the_admission_step_probes_a_half_open_breaker() {
    let config = anteroom::config::parse(CONFIG, "test.toml", Path::new(".")).unwrap();
    let clock = Arc::new(ManualClock::new());
    let store = Arc::new(MemoryStore::new(clock.clone()));
    let core = Core::new(&config, store, clock.clone()).unwrap();
    assert!(core
        .store_call("join", "sale", async { failed() })
        .await
        .is_err());
    clock.advance(Duration::from_millis(1100));
    // A visitor's join would be the first call to a store that may have lost its data.
    let join = core.store_call("join", "sale", async { Ok(()) }).await;
    assert!(
        matches!(join, Err(StoreError::BreakerOpen { .. })),
        "{join:?}"
    );
    // Nor does an admission step: a call that times out may still have run, and an `admit`
    // moves the line (found by review); the loop's probe is a read that changes nothing.
    let admit = core.store_call("admit", "sale", async { Ok(()) }).await;
    assert!(
        matches!(admit, Err(StoreError::BreakerOpen { .. })),
        "{admit:?}"
    );
    assert!(core
        .store_call(anteroom::app::PROBE_OP, "sale", async { Ok(()) })
        .await
        .is_ok());
    assert!(
        core.store_call("join", "sale", async { Ok(()) })
            .await
            .is_ok(),
        "closed again"
    );
}
