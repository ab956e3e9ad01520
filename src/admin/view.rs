//! A room as the admin API shows it (`GET /rooms`, `GET /rooms/NAME`, the answer to a change).

use serde_json::{json, Value};

use crate::app::Shared;
use crate::event::Phase;
use crate::line::accuracy;
use crate::line::forecast::{self, HeldBy};
use crate::room::Room;
use crate::store::RoomStats;

/// The autopilot of a room as the admin API shows it (`null` when the config has none).
fn autopilot_view(r: &Room, state: &crate::store::RoomState) -> Value {
    let Some(cfg) = r.cfg.autopilot else {
        return Value::Null;
    };
    let last = r.pilot.last();
    let why_not = if state.autopilot == Some(false) {
        Some("switched off (PATCH {\"autopilot\": true} resumes it)")
    } else if state.admit_per_second.is_some() {
        Some("paused: admit_per_second is pinned (PATCH {\"admit_per_second\": null} resumes it)")
    } else {
        None
    };
    json!({
        "running": why_not.is_none() && state.autopilot_rate.is_some(),
        "paused_because": why_not,
        // The rate in force here: the one the store keeps for every instance, never above this
        // instance's own ceiling (found by review: 50 shown beside a ceiling of 4 during a
        // rolling reload, while the instance admitted at 4).
        "rate": last.as_ref().and_then(|l| l.rate).map(|rate| rate.min(r.cfg.params.admit_per_second)),
        "shared_rate": last.as_ref().and_then(|l| l.rate),
        "ceiling": r.cfg.params.admit_per_second,
        "min_rate": cfg.min_rate,
        "target_latency_ms": cfg.target_latency.as_millis() as u64,
        "max_error_rate": cfg.max_error_rate,
        "window_ms": cfg.window.as_millis() as u64,
        "origin_p90_ms": last.as_ref().map(|l| crate::logwriter::millis(l.health.p90.as_secs_f64())),
        "origin_error_share": last.as_ref().map(|l| l.health.error_share()),
        "origin_requests": last.as_ref().map(|l| l.health.requests),
        "last_change": last.as_ref().map(|l| json!({
            "reason": l.reason,
            "from": l.from,
            "to": l.rate,
        })),
        "judged_seconds_ago": last.as_ref().map(|l| l.since_step().as_secs_f64()),
    })
}

