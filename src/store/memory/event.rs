//! The memory store's side of events: the same rules, steps and names as `lua/join.lua`,
//! `lua/admit.lua` and the prelude's `event_now` (see [`crate::store::event`]).

use std::collections::BTreeSet;

use super::*;
use crate::event::draw::{RegTicket, KEY_BITS};
use crate::event::schedule::Runtime;
use crate::event::{self, Event, Phase};
use crate::store::{Draw, EventChange, EventSeen, EventsArg, LineDraw, RuntimeEvents};

/// The width of a drawn range of places: every draw key, shifted by 16 bits, with the first two
/// bytes of the visitor id below it, so that two registrants with the same key take two places
/// in the order Redis gives them (by member, the id's bytes) instead of one.
pub(super) const DRAW_SPAN: u64 = 1 << (KEY_BITS + 16);

/// What the memory store keeps of a room's events.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// The event whose pre-queue admit saw last (`in_pre`).
    in_pre: Option<String>,
    /// The liveness clock when the room was last found out of a pre-queue: registrations are
    /// silent from then (`open_live`).
    pub(super) open_live: Option<Micros>,
    /// The event seen open, and when (wall and monotonic).
    opened: Option<String>,
    opened_wall: Option<Micros>,
    opened_mono: Option<Micros>,
    /// The event whose closing emptied the line.
    released: Option<String>,
    /// The line's drawn range: the event, its first place and the line's epoch then.
    drawn: Option<(String, u64, u64)>,
    /// Each event's draw: (draw key, ticket), in the draw's order.
    lists: HashMap<String, BTreeSet<(u64, RegTicket)>>,
    runtime: RuntimeEvents,
    /// In line and seen only during a pre-queue (slot 0 in Redis): silent from the opening.
    pub(super) registered: BTreeSet<u64>,
    /// The event whose start ended the sessions admitted before it (`ended_for`).
    ended_for: Option<String>,
    /// The draws whose order came out (`out:<id>`): nobody is placed by them again.
    draws_out: BTreeSet<String>,
}

/// The event in force at `wall` (the prelude's `event_now`).
fn in_force<'a>(
    events: Option<&'a EventsArg>,
    wall: Micros,
    opened: Option<&str>,
) -> Option<(&'a Event, Phase)> {
    let list = &events?.events;
    event::current(list, wall, opened).map(|(_, e, p)| (e, p))
}

/// What a call decides by: the event in force and its phase.
pub(super) struct Now<'a> {
    pub event: Option<(&'a Event, Phase)>,
    /// Index of the event in the call's list (for its draw).
    pub index: Option<usize>,
}

impl Now<'_> {
    pub fn in_pre(&self) -> bool {
        matches!(self.event, Some((_, Phase::Prequeue)))
    }

    pub fn closed(&self) -> bool {
        matches!(self.event, Some((_, Phase::Closed)))
    }
}

