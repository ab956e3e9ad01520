//! The store conformance suite: the semantics every backend must have, written against the
//! `Store` trait and a harness that can move time. Each backend's test file runs every case
//! here (`store_memory.rs` for the memory store; the Redis backends reuse it unchanged).

pub mod autopilot;
pub mod basics;
pub mod controls;
pub mod draws;
pub mod edge;
pub mod event_sessions;
pub mod events;
pub mod finish;
pub mod history;
pub mod integrity;
pub mod liveness;
pub mod order_clocks;
pub mod outage_records;
pub mod properties;
pub mod queueing;
pub mod recovery;
pub mod taken_back;

pub use recovery::{
    a_loss_noticed_by_a_caller_that_knew_holds_the_line,
    a_reassertion_keeps_the_newest_change_whoever_writes_last,
    admit_reports_a_generation_and_a_new_one_after_a_wipe,
    an_admit_that_knew_another_generation_admits_nobody, hold_back_applies_to_the_fast_path_too,
    hold_back_keeps_slots_of_max_active_free,
    the_hold_a_loss_puts_on_the_line_ends_at_the_reassertion,
};

pub use autopilot::*;
pub use basics::*;
pub use controls::*;
pub use draws::*;
pub use edge::*;
pub use event_sessions::*;
pub use events::*;
pub use finish::*;
pub use history::*;
pub use integrity::*;
pub use liveness::*;
pub use order_clocks::*;
pub use outage_records::*;
pub use queueing::*;
pub use taken_back::*;

use std::sync::Arc;
use std::time::Duration;

use anteroom::store::{Admission, RoomParams, RoomPatch, Store, VisitorId};

/// A store under test plus control over its time.
pub trait Harness: Send + Sync {
    fn store(&self) -> Arc<dyn Store>;
    /// Moves the store's clock forward.
    fn advance(&self, by: Duration);
    /// Time passes for the store as a whole: its clock moves on, and so do the lives of its
    /// keys, which in Redis run on Redis's own clock (`advance` moves only the clock its scripts
    /// read). With no call meanwhile, an outage or a paused Redis.
    fn let_time_pass(&self, by: Duration) {
        self.advance(by);
    }
    /// Steps the store's wall clock back without time passing (NTP, a failover to a host whose
    /// clock is behind).
    fn step_back(&self, by: Duration);
    /// Loses all of the store's data, as a Redis restart without persistence does.
    fn wipe(&self);
    /// The store's wall clock, unix seconds (as a proxy reads cookie expiry).
    fn wall_secs(&self) -> u64;
}

/// A room with a unique name (so backends sharing one server do not collide).
pub fn room(tag: &str, rate: f64, max_active: u64) -> RoomParams {
    RoomParams {
        name: Arc::from(
            format!("{tag}-{}", VisitorId::random())
                .get(..24)
                .unwrap_or(tag),
        ),
        admit_per_second: rate,
        max_active,
        max_waiting: 1_000_000,
        session_ttl: Duration::from_secs(600),
        claim_ttl: Duration::from_secs(60),
        abandon_after: Duration::from_secs(60),
        tick: Duration::from_millis(100),
        queueing: Default::default(),
    }
}

/// Puts `n` visitors in line (holding the line meanwhile, so that none walks in).
pub async fn line_up(s: &dyn Store, p: &RoomParams, n: usize) -> Vec<VisitorId> {
    let hold = |on| RoomPatch {
        queue_all: Some(on),
        ..Default::default()
    };
    s.update_room_state(p, &hold(true)).await.unwrap();
    let vs: Vec<VisitorId> = (0..n).map(|_| VisitorId::random()).collect();
    for v in &vs {
        s.join(p, *v).await.unwrap();
    }
    s.update_room_state(p, &hold(false)).await.unwrap();
    vs
}

pub(crate) fn waiting_pos(a: &Admission) -> Option<u64> {
    match a {
        Admission::Waiting { position, .. } | Admission::Paused { position, .. } => Some(*position),
        _ => None,
    }
}

/// Lets one visitor in through the fast path, so that the next ones must wait.
pub(crate) async fn occupy(s: &dyn Store, p: &RoomParams) -> VisitorId {
    let v = VisitorId::random();
    assert_eq!(s.join(p, v).await.unwrap(), Admission::Entered);
    v
}

