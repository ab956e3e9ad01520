//! A local per-client pre-limit in front of `join-limit`'s store counter: a flood of new
//! visitors from one address costs the store at most the limit's worth of calls per window
//! on each instance, not one call per request.
//!
//! The store's counter (`INCR`) stays the judge of the limit across instances; this limiter
//! only refuses what the store would refuse anyway on this instance alone. A request past it
//! with a visitor id of its own may be a place in line, which only the store knows: it asks
//! with a join for known visitors only ([`crate::store::JoinGate::known_only`]), which refuses
//! a newcomer without counting it. Its quota is the
//! whole per-client limit (a GCRA bucket of `per-ip` refilled over `per`): that is N times an
//! instance's share behind a load balancer that spreads a client over N instances, and never
//! stricter than the store's fixed window for a client whose requests all land on one
//! instance. It counts store joins made without a valid queue ticket (a new identity, or a
//! poll that cannot be answered at the edge), keyed like the store's counter (an IPv4 address
//! or an IPv6 /64).
//!
//! There is one limiter per kind of gate: `join-limit`, and the stricter limit of visitors who
//! join a room with `join-challenge` without a solution ([`no_script_client`]). The second
//! applies also in a room without `join-limit` (found by review: there, every request with a
//! made-up visitor id and no solution cost the store a `join` call).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::JoinLimit;
use crate::store::{JoinGate, VisitorId};

/// Clients kept before idle ones are forgotten.
const KEEP: usize = 50_000;

/// At most one sweep of idle clients per this many milliseconds: a table of more than
/// [`KEEP`] clients all within their window (a large sale, or a flood from many addresses)
/// was swept on every request, nothing removed, each a scan of the whole table (found by
/// review: joins at a tenth of the rate past 60,000 clients).
const SWEEP_EVERY_MS: u64 = 1_000;

/// One room's pre-limits: `join-limit`'s and the no-script gate's (each none when the room
/// has no such gate).
#[derive(Default)]
pub struct JoinPreLimit {
    join: Limiter,
    no_script: Limiter,
    /// Visitors whose join took a turn here and was put on hold ([`Self::held`]).
    held: std::sync::Arc<Held>,
    /// How long such a visitor's turn is kept for them ([`held_for`]).
    held_for: Duration,
}

/// The suffix of a client key counted under the no-script gate (`join-challenge` without a
/// solution): the store keeps its counter apart from `join-limit`'s.
const NO_SCRIPT: &str = "|no-script";

/// The key under which `client` joins without a solution to the room's challenge.
pub fn no_script_client(client: &str) -> String {
    format!("{client}{NO_SCRIPT}")
}

impl JoinPreLimit {
    /// `join`: the room's `join-limit`; `no_script`: the stricter limit of its join challenge.
    pub fn new(join: Option<&JoinLimit>, no_script: Option<&JoinLimit>) -> Self {
        Self {
            join: Limiter::new(join),
            no_script: Limiter::new(no_script),
            held: Default::default(),
            held_for: held_for([join, no_script]),
        }
    }

    /// Over a reload: a gate whose limit is unchanged keeps its clients' counts (found by
    /// review: each reload let every address a whole limit's worth of store calls again).
    pub fn inherit(&mut self, old: &JoinPreLimit) {
        self.join.inherit(&old.join);
        self.no_script.inherit(&old.no_script);
        self.held.clone_from(&old.held);
    }

    /// Whether `vid` from `client` took a turn here for a join the store never answered (it
    /// was put on hold): its next joins are no new identity, and take none. Before (found by
    /// review), each poll of a newcomer during a Redis stall — on hold, with no ticket, so a
    /// new join again at the next poll — took a turn, and once Redis was back the address was
    /// refused 429 for the limit's window though the store had counted nobody. The store's
    /// count stays the judge of the limit (and a local admission the store-error policy gives
    /// such a visitor is gated by the address: `LocalAdmit`).
    pub fn held(&self, vid: VisitorId, client: &str) -> bool {
        self.held.holds(vid, client, self.held_for)
    }

