//! A room's draws on this instance: seeds, commitments and tickets, and a revealed draw's list
//! (read from the store once, served from memory).

use std::sync::Arc;

use super::super::draw::{self, RegTicket};
use super::super::Event;
use super::{RoomEvents, LISTS_KEPT};
use crate::clock::Micros;
use crate::store::{Draw, EventsArg, LineDraw, VisitorId};

/// A draw whose event was cancelled after its pre-queue began, while its registrants are in
/// line by their drawn places ([`RoomEvents::cancelled_draw`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CancelledDraw {
    /// Its event's id ([`Event::id`]), what the published document is asked for by.
    pub id: String,
    pub name: String,
    pub prequeue_from: Micros,
    pub seed: [u8; 32],
    /// Its order is out: the seed may be shown.
    pub out: bool,
    /// The line's epoch its places are in.
    pub epoch: u64,
}

impl CancelledDraw {
    /// A registrant's ticket in it.
    pub fn ticket(&self, room: &str, vid: VisitorId) -> RegTicket {
        draw::ticket(room, &self.id, vid)
    }
}

/// A revealed draw's list, read from the store once per instance and served from memory.
#[derive(Debug, Clone)]
pub struct DrawList {
    pub event: String,
    /// Empty while it is being read.
    pub tickets: Arc<Vec<RegTicket>>,
    pub reading: bool,
    /// The tickets as the JSON array `/.anteroom/event` serves, built once.
    pub json: bytes::Bytes,
}

impl DrawList {
    /// A list read: its JSON built here, off the request path.
    pub fn read(event: String, tickets: Vec<RegTicket>) -> Self {
        let mut json = Vec::with_capacity(tickets.len() * 35 + 2);
        json.push(b'[');
        for (i, t) in tickets.iter().enumerate() {
            if i > 0 {
                json.push(b',');
            }
            json.push(b'"');
            json.extend_from_slice(draw::hex(t).as_bytes());
            json.push(b'"');
        }
        json.push(b']');
        Self {
            event,
            tickets: Arc::new(tickets),
            reading: false,
            json: json.into(),
        }
    }

    /// The mark of a list being read.
    pub fn reading(event: String) -> Self {
        Self {
            event,
            tickets: Arc::new(Vec::new()),
            reading: true,
            json: bytes::Bytes::new(),
        }
    }
}

impl RoomEvents {
    /// The seed of an event's draw (`None` without `[draw] secret`).
    pub fn seed(&self, e: &Event) -> Option<[u8; 32]> {
        self.seed_of(&e.name, e.prequeue_from)
    }

    /// The seed of an event's draw as this instance publishes it (its commitment, and the seed
    /// from the opening): none while the store keeps another commitment for it
    /// ([`Self::recommitted`]: this instance runs with another `[draw] secret` than the one the
    /// pre-queue began with, and would show visitors a second commitment).
    pub fn published_seed(&self, e: &Event) -> Option<[u8; 32]> {
        if self.recommitted() {
            return None;
        }
        self.seed(e)
    }

    /// The seed of the draw of the event `name` whose pre-queue began at `prequeue_from`.
    fn seed_of(&self, name: &str, prequeue_from: Micros) -> Option<[u8; 32]> {
        let secret = self.secret.as_ref()?;
        Some(draw::seed(secret, &self.room, name, prequeue_from))
    }

    /// The draw whose places the line held at the last tick.
    pub fn line_draw(&self) -> Option<Arc<LineDraw>> {
        self.line_draw.load_full()
    }

    /// The line's draw when its event is no longer in the schedule (cancelled after its
    /// pre-queue began): its registrants keep their drawn places, and the draw is published by
    /// its id. `None` while it is not.
    pub fn cancelled_draw(&self) -> Option<CancelledDraw> {
        let d = self.line_draw.load_full()?;
        if self.schedule.load().events.iter().any(|e| e.is(&d.id)) {
            return None;
        }
        let (name, pre) = d.name_and_start()?;
        Some(CancelledDraw {
            name: name.to_string(),
            prequeue_from: pre,
            seed: self.seed_of(name, pre)?,
            out: d.out,
            epoch: d.epoch,
            id: d.id.clone(),
        })
    }

