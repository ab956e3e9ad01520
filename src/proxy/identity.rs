//! Whose place a waiting request speaks for: the visitor-id cookie (`anteroom_vid`, one for
//! every room) and the room's signed queue ticket, which names the id the visitor holds their
//! place in this room with.
//!
//! The ticket decides when the two disagree. The id cookie is shared by all rooms and changes
//! under a room's feet: a `revoke` in another room gives the visitor a new id (found by
//! review: a visitor fourth in one room's line, revoked in another, was put at the back of the
//! first, their old place left to be swept for silence). The ticket is signed and cannot be
//! forged; a sibling site tossing in a ticket of its own beside ours (sent first, for a longer
//! path) can only move the visitor forward: the ticket with the earliest place counts
//! (re-reviews: the first sent counted, then the first an id cookie named, and a tossed ticket
//! with an id cookie naming it moved them back).

use pingora::http::RequestHeader;

use super::{cookie_values, secure, Ctx, Proxy};
use crate::app::Shared;
use crate::cookie;
use crate::line::Ticket;
use crate::store::line::Place;
use crate::store::VisitorId;

/// Who a waiting request is, in one room.
pub(super) struct Visitor {
    /// The id the visitor is placed with in this room.
    pub vid: VisitorId,
    /// Their queue ticket for this room, naming `vid`.
    pub ticket: Option<Ticket>,
    /// The request carried `vid` in a visitor-id cookie.
    pub had_vid: bool,
    /// `ticket` is a draw's place, sealed (see [`Candidate::sealed`]).
    pub sealed: bool,
    /// The ticket the join challenge is judged by (`challenge::holds_place`): `ticket`, or,
    /// when the store held none of the request's tickets, the one that named `vid`.
    pub vouched: Option<Ticket>,
    /// The other identities the request's tickets name, in the order the store is asked about
    /// them ([`candidates`]): when there are any, the place `vid`'s ticket names may be gone (a
    /// stale ticket tossed in by a sibling site), and the first whose place the store still
    /// holds decides.
    pub others: Vec<Candidate>,
    /// The store did not answer when asked about those identities
    /// ([`Proxy::enter_known`](super::Proxy)): the join that would follow is not made (it
    /// would wait out a second store timeout while the store is down), and this stands for
    /// its answer.
    pub unanswered: Option<crate::store::StoreError>,
}

/// One identity a request may speak for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Candidate {
    pub vid: VisitorId,
    pub ticket: Option<Ticket>,
    /// The request carried `vid` in a visitor-id cookie.
    pub had_vid: bool,
    /// Its ticket is a draw's place, sealed: the draw has not been revealed.
    pub sealed: bool,
}

/// The place a ticket is ordered by among a request's tickets: its own, but a drawn one's key,
/// while the draw is `sealed` (until its opening: see `Proxy::visitor`), orders it after every
/// place of its line that is not drawn (those who waited before the pre-queue began are ahead
/// of its draw), and among drawn ones by nothing. Once the draw is revealed, its key orders it
/// as the store does (found by re-review: drawn keys counted for nothing after the opening as
/// well, and a registrant's ticket tossed in first moved a visitor at the head of the line to
/// its place, or a visitor who waited before the pre-queue behind the draw).
fn ordered_by(t: &Ticket, sealed: bool) -> Place {
    Place {
        key: if t.drawn && sealed {
            u64::MAX
        } else {
            t.place.key
        },
        ..t.place
    }
}

/// At most this many of a request's tickets are asked about in turn: every one it may carry
/// (re-review: with three, a fourth, the visitor's own, went unasked behind three stale ones).
/// With the join that may follow, five store calls for one poll at most.
const ASKED: usize = cookie::VALUES_TRIED;

/// The tickets a request carries, in the order the store is asked about them when they name
/// several ids: by place (the earliest first, of the newest line), one per id, at most
/// [`ASKED`]. The first is [`whose`]'s choice. Id cookies are not asked about: a tossed one
/// would give the visitor a sibling site's id. (Found by review: the earliest place counted
/// alone, and a ticket of a place long swept, tossed in by a sibling site, put the visitor at
/// the back of the line as its id, their own place left to be swept.)
pub(super) fn candidates(tickets: &[(VisitorId, Place)]) -> Vec<(VisitorId, usize)> {
    let mut order: Vec<usize> = (0..tickets.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(tickets[i].1.epoch), tickets[i].1.key));
    let mut out: Vec<(VisitorId, usize)> = Vec::new();
    for i in order {
        let v = tickets[i].0;
        if out.len() < ASKED && !out.iter().any(|(o, _)| *o == v) {
            out.push((v, i));
        }
    }
    out
}

