//! A local per-client pre-limit in front of `join-limit`'s store counter: a flood of new
//! visitors from one address costs the store at most the limit's worth of calls per window
//! on each instance, not one call per request.
//!
//! The store's counter (`INCR`) stays the judge of the limit across instances; this limiter
//! only refuses what the store would refuse anyway on this instance alone. Its quota is the
//! whole per-client limit (a GCRA bucket of `per-ip` refilled over `per`): that is N times an
//! instance's share behind a load balancer that spreads a client over N instances, and never
//! stricter than the store's fixed window for a client whose requests all land on one
//! instance. It counts store joins made without a valid queue ticket (a new identity, or a
//! poll that cannot be answered at the edge), keyed like the store's counter (an IPv4 address
//! or an IPv6 /64).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::JoinLimit;

/// Clients kept before idle ones are forgotten.
const KEEP: usize = 50_000;

/// One room's pre-limit (none without `join-limit`).
#[derive(Default)]
pub struct JoinPreLimit {
    limiter: Option<DefaultKeyedRateLimiter<String>>,
}

fn quota(limit: &JoinLimit) -> Option<Quota> {
    let burst = NonZeroU32::new(limit.per_ip)?;
    let every = limit.per.checked_div(limit.per_ip)?;
    Some(Quota::with_period(every.max(Duration::from_nanos(1)))?.allow_burst(burst))
}

impl JoinPreLimit {
    pub fn new(limit: Option<&JoinLimit>) -> Self {
        Self {
            limiter: limit.and_then(quota).map(RateLimiter::keyed),
        }
    }

    /// `Some(wait)` when `client` is past the limit on this instance alone (refuse without a
    /// store call); `None` to go on to the store.
    pub fn check(&self, client: &str) -> Option<Duration> {
        let limiter = self.limiter.as_ref()?;
        if limiter.len() > KEEP {
            limiter.retain_recent();
        }
        let key = client.to_string();
        match limiter.check_key(&key) {
            Ok(()) => None,
            Err(not_until) => Some(
                not_until
                    .wait_time_from(DefaultClock::default().now())
                    .max(Duration::from_secs(1)),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_the_whole_limit_then_waits_others_are_untouched() {
        let p = JoinPreLimit::new(Some(&JoinLimit {
            per_ip: 3,
            per: Duration::from_secs(60),
        }));
        for _ in 0..3 {
            assert_eq!(p.check("198.51.100.1"), None);
        }
        let wait = p.check("198.51.100.1").expect("refused");
        assert!(
            (Duration::from_secs(1)..=Duration::from_secs(20)).contains(&wait),
            "{wait:?}"
        );
        assert_eq!(p.check("198.51.100.2"), None, "another client");
        assert_eq!(JoinPreLimit::new(None).check("198.51.100.1"), None);
    }
}