    /// Notes that `vid` from `client` took a turn and was put on hold ([`Self::held`]).
    pub fn note_held(&self, vid: VisitorId, client: &str) {
        self.held.note(vid, client, self.held_for);
    }

    /// The store answered `vid`'s join: its next one is judged as ever.
    pub fn answered(&self, vid: VisitorId) {
        self.held.forget(vid);
    }

    /// `Some(wait)` when the gate's client is past its limit on this instance alone (refuse
    /// without a store call); `None` to go on to the store.
    pub fn check(&self, gate: &JoinGate) -> Option<Duration> {
        let limiter = if gate.client.ends_with(NO_SCRIPT) {
            &self.no_script
        } else {
            &self.join
        };
        limiter.check(&gate.client)
    }
}

/// Visitors held without a store answer after their join took a turn ([`JoinPreLimit::held`]),
/// with their client and when they were noted. Entries older than the room's [`held_for`] are
/// dropped (at
/// most once per [`SWEEP_EVERY_MS`] once the table is past [`HELD_KEEP`]: found by review, a
/// table swept on every note past its size made each newcomer of an outage a scan of it under
/// its lock); while it is still full, no one more is noted — those take a turn at each poll,
/// as before — and the visitors it holds keep their turn (found by re-review: emptying it
/// refused them 429 after the outage).
#[derive(Default)]
struct Held {
    by_vid: std::sync::Mutex<std::collections::HashMap<VisitorId, (String, std::time::Instant)>>,
    sweeps: Sweeps,
    /// Whether the table may hold anyone: a join asks the lock only then (outside an outage,
    /// never).
    any: std::sync::atomic::AtomicBool,
}

/// The longest a held visitor's turn is kept for them ([`held_for`]).
const HELD_FOR: Duration = Duration::from_secs(3600);

/// How long a held visitor's turn is kept for them: the longest window of the room's gates
/// (by then the turn has come back to the address's bucket, so a held visitor takes at most
/// one turn a window), at most [`HELD_FOR`] and at least a second. Before (found by review),
/// an hour whatever the window: a flood's held newcomers, gone, kept the table full for an
/// hour, and a later outage's newcomers took a turn at each poll again.
fn held_for(limits: [Option<&JoinLimit>; 2]) -> Duration {
    limits
        .into_iter()
        .flatten()
        .map(|l| l.per)
        .max()
        .unwrap_or(HELD_FOR)
        .clamp(Duration::from_secs(1), HELD_FOR)
}

/// Held visitors kept (about 100 bytes each): newcomers of an outage on one instance, each
/// having taken a turn of their address's limit (found by review: a table of 50,000 entries
/// gave nothing back past a big sale's outage).
const HELD_KEEP: usize = 500_000;

impl Held {
    fn holds(&self, vid: VisitorId, client: &str, held_for: Duration) -> bool {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let by_vid = self.by_vid.lock().unwrap_or_else(|e| e.into_inner());
        by_vid
            .get(&vid)
            .is_some_and(|(c, at)| c == client && at.elapsed() < held_for)
    }

    fn note(&self, vid: VisitorId, client: &str, held_for: Duration) {
        self.note_within(vid, client, held_for, HELD_KEEP);
    }

