//! The `local` store-error policy's own bucket and the sessions it admitted.

use std::collections::{HashMap, HashSet, VecDeque};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::clock::{micros, Micros};
use crate::store::{JoinGate, VisitorId};

/// Clients counted before those whose window ended are forgotten (each got a local admission,
/// so they are as many as those in a window at most).
const PER_CLIENT_SWEEP: usize = 4096;

/// The `local` store-error policy's limiter: while the store cannot answer, this instance admits
/// at its share of the room's rate (the rate divided by the instances last seen alive), and
/// keeps the sessions it admitted so, until they run out, against its share of max-active.
#[derive(Default)]
pub struct LocalBucket {
    inner: Mutex<LocalInner>,
    /// `unregistered.len()`, read without the lock on every admitted request.
    pending: AtomicUsize,
}

#[derive(Default)]
struct LocalInner {
    /// Shared with the room of the configuration before a reload (`inherit`): a new room's
    /// limiter started full, and an operator's or a tool's reloads during an outage each let a
    /// burst in (found by review: ten times the rate with a reload every 100 ms).
    limiter: Option<std::sync::Arc<Tokens>>,
    /// When each locally admitted or kept session runs out, oldest first (all last one
    /// session-ttl; a session kept again is queued again, its earlier entry left to be pruned).
    /// Bounded by the sessions admitted, kept and running.
    sessions: VecDeque<(Micros, VisitorId)>,
    /// The same sessions by visitor: each visitor holds at most one.
    running: HashMap<VisitorId, Micros>,
    /// Local admissions per client address (`join-limit`'s key) in its window: the count and
    /// when the window began. Only admissions given count.
    per_client: HashMap<String, (u32, Micros)>,
    /// When `per_client` was last swept of ended windows: at most once a second once it is
    /// past [`PER_CLIENT_SWEEP`] (found by re-review: with every local admission counted, a
    /// table of addresses all within their windows was scanned on every admission, under this
    /// lock, and an outage's admissions fell from 4,500 to 480 a second at 100,000 addresses).
    per_client_swept_at: Option<Micros>,
    /// Of those, the ones the store has not been told of yet.
    unregistered: HashSet<VisitorId>,
}

/// The local bucket: made for a share of the rate (its key, in thousandths a second) in the
/// outage after the store last answered at `since`.
struct Tokens {
    key: u64,
    since: Option<std::time::Instant>,
    limiter: DefaultDirectRateLimiter,
}

impl LocalInner {
    fn prune(&mut self, now: Micros) {
        while let Some(&(end, vid)) = self.sessions.front() {
            if end > now {
                break;
            }
            self.sessions.pop_front();
            // Not a session kept running since ([`LocalBucket::keep`]): its later end is
            // queued behind.
            if self.running.get(&vid) == Some(&end) {
                self.running.remove(&vid);
                self.unregistered.remove(&vid);
            }
        }
    }
}

/// Figures of a local admission: the room's rate and instances, and the session it starts.
#[derive(Debug, Clone, Copy)]
pub struct LocalAdmit {
    pub vid: VisitorId,
    pub rate: f64,
    pub instances: u64,
    pub tick: Duration,
    /// Local sessions this instance may have running at once.
    pub share: u64,
    pub now: Micros,
    pub session_ttl: Duration,
    /// When the store last answered this instance's tick for the room: the outage began after
    /// it, and the bucket starts empty in each outage ([`LocalBucket::try_admit`]).
    pub heard_at: Option<std::time::Instant>,
}

/// A local session [`LocalBucket::try_admit`] gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalSession {
    /// What is left of it: the admission cookie's life.
    pub life: Duration,
    /// Taken now (a token and a slot), not one the visitor held already.
    pub fresh: bool,
}

