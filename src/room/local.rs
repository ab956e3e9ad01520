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

    /// Up to `n` of the sessions the store has not been told of yet, each with when it runs out
    /// here (µs; 0 if not known), none without a lock when there are none.
    pub fn unregistered_some(&self, n: usize) -> Vec<(VisitorId, Micros)> {
        if self.pending.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .unregistered
            .iter()
            .take(n)
            .map(|vid| (*vid, inner.running.get(vid).copied().unwrap_or(0)))
            .collect()
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

/// How long after the store last answered this instance an admission is still kept running
/// on it ([`kept_life`]). The store keeps a used admission's record (and a pre-queue's ended
/// sessions) this long past the life of its cookies, on the room's liveness clock
/// (`KEPT_AT_MOST_US` in `lua/prelude.lua`): an instance cut off from the store alone, while
/// the others kept its clock running, kept a copy of a used cookie alive past the record, and
/// once back, told the store of a session it had no record of as used, which took it back and
/// let the copy order a second time (found by review r99a).
pub const KEEP_AT_MOST: Duration = Duration::from_secs(3600);

/// The life of the cookie an admission whose sliding renewal the store could not make (`left`
/// seconds of its cookie of a `ttl`-second session) is given by keeping it running on this
/// instance ([`LocalBucket::keep`]), or `None` if it is not kept: while the store is away (its
/// breaker open), at once; when a call only failed, or a loss of the store's data is too young
/// to take the session back, once less than a quarter of a session is left. Postponed, the
/// renewal let the cookie run out during an outage longer than half a session, and the visitor
/// went to the back of the line (found by review r95b). Never past [`KEEP_AT_MOST`] after the
/// store last answered this instance for the room (`away`: how long ago; `None`: never since
/// it started), which the store's records outlast. Nor past the start of the next pre-queue
/// (`prequeue_in`: seconds until it, if one is scheduled): the store ends the sessions it holds
/// when one begins, and a session kept here alone meanwhile is not among them, so a cookie kept
/// past it ordered after the opening, ahead of the registrants (found by review r100b).
pub fn kept_life(
    breaker_open: bool,
    left: u64,
    ttl: u64,
    away: Option<Duration>,
    prequeue_in: Option<u64>,
) -> Option<u64> {
    let remaining = KEEP_AT_MOST
        .checked_sub(away?)?
        .as_secs()
        .min(prequeue_in.unwrap_or(u64::MAX));
    (remaining >= 1 && (breaker_open || left < ttl / 4)).then(|| ttl.min(remaining))
}

#[cfg(test)]
mod tests;
