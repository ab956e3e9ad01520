//! The admission loop: a Pingora background service that calls `admit` for every room each tick.
//!
//! Each room ticks on its own timer. With the Redis store every instance runs this loop and the
//! token bucket lives in Redis, so N instances together admit at the configured rate, not N
//! times it. A late tick is not made up for ("delay", not "burst"): the bucket's own refill
//! already credits the elapsed time, capped at one tick's worth. A reload restarts the room
//! timers with the new configuration.
//!
//! Each admit step also reports the store generation; a change from the one known means the
//! store lost the room's data, and the loop re-asserts the room's last runtime state (see
//! [`crate::room::recovery`]).

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::app::{Current, Shared};
use crate::room::recovery::{self, Known, Seen};
pub mod autopilot;
pub mod events;
pub mod health;
pub mod pilot;

use crate::store::{AdmitReport, RoomState};

/// The background service.
pub struct AdmissionLoop {
    current: Current,
    reloaded: Arc<Notify>,
}

impl AdmissionLoop {
    pub fn new(current: Current, reloaded: Arc<Notify>) -> Self {
        Self { current, reloaded }
    }
}

/// Ticks one room until its task is aborted.
async fn run_room(shared: Arc<Shared>, room: usize) {
    let r = &shared.rooms[room];
    let tick = r.cfg.params.tick;
    let mut period = cadence(tick, r.recovery.landed_tick());
    let mut next = Instant::now();
    loop {
        // A period after the last call began, never less (a late call's successor is not made
        // up for: the store would let only part of its batch in and the bucket, full by then,
        // would lose the rest of its tokens). While this instance has an order the store may
        // not know the end of, at most `WATCHING` apart: it must see a data loss soon, whatever
        // its tick, for its heartbeat to write the order's marker again before another instance
        // lets a cookie alone order again (found by re-review: a tick lengthened by a reload
        // landed, the store lost its data before the other instances had heard the new tick,
        // and the kept cookie ordered again through one of them).
        tokio::time::sleep_until(next).await;
        let wait = if r.owed.is_empty() {
            period
        } else {
            period.min(WATCHING)
        };
        next = Instant::now() + wait;
        // While the breaker is not closed, a read that changes nothing probes the store first
        // (see `Core::store_call`); the admit follows once it is answered in time.
        if !shared.store_closed(r.name()) {
            let probe = shared.store.room_state(&r.cfg.params);
            if let Err(e) = shared
                .store_call(crate::app::PROBE_OP, r.name(), probe)
                .await
            {
                r.live.tick_failed(&e);
                shared.warn_store_error(&e);
                continue;
            }
        }
        let mut ctx = r.recovery.context(shared.clock.now_micros());
        let changes = r.live.state_changes();
        // Old notes say nothing of a visitor now (see `line::note_max_age`).
        let max_age = crate::line::note_max_age(
            r.cfg.params.tick,
            shared.config.store.breaker_cooldown,
            r.cfg.abandon_after,
        );
        let noted = r.line.seen.take(shared.clock.mono_micros(), max_age);
        ctx.seen = noted.iter().map(|&(vid, place, _)| (vid, place)).collect();
        ctx.config.clone_from(&r.digest);
        ctx.autopilot = pilot::prepare(&shared, room);
        // Read whatever this instance's `origin-commands` says: another instance may revoke
        // (found by review: one reloaded with it off never learned the others' revocations).
        ctx.revoked_after = Some(r.revoked.last());
        ctx.events = events::prepare(&shared, room);
        ctx.draw_commitments = events::commitments(&shared, room, ctx.events.as_ref());
        let store = &shared.config.store;
        ctx.outage = crate::store::Outage {
            untold: r.local.untold() as u64,
            cut: r.live.cut(),
            instances: r.live.instances(),
            away: 2 * store.breaker_cooldown + store.timeout + 2 * tick,
            heartbeat_hi: r
                .recovery
                .known()
                .map_or(std::time::Duration::ZERO, |k| k.heartbeat_hi.value),
        };
        ctx.events_config =
            crate::room::events_digest(ctx.events.as_ref(), r.events_secret.as_deref());
        match shared
            .store_call(
                "admit",
                r.name(),
                shared
                    .store
                    .admit_with(&r.params_at(shared.clock.now_micros()), &ctx),
            )
            .await
        {
            Ok(mut report) => {
                r.recovery.heard(ctx.step.number);
                r.recovery
                    .admits_heard_in(&report.generation, report.admits);
                r.recovery.tick_landed(tick);
                period = tick;
                r.events
                    .note_store_now(report.store_now, shared.clock.now_micros());
                let m = &r.metrics;
                m.waiting.set(report.waiting as i64);
                m.active.set(report.active as i64);
                m.admitted.inc_by(report.admitted);
                for a in &report.admitted_visitors {
                    m.wait.observe(a.waited.as_secs_f64());
                }
                if report.admitted > 0 {
                    tracing::debug!(
                        room = r.name(),
                        admitted = report.admitted,
                        waiting = report.waiting,
                        "admitted"
                    );
                }
                let now = shared.cookie_secs(room);
                r.revoked.learn(&report.revoked, now);
                r.revoked.prune(now);
                let event_overrides = (report.state.event_rate, report.state.event_max_active);
                report.state = generation_seen(&shared, room, &report).await;
                (report.state.event_rate, report.state.event_max_active) = event_overrides;
                events::learn(&shared, room, &report).await;
                pilot::learn(&shared, room, &report);
                let p = &r.cfg.params;
                m.admit_rate.set(p.rate(&report.state));
                // What the store held back, not this caller's hold alone: the call that finds a
                // loss holds back the forgotten sessions' slots at once (found by CI: the line
                // moved "at the rate" into a full room until the next tick).
                r.live.update(
                    &report,
                    p.rate(&report.state),
                    p.max_active(&report.state),
                    report.held_back,
                    changes,
                );
                // What this instance holds now: a change made through it since the call was
                // sent wins over what the call tells (the line's answers go by it too).
                report.state.enabled = r.live.enabled();
                report.state.queue_all = r.live.queue_all();
                let eta_rate = p.eta_rate(&report.state, report.measured_rate);
                let rate = p.rate(&report.state);
                let health = report.autopilot.as_ref().map(|a| a.health);
                let accuracy = r.line.accuracy.summary();
                r.series.note(&crate::room::series::Seen {
                    waiting: report.waiting,
                    active: report.active,
                    measured_rate: report.measured_rate,
                    rate,
                    origin_p90_ms: health.map(|h| h.p90.as_secs_f64() * 1000.0),
                    origin_error_share: health.map(|h| h.error_share()),
                    eta_error: accuracy.map(|a| (a.median_abs_error, a.p90_abs_error)),
                });
                r.line.update(crate::line::Snapshot::of(
                    &report,
                    report.held_back,
                    eta_rate,
                    rate,
                    p.burst(rate),
                    p.max_active(&report.state),
                    crate::line::stale_after(p.tick, p.claim_ttl),
                ));
                r.line
                    .band
                    .set(eta_band(r, &report, eta_rate, rate, accuracy.as_ref()));
                register_local(&shared, room).await;
            }
            Err(e) => {
                // Nobody is abandoned for a flush that failed: it goes with the next call.
                r.line.seen.restore(noted);
                r.live.tick_failed(&e);
                shared.warn_store_error(&e);
            }
        }
    }
}