impl LocalBucket {
    /// Takes one admission if the bucket has a token and fewer than `share` local sessions are
    /// running; the check and the count are one step, so concurrent requests cannot overshoot.
    /// The session's remaining life is what the admission cookie is given. A visitor
    /// who holds a local session already is given it again, without a token or a slot: one
    /// identity holds one session (found by review: one queue ticket replayed while the store
    /// was away took 99 of an instance's 100 local admissions).
    /// With `client` (the join's join-limit gate), at most its limit of local admissions per
    /// window from its address, whatever turns of the instance's pre-limit the joins took: a
    /// join this instance did not count (a ticket's, a held visitor's) must not make a claim on
    /// more, nor two budgets add up (found by re-review). Only admissions given count (found by re-review: counting every poll that
    /// found no token held a lone visitor for the window, and newcomers of the address after).
    pub fn try_admit(&self, a: &LocalAdmit, client: Option<&JoinGate>) -> Option<LocalSession> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.prune(a.now);
        if let Some(&end) = inner.running.get(&a.vid) {
            return Some(LocalSession {
                life: Duration::from_micros(end.saturating_sub(a.now)),
                fresh: false,
            });
        }
        if inner.running.len() as u64 >= a.share {
            return None;
        }
        let window = |g: &JoinGate, started: Micros| a.now < started.saturating_add(micros(g.per));
        // The client's count in its window now, and when that window began.
        let counted = client.map(|g| match inner.per_client.get(&g.client) {
            Some(&(n, started)) if window(g, started) => (n, started),
            _ => (0, a.now),
        });
        if let (Some(g), Some((n, _))) = (client, counted) {
            if n >= g.limit {
                return None;
            }
        }
        if !Self::take_token(&mut inner.limiter, a) {
            return None;
        }
        if let (Some(g), Some((n, started))) = (client, counted) {
            if inner.per_client.len() >= PER_CLIENT_SWEEP
                && inner
                    .per_client_swept_at
                    .is_none_or(|at| a.now.saturating_sub(at) >= 1_000_000)
            {
                inner.per_client_swept_at = Some(a.now);
                inner.per_client.retain(|_, e| window(g, e.1));
            }
            inner.per_client.insert(g.client.clone(), (n + 1, started));
        }
        let end = a.now.saturating_add(micros(a.session_ttl));
        inner.sessions.push_back((end, a.vid));
        inner.running.insert(a.vid, end);
        inner.unregistered.insert(a.vid);
        self.pending
            .store(inner.unregistered.len(), Ordering::Release);
        Some(LocalSession {
            life: a.session_ttl,
            fresh: true,
        })
    }

    /// Keeps the session of `vid`, admitted before, running on this instance from `now` for
    /// `session_ttl` while the store cannot renew it: counted against the instance's share like
    /// a local admission, and told to the store once it answers (counted past max-active: the
    /// visitor was in the shop before; see [`crate::proxy`]'s renewal).
    pub fn keep(&self, vid: VisitorId, now: Micros, session_ttl: Duration) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.prune(now);
        // Kept lately already (a client that sends the cookie before this one again): one
        // entry per half a session at most, not one per request (found by re-review r96a).
        let half = now.saturating_add(micros(session_ttl) / 2);
        if inner.running.get(&vid).is_some_and(|&end| end > half) {
            return;
        }
        let end = now.saturating_add(micros(session_ttl));
        inner.sessions.push_back((end, vid));
        inner.running.insert(vid, end);
        inner.unregistered.insert(vid);
        self.pending
            .store(inner.unregistered.len(), Ordering::Release);
    }

    /// Whether `vid` was admitted here while the store was away and the store has not been
    /// told yet: its next request registers the session (one `touch`), so that max-active
    /// counts it once the store answers again.
    pub fn unregistered(&self, vid: VisitorId) -> bool {
        if self.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.unregistered.contains(&vid)
    }

    /// How many sessions admitted here the store has not been told of yet.
    pub fn untold(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Up to `n` of the sessions the store has not been told of yet (none without a lock when
    /// there are none).
    pub fn unregistered_some(&self, n: usize) -> Vec<VisitorId> {
        if self.pending.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.unregistered.iter().take(n).copied().collect()
    }

    /// The store was told of `vid`'s session (or has no room for it: then it is not asked again).
    pub fn registered(&self, vid: VisitorId) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.unregistered.remove(&vid);
        self.pending
            .store(inner.unregistered.len(), Ordering::Release);
    }

    /// Carries the local sessions over a reload.
    pub fn inherit(&self, old: &LocalBucket) {
        let (sessions, running, per_client, unregistered, limiter) = {
            let o = old.inner.lock().unwrap_or_else(|e| e.into_inner());
            (
                o.sessions.clone(),
                o.running.clone(),
                o.per_client.clone(),
                o.unregistered.clone(),
                o.limiter.clone(),
            )
        };
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.sessions = sessions;
        inner.running = running;
        inner.per_client = per_client;
        inner.unregistered = unregistered;
        inner.limiter = limiter;
        self.pending
            .store(inner.unregistered.len(), Ordering::Release);
    }

    /// Sessions admitted locally that have not run out at `now`.
    pub fn active(&self, now: Micros) -> u64 {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.prune(now);
        self.pending
            .store(inner.unregistered.len(), Ordering::Release);
        inner.running.len() as u64
    }

    /// A token of this instance's share of the rate. The bucket is made anew, empty, for a new
    /// outage (the store answered since it was made) and for another share: the store's bucket
    /// let its burst in before the outage, and a local one that started full let one more in
    /// at each outage, on each instance (found by review r83b: two admissions in 471 s at
    /// 0.001/s). A bucket made before any answer (never, on the request path: `local` waits
    /// for one) starts full.
    fn take_token(limiter: &mut Option<std::sync::Arc<Tokens>>, a: &LocalAdmit) -> bool {
        let share = (a.rate / a.instances.max(1) as f64).max(0.001);
        let key = (share * 1000.0).round() as u64;
        let fits = |t: &Tokens| t.key == key && t.since == a.heard_at;
        if !limiter.as_deref().is_some_and(fits) {
            // One tick's worth, and never more than a second's worth.
            let window = a.tick.min(Duration::from_secs(1)).as_secs_f64();
            let burst = (share * window).ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
            let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
            let quota = Quota::with_period(Duration::from_secs_f64(1.0 / share))
                .map(|q| q.allow_burst(burst));
            let Some(quota) = quota else { return false };
            let fresh = RateLimiter::direct(quota);
            if a.heard_at.is_some() {
                let _ = fresh.check_n(burst);
            }
            *limiter = Some(std::sync::Arc::new(Tokens {
                key,
                since: a.heard_at,
                limiter: fresh,
            }));
        }
        limiter.as_ref().is_some_and(|l| l.limiter.check().is_ok())
    }
}

