//! What an `admit` step is told by its caller ([`AdmitContext`], [`AdmitStep`]) and what it
//! answers ([`AdmitReport`]), on every store backend.

use std::time::Duration;

use super::{
    autopilot, EventSeen, EventsArg, LineDraw, LineSample, Place, Revocations, RoomState, VisitorId,
};

/// A visitor moved from waiting to active by an `admit` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmittedVisitor {
    pub vid: VisitorId,
    /// Time from joining the line to this admission.
    pub waited: Duration,
}

/// What one `admit` step did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmitReport {
    pub admitted: u64,
    /// Who was admitted, front of the line first.
    pub admitted_visitors: Vec<AdmittedVisitor>,
    pub abandoned: u64,
    pub expired: u64,
    pub waiting: u64,
    pub active: u64,
    /// Measured admissions per second (smoothed).
    pub measured_rate: f64,
    pub state: RoomState,
    /// Proxy instances that ran the admission loop for this room lately (1 for memory).
    pub instances: u64,
    /// The store generation: an opaque id kept in the room's data and created by `admit` when
    /// there is none. A different one than last time means the store lost the room's data (a
    /// Redis restarted without persistence, a failover that dropped writes).
    pub generation: String,
    /// This call created `generation` (a new room, or a store that forgot it).
    pub new_generation: bool,
    /// The room's count of admit calls in this generation, this one's included (0: a store
    /// that cannot roll back, memory): an answer later that finds it lower than one heard
    /// knows the data went back in time ([`AdmitStep::admits`]).
    pub admits: u64,
    /// The line after this step, sampled (see [`super::line`]): what answers status polls at the edge.
    pub line: LineSample,
    /// The autopilot, when the call carried one ([`AdmitContext::autopilot`]).
    pub autopilot: Option<autopilot::AutopilotState>,
    /// Admissions revoked since [`AdmitContext::revoked_after`] (empty when it was `None`).
    pub revoked: Revocations,
    /// The event in force, when the call carried events ([`AdmitContext::events`]).
    pub event: Option<EventSeen>,
    /// The version of the room's runtime event changes ([`super::Store::runtime_events`]): another
    /// than the caller built its schedule from means it should read them again.
    pub events_version: u64,
    /// The store's clock at the call (Unix µs): what event times are decided by.
    pub store_now: crate::clock::Micros,
    /// A random draw let someone in within the last claim-ttl (and two ticks), whatever this
    /// caller's method: the line's order then says nothing of who was let in, and a status
    /// poll asks the store (an instance still on `fifo` beside one on `random`, or a room just
    /// switched from `random`: found by review, a visitor drawn lost the turn).
    pub random_recent: bool,
    /// The longest tick an instance runs the room with lately (its own for memory): after a
    /// data loss, the wait before a cookie alone vouches for an order lets the slowest
    /// instance see the loss (see `Proxy::seen_generation`).
    pub tick_hi: Duration,
    /// The longest heartbeat life an instance runs the room with lately (zero for memory):
    /// kept by each instance past a loss, so that the finder of a loss makes the store wait as
    /// long for the instances from before it ([`Outage::heartbeat_hi`]).
    pub heartbeat_hi: Duration,
    /// The store lets nobody in for now (no turn, no walk-in): it waits for live instances on
    /// `local` to tell it of the sessions they admitted on their own while it was away
    /// (`lc_wait`; [`Outage`]). Never for memory.
    pub untold_hold: bool,
    /// The draw whose places the line holds (`None`: none in this line).
    pub line_draw: Option<LineDraw>,
    /// The live instances run the room with different events (a rolling reload under way):
    /// the store takes no event step and admits nobody, and while the store is away the room
    /// holds whatever this instance's own events say (always `false` for memory).
    pub events_mixed: bool,
    /// This instance's commitment to the draw of the event in force is not the one its
    /// pre-queue began with (another `[draw] secret` than the instances that began it had):
    /// in the pre-queue the store places nobody in the draw meanwhile (`events_mixed` is set
    /// too). Always `false` for memory (its draws end with the process).
    pub draw_recommitted: bool,
    /// The slots of `max-active` the call held back for sessions a store that lost its data
    /// forgot: the caller's hold, what it holds should the call find the loss, or a larger
    /// hold of another instance the store keeps. The line's snapshot counts these (found by
    /// CI: the call that found a loss held back the forgotten sessions' slots, and until the
    /// next tick the waiting page said the line moved at the rate into a full room).
    pub held_back: u64,
}