/// Runs every case against a fresh harness from `make`.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        conformance_suite!(@cases $make;
            fast_path_admits_when_nobody_waits,
            join_is_idempotent_and_fifo,
            admission_follows_the_line,
            admit_keeps_the_rate_and_the_burst,
            no_tick_window_holds_more_than_a_burst,
            max_active_is_never_exceeded,
            unclaimed_admissions_return_their_slot,
            silent_waiters_lose_their_place,
            sessions_expire_and_are_counted_exactly,
            consume_wins_exactly_once,
            a_full_line_turns_newcomers_away,
            queue_all_holds_the_line_and_releases_it_in_order,
            a_disabled_room_lets_everyone_pass,
            overrides_change_rate_and_cap,
            clearing_the_line,
            eta_rate_follows_measured_admissions,
            the_measured_rate_counts_only_time_with_a_line,
            join_limit_counts_new_visitors_not_polls,
            a_ticket_kept_after_an_order_is_counted_and_one_of_a_lost_place_is_not,
            a_ticket_kept_past_the_orders_marker_is_still_counted,
            an_outage_abandons_nobody,
            polling_just_within_abandon_after_keeps_the_place,
            a_clock_step_back_sweeps_nobody_and_admission_goes_on,
            a_step_not_heard_gives_no_turn_and_keeps_the_ones_it_gave,
            an_empty_line_forgets_its_measured_rate,
            an_outage_does_not_count_as_a_line_that_stood_still,
            a_consumed_admission_is_not_renewed,
            a_used_visitor_can_be_admitted_again,
            a_confirmed_order_uses_the_admission_up,
            a_failed_order_gives_the_admission_back,
            a_give_back_is_not_blocked_by_max_active,
            an_unsettled_order_comes_back_after_its_deadline,
            a_late_confirm_still_uses_the_admission_up,
            an_order_in_flight_is_kept_pending_by_its_heartbeat,
            a_pending_order_outlives_a_pause_of_the_store,
            an_unsettled_order_comes_back_after_a_pause_once_its_grace_has_run,
            a_session_is_not_also_a_place_in_line,
            an_order_takes_its_visitor_out_of_the_line,
            a_marker_outlives_the_cookie_that_ordered,
            a_marker_outlives_every_cookie_of_the_admission,
            a_used_admissions_cookie_given_a_new_life_is_outlived_by_its_marker,
            a_used_admission_stays_used_through_an_outage_longer_than_its_marker,
            a_visitor_admitted_again_is_not_held_to_an_earlier_use,
            an_order_in_flight_holds_through_an_outage_longer_than_its_marker,
            a_local_admission_that_ordered_before_it_was_told_orders_once,
            a_renewal_under_a_lower_session_ttl_never_shortens_the_session,
            a_local_admission_is_counted_past_the_cap,
            a_session_taken_back_runs_as_long_as_its_cookie,
            settling_twice_changes_nothing,
            a_confirm_of_an_order_the_store_never_saw_uses_the_admission_up,
            a_heartbeat_does_not_shorten_the_marker,
            a_resent_consume_is_recognised,
            an_admission_survives_the_store_losing_its_data,
            a_cookie_expired_by_the_stores_clock_vouches_for_nothing,
            no_admission_is_given_on_a_session_whose_order_is_in_flight,
            a_session_whose_orders_instance_died_comes_back,
            a_wall_clock_stepped_back_after_an_order_buys_no_second,
            a_fast_path_entry_holds_its_slot_for_claim_ttl,
            a_claim_outlives_a_pause_of_the_store,
            admit_reports_a_generation_and_a_new_one_after_a_wipe,
            an_admit_that_knew_another_generation_admits_nobody,
            hold_back_keeps_slots_of_max_active_free,
            hold_back_applies_to_the_fast_path_too,
            a_loss_noticed_by_a_caller_that_knew_holds_the_line,
            a_reassertion_keeps_the_newest_change_whoever_writes_last,
            the_hold_a_loss_puts_on_the_line_ends_at_the_reassertion,
            the_sampled_line_places_everyone_within_a_batch_or_one_percent,
            a_second_admit_within_half_a_tick_samples_the_line_after_its_batch,
            the_liveness_batch_keeps_places_and_only_the_named_ones,
            a_turn_whose_visitor_is_noted_keeps_its_claim,
            a_place_of_an_emptied_line_names_no_place_in_the_next,
            the_autopilot_keeps_one_rate_that_admits,
            every_change_is_recorded_once_with_before_and_after,
            the_history_keeps_the_newest,
            a_change_to_the_same_value_is_no_change,
            a_resent_clear_keeps_who_joined_since,
            completing_frees_the_slot_and_nothing_renews_it,
            an_order_in_flight_is_settled_by_the_origins_word,
            a_revocation_is_handed_back_once_per_number,
            revocations_expire_with_their_cookies,
            a_store_that_lost_its_revocations_is_read_from_the_start,
            a_caller_of_an_earlier_generation_reads_the_revocations_from_the_start,
            revocations_are_numbered_by_the_store_clock,
            an_ending_outlasts_a_session_renewed_for_longer_elsewhere,
            random_admits_anyone_in_line_at_the_rate_each_once,
            a_random_draw_is_told_to_every_caller_until_its_claims_run_out,
            a_room_that_rejects_admits_nobody_of_the_line_left,
            passthrough_lets_everyone_in_and_counts_who_would_have_queued,
            a_line_that_never_empties_stays_in_order_past_its_offsets_time_range,
            a_prequeue_registers_and_admits_nobody_until_the_opening,
            a_passthrough_room_lets_nobody_past_a_hold_or_through_an_event,
            a_draw_places_registrants_by_their_keys_ahead_of_later_arrivals,
            a_draw_goes_in_by_its_order_whatever_the_method,
            registrations_outlast_abandon_after_and_are_silent_from_the_opening,
            after_the_closing_newcomers_are_turned_away_and_the_line_is_kept_or_released,
            an_events_rate_and_cap_sit_between_an_override_and_the_autopilot,
            a_renewal_keeps_to_an_events_cap,
            the_store_clock_decides_and_a_step_back_does_not_reopen_registration,
            runtime_event_changes_are_versioned_and_recorded,
            a_join_by_events_older_than_the_stores_places_nobody_new,
            registrants_with_one_key_keep_two_places_in_the_order_of_their_ids,
            a_line_holds_one_draw_and_a_second_queues_first_come_first_served,
            an_admit_with_events_older_than_the_stores_makes_no_irreversible_step,
            a_prequeue_ends_the_sessions_admitted_before_it,
            a_session_a_prequeue_ended_stays_ended_through_an_outage,
            an_order_failed_after_an_outage_does_not_bring_an_ended_session_back,
            an_order_by_events_older_than_the_stores_takes_nothing,
            a_prequeue_cancelled_before_an_admit_read_it_ends_no_session,
            an_opening_seen_without_its_prequeue_ends_the_sessions_before_it,
            a_cancelled_draw_is_out_and_places_nobody_again,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let h = $make;
                conformance::$case(&h).await;
            }
        )*
    };
}