impl RoomData {
    pub(super) fn event_now<'a>(&self, events: Option<&'a EventsArg>, wall: Micros) -> Now<'a> {
        let opened = self.events.opened.as_deref();
        let event = in_force(events, wall, opened);
        let index =
            event.and_then(|(e, _)| events.and_then(|a| a.events.iter().position(|x| x == e)));
        Now { event, index }
    }

    /// The room state a call decides by: the event's overrides while it runs.
    pub(super) fn state_in(&self, now: &Now<'_>) -> RoomState {
        let mut s = self.state.clone();
        match now.event {
            Some((e, phase)) if Event::overrides_in(phase) => {
                s.event_rate = e.admit_per_second;
                s.event_max_active = e.max_active;
            }
            _ => {
                s.event_rate = None;
                s.event_max_active = None;
            }
        }
        s
    }

    /// Whether `seq` is a draw's place in the line's current epoch.
    pub(super) fn drawn(&self, seq: u64) -> bool {
        self.events.drawn.as_ref().is_some_and(|(_, base, epoch)| {
            *epoch == self.epoch && seq >= *base && seq < base + DRAW_SPAN
        })
    }

    /// Whether a draw's places of the line's current epoch are in it still: it is let in from
    /// its front meanwhile, whatever the room's method (as admit.lua; found by review r92d).
    pub(super) fn drawn_in_line(&self) -> bool {
        self.events.drawn.as_ref().is_some_and(|(_, base, epoch)| {
            *epoch == self.epoch && self.order.range(*base..base + DRAW_SPAN).next().is_some()
        })
    }

    /// Whether the order of the line's draw is out (`out:<id>` in admit.lua): its places may be
    /// shown.
    pub(super) fn draw_out(&self) -> bool {
        self.events
            .drawn
            .as_ref()
            .is_some_and(|(id, _, _)| self.events.draws_out.contains(id))
    }

    /// A join during a pre-queue no admit has seen yet marks it (as admit would): its
    /// registrations are silent only from its opening.
    pub(super) fn note_prequeue(&mut self, now: &Now<'_>, mono: Micros) {
        if let Some((e, Phase::Prequeue)) = now.event {
            if self.events.in_pre.as_deref() != Some(e.id().as_str()) {
                self.events.in_pre = Some(e.id());
                self.events.open_live = None;
                self.events.ended_for = Some(e.id());
                self.end_sessions(mono, self.live_now);
            }
        }
    }

    /// A pre-queue ends the sessions admitted before it; their visitors are kept as ended
    /// until their cookies can have expired (the prelude's `end_sessions`), on the store's
    /// clock and, through an outage, on the liveness clock (`live`: now).
    pub(super) fn end_sessions(&mut self, now: Micros, live: Micros) {
        let margin = micros(crate::store::order::MARKER_MARGIN);
        self.ended.retain(|_, until| *until + margin > now);
        for (vid, until) in self.active.drain() {
            let e = self.ended.entry(vid).or_insert(until);
            *e = (*e).max(until);
            let on_live =
                live + until.saturating_sub(now) + margin + micros(crate::room::KEEP_AT_MOST);
            self.ended_live.note(vid, on_live, live);
        }
        self.expiries.clear();
    }

    /// Whether `vid`'s session was ended by a pre-queue and a cookie of it may still be valid:
    /// then a cookie without a session is no proof of one, and an order of that session does
    /// not bring it back (the prelude's `session_ended`).
    pub(super) fn session_ended(&self, vid: VisitorId, now: Micros) -> bool {
        self.ended
            .get(&vid)
            .is_some_and(|until| until + micros(crate::store::order::MARKER_MARGIN) > now)
    }

    /// Admitted again: no longer one of the sessions a pre-queue ended, nor a used admission.
    pub(super) fn readmitted(&mut self, vid: VisitorId) {
        if !self.ended.is_empty() {
            self.ended.remove(&vid);
        }
        self.used.forget(&vid);
        self.ended_live.forget(&vid);
        self.pending_live.forget(&vid);
    }

    /// A visitor in line is seen now; during a pre-queue that means registered.
    pub(super) fn seen_now(&mut self, vid: VisitorId, in_pre: bool) {
        if in_pre {
            self.register(vid);
        } else {
            self.mark_seen(vid);
        }
    }

    /// Marks a waiter registered: out of the silence order, silent from the opening.
    pub(super) fn register(&mut self, vid: VisitorId) {
        if let Some(w) = self.waiters.get_mut(&vid) {
            let (old, seq) = (w.last_seen, w.seq);
            w.last_seen = REGISTERED;
            self.seen.remove(&(old, seq));
            self.events.registered.insert(seq);
        }
    }

    /// A newcomer's place: in a drawn pre-queue its draw key within the drawn range (reserved
    /// after everyone in line the first time), else the next number. One drawn range per line
    /// (epoch), as in Redis, whose offsets have room for one: a line that holds another
    /// event's queues registrants first come, first served.
    pub(super) fn place_for(
        &mut self,
        now: &Now<'_>,
        draws: &[Option<Draw>],
        vid: VisitorId,
    ) -> (u64, bool) {
        let draw = match (now.event, now.index) {
            (Some((e, Phase::Prequeue)), Some(i)) if e.draw => {
                draws.get(i).copied().flatten().map(|d| (e, d))
            }
            _ => None,
        };
        let other_range = self.events.drawn.as_ref().is_some_and(|(id, _, epoch)| {
            *epoch == self.epoch && draw.is_some_and(|(e, _)| *id != e.id())
        });
        // A draw whose order is out places nobody, should an event of its id come back.
        let out = draw.is_some_and(|(e, _)| self.events.draws_out.contains(&e.id()));
        let draw = draw.filter(|_| !other_range && !out);
        let Some((e, d)) = draw else {
            let seq = self.next_seq;
            self.next_seq += 1;
            return (seq, false);
        };
        let base = match &self.events.drawn {
            Some((id, base, epoch)) if *id == e.id() && *epoch == self.epoch => *base,
            _ => {
                let base = self.next_seq;
                self.next_seq = base + DRAW_SPAN;
                self.events.drawn = Some((e.id(), base, self.epoch));
                base
            }
        };
        self.events
            .lists
            .entry(e.id())
            .or_default()
            .insert((d.key, d.ticket));
        let id = vid.as_bytes();
        let mut seq = base + (d.key << 16) + u64::from(u16::from_be_bytes([id[0], id[1]]));
        while self.order.contains_key(&seq) {
            // The same key and the same first two bytes: the next free place (1 in 2^56).
            seq += 1;
        }
        (seq, true)
    }

    /// An empty line's new epoch ends any drawn range.
    pub(super) fn new_line(&mut self) {
        self.epoch = new_epoch();
        self.events.drawn = None;
    }

    /// Registrations are silent from the opening: all at once, once `abandon_after` has passed
    /// since it on the liveness clock.
    pub(super) fn prune_registered(&mut self, live: Micros, abandon_after: Micros) -> u64 {
        let Some(open) = self.events.open_live else {
            return 0;
        };
        if open.saturating_add(abandon_after) > live || self.events.registered.is_empty() {
            return 0;
        }
        let seqs: Vec<u64> = std::mem::take(&mut self.events.registered)
            .into_iter()
            .collect();
        let mut n = 0;
        for seq in seqs {
            if let Some(vid) = self.order.get(&seq).copied() {
                self.remove_waiter(vid);
                n += 1;
            }
        }
        n
    }

    /// An admit's bookkeeping of the event in force (admit.lua's): the pre-queue entered or
    /// left, the opening seen, a release at the closing. Returns the number released.
    pub(super) fn event_tick(
        &mut self,
        now: &Now<'_>,
        live: Micros,
        mono: Micros,
        wall: Micros,
        stale_events: bool,
    ) -> u64 {
        match now.event {
            // By events older than the runtime changes kept here no pre-queue is entered or
            // left (as in admit.lua; review r105a), nor an opening seen (below).
            _ if stale_events => {}
            Some((e, Phase::Prequeue)) => {
                if self.events.in_pre.as_deref() != Some(e.id().as_str()) {
                    self.events.in_pre = Some(e.id());
                    self.events.open_live = None;
                    self.events.ended_for = Some(e.id());
                    self.end_sessions(mono, live);
                }
            }
            event => {
                if self.events.in_pre.is_some() || self.events.open_live.is_none() {
                    // Out of a pre-queue: registrations are silent from now on.
                    self.events.open_live = Some(live);
                    self.events.in_pre = None;
                }
                if let Some((e, phase)) = event.filter(|_| !stale_events) {
                    if self.events.opened.as_deref() != Some(e.id().as_str()) {
                        // The opening, seen: registration stays closed whatever the clock does.
                        self.events.opened = Some(e.id());
                        self.events.opened_wall = Some(wall);
                        self.events.opened_mono = Some(mono);
                        // Seen without its pre-queue (as in admit.lua): its start is now.
                        if phase == Phase::Open
                            && self.events.ended_for.as_deref() != Some(e.id().as_str())
                        {
                            self.events.ended_for = Some(e.id());
                            self.end_sessions(mono, live);
                        }
                    }
                }
            }
        }
        if let Some((e, Phase::Closed)) = now.event.filter(|_| !stale_events) {
            let release = e.after_close == event::AfterClose::Release;
            if release && self.events.released.as_deref() != Some(e.id().as_str()) {
                let n = self.waiters.len() as u64;
                self.clear_line();
                self.events.released = Some(e.id());
                return n;
            }
        }
        0
    }

    /// Empties the line (clear_waiting.lua).
    pub(super) fn clear_line(&mut self) {
        self.waiters.clear();
        self.order.clear();
        self.seen.clear();
        self.ranks = Ranks::default();
        self.events.registered.clear();
        self.events.drawn = None;
    }

    /// When a visitor admitted from `seq`, who joined at `joined_at`, started waiting: a draw's
    /// place waits from the opening.
    pub(super) fn waited_from(&self, seq: u64, joined_at: Micros) -> Micros {
        match self.events.opened_mono {
            Some(at) if self.drawn(seq) => at,
            _ => joined_at,
        }
    }

    /// The draw whose places the line holds and whether its order is out (admit.lua's
    /// `line_draw`): out once its event is seen open, or no longer among the caller's events.
    pub(super) fn line_draw(
        &mut self,
        events: Option<&EventsArg>,
        stale_events: bool,
    ) -> Option<LineDraw> {
        let id = match &self.events.drawn {
            Some((id, _, epoch)) if *epoch == self.epoch => id.clone(),
            _ => return None,
        };
        let mut out = self.events.draws_out.contains(&id);
        if !out && !stale_events {
            let held = events.is_some_and(|a| a.events.iter().any(|e| e.is(&id)));
            if self.events.opened.as_deref() == Some(id.as_str()) || !held {
                out = true;
                self.events.draws_out.insert(id.clone());
            }
        }
        Some(LineDraw {
            id,
            out,
            epoch: self.epoch,
        })
    }

    pub(super) fn event_seen(&self, now: &Now<'_>, wall: Micros) -> Option<EventSeen> {
        let _ = wall;
        let (e, phase) = now.event?;
        Some(EventSeen {
            id: e.id(),
            name: e.name.clone(),
            phase,
            registrations: self.events.lists.get(&e.id()).map_or(0, |l| l.len() as u64),
            opened_at: self
                .events
                .opened_wall
                .filter(|_| self.events.opened.as_deref() == Some(e.id().as_str())),
        })
    }

    pub(super) fn runtime_events(&self) -> RuntimeEvents {
        RuntimeEvents {
            opened: self.events.opened.clone(),
            ..self.events.runtime.clone()
        }
    }

    pub(super) fn events_version(&self) -> u64 {
        self.events.runtime.version
    }

    pub(super) fn change_event(
        &mut self,
        name: &str,
        change: &Runtime,
        version: u64,
        before: &serde_json::Value,
        by: &crate::store::history::Actor,
    ) -> EventChange {
        let rt = &mut self.events.runtime;
        if rt.events.get(name) == Some(change) {
            return EventChange::Done(rt.version);
        }
        if rt.version != version {
            return EventChange::Conflict(rt.clone());
        }
        // As lua/change_event.lua: a recorded opening does not move.
        let old_id = before
            .get("name")
            .and_then(serde_json::Value::as_str)
            .zip(
                before
                    .get("prequeue-from")
                    .and_then(serde_json::Value::as_u64),
            )
            .map(|(n, p)| format!("{n}@{p}"));
        let moved = change.event.as_ref().is_some_and(|e| {
            before.get("opens-at").and_then(serde_json::Value::as_u64) != Some(e.opens_at)
        });
        if moved && old_id.is_some() && self.events.opened == old_id {
            return EventChange::OpeningRecorded;
        }
        let rt = &mut self.events.runtime;
        rt.events.insert(name.to_string(), change.clone());
        rt.version += 1;
        let v = rt.version;
        let to = serde_json::to_value(change).unwrap_or(serde_json::Value::Null);
        self.record(
            by,
            vec![crate::store::history::FieldChange {
                field: format!("event {name}"),
                from: before.clone(),
                to,
            }],
        );
        EventChange::Done(v)
    }

    pub(super) fn draw_list(&self, event: &str, from: u64, count: u64) -> Vec<RegTicket> {
        self.events.lists.get(event).map_or_else(Vec::new, |l| {
            l.iter()
                .skip(usize::try_from(from).unwrap_or(usize::MAX))
                .take(usize::try_from(count).unwrap_or(usize::MAX))
                .map(|(_, t)| *t)
                .collect()
        })
    }
}