/// Sessions admitted locally told to the store in one round of calls.
const REGISTER_PER_ROUND: usize = 64;

/// Rounds of [`REGISTER_PER_ROUND`] a tick makes at most, within half a tick: while some are
/// untold, the store lets nobody in (see [`crate::store::Outage`]).
const REGISTER_ROUNDS: usize = 8;

/// Tells the store of sessions this instance admitted on its own (`local`) while it could not
/// answer, once it answers again, so that max-active counts them whichever instance their
/// visitors come back through (found by review: behind a load balancer that spreads requests,
/// a visitor admitted locally by one instance browsed through another, which could not know,
/// and the store let `max-active` more in beside them). The first request through the instance
/// that admitted them does the same, whichever comes first.
async fn register_local(shared: &Shared, room: usize) {
    let started = Instant::now();
    let budget = shared.rooms[room].cfg.params.tick / 2;
    for _ in 0..REGISTER_ROUNDS {
        // Another round only after a whole one went through, within the budget.
        if !register_round(shared, room).await || started.elapsed() >= budget {
            return;
        }
    }
}

/// One round of [`register_local`]: whether it told a full batch, every one of them.
async fn register_round(shared: &Shared, room: usize) -> bool {
    let r = &shared.rooms[room];
    let batch = r.local.unregistered_some(REGISTER_PER_ROUND);
    if batch.is_empty() {
        return false;
    }
    let seen = shared.seen_generation(room);
    let (now, cookie_now) = (shared.clock.now_micros(), shared.cookie_secs(room));
    let calls = batch.iter().map(|&(vid, end)| {
        // Counted past max-active too (found by review r89c: left out, the store let the line
        // into their slots). With its cookie's expiry (rounded up): a kept copy of a used
        // admission's cookie outlived the marker of its order, and ordered again once it ran
        // out (found by review r97b); the store stretches the marker past it.
        let expires = if end > now {
            cookie_now + (end - now).div_ceil(1_000_000)
        } else {
            0
        };
        let touch = shared
            .store
            .register_local(&r.cfg.params, vid, seen.as_ref(), expires);
        async move { (vid, shared.store_call("touch", r.name(), touch).await) }
    });
    let mut told = 0;
    for (vid, answer) in futures_util::future::join_all(calls).await {
        match answer {
            // Refused (an order of it used, a pre-queue ended it): as on the request path, the
            // cookie runs out and the store is not asked again. Not while a loss is young: a
            // later tick or request tells it again (found by re-review: after Redis came back
            // empty, the first tick's refusal was taken for a full room, and max-active more
            // were let in beside the local sessions).
            Ok(crate::store::Touched::TooSoon) => {}
            Ok(t) => {
                r.local.registered(vid);
                r.note_taken_back(t);
                told += 1;
            }
            Err(e) => shared.warn_store_error(&e),
        }
    }
    told == REGISTER_PER_ROUND
}

