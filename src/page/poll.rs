//! When a visitor in line polls next: by position tier, with jitter, and no later than just
//! after the soonest their turn can come.

use std::time::Duration;

use crate::config::PollTier;

/// The poll interval for a position: the first tier whose `below` exceeds it, with ±20 % jitter.
pub fn poll_interval(tiers: &[PollTier], position: u64) -> Duration {
    let every = tiers
        .iter()
        .find(|t| t.below.is_none_or(|b| position < b))
        .or(tiers.last())
        .map(|t| t.every)
        .unwrap_or(Duration::from_secs(5));
    every.mul_f64(0.8 + 0.4 * fastrand::f64())
}

/// The soonest a waiting visitor is asked to poll again: one tick (a visitor at the head learns
/// of the admission the next tick makes), but no sooner than 100 ms and no later than 250 ms.
/// Costs the store no more than a longer floor would: the visitors it applies to are those
/// whose turn is within it, about `rate × floor` of them, each polling once per floor — about
/// `rate` polls a second at the head whatever the floor.
pub fn poll_floor(tick: Duration) -> Duration {
    tick.clamp(Duration::from_millis(100), Duration::from_millis(250))
}

/// When a waiting visitor should poll next: the position's tier (with jitter), but no later than
/// just after the soonest their turn can come (`position / rate`, at least `floor`, plus
/// 0–20 %). Visitors then learn of their admission about when it happens, spread like the
/// admissions themselves; with tiers alone a crowd that joined in the same second and sleeps
/// the same 5 s wakes up together and reaches the shop at several times the admission rate
/// (`bench/flash-sale` measured twice the rate and origin errors before this). The jitter
/// applies to the floor too: the first crowd of a sale, all at the head, does not come back
/// in one instant.
pub fn poll_for_turn(tiers: &[PollTier], position: u64, rate: f64, floor: Duration) -> Duration {
    let tier = poll_interval(tiers, position);
    let Some(turn) = (rate > 0.0 && rate.is_finite()).then(|| position as f64 / rate) else {
        return tier;
    };
    let at = turn.max(floor.as_secs_f64()) * (1.0 + 0.2 * fastrand::f64());
    if at < tier.as_secs_f64() {
        Duration::from_secs_f64(at)
    } else {
        tier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::default_poll;

    #[test]
    fn polls_no_later_than_just_after_the_turn() {
        let tiers = default_poll();
        for _ in 0..200 {
            // Far back: the tier decides (5 s ± 20 %).
            let floor = poll_floor(Duration::from_millis(100));
            let far = poll_for_turn(&tiers, 50_000, 100.0, floor).as_millis();
            assert!((4000..=6000).contains(&far), "{far}");
            // Turn in 2 s, tier 3 s: just after the turn.
            let soon = poll_for_turn(&tiers, 200, 100.0, floor).as_millis();
            assert!((2000..=2400).contains(&soon), "{soon}");
            // Turn at once: the floor, with its jitter.
            let now = poll_for_turn(&tiers, 1, 1000.0, floor).as_millis();
            assert!((100..=120).contains(&now), "{now}");
            // No rate known: the tier.
            let unknown = poll_for_turn(&tiers, 200, 0.0, floor).as_millis();
            assert!((2400..=3600).contains(&unknown), "{unknown}");
        }
    }

    #[test]
    fn the_floor_is_a_tick_between_100_and_250_ms() {
        let ms = Duration::from_millis;
        assert_eq!(poll_floor(ms(100)), ms(100));
        assert_eq!(poll_floor(ms(10)), ms(100));
        assert_eq!(poll_floor(ms(200)), ms(200));
        assert_eq!(poll_floor(ms(1000)), ms(250));
    }

    #[test]
    fn poll_tiers_with_jitter() {
        let tiers = default_poll();
        for _ in 0..200 {
            let near = poll_interval(&tiers, 5).as_millis();
            assert!((800..=1200).contains(&near), "{near}");
            let mid = poll_interval(&tiers, 500).as_millis();
            assert!((2400..=3600).contains(&mid), "{mid}");
            let far = poll_interval(&tiers, 50_000).as_millis();
            assert!((4000..=6000).contains(&far), "{far}");
        }
    }
}