/// What the caller of `admit` knows, from its own earlier ticks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmitContext {
    /// The generation this instance saw last. When the store holds another one, the call
    /// admits nobody: the room's runtime state was lost and must be re-asserted first. When the
    /// store holds none (this call makes it), the call also holds the line (`queue_all`) until
    /// the caller has re-asserted the state, so that no newcomer walks in meanwhile.
    pub known_generation: Option<String>,
    /// Slots of max-active to keep free: sessions the store forgot that are probably still
    /// browsing and not yet re-registered. Join's fast path honours the latest one too.
    pub hold_back: u64,
    /// Visitors polled through queue tickets since the last call, with the place each ticket
    /// names: each one still at that place in line is marked seen now (as a join would).
    pub seen: Vec<(VisitorId, Place)>,
    /// A digest of the room's configuration on this instance (see
    /// [`crate::room::config_digest`]), kept beside the instance's heartbeat so that the
    /// admin API can tell when instances run different configurations.
    pub config: String,
    /// A digest of the room's events as this instance runs them (see
    /// [`crate::room::events_digest`]): while live instances disagree on it, the store takes
    /// no event step and admits nobody in the room ('' tells nothing: a caller before this).
    pub events_config: String,
    /// The room has an autopilot: this instance's report and proposal.
    pub autopilot: Option<autopilot::AutopilotTick>,
    /// The room takes origin commands: hand back the revocations numbered after this one
    /// ([`super::finish`]); `None` reads none (no cost for rooms without them).
    pub revoked_after: Option<u64>,
    /// The room's events near now ([`super::event`]); `None` for a room without events.
    pub events: Option<EventsArg>,
    /// The commitments of the drawn events in `events`, as this instance's `[draw] secret`
    /// gives them: "ID HEX\n" each, HEX the first 16 hex digits
    /// ([`crate::admission::events::commitments`]). The store keeps the one a pre-queue began
    /// with, and holds a caller whose commitment is another ([`AdmitReport::draw_recommitted`]).
    pub draw_commitments: String,
    /// The slots to hold back should this call find that the store lost its data (the
    /// sessions the caller's last tick counted and its walk-ins since): the call that finds the
    /// loss holds them back at once, before the caller re-asserts the room's state and its
    /// next tick says so (found on re-review r89c: a newcomer walked in between).
    pub hold_if_lost: u64,
    /// This call's number and the last one whose answer the caller received.
    pub step: AdmitStep,
    /// What the caller must settle after the store was away from it (see [`Outage`]).
    pub outage: Outage,
}

/// What an admit call tells of the time the store was away from the caller. Sessions an
/// instance admitted on its own (`local`) meanwhile, or kept running when their renewal came
/// due (under any policy), are in the shop before the store hears of them; after the store was
/// away from any instance, it lets nobody in until every live instance has told it of all of
/// theirs (found by review r94a: a newcomer walked into their slots in the moments before,
/// five in for a cap of three; r97a: an instance on `closed` was not waited for, and the line
/// moved beside the sessions it had kept). Memory has no outage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outage {
    /// Sessions the caller admitted or kept on its own that the store has not been told of yet.
    pub untold: u64,
    /// A call of the caller's admission loop failed since its last answered admit.
    pub cut: bool,
    /// The live instances the caller's last answered admit counted: the caller that finds the
    /// store lost its data waits for as many to be heard again (the store lost its record of
    /// them, and of what they have told).
    pub instances: u64,
    /// How long the caller may be away from the store after an outage before it tells it of its
    /// own admissions (two breaker cooldowns, a timeout and two ticks): its heartbeat lives
    /// at least as long, so that it is waited for (found by review r95a: a
    /// cooldown of 3 s kept an instance away past its heartbeat's five seconds).
    pub away: std::time::Duration,
    /// The longest heartbeat life an instance ran the room with lately, as the store last told
    /// the caller ([`AdmitReport::heartbeat_hi`], kept past a loss): the caller that finds the
    /// store lost its data makes it wait that long for the instances from before the loss, not
    /// only its own heartbeat's life (found by re-review r96a: an instance with a longer
    /// `breaker-cooldown` than the finder's told its own admissions after the wait had ended,
    /// and the line moved beside them).
    pub heartbeat_hi: std::time::Duration,
}

/// An admit call's place among the caller's calls for a room. A call whose answer the caller
/// never received (late past its timeout, or lost) still ran, and may have given turns the
/// caller cannot tell its visitors of: while the last call the store ran for the caller is
/// not one it heard, the store gives no turn, and keeps the claims of the turns that call
/// gave alive. `number` 0: not numbered (no such check).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdmitStep {
    /// This call's number: larger than any earlier call's of the caller, for any room.
    pub number: u64,
    /// The number of the last call of the caller for this room whose answer it received
    /// (0: none yet).
    pub heard: u64,
    /// The room's count of admit calls ([`AdmitReport::admits`]) in the last answer the
    /// caller received in the generation it knows (0: none).
    pub admits: u64,
}