/// Whether an admission whose sliding renewal the store could not make (`left` seconds of its
/// cookie of a `ttl`-second session) is kept running on this instance ([`LocalBucket::keep`]):
/// while the store is away (its breaker open), at once; when a call only failed, or a loss of
/// the store's data is too young to take the session back, once less than a quarter of a
/// session is left. Postponed, the renewal let the cookie run out during an outage longer than
/// half a session, and the visitor went to the back of the line (found by review r95b).
pub fn keep_unrenewed(breaker_open: bool, left: u64, ttl: u64) -> bool {
    breaker_open || left < ttl / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(share: u64, now: Micros) -> LocalAdmit {
        LocalAdmit {
            vid: VisitorId::random(),
            rate: 1000.0,
            instances: 1,
            tick: Duration::from_millis(100),
            share,
            now,
            session_ttl: Duration::from_secs(10),
            heard_at: None,
        }
    }

    #[test]
    fn local_sessions_count_against_the_share_until_they_run_out() {
        let b = LocalBucket::default();
        let t = 1_000_000_000;
        assert!(b.try_admit(&admit(2, t), None).is_some());
        assert!(b.try_admit(&admit(2, t), None).is_some());
        assert!(b.try_admit(&admit(2, t), None).is_none(), "share used");
        assert_eq!(b.active(t), 2);
        let later = t + micros(Duration::from_secs(10));
        assert_eq!(b.active(later), 0, "both sessions ran out");
        assert!(b.try_admit(&admit(2, later), None).is_some());
    }

    #[test]
    fn local_sessions_are_registered_once() {
        let b = LocalBucket::default();
        let a = admit(5, 1);
        assert!(!b.unregistered(a.vid));
        assert!(b.try_admit(&a, None).is_some());
        assert!(b.unregistered(a.vid));
        b.registered(a.vid);
        assert!(!b.unregistered(a.vid));
        assert_eq!(b.active(1), 1, "still counts against the share");
        let c = admit(5, 1);
        assert!(b.try_admit(&c, None).is_some());
        assert_eq!(b.active(1 + micros(Duration::from_secs(10))), 0);
        assert!(!b.unregistered(c.vid), "ran out: nothing to register");
    }

    /// A session kept running while the store cannot renew it counts once, is told to the
    /// store, and runs to its new end, not its first one (found by review r95b: an admitted
    /// visitor's cookie ran out during a long outage).
    #[test]
    fn a_kept_session_runs_to_its_new_end_and_is_told() {
        let b = LocalBucket::default();
        let a = admit(5, 1);
        assert!(b.try_admit(&a, None).is_some());
        b.registered(a.vid);
        let ttl = Duration::from_secs(10);
        let half = 1 + micros(ttl) / 2;
        b.keep(a.vid, half, ttl);
        assert!(b.unregistered(a.vid), "to be told");
        assert_eq!(b.active(half), 1, "counted once");
        let first_end = 1 + micros(ttl);
        assert_eq!(b.active(first_end), 1, "runs past its first end");
        assert!(b.unregistered(a.vid));
        let kept = LocalBucket::default();
        kept.keep(a.vid, 1, ttl);
        assert_eq!(
            kept.untold(),
            1,
            "a visitor admitted through the store, kept here"
        );
        for _ in 0..100 {
            b.keep(a.vid, half + 1, ttl);
        }
        assert_eq!(
            b.inner.lock().unwrap().sessions.len(),
            1,
            "kept again at once: no more entries"
        );
        assert_eq!(b.active(half + micros(ttl)), 0, "ran out at its new end");
        assert!(!b.unregistered(a.vid));
    }

    #[test]
    fn an_unrenewed_admission_is_kept_while_the_store_is_away_or_near_its_end() {
        assert!(keep_unrenewed(true, 290, 600), "the breaker open");
        assert!(
            !keep_unrenewed(false, 290, 600),
            "a failed call: asked again later"
        );
        assert!(keep_unrenewed(false, 149, 600), "under a quarter left");
    }

    /// A reload hands the rate's tokens over with the sessions: a new room's bucket started
    /// full, and reloads during an outage each let a burst in (found by review).
    #[test]
    fn a_reload_does_not_refill_the_rate() {
        let slow = |now| LocalAdmit {
            rate: 1.0,
            ..admit(1_000, now)
        };
        let old = LocalBucket::default();
        assert!(old.try_admit(&slow(1), None).is_some());
        assert!(
            old.try_admit(&slow(1), None).is_none(),
            "a second's worth used"
        );
        let new = LocalBucket::default();
        new.inherit(&old);
        assert!(
            new.try_admit(&slow(1), None).is_none(),
            "the reload refilled the bucket"
        );
        assert_eq!(new.active(1), 1, "the session came over too");
    }

    /// Each outage starts with an empty bucket: the store's let its burst in before it (found
    /// by review r83b: a local bucket that started full let one more admission in at each
    /// outage, on each instance). Within one outage the tokens come at the share's rate.
    #[test]
    fn each_outage_starts_with_an_empty_bucket() {
        let heard = std::time::Instant::now();
        let ask = |heard_at| LocalAdmit {
            // A token every half second, one at most in the bucket.
            rate: 2.0,
            heard_at: Some(heard_at),
            ..admit(1_000, 1)
        };
        let b = LocalBucket::default();
        assert!(b.try_admit(&ask(heard), None).is_none(), "a burst at once");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while b.try_admit(&ask(heard), None).is_none() {
            assert!(std::time::Instant::now() < deadline, "no token at the rate");
            std::thread::sleep(Duration::from_millis(5));
        }
        let next = heard + Duration::from_secs(1);
        assert!(
            b.try_admit(&ask(next), None).is_none(),
            "the next outage's burst"
        );
        // Over a reload within the outage, the bucket goes on.
        let new = LocalBucket::default();
        new.inherit(&b);
        while new.try_admit(&ask(next), None).is_none() {
            assert!(std::time::Instant::now() < deadline, "no token at the rate");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            new.try_admit(&ask(next), None).is_none(),
            "refilled by the reload"
        );
    }

    #[test]
    fn a_zero_share_admits_nobody() {
        assert!(LocalBucket::default()
            .try_admit(&admit(0, 1), None)
            .is_none());
    }

    /// One identity holds one local session: asked again, it is given the session it holds
    /// (its remaining life), with no token or slot taken (found by review: one queue ticket
    /// replayed took 99 of an instance's 100 local admissions).
    #[test]
    fn a_visitor_holding_a_local_session_is_given_it_again() {
        let b = LocalBucket::default();
        let t = 1_000_000_000;
        // A burst of 100 tokens (a tick at 1000/s) and a share of 2: a hundred asks that took
        // either would leave nothing for another visitor.
        let one = admit(2, t);
        assert_eq!(
            b.try_admit(&one, None),
            Some(LocalSession {
                life: Duration::from_secs(10),
                fresh: true
            })
        );
        let later = LocalAdmit {
            now: t + 4_000_000,
            ..one
        };
        for _ in 0..100 {
            assert_eq!(
                b.try_admit(&later, None),
                Some(LocalSession {
                    life: Duration::from_secs(6),
                    fresh: false
                })
            );
        }
        assert_eq!(b.active(t + 4_000_000), 1, "one session, whatever the asks");
        let other = LocalAdmit {
            vid: VisitorId::random(),
            now: t + 1_000_000,
            ..one
        };
        assert!(
            b.try_admit(&other, None).is_some(),
            "a token and a slot were left"
        );
        assert_eq!(b.active(t + 1_000_000), 2);
        let after = LocalAdmit {
            now: t + 10_000_000,
            ..one
        };
        assert!(
            b.try_admit(&after, None).is_some_and(|s| s.fresh),
            "ran out: a new session"
        );
    }

    /// With a client's gate, its address gets at most the limit of local admissions in a
    /// window, and only admissions given count (found by re-review: polls that found no token
    /// or no slot counted too, and held a lone visitor for the window).
    #[test]
    fn a_clients_local_admissions_count_only_when_given() {
        let b = LocalBucket::default();
        let t = 1_000_000_000;
        let gate = JoinGate {
            client: "198.51.100.1".into(),
            limit: 2,
            per: Duration::from_secs(60),
            known_only: false,
            vouched: false,
        };
        let ask = |now| LocalAdmit {
            vid: VisitorId::random(),
            ..admit(1, now)
        };
        assert!(b.try_admit(&ask(t), Some(&gate)).is_some());
        for _ in 0..5 {
            assert!(
                b.try_admit(&ask(t), Some(&gate)).is_none(),
                "the share is full"
            );
        }
        // The session ran out: one of the address's two is left, whatever was refused.
        let later = t + 10_000_000;
        assert!(b.try_admit(&ask(later), Some(&gate)).is_some());
        let after = later + 10_000_000;
        assert!(
            b.try_admit(&ask(after), Some(&gate)).is_none(),
            "two in the window"
        );
        let other = JoinGate {
            client: "198.51.100.2".into(),
            ..gate.clone()
        };
        assert!(b.try_admit(&ask(after), Some(&other)).is_some());
        assert!(
            b.try_admit(&ask(t + 70_000_000), Some(&gate)).is_some(),
            "a new window"
        );
    }
}
