use super::*;

#[test]
fn the_default_threads_are_the_cores_this_process_may_use() {
    if let Ok(cores) = std::thread::available_parallelism() {
        assert_eq!(default_threads(), cores.get());
    }
    let text = "[listen]\nhttp = \"127.0.0.1:18080\"\n[cookie]\nkeys = [\"unit-test-key-0123456789-0123456789-0123\"]\n[[upstream]]\nname = \"shop\"\naddr = \"127.0.0.1:9\"\n[default]\nupstream = \"shop\"\n";
    let config = crate::config::parse(text, "unit.toml", std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(config.server.threads, default_threads());
    assert!(config.server.work_stealing);
}

#[test]
fn each_public_address_has_its_own_upgrade_socket() {
    let sock = |a: &str| default_upgrade_sock(a.parse().unwrap());
    assert_eq!(
        sock("0.0.0.0:8080"),
        "/tmp/anteroom_upgrade_0.0.0.0_8080.sock"
    );
    assert_eq!(sock("[::]:8080"), "/tmp/anteroom_upgrade_--_8080.sock");
    assert_ne!(sock("127.0.0.1:8080"), sock("127.0.0.1:8081"));
    assert_ne!(sock("10.0.0.1:8080"), sock("10.0.0.2:8080"));
}

#[test]
fn a_store_is_described_without_its_password() {
    let b = StoreBackend::Redis {
        url: "redis://:s3cret@10.0.0.5:6379/0".into(),
    };
    assert_eq!(b.to_string(), "redis redis://10.0.0.5:6379/0");
    let b = StoreBackend::RedisCluster {
        urls: vec!["redis://user:pw@a:7000".into(), "rediss://b:7001".into()],
    };
    assert_eq!(
        b.to_string(),
        "redis cluster redis://a:7000, rediss://b:7001"
    );
    assert!(!format!(
        "{}",
        StoreBackend::RedisSentinel {
            urls: vec!["redis://:pw@s1:26379".into()],
            master: "mymaster".into()
        }
    )
    .contains("pw"));
}

const S: Duration = Duration::from_secs(1);

#[test]
fn abandon_after_leaves_room_for_jitter_a_missed_poll_and_hidden_tabs() {
    let check = check_abandon_after;
    assert_eq!(
        check(DEFAULT_ABANDON_AFTER, 5 * S, DEFAULT_THROTTLED_POLL),
        None
    );
    // The old default dropped a hidden tab after its first throttled minute.
    assert_eq!(
        check(60 * S, 5 * S, DEFAULT_THROTTLED_POLL),
        Some(AbandonTooShort::ForHiddenTabs(120 * S))
    );
    assert_eq!(check(120 * S, 5 * S, DEFAULT_THROTTLED_POLL), None);
    // Longer than the slowest tier, but not with its jitter and one missed poll.
    assert_eq!(
        check(100 * S, 50 * S, DEFAULT_THROTTLED_POLL),
        Some(AbandonTooShort::ForPolls(120 * S))
    );
    // Visitors that are not throttled browsers: only the tiers count.
    assert_eq!(check(5 * S, 2 * S, S), None);
    assert_eq!(
        check(4 * S, 2 * S, S),
        Some(AbandonTooShort::ForPolls(4800 * S / 1000))
    );
}

#[test]
fn a_refused_number_is_shown_short() {
    assert_eq!(shown(1e308), "1e308");
    assert_eq!(shown(1e-300), "1e-300");
    assert_eq!(shown(2.5), "2.5");
    assert_eq!(shown(0.001), "0.001");
    assert_eq!(shown(1_000_001.0), "1000001");
    assert_eq!(shown(-0.0), "-0");
}