    /// [`Self::note`] with a table of at most `keep` entries.
    fn note_within(&self, vid: VisitorId, client: &str, held_for: Duration, keep: usize) {
        let mut by_vid = self.by_vid.lock().unwrap_or_else(|e| e.into_inner());
        if by_vid.len() >= keep {
            if !self.sweeps.due() {
                return;
            }
            by_vid.retain(|_, (_, at)| at.elapsed() < held_for);
            if by_vid.len() >= keep {
                return;
            }
        }
        by_vid.insert(vid, (client.to_string(), std::time::Instant::now()));
        self.any.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn forget(&self, vid: VisitorId) {
        if !self.any.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let mut by_vid = self.by_vid.lock().unwrap_or_else(|e| e.into_inner());
        by_vid.remove(&vid);
        if by_vid.is_empty() {
            self.any.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// One gate's limiter (none without the gate), and the limit it was made for.
#[derive(Default)]
struct Limiter {
    limiter: Option<std::sync::Arc<DefaultKeyedRateLimiter<String>>>,
    limit: Option<(u32, Duration)>,
    /// When idle clients were last forgotten.
    sweeps: Sweeps,
}

/// Paces a table's sweeps: at most one per [`SWEEP_EVERY_MS`] (one clock for the three tables
/// here).
#[derive(Default)]
struct Sweeps {
    /// When the last sweep was made (ms since the first sweep's check, +1; 0: never).
    swept_at: std::sync::atomic::AtomicU64,
    /// Sweeps made (for the tests).
    made: std::sync::atomic::AtomicU64,
}

impl Sweeps {
    /// Whether a sweep is due now; if so, it counts as made (one caller of many racing wins).
    fn due(&self) -> bool {
        use std::sync::atomic::Ordering;
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let since = START.get_or_init(std::time::Instant::now).elapsed();
        let now = u64::try_from(since.as_millis()).unwrap_or(u64::MAX - 1) + 1;
        let last = self.swept_at.load(Ordering::Relaxed);
        let won = sweep_due(last, now)
            && self
                .swept_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if won {
            self.made.fetch_add(1, Ordering::Relaxed);
        }
        won
    }
}

/// Whether a sweep last made at `swept_at` (ms, 0: never) is due again at `now` (ms).
fn sweep_due(swept_at: u64, now: u64) -> bool {
    swept_at == 0 || now.saturating_sub(swept_at) >= SWEEP_EVERY_MS
}

fn quota(limit: &JoinLimit) -> Option<Quota> {
    let burst = NonZeroU32::new(limit.per_ip)?;
    let every = limit.per.checked_div(limit.per_ip)?;
    Some(Quota::with_period(every.max(Duration::from_nanos(1)))?.allow_burst(burst))
}

impl Limiter {
    fn new(limit: Option<&JoinLimit>) -> Self {
        Self {
            limiter: limit
                .and_then(quota)
                .map(|q| std::sync::Arc::new(RateLimiter::keyed(q))),
            limit: limit.map(|l| (l.per_ip, l.per)),
            ..Self::default()
        }
    }

    /// Takes `old`'s counts over when the limit is the same.
    fn inherit(&mut self, old: &Limiter) {
        if self.limit.is_some() && self.limit == old.limit {
            self.limiter.clone_from(&old.limiter);
        }
    }

    fn check(&self, client: &str) -> Option<Duration> {
        let limiter = self.limiter.as_ref()?;
        check_keyed(limiter, &self.sweeps, &client.to_string())
    }
}

/// `key`'s turn in `limiter`, idle keys forgotten first when the table is past [`KEEP`] (at
/// most once per [`SWEEP_EVERY_MS`]): `Some(wait)` when it is past its quota.
fn check_keyed<K: std::hash::Hash + Eq + Clone>(
    limiter: &DefaultKeyedRateLimiter<K>,
    sweeps: &Sweeps,
    key: &K,
) -> Option<Duration> {
    if limiter.len() > KEEP && sweeps.due() {
        limiter.retain_recent();
    }
    match limiter.check_key(key) {
        Ok(()) => None,
        Err(not_until) => Some(
            not_until
                .wait_time_from(DefaultClock::default().now())
                .max(Duration::from_secs(1)),
        ),
    }
}

/// The fewest store asks a queue ticket may make on this instance per second, and its least
/// burst ([`TicketAsks::new`]): a browser polls at the interval the server gives, down to the
/// poll floor at the head of the line (a tick, 100–250 ms), with a page load or a second tab
/// beside it, and a script that polls without waiting for its answers (a test, a monitor)
/// is not a flood. What it bounds is a replay: a copy of one ticket sent thousands of times
/// a second costs the store this many calls.
pub const TICKET_ASKS_PER_SECOND: u32 = 40;
/// See [`TICKET_ASKS_PER_SECOND`].
pub const TICKET_ASKS_BURST: u32 = 40;

/// The store asks of each queue ticket on this instance: a poll with a valid ticket that the
/// edge cannot answer (its turn may have come, or its holder was away for half of
/// `abandon-after`) asks the store, and a copy of one ticket replayed in a loop did so on every
/// request, past `join-limit` and its pre-limit, which count new identities (found by review:
/// 60 replays of one stale ticket, 53 more store calls in the same seconds, with a limit of 5 a
/// minute). Keyed by the ticket's visitor: only requests that carry a ticket signed for that
/// visitor count, so nobody else's flood can hold a visitor back; past the quota, `429` with
/// `Retry-After`, which the waiting page honours (its place is kept: it asks again then).
pub struct TicketAsks {
    limiter: std::sync::Arc<DefaultKeyedRateLimiter<crate::store::VisitorId>>,
    /// Asks per second ([`ticket_asks_per_second`]).
    rate: u32,
    sweeps: Sweeps,
}

impl TicketAsks {
    /// For a room whose visitors are told to poll every `shortest_poll` at the most often
    /// (the poll floor at the head of the line, or a shorter tier).
    pub fn new(shortest_poll: Duration) -> Self {
        let rate = ticket_asks_per_second(shortest_poll);
        let quota = NonZeroU32::new(rate)
            .zip(NonZeroU32::new(rate.max(TICKET_ASKS_BURST)))
            .map(|(rate, burst)| Quota::per_second(rate).allow_burst(burst));
        Self {
            limiter: std::sync::Arc::new(RateLimiter::keyed(
                quota.unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN)),
            )),
            rate,
            sweeps: Sweeps::default(),
        }
    }

    /// `Some(wait)` when `vid`'s ticket has asked the store its quota's worth lately.
    pub fn check(&self, vid: crate::store::VisitorId) -> Option<Duration> {
        check_keyed(&self.limiter, &self.sweeps, &vid)
    }

    /// Over a reload: the counts go on (a reload gives no ticket a new burst), unless the
    /// quota changed with the poll intervals.
    pub fn inherit(&mut self, old: &TicketAsks) {
        if self.rate == old.rate {
            self.limiter.clone_from(&old.limiter);
        }
    }
}

/// Two tabs' polls a second at `shortest_poll` less the polls' jitter (a poll comes up to a
/// fifth early), at least [`TICKET_ASKS_PER_SECOND`].
fn ticket_asks_per_second(shortest_poll: Duration) -> u32 {
    let polls = 2.0 / (shortest_poll.as_secs_f64() * (1.0 - 0.2)).max(0.001);
    (polls.ceil() as u32).clamp(TICKET_ASKS_PER_SECOND, 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_the_whole_limit_then_waits_others_are_untouched() {
        let limit = JoinLimit {
            per_ip: 3,
            per: Duration::from_secs(60),
        };
        let p = JoinPreLimit::new(Some(&limit), None);
        for _ in 0..3 {
            assert_eq!(p.check(&gate("198.51.100.1")), None);
        }
        let wait = p.check(&gate("198.51.100.1")).expect("refused");
        assert!(
            (Duration::from_secs(1)..=Duration::from_secs(20)).contains(&wait),
            "{wait:?}"
        );
        assert_eq!(p.check(&gate("198.51.100.2")), None, "another client");
        assert_eq!(
            JoinPreLimit::new(None, None).check(&gate("198.51.100.1")),
            None
        );
    }

    #[test]
    fn a_visitor_held_without_an_answer_is_known_from_its_client_until_answered() {
        let p = JoinPreLimit::new(None, None);
        let (v, w) = (VisitorId::random(), VisitorId::random());
        assert!(!p.held(v, "198.51.100.1"));
        p.note_held(v, "198.51.100.1");
        assert!(p.held(v, "198.51.100.1"));
        assert!(!p.held(v, "198.51.100.2"), "another address's request");
        assert!(!p.held(w, "198.51.100.1"), "another visitor");
        p.answered(w);
        assert!(p.held(v, "198.51.100.1"));
        p.answered(v);
        assert!(!p.held(v, "198.51.100.1"));
        // Over a reload too.
        p.note_held(w, "198.51.100.1");
        let mut next = JoinPreLimit::new(None, None);
        next.inherit(&p);
        assert!(next.held(w, "198.51.100.1"));
    }

    /// A held visitor's turn is kept for the gates' longest window, at most an hour: by then
    /// the turn is back in the address's bucket. An hour whatever the window (found by
    /// review) kept a gone flood's table full, and a later outage's newcomers took a turn at
    /// each poll.
    #[test]
    fn a_held_turn_is_kept_for_the_limits_window() {
        let limit = |secs| JoinLimit {
            per_ip: 3,
            per: Duration::from_secs(secs),
        };
        let (minute, ten) = (limit(60), limit(600));
        assert_eq!(held_for([Some(&minute), None]), Duration::from_secs(60));
        assert_eq!(held_for([None, Some(&ten)]), Duration::from_secs(600));
        assert_eq!(
            held_for([Some(&minute), Some(&ten)]),
            Duration::from_secs(600)
        );
        assert_eq!(held_for([Some(&limit(86_400)), None]), HELD_FOR);
        assert_eq!(held_for([Some(&limit(0)), None]), Duration::from_secs(1));
        assert_eq!(held_for([None, None]), HELD_FOR);
        assert_eq!(
            JoinPreLimit::new(Some(&minute), None).held_for,
            Duration::from_secs(60)
        );

        let held = Held::default();
        let (v, w, x) = (
            VisitorId::random(),
            VisitorId::random(),
            VisitorId::random(),
        );
        held.note_within(v, "198.51.100.1", Duration::from_secs(60), 2);
        assert!(held.holds(v, "198.51.100.1", Duration::from_secs(60)));
        assert!(
            !held.holds(v, "198.51.100.1", Duration::ZERO),
            "past its window"
        );
        held.note_within(w, "198.51.100.2", Duration::from_secs(60), 2);
        // Full, every entry within its window: no one more is noted, and those held keep it.
        held.note_within(x, "198.51.100.3", Duration::from_secs(60), 2);
        assert!(!held.holds(x, "198.51.100.3", Duration::from_secs(60)));
        assert!(held.holds(v, "198.51.100.1", Duration::from_secs(60)));
        // Full of entries past their window: the sweep makes room for a newcomer (the sweep
        // above was made within the second, so wait for the next one to be due).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !held.holds(x, "198.51.100.3", Duration::from_secs(60)) {
            assert!(std::time::Instant::now() < deadline, "never noted");
            held.note_within(x, "198.51.100.3", Duration::ZERO, 2);
            std::thread::yield_now();
        }
        assert!(
            !held.holds(v, "198.51.100.1", Duration::from_secs(60)),
            "swept"
        );
    }

    #[test]
    fn a_tickets_store_asks_have_a_quota_of_their_own() {
        let second = Duration::from_secs(1);
        let asks = TicketAsks::new(second);
        let (one, two) = (
            crate::store::VisitorId::random(),
            crate::store::VisitorId::random(),
        );
        for _ in 0..TICKET_ASKS_BURST {
            assert_eq!(asks.check(one), None);
        }
        let wait = asks.check(one).expect("past the burst");
        assert_eq!(
            wait,
            Duration::from_secs(1),
            "told to come back in a second"
        );
        assert_eq!(asks.check(two), None, "another visitor's ticket");
        let mut reloaded = TicketAsks::new(second);
        reloaded.inherit(&asks);
        assert!(reloaded.check(one).is_some(), "no new burst by a reload");
        // Polls at a shorter interval than any default: two tabs' of them.
        assert_eq!(ticket_asks_per_second(second), TICKET_ASKS_PER_SECOND);
        assert_eq!(ticket_asks_per_second(Duration::from_millis(100)), 40);
        assert_eq!(ticket_asks_per_second(Duration::from_millis(20)), 125);
        assert_eq!(ticket_asks_per_second(Duration::from_secs(5)), 40);
        assert_eq!(ticket_asks_per_second(Duration::ZERO), 2000);
        let mut faster = TicketAsks::new(Duration::from_millis(20));
        faster.inherit(&asks);
        assert_eq!(faster.check(one), None, "another quota, counted anew");
    }

    fn gate(client: &str) -> JoinGate {
        JoinGate {
            client: client.to_string(),
            limit: 0,
            per: Duration::from_secs(60),
            known_only: false,
            vouched: false,
        }
    }

    /// The no-script gate has a limiter of its own, also in a room without `join-limit` (found
    /// by review: each request with a made-up visitor id cost a store call), and the two
    /// gates' budgets are apart.
    #[test]
    fn each_gate_has_its_own_limiter() {
        let strict = JoinLimit {
            per_ip: 2,
            per: Duration::from_secs(60),
        };
        let p = JoinPreLimit::new(None, Some(&strict));
        let no_script = gate(&no_script_client("198.51.100.1"));
        assert_eq!(p.check(&no_script), None);
        assert_eq!(p.check(&no_script), None);
        assert!(p.check(&no_script).is_some(), "past the stricter limit");
        for _ in 0..10 {
            assert_eq!(p.check(&gate("198.51.100.1")), None, "no join-limit");
        }
        let join = JoinLimit {
            per_ip: 1,
            per: Duration::from_secs(60),
        };
        let p = JoinPreLimit::new(Some(&join), Some(&strict));
        assert_eq!(p.check(&gate("198.51.100.1")), None);
        assert!(p.check(&gate("198.51.100.1")).is_some());
        assert_eq!(p.check(&no_script), None, "the gates count apart");
    }

    #[test]
    fn a_full_table_is_swept_at_most_once_a_second() {
        assert!(sweep_due(0, 5));
        assert!(!sweep_due(1_000, 1_999));
        assert!(sweep_due(1_000, 2_000));
        let p = Limiter::new(Some(&JoinLimit {
            per_ip: 5,
            per: Duration::from_secs(600),
        }));
        for i in 0..(KEEP + 2_000) {
            p.check(&format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255));
        }
        // Every client is still within its window: a sweep removes nobody, and is not made
        // again on each of the requests that follow.
        let sweeps = p.sweeps.made.load(std::sync::atomic::Ordering::Relaxed);
        assert!(sweeps <= 2, "{sweeps} sweeps");
    }

    /// A reload keeps the counts of a gate whose limit it did not change, and starts a changed
    /// one anew.
    #[test]
    fn a_reload_keeps_the_counts_of_an_unchanged_limit() {
        let limit = JoinLimit {
            per_ip: 2,
            per: Duration::from_secs(60),
        };
        let old = JoinPreLimit::new(Some(&limit), None);
        assert_eq!(old.check(&gate("198.51.100.1")), None);
        assert_eq!(old.check(&gate("198.51.100.1")), None);
        let mut same = JoinPreLimit::new(Some(&limit), None);
        same.inherit(&old);
        assert!(same.check(&gate("198.51.100.1")).is_some(), "refilled");
        let mut changed = JoinPreLimit::new(Some(&JoinLimit { per_ip: 3, ..limit }), None);
        changed.inherit(&old);
        assert_eq!(changed.check(&gate("198.51.100.1")), None, "a new limit");
    }
}
