//! The join challenge (`join-challenge = { difficulty = N }`): a proof of work a new visitor's
//! browser does before its first poll joins the line. Not a CAPTCHA: it does not tell people
//! from programs, it prices identities. A browser pays it once (about a second), a script pays
//! it for every identity it wants in line.
//!
//! Stateless, no store call: the puzzle's nonce is an HMAC of the room, the visitor id and a
//! one-minute bucket under the first cookie key, so any instance can check a solution (under
//! any of the keys: a rotation fails no puzzle handed out before it). The
//! work is to find a counter `c` such that `SHA-256(nonce_hex ‖ c in decimal)` starts with
//! `difficulty` zero bits (one SHA-256 block: the page's script hashes fast). A solution is
//! good for its visitor id and room, for [`BUCKETS`] minutes.
//!
//! Visitors without JavaScript are never locked out: a newcomer is asked once (the page
//! explains, and reloads by `<meta refresh>`), and a request of a known visitor id without a
//! solution joins under a stricter per-client limit ([`Step::Strict`]).

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::cookie::CookieKey;
use crate::store::VisitorId;

/// Domain of the nonce's HMAC: no other signed value of anteroom verifies as a nonce.
const DOMAIN: &[u8] = b"anteroom-challenge/1|";
/// A nonce's bucket: a minute of the proxy's clock.
pub const BUCKET_SECS: u64 = 60;
/// Buckets a solution is accepted in: its own and the next ones (a slow phone that started a
/// minute ago still gets in).
pub const BUCKETS: u64 = 3;
/// The difficulty unless configured: p90 under a second in a browser on a 2-core machine
/// (docs/BENCHMARKS.md), tens of milliseconds of a native core.
pub const DEFAULT_DIFFICULTY: u32 = 18;
/// Accepted difficulties: below, the work is nothing; above, phones take minutes.
pub const DIFFICULTIES: std::ops::RangeInclusive<u32> = 8..=26;
/// Longest counter accepted (decimal digits): far beyond any difficulty's expected work.
const MAX_COUNTER_DIGITS: usize = 12;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The puzzle's nonce for `vid` in `room` in `bucket`: 32 hex digits.
pub fn nonce(key: &CookieKey, room: &str, vid: VisitorId, bucket: u64) -> String {
    let mut payload = [0u8; 24];
    payload[..16].copy_from_slice(vid.as_bytes());
    payload[16..].copy_from_slice(&bucket.to_be_bytes());
    hex(&key.tag(DOMAIN, room, &payload)[..16])
}

/// The puzzle handed to a new visitor at `now` (unix seconds): `BUCKET.NONCE`. `None` without
/// a key (a configuration always has one).
pub fn issue(keys: &[CookieKey], room: &str, vid: VisitorId, now: u64) -> Option<String> {
    let bucket = now / BUCKET_SECS;
    Some(format!(
        "{bucket}.{}",
        nonce(keys.first()?, room, vid, bucket)
    ))
}

/// Zero bits at the start of `h`, counted over every byte (no early exit).
pub fn leading_zero_bits(h: &[u8; 32]) -> u32 {
    let mut total = 0u32;
    let mut still = 1u32;
    for b in h {
        let z = b.leading_zeros();
        total += still * z;
        still &= u32::from(*b == 0);
    }
    total
}

/// The hash the work is about.
pub fn work(nonce: &str, counter: u64) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(nonce.as_bytes());
    h.update(counter.to_string().as_bytes());
    h.finalize().into()
}

/// Whether `solution` (`BUCKET.COUNTER`) proves the work for `vid` in `room` at `now`.
/// Malformed, stale, future, foreign (another visitor's or room's) or too easy: `false`.
pub fn verify(
    keys: &[CookieKey],
    room: &str,
    vid: VisitorId,
    difficulty: u32,
    solution: &str,
    now: u64,
) -> bool {
    let Some((bucket, counter)) = solution.split_once('.') else {
        return false;
    };
    let digits = |s: &str, max: usize| {
        !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_digit())
    };
    if !digits(bucket, 20) || !digits(counter, MAX_COUNTER_DIGITS) {
        return false;
    }
    let (Ok(bucket), Ok(counter)) = (bucket.parse::<u64>(), counter.parse::<u64>()) else {
        return false;
    };
    let current = now / BUCKET_SECS;
    if bucket > current || current - bucket >= BUCKETS {
        return false;
    }
    // Leading zeros are not secret, but the nonce is recomputed, never taken from the client:
    // a solution carries only the bucket and the counter. Under every configured key: a puzzle
    // handed out before a key rotation, or by an instance that signs with another of the keys
    // (a rolling change), is still solved (found by review: it failed, and the visitor joined
    // under the stricter limit).
    keys.iter().any(|key| {
        let h = work(&nonce(key, room, vid, bucket), counter);
        let enough = leading_zero_bits(&h) >= difficulty;
        bool::from(u8::from(enough).ct_eq(&1))
    })
}