/// A room's configuration, runtime state and figures. The figures come from the store;
/// when it cannot answer, the last ones the admission loop saw are shown instead.
pub async fn room(s: &Shared, i: usize) -> Value {
    let r: &Room = &s.rooms[i];
    let p = &r.cfg.params;
    let stats: Result<RoomStats, _> = s.store_call("stats", r.name(), s.store.stats(p)).await;
    // The last error only while it stands, as `/readyz` shows it (found by review: one from
    // an outage long over stood beside "healthy").
    let healthy = s.store_healthy();
    let store = json!({
        "backend": s.store.backend(),
        "healthy": healthy,
        "breaker": r.breaker.state(s.clock.mono_micros()).as_str(),
        "last_error": if healthy { None } else { s.last_store_error() },
    });
    let config = json!({
        "hosts": r.cfg.hosts.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "paths": r.cfg.paths,
        "upstream": s.config.upstreams[r.cfg.upstream].name,
        "admit_per_second": p.admit_per_second,
        "max_active": p.max_active,
        "max_waiting": p.max_waiting,
        "session_ttl_seconds": p.session_ttl.as_secs_f64(),
        "claim_ttl_seconds": p.claim_ttl.as_secs_f64(),
        "abandon_after_seconds": r.cfg.abandon_after.as_secs_f64(),
        "tick_ms": p.tick.as_millis() as u64,
        "on_store_error": r.cfg.on_store_error.as_str(),
        "consume": r.cfg.consume.iter().map(|c| format!("{} {}", c.method, c.path)).collect::<Vec<_>>(),
        // `null` when off.
        "order_receipt_seconds": r.cfg.order_receipt.map(|d| d.as_secs()),
    });
    // Counted by this process since it started; the top-level totals are the store's, for
    // every instance together.
    let accuracy = r.line.accuracy.summary();
    let this_instance = json!({
        "joined_total": r.metrics.joined.get(),
        "admitted_total": r.metrics.admitted.get(),
        // The visitors this instance admitted in the last minutes who had been told a wait:
        // how far the wait they had was from it, and the range new estimates are told as.
        "eta_accuracy": {
            "measured": accuracy.map_or(0, |a| a.count),
            "median_abs_error": accuracy.map(|a| a.median_abs_error),
            "p90_abs_error": accuracy.map(|a| a.p90_abs_error),
            "median_ratio": accuracy.map(|a| a.median_ratio),
            "range_factors": r.line.band.get().map(|(lo, hi)| [lo, hi]),
        },
    });
    match stats {
        Ok(mut st) => {
            // The event in force sets the rate and cap between an operator's pin and the
            // configured ones, as on the admission path (the store's stats do not carry them:
            // found by review, during an event this view told the configured rate and cap, an
            // ETA too short and `held_by` unlike the visitors' page).
            let event = r.events.view(s.clock.now_micros());
            if let Some(v) = &event {
                if crate::event::Event::overrides_in(v.phase) {
                    st.state.event_rate = v.event.admit_per_second;
                    st.state.event_max_active = v.event.max_active;
                }
            }
            let phase = event.as_ref().map(|v| v.phase);
            let rate = p.rate(&st.state);
            let eta_rate = p.eta_rate(&st.state, st.measured_rate);
            let max_active = p.max_active(&st.state);
            // The slots held back for sessions a store that lost its data forgot are taken
            // (found by review: after such a loss with the shop full, this view said a newcomer
            // walks in, then that the line moved at the rate).
            let held_back = r.recovery.held_back(s.clock.now_micros());
            let held = forecast::held_by(&forecast::Figures {
                enabled: st.state.enabled,
                queue_all: st.state.queue_all,
                waiting: st.waiting,
                active: st.active.saturating_add(held_back),
                max_active,
                store_hold: r.live.untold_hold(),
            });
            // A room that rejects takes no newcomer at all: no wait to tell (found by review: it
            // said a newcomer walks in); nor does an event's pre-queue (a newcomer registers
            // and waits for the opening) or its closing (newcomers are turned away), whose
            // line is held by the schedule as the visitors' page says (found by review: during
            // a pre-queue this view told `held_by: rate` and a wait of one second).
            let rejects = r.cfg.queueing == crate::config::QueueMethod::Reject;
            let scheduled = matches!(phase, Some(Phase::Prequeue | Phase::Closed));
            let held_by = match phase {
                Some(Phase::Prequeue) => Some("prequeue"),
                _ => held.map(HeldBy::as_str),
            };
            let new_wait = (!rejects && !scheduled)
                .then(|| forecast::new_visitor_wait(held, st.waiting, eta_rate, st.measured_rate))
                .flatten();
            json!({
                "name": r.name(),
                "enabled": st.state.enabled,
                "queue_all": st.state.queue_all,
                "queueing": r.cfg.queueing.as_str(),
                "overrides": { "admit_per_second": st.state.admit_per_second, "max_active": st.state.max_active },
                "admit_per_second": rate,
                "max_active": max_active,
                "waiting": st.waiting,
                "active": st.active,
                "held_back": held_back,
                "held_by": held_by,
                "event_phase": phase.map(Phase::as_str),
                "admitted_per_second": forecast::shown_rate(st.waiting, st.measured_rate, rate),
                "new_visitor_wait_seconds": new_wait,
                "new_visitor_wait_range_seconds": new_wait
                    .and_then(|w| accuracy::range_of(w, r.line.band.get()))
                    .map(|(lo, hi)| [lo, hi]),
                "admitted_total": st.admitted_total,
                "joined_total": st.joined_total,
                "abandoned_total": st.abandoned_total,
                "would_have_queued": st.would_have_queued,
                "this_instance": this_instance,
                "autopilot": autopilot_view(r, &st.state),
                "config_digest": r.digest,
                "instance_configs": st.configs,
                "configs_differ": st.configs.len() > 1,
                "config": config,
                "store": store,
            })
        }
        Err(e) => json!({
            "name": r.name(),
            "enabled": r.live.enabled(),
            "queue_all": r.live.queue_all(),
            "waiting": r.live.waiting(),
            "active": r.live.active(),
            "held_by": held_while_away(r.cfg.on_store_error, r.live.enabled(), r.live.held_by()),
            "admitted_per_second": forecast::shown_rate(r.live.waiting(), r.live.measured_rate(), r.live.rate_in_force().unwrap_or(p.admit_per_second)),
            "this_instance": this_instance,
            "stale": true,
            "error": e.to_string(),
            "config": config,
            "store": store,
        }),
    }
}

/// What holds a room's line while the store cannot be read, as its visitors are told: under
/// `closed` the store itself (nobody is let in; found by review: this view said `rate` while
/// the visitors' pages said `store`), or the operator's hold; nothing in a room switched off
/// or under `open`; under `local` what the instance's own figures hold it by.
fn held_while_away(
    policy: crate::config::StorePolicy,
    enabled: bool,
    local: Option<HeldBy>,
) -> Option<&'static str> {
    use crate::config::StorePolicy;
    match policy {
        _ if !enabled => None,
        StorePolicy::Closed if local == Some(HeldBy::Paused) => Some(HeldBy::Paused.as_str()),
        StorePolicy::Closed => Some(HeldBy::Store.as_str()),
        StorePolicy::Open => None,
        StorePolicy::Local => local.map(HeldBy::as_str),
    }
}

#[cfg(test)]
mod held_tests {
    use super::*;
    use crate::config::StorePolicy;

    #[test]
    fn a_line_held_while_the_store_is_away_says_by_what() {
        let rate = Some(HeldBy::Rate);
        let paused = Some(HeldBy::Paused);
        assert_eq!(
            held_while_away(StorePolicy::Closed, true, rate),
            Some("store")
        );
        assert_eq!(
            held_while_away(StorePolicy::Closed, true, None),
            Some("store")
        );
        assert_eq!(
            held_while_away(StorePolicy::Closed, true, paused),
            Some("paused")
        );
        assert_eq!(held_while_away(StorePolicy::Closed, false, None), None);
        assert_eq!(held_while_away(StorePolicy::Open, true, rate), None);
        assert_eq!(
            held_while_away(StorePolicy::Local, true, rate),
            Some("rate")
        );
        assert_eq!(held_while_away(StorePolicy::Local, true, None), None);
    }
}