/// The choice, from the ids the request's visitor-id cookies carry and the ids and places its
/// verified tickets for the room name, those the room revoked left out: the ticket with the
/// earliest place (of the newest line), whatever the order they were sent in; else the first
/// id. `Some(i)`: the place is ticket `i`'s. A ticket tossed in beside the visitor's own, with
/// an id cookie naming it, can only move them forward (re-review: the first ticket an id
/// cookie named counted, and a sibling site that tossed in both put the visitor in its place).
pub(super) fn whose(
    ids: &[VisitorId],
    tickets: &[(VisitorId, Place)],
) -> Option<(VisitorId, Option<usize>)> {
    let earliest = tickets
        .iter()
        .enumerate()
        .min_by_key(|(_, (_, p))| (std::cmp::Reverse(p.epoch), p.key));
    if let Some((i, (t, _))) = earliest {
        return Some((*t, Some(i)));
    }
    ids.first().map(|v| (*v, None))
}

impl Proxy {
    /// The visitor's id and ticket in `room` ([`whose`]); without either, a new id (and its
    /// cookie). An id whose admission in `room` the origin revoked is left out, and its ticket
    /// with it: its next admission must be a new one, not one its old cookies are refused with.
    ///
    /// The ticket is the visitor's place: a browser that kept it and lost the id cookie (which
    /// lived a day, and was never given again: found by review, a registrant more than a day
    /// before the opening got a new id, a new place and a new registration ticket) keeps it,
    /// and the id cookie is given again.
    pub(super) fn visitor(
        shared: &Shared,
        req: &RequestHeader,
        ctx: &mut Ctx,
        room: usize,
    ) -> Visitor {
        let r = &shared.rooms[room];
        let revoked = |v: &VisitorId| r.revoked.holds(*v, shared.cookie_secs(room));
        let ids: Vec<VisitorId> = cookie::values(cookie_values(req), cookie::VID_COOKIE)
            .take(cookie::VALUES_TRIED)
            .filter_map(VisitorId::parse)
            .filter(|v| !revoked(v))
            .collect();
        let mut carried = false;
        let mut tickets: Vec<Ticket> = cookie::values(cookie_values(req), &r.ticket_cookie)
            .take(cookie::VALUES_TRIED)
            .inspect(|_| carried = true)
            .filter_map(|v| crate::line::ticket::verify(&shared.config.cookie.keys, r.name(), v))
            .filter(|t| !revoked(&t.vid))
            .collect();
        ctx.carried_ticket = carried;
        // A drawn place is ordered by nothing of its draw until the draw is revealed: its key
        // is sealed until then, and which of two tickets a request was placed by would tell
        // which drew the earlier place (found by re-review: pairs of tickets sent together
        // sorted six registrants in the draw's order before the opening). After, by its key.
        // Sealed by the line's draw, which is not always the event in force's (one cancelled
        // after its pre-queue began).
        let sealed =
            tickets.iter().any(|t| t.drawn) && r.events.line_sealed(shared.clock.now_micros());
        let named: Vec<(VisitorId, Place)> = tickets
            .iter()
            .map(|t| (t.vid, ordered_by(t, sealed)))
            .collect();
        let Some((vid, from)) = whose(&ids, &named) else {
            let vid = VisitorId::random();
            Self::give_vid(shared, ctx, room, vid);
            return Visitor {
                vid,
                ticket: None,
                had_vid: false,
                sealed: false,
                vouched: None,
                others: Vec::new(),
                unanswered: None,
            };
        };
        // One ticket (every browser of ours): nothing to ask about, nothing allocated.
        let others: Vec<Candidate> = if named.len() < 2 {
            Vec::new()
        } else {
            candidates(&named)
                .into_iter()
                .skip(1)
                .map(|(v, i)| Candidate {
                    vid: v,
                    ticket: Some(tickets[i]),
                    had_vid: ids.contains(&v),
                    sealed: sealed && tickets[i].drawn,
                })
                .collect()
        };
        let ticket = from.map(|i| tickets.swap_remove(i));
        if ids.is_empty() {
            Self::give_vid(shared, ctx, room, vid);
        }
        // The id cookie is given again (the page's refresh of its life, a new ticket) with
        // this room's id when it carries it (beside one tossed in first by a sibling site),
        // else with the one it carries: what the other rooms know the visitor by.
        let had_vid = ids.contains(&vid);
        ctx.kept_vid = if had_vid {
            Some(vid)
        } else {
            ids.first().copied()
        };
        Visitor {
            vid,
            ticket,
            had_vid,
            sealed: sealed && ticket.is_some_and(|t| t.drawn),
            vouched: ticket,
            others,
            unanswered: None,
        }
    }