/// The cookie that says this room's puzzle was handed to the visitor lately (`anteroom_a.ROOM`,
/// living [`ASKED_SECS`]): only such a visitor who comes back without a solution is held to
/// the stricter limit. Unsigned: dropping it gets the puzzle again, keeping it only the
/// stricter limit, so neither spares any work.
pub fn asked_cookie_name(room: &str) -> String {
    format!("{}a.{room}", crate::cookie::COOKIE_PREFIX)
}

/// How long the asked marker lives: as long as a puzzle's solution is accepted.
pub const ASKED_SECS: u64 = BUCKET_SECS * BUCKETS;

/// What a request with no admission and no queue ticket does in a room with a challenge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// As without a challenge: the room's own join limit.
    Join,
    /// A newcomer: answer the puzzle, place nobody.
    Ask,
    /// A visitor asked lately who came back without a solution (no JavaScript, or a script
    /// that skips the work): joins under the stricter limit.
    Strict,
}

/// The decision. `line_forms`: the last tick says a newcomer would wait (no challenge to
/// walk into an empty room); `asked`: the request carried a visitor id and this room's marker
/// that the puzzle was handed to it lately ([`asked_cookie_name`]); `solved`: it carried a
/// solution that verified. A visitor id alone is no sign of having been asked: the id cookie is
/// one for every room and a day long (found by review: a browser with JavaScript back from
/// another room was held to the stricter limit, never asked, and behind a shared address
/// refused with 429 while the budget of those who do the work stood unused).
pub fn step(line_forms: bool, asked: bool, solved: bool) -> Step {
    match (line_forms, solved, asked) {
        (false, _, _) | (true, true, _) => Step::Join,
        (true, false, false) => Step::Ask,
        (true, false, true) => Step::Strict,
    }
}

/// The stricter per-client limit of visitors who join without a solution: a quarter of the
/// room's `join-limit` (at least one), or [`NO_SCRIPT_DEFAULT`] per minute without one.
pub fn strict_limit(join_limit: Option<(u32, std::time::Duration)>) -> (u32, std::time::Duration) {
    match join_limit {
        Some((per_ip, per)) => ((per_ip / 4).max(1), per),
        None => (NO_SCRIPT_DEFAULT, std::time::Duration::from_secs(60)),
    }
}