/// How often at most a room's loop runs while this instance has an order the store may not
/// know the end of (see `run_room`): it sees a loss well within the wait every instance gives
/// one (`breaker-cooldown` + `timeout` + two ticks), whatever its own tick.
const WATCHING: std::time::Duration = std::time::Duration::from_millis(100);

/// How often a room's loop runs: every `tick`, but at the tick the store last knew this
/// instance by (`landed`), when that is shorter, until an admit carrying the new one has reached
/// it. After a data loss, other instances wait for this one to see the loss by the longest tick
/// the store told them ([`crate::store::AdmitReport::tick_hi`]); a reload that lengthened the
/// tick during an outage would otherwise see it later than they wait, and an order it had in
/// flight could be taken again elsewhere (found by re-review: two orders of one admission, two
/// times in six).
fn cadence(tick: std::time::Duration, landed: Option<std::time::Duration>) -> std::time::Duration {
    landed.filter(|l| *l < tick).unwrap_or(tick)
}

/// The range new estimates are told as until the next tick (see
/// [`crate::line::accuracy::band`]).
fn eta_band(
    r: &crate::room::Room,
    report: &AdmitReport,
    eta_rate: f64,
    rate: f64,
    recent: Option<&crate::line::accuracy::Summary>,
) -> Option<(f64, f64)> {
    use crate::line::accuracy::{self, Paces};
    use crate::line::forecast::{self, HeldBy};
    let measured = report.measured_rate;
    let held = r.live.held_by();
    let by_rate = !matches!(held, Some(HeldBy::MaxActive));
    let told = forecast::eta_rate(held, eta_rate, measured);
    let paces = Paces {
        told,
        minute: r.line.pace.note(measured, report.waiting > 0),
        fastest: if by_rate { rate } else { told },
    };
    accuracy::band(
        accuracy::settled(by_rate, measured, Some(rate)),
        recent,
        &paces,
    )
}