    fn give_vid(shared: &Shared, ctx: &mut Ctx, room: usize, vid: VisitorId) {
        if ctx.hold_identity {
            return;
        }
        let life = Self::visitor_cookie_secs(shared, room);
        ctx.set_cookies
            .push(cookie::set_vid(vid, life, secure(shared, ctx)));
    }

    /// A page the visitor keeps polling from gives their visitor-id cookie a fresh life, with
    /// the id it carries (`Ctx::kept_vid`; else `vid`): the page's polls are judged by it
    /// (`cookies_required`: see `status::refuses_cookies`), and one set a day before, on an
    /// earlier visit, ran out on a page that gave no ticket (the line full, on hold, the
    /// challenge: found by re-review).
    pub(super) fn keep_vid(shared: &Shared, ctx: &mut Ctx, room: usize, vid: VisitorId) {
        let named = |c: &String| {
            c.strip_prefix(cookie::VID_COOKIE)
                .is_some_and(|rest| rest.starts_with('='))
        };
        if ctx.set_cookies.iter().any(named) {
            return;
        }
        Self::give_vid(shared, ctx, room, ctx.kept_vid.unwrap_or(vid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: u8) -> VisitorId {
        VisitorId::from_bytes([n; 16])
    }

    /// A ticket naming visitor `n` at place key `n` of epoch 1.
    fn t(n: u8) -> (VisitorId, Place) {
        (
            id(n),
            Place {
                epoch: 1,
                key: n.into(),
            },
        )
    }

    #[test]
    fn the_ticket_decides_whose_place_a_request_is() {
        let (a, b, x) = (id(1), id(2), id(9));
        // One id, its ticket: theirs.
        assert_eq!(whose(&[a], &[t(1)]), Some((a, Some(0))));
        // The id cookie replaced (a revoke in another room): the place stays the ticket's.
        assert_eq!(whose(&[b], &[t(1)]), Some((a, Some(0))));
        // A ticket tossed in first by a sibling site, with an id cookie naming it or not: the
        // earlier place counts.
        assert_eq!(whose(&[a], &[t(9), t(1)]), Some((a, Some(1))));
        assert_eq!(whose(&[x, a], &[t(9), t(1)]), Some((a, Some(1))));
        assert_eq!(whose(&[b], &[t(9), t(1)]), Some((a, Some(1))));
        // An id tossed in first: the one the ticket names wins.
        assert_eq!(whose(&[x, a], &[t(1)]), Some((a, Some(0))));
        // No ticket: the first id; nothing: nobody yet.
        assert_eq!(whose(&[a, b], &[]), Some((a, None)));
        assert_eq!(whose(&[], &[]), None);
        assert_eq!(whose(&[], &[t(2)]), Some((b, Some(0))));
    }

    #[test]
    fn a_sealed_draw_orders_nothing_and_a_revealed_one_its_place() {
        let ticket = |key: u64, drawn: bool| Ticket {
            vid: id(1),
            place: Place { epoch: 3, key },
            seen: 0,
            shown: 1,
            predicted: None,
            drawn,
        };
        // Two sealed drawn tickets: sent in either order, the first sent counts (the draw says
        // nothing); revealed, the earlier place.
        for (a, b) in [(5, 9), (9, 5)] {
            let named = |sealed| {
                [
                    (id(1), ordered_by(&ticket(a, true), sealed)),
                    (id(2), ordered_by(&ticket(b, true), sealed)),
                ]
            };
            assert_eq!(whose(&[], &named(true)), Some((id(1), Some(0))));
            let earlier = if a < b { 0 } else { 1 };
            assert_eq!(
                whose(&[], &named(false)),
                Some((id(earlier as u8 + 1), Some(earlier)))
            );
        }
        // A place from before the pre-queue (not drawn) goes before a sealed draw, whatever
        // its key; once revealed, the keys order them as the store does.
        for sealed in [true, false] {
            let named = [
                (id(1), ordered_by(&ticket(2, true), sealed)),
                (id(2), ordered_by(&ticket(7, false), sealed)),
            ];
            let first = if sealed { id(2) } else { id(1) };
            assert_eq!(whose(&[], &named).map(|w| w.0), Some(first));
            assert_eq!(candidates(&named)[0].0, first);
        }
        assert_eq!(ordered_by(&ticket(9, false), true).key, 9);
        assert_eq!(ordered_by(&ticket(9, true), true).epoch, 3);
    }

    #[test]
    fn every_ticket_a_request_carries_is_asked_about_in_order() {
        let (a, b) = (id(1), id(2));
        // One ticket: one identity (answered at the edge).
        assert_eq!(candidates(&[t(1)]), vec![(a, 0)]);
        // A stale ticket tossed in first: asked about first, then the visitor's own.
        assert_eq!(candidates(&[t(2), t(1)]), vec![(a, 1), (b, 0)]);
        // Two tickets of one id: its earliest place, once.
        let later = (
            a,
            Place {
                epoch: 1,
                key: 7u8.into(),
            },
        );
        assert_eq!(candidates(&[later, t(1)]), vec![(a, 1)]);
        // A newer line's ticket first.
        let newer = (
            b,
            Place {
                epoch: 2,
                key: 50u8.into(),
            },
        );
        assert_eq!(candidates(&[t(1), newer]), vec![(b, 1), (a, 0)]);
        // All four a request may carry.
        assert_eq!(candidates(&[t(4), t(3), t(2), t(1)]).len(), ASKED);
        assert_eq!(candidates(&[t(5), t(4), t(3), t(2), t(1)]).len(), ASKED);
    }

    proptest! {
        /// The tickets asked about: [`whose`]'s choice first, each id once, by place, at most
        /// [`ASKED`]; and every id a ticket names while there is room.
        #[test]
        fn the_tickets_asked_about_start_with_the_choice(
            ids in proptest::collection::vec(0u8..8, 0..4),
            tickets in proptest::collection::vec(0u8..8, 0..5),
        ) {
            let ids: Vec<VisitorId> = ids.into_iter().map(id).collect();
            let tickets: Vec<(VisitorId, Place)> = tickets.into_iter().map(t).collect();
            let c = candidates(&tickets);
            prop_assert_eq!(
                c.first().map(|(v, i)| (*v, Some(*i))),
                whose(&ids, &tickets).filter(|(_, i)| i.is_some())
            );
            prop_assert!(c.len() <= ASKED);
            for (i, (v, _)) in c.iter().enumerate() {
                prop_assert!(!c[..i].iter().any(|(o, _)| o == v));
            }
            let keys: Vec<u64> = c.iter().map(|(_, i)| tickets[*i].1.key).collect();
            prop_assert!(keys.windows(2).all(|w| w[0] <= w[1]));
            if c.len() < ASKED {
                prop_assert!(tickets.iter().all(|(v, _)| c.iter().any(|(o, _)| o == v)));
            }
        }

        /// Whatever is tossed in beside them, a visitor is placed no later than their own
        /// ticket; and the choice is always one the request carried.
        #[test]
        fn a_visitor_is_placed_no_later_than_their_own_ticket(
            ids in proptest::collection::vec(0u8..6, 0..4),
            tickets in proptest::collection::vec(0u8..6, 0..4),
        ) {
            let ids: Vec<VisitorId> = ids.into_iter().map(id).collect();
            let tickets: Vec<(VisitorId, Place)> = tickets.into_iter().map(t).collect();
            let chosen = whose(&ids, &tickets);
            match chosen {
                None => prop_assert!(ids.is_empty() && tickets.is_empty()),
                Some((v, Some(i))) => {
                    prop_assert_eq!(tickets[i].0, v);
                    // No ticket sent has an earlier place.
                    prop_assert!(tickets.iter().all(|(_, p)| p.key >= tickets[i].1.key));
                }
                Some((v, None)) => {
                    prop_assert!(tickets.is_empty());
                    prop_assert_eq!(Some(&v), ids.first());
                }
            }
        }
    }
}