/// New identities without a solution per client per minute in a room without `join-limit`.
pub const NO_SCRIPT_DEFAULT: u32 = 5;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys() -> Vec<CookieKey> {
        vec![CookieKey::new(b"challenge-test-key-0123456789abcdef").unwrap()]
    }

    /// Finds a counter for `nonce` at `difficulty` (low difficulties only: tests).
    fn solve(nonce: &str, difficulty: u32) -> u64 {
        (0u64..)
            .find(|c| leading_zero_bits(&work(nonce, *c)) >= difficulty)
            .unwrap()
    }

    #[test]
    fn zero_bits_are_counted_across_bytes() {
        let mut h = [0xffu8; 32];
        assert_eq!(leading_zero_bits(&h), 0);
        h[0] = 0;
        h[1] = 0x10;
        assert_eq!(leading_zero_bits(&h), 11);
        h[2] = 0;
        assert_eq!(leading_zero_bits(&h), 11, "zeros after a one do not count");
        assert_eq!(leading_zero_bits(&[0u8; 32]), 256);
    }

    #[test]
    fn a_solution_verifies_for_its_visitor_room_and_minutes_only() {
        let k = keys();
        // A fixed visitor: with a random one, the solution met another key's 10 bits too once
        // in 1024 runs (a check that fails by chance is no check).
        let vid = VisitorId::from_bytes(*b"a fixed visitor!");
        let now = 1_800_000_000;
        let puzzle = issue(&k, "sale", vid, now).unwrap();
        let (bucket, nonce) = puzzle.split_once('.').unwrap();
        let c = solve(nonce, 10);
        let sol = format!("{bucket}.{c}");
        assert!(verify(&k, "sale", vid, 10, &sol, now));
        assert!(verify(&k, "sale", vid, 10, &sol, now + 2 * BUCKET_SECS));
        assert!(!verify(
            &k,
            "sale",
            vid,
            10,
            &sol,
            now + BUCKETS * BUCKET_SECS + 60
        ));
        assert!(
            !verify(&k, "sale", vid, 10, &sol, now - BUCKET_SECS),
            "from the future"
        );
        assert!(!verify(&k, "vip", vid, 10, &sol, now), "another room");
        let another = VisitorId::from_bytes(*b"another visitor!");
        assert!(!verify(&k, "sale", another, 10, &sol, now));
        let other = vec![CookieKey::new(b"another-key-0123456789abcdefghij").unwrap()];
        assert!(!verify(&other, "sale", vid, 10, &sol, now), "another key");
        // A rotation puts a new key first: the puzzle handed out under the old one is solved.
        let rotated = vec![other[0].clone(), k[0].clone()];
        assert!(
            verify(&rotated, "sale", vid, 10, &sol, now),
            "after a rotation"
        );
        for bad in ["", ".", "1.", ".1", "x.1", "1.x", "1.2.3", "-1.5", "1.+5"] {
            assert!(!verify(&k, "sale", vid, 10, bad, now), "{bad:?}");
        }
        let long = format!("{bucket}.{}", "9".repeat(40));
        assert!(!verify(&k, "sale", vid, 10, &long, now));
    }

    #[test]
    fn the_decision_table() {
        assert_eq!(step(false, false, false), Step::Join, "an empty room");
        assert_eq!(step(false, true, false), Step::Join);
        assert_eq!(step(true, false, true), Step::Join, "solved");
        assert_eq!(step(true, true, true), Step::Join);
        assert_eq!(step(true, false, false), Step::Ask, "a newcomer");
        assert_eq!(step(true, true, false), Step::Strict, "no work done");
    }

    #[test]
    fn the_strict_limit_is_a_quarter_or_a_default() {
        let m = std::time::Duration::from_secs(60);
        assert_eq!(strict_limit(Some((30, m))), (7, m));
        assert_eq!(strict_limit(Some((2, m))), (1, m));
        assert_eq!(strict_limit(None), (NO_SCRIPT_DEFAULT, m));
    }

    proptest! {
        /// The attacker's goal: work done once buys a second identity, room or minute. Each
        /// (visitor, room, bucket) has its own nonce, and a solution is judged on the nonce of
        /// the identity that presents it, never on the one it was found for.
        #[test]
        fn work_for_one_identity_buys_no_other(
            a in any::<[u8; 16]>(), b in any::<[u8; 16]>(), later in 1u64..10, other_room in any::<bool>()
        ) {
            prop_assume!(a != b);
            let k = keys();
            let (va, vb) = (VisitorId::from_bytes(a), VisitorId::from_bytes(b));
            let now = 1_800_000_000;
            let bucket = now / BUCKET_SECS;
            let room = if other_room { "vip" } else { "sale" };
            let mine = nonce(&k[0], "sale", va, bucket);
            prop_assert_ne!(&mine, &nonce(&k[0], room, vb, bucket));
            prop_assert_ne!(&mine, &nonce(&k[0], "sale", va, bucket + later));
            let c = solve(&mine, 8);
            let sol = format!("{bucket}.{c}");
            prop_assert!(verify(&k, "sale", va, 8, &sol, now));
            let theirs = leading_zero_bits(&work(&nonce(&k[0], room, vb, bucket), c)) >= 8;
            prop_assert_eq!(verify(&k, room, vb, 8, &sol, now), theirs);
            prop_assert!(!verify(&k, "sale", va, 8, &sol, now + (BUCKETS + later) * BUCKET_SECS));
        }
    }
}