/// Compares the store generation an admit step reported with the one known; returns the room
/// state to go by. When the store lost the room's data, the last state seen is re-asserted
/// (once: a failed attempt is retried at the next tick, whose admit admits nobody meanwhile)
/// and the session re-registration window opens.
async fn generation_seen(shared: &Shared, room: usize, report: &AdmitReport) -> RoomState {
    let r = &shared.rooms[room];
    let p = &r.cfg.params;
    let known = r.recovery.known();
    let now = shared.clock.now_micros();
    let tick_hi = recovery::Longest::after(known.as_ref().map(|k| k.tick_hi), report.tick_hi, now);
    let heartbeat_hi = recovery::Longest::after(
        known.as_ref().map(|k| k.heartbeat_hi),
        report.heartbeat_hi,
        now,
    );
    let last = match recovery::compare(known.as_ref(), &report.generation) {
        Seen::First | Seen::Same => {
            r.recovery.remember(Known {
                generation: report.generation.clone(),
                state: report.state.clone(),
                active: report.active,
                tick_hi,
                heartbeat_hi,
            });
            return report.state.clone();
        }
        Seen::Lost(last) => last,
    };
    // Tickets given before now may name places the store no longer holds.
    r.line.note_loss(shared.clock.now_secs());
    // The sessions the last tick counted, and the walk-ins since: held back from now on, also
    // when the re-assertion below fails (found on CI: the store went away again before it,
    // the instance knew of no loss, and `local` admitted into the forgotten sessions' slots).
    // The retry at the next tick finds the loss again and keeps this window.
    let old_active = last.active.saturating_add(r.recovery.entered_since_known());
    let cap = usize::try_from(p.max_active(&last.state).saturating_mul(2))
        .unwrap_or(usize::MAX)
        .clamp(1024, 4_000_000);
    r.recovery.open_window(
        shared.clock.now_micros(),
        p.session_ttl,
        old_active,
        cap,
        (&last.generation, &report.generation),
    );
    let reasserted = shared
        .store_call(
            "room_state",
            r.name(),
            shared
                .store
                .update_room_state(p, &recovery::reassert(&last.state)),
        )
        .await;
    match reasserted {
        Ok(state) => {
            tracing::warn!(
                room = r.name(),
                old_generation = %last.generation,
                new_generation = %report.generation,
                state = ?state,
                sessions_before = old_active,
                "the store lost this room's data: re-asserted the last runtime state seen; \
                 admitted visitors re-register their sessions for one session-ttl"
            );
            // The store's record of the instances' ticks went with the loss: the slowest one
            // known before it may not have reported since (`Longest::after`), nor the instance with
            // the longest heartbeat.
            r.recovery.remember(Known {
                generation: report.generation.clone(),
                state: state.clone(),
                active: report.active,
                tick_hi,
                heartbeat_hi,
            });
            state
        }
        Err(e) => {
            shared.warn_store_error(&e);
            last.state
        }
    }
}

/// After the shutdown broadcast the admission steps stop, but what this process owes the store
/// (confirms, origin commands) is still retried while it drains, behind each room's breaker,
/// and only this loop probes a half-open breaker: it goes on probing the rooms that owe
/// something until the runtime ends (found by review: after SIGQUIT the breakers stayed open
/// while Redis answered again, and an owed confirm and a revoke never landed).
async fn probe_while_owed(current: &crate::app::Current) {
    loop {
        let shared = current.load_full();
        for r in &shared.rooms {
            if !r.owed.is_empty() && !shared.store_closed(r.name()) {
                let probe = shared.store.room_state(&r.cfg.params);
                let _ = shared
                    .store_call(crate::app::PROBE_OP, r.name(), probe)
                    .await;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn shutdown_requested(shutdown: &mut ShutdownWatch) {
    // A closed channel means the server is going away too.
    while !*shutdown.borrow() {
        if shutdown.changed().await.is_err() {
            return;
        }
    }
}

#[async_trait]
impl BackgroundService for AdmissionLoop {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let shared = self.current.load_full();
            let mut tasks = tokio::task::JoinSet::new();
            for room in 0..shared.rooms.len() {
                tasks.spawn(run_room(shared.clone(), room));
            }
            tokio::select! {
                _ = shutdown_requested(&mut shutdown) => {
                    tasks.abort_all();
                    probe_while_owed(&self.current).await;
                    return;
                }
                _ = self.reloaded.notified() => tasks.abort_all(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_longer_tick_waits_for_the_store_to_know_it() {
        let (fast, slow) = (Duration::from_millis(100), Duration::from_secs(3));
        // Lengthened by a reload: the old tick until one carrying the new has landed.
        assert_eq!(cadence(slow, Some(fast)), fast);
        assert_eq!(cadence(slow, Some(slow)), slow);
        // Shortened, or nothing landed yet (a new process): the room's own.
        assert_eq!(cadence(fast, Some(slow)), fast);
        assert_eq!(cadence(slow, None), slow);
    }
}