    /// Whether drawn places in line are sealed: the line's draw is not out (with no word of
    /// the store on it yet, the event in force's draw not revealed).
    pub fn line_sealed(&self, local: Micros) -> bool {
        match self.line_draw.load().as_deref() {
            Some(d) => !d.out,
            None => self.view(local).is_some_and(|v| !v.revealed),
        }
    }

    /// The commitment this instance publishes for an event's draw ([`Self::published_seed`]).
    pub fn commitment(&self, e: &Event) -> Option<String> {
        self.published_seed(e).map(|s| draw::commitment(&s))
    }

    /// The commitment this instance's `[draw] secret` gives an event's draw.
    pub fn own_commitment(&self, e: &Event) -> Option<String> {
        self.seed(e).map(|s| draw::commitment(&s))
    }

    /// A visitor's registration ticket in an event's draw.
    pub fn ticket(&self, e: &Event, vid: VisitorId) -> RegTicket {
        draw::ticket(&self.room, &e.id(), vid)
    }

    /// The visitor's draw in each event of `window` that draws and has not opened yet (by this
    /// instance's estimate, with a minute's margin for clocks): what a join carries.
    pub fn draws(&self, window: &EventsArg, vid: VisitorId, local: Micros) -> Vec<Option<Draw>> {
        let now = self.store_now(local);
        window
            .events
            .iter()
            .map(|e| {
                if !e.draw || now > e.opens_at.saturating_add(60_000_000) {
                    return None;
                }
                let seed = self.seed(e)?;
                let ticket = self.ticket(e, vid);
                Some(Draw {
                    ticket,
                    key: draw::key(&seed, &ticket),
                })
            })
            .collect()
    }

    /// The list of the draw of the event with id `event`, if read (or being read).
    pub fn list(&self, event: &str) -> Option<DrawList> {
        self.lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|l| l.event == event)
            .cloned()
    }

    pub fn set_list(&self, list: DrawList) {
        let mut lists = self.lists.lock().unwrap_or_else(|e| e.into_inner());
        lists.retain(|l| l.event != list.event);
        lists.push(list);
        if lists.len() > LISTS_KEPT {
            lists.remove(0);
        }
    }

    /// Forgets a list whose reading failed, so that it is read again when asked for.
    pub fn clear_list(&self, event: &str) {
        self.lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|l| l.event != event);
    }

    /// A request asked for the list of the draw of the event with id `event`: the next tick
    /// reads it.
    pub fn want_list(&self, event: &str) {
        let mut w = self.wanted.lock().unwrap_or_else(|e| e.into_inner());
        if !w.iter().any(|x| x == event) && w.len() < LISTS_KEPT {
            w.push(event.to_string());
        }
    }

    pub fn take_wanted(&self) -> Vec<String> {
        std::mem::take(&mut *self.wanted.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether `e`'s draw may be shown: the store has seen it open, or an event after it is in
    /// force (events do not overlap, so it opened). Never on this instance's clock alone: an
    /// instance that missed a postponed opening must not publish a seed while the store still
    /// takes registrations, nor one of an event cancelled and added anew by the same name (the
    /// store's word is on an event's id, [`Event::id`]).
    pub fn revealed(&self, e: &Event) -> bool {
        let seen = self.seen.load();
        if seen
            .as_ref()
            .is_some_and(|s| e.is(&s.id) && s.opened_at.is_some())
        {
            return true;
        }
        // Events do not overlap: a later one in force means this one has opened.
        let later_in_force = seen.as_ref().is_some_and(|s| {
            self.schedule
                .load()
                .events
                .iter()
                .any(|x| x.is(&s.id) && x.prequeue_from > e.prequeue_from)
        });
        later_in_force
    }
}
