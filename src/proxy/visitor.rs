//! The visitor's side of a protected request: who they are, one store call to place or admit
//! them, and the answers anteroom writes itself (waiting, limited). Orders are in
//! [`super::consume`].

use super::identity::{Candidate, Visitor};
use super::{Ctx, Proxy, Verdict};
use crate::app::Shared;
use crate::cookie;
use crate::store::{Admission, JoinGate};

impl Proxy {
    /// Places the visitor or lets them in: from the line's snapshot when their queue ticket
    /// allows (no store call), else one store call. A request that may speak for several
    /// identities asks the store about each in turn ([`Self::enter_known`]); `who` is left
    /// naming the one it was placed as.
    pub(super) async fn enter(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        who: &mut Visitor,
        gate: Option<JoinGate>,
    ) -> Verdict {
        if !who.others.is_empty() {
            if let Some(v) = Self::enter_known(shared, ctx, room, who, gate.as_ref()).await {
                return v;
            }
        }
        let (vid, ticket, had_vid) = (who.vid, who.ticket, who.had_vid);
        if let Some(v) = ticket
            .as_ref()
            .and_then(|t| Self::answer_at_edge(shared, ctx, room, t))
        {
            return v;
        }
        let r = &shared.rooms[room];
        // A ticket the edge could not answer asks the store, within its own quota.
        if who.unanswered.is_none() {
            if let Some(v) = Self::past_ticket_quota(shared, room, ticket.iter().map(|t| t.vid)) {
                return v;
            }
        }
        // A ticket that vouches for a place held lately (see `challenge::holds_place`) is no new
        // identity: a join the store must place anew (it lost the place, or the turn lapsed) is
        // not counted (found by review: after a FLUSHALL, people in line behind one address
        // were refused 429 on every poll past join-limit, and lost their turn to everyone
        // else's) — unless the store holds an order of the visitor's: they were let in and
        // ordered, and a ticket kept is no way back past the limit (`JoinGate::vouched`; found
        // by review). The request's own ticket, or, when the store held none of the request's
        // tickets, the one that named `vid` (found by re-review: a second ticket tossed in
        // beside one's own lost the exemption after a loss, and 429'd a network's people).
        let vouching = who
            .vouched
            .filter(|t| t.vid == vid && super::challenge::holds_place(shared, room, t));
        // Without such a ticket this is a store join that join-limit may count: past the limit
        // on this instance alone, a newcomer is refused here, without a store call. One that
        // came with a visitor id of its own may be in line, which only the store knows: it
        // asks, and the store answers a known visitor as ever and refuses a newcomer uncounted
        // (found by review: a visitor in line polling without its ticket was told 429 by a
        // flood from its network's newcomers, and lost the place for silence).
        let mut gate = gate;
        let mut local_wait = None;
        // A visitor whose join took a turn here and was put on hold (the store never answered)
        // takes none again: no new identity (`JoinPreLimit::held`; found by review).
        let held = gate
            .as_ref()
            .is_some_and(|g| r.prelimit.held(vid, &g.client));
        let mut took_turn = false;
        if let Some(g) = gate
            .as_mut()
            .filter(|_| ticket.is_none() && vouching.is_none() && !held)
        {
            if let Some(retry_after) = r.prelimit.check(g) {
                if !had_vid {
                    return Verdict::Limited {
                        retry_after,
                        polls: false,
                    };
                }
                g.known_only = true;
                local_wait = Some(retry_after);
            } else {
                took_turn = true;
            }
        }
        // While the store cannot answer, every local admission is counted by its address's
        // gate ([`Self::answer_join`]): a ticket's (a fresh one's too) and a held visitor's
        // took no turn here, and a newcomer's turn is no count of admissions (found by
        // re-review: held visitors' admissions and then fresh newcomers' were two budgets,
        // four local admissions at once from an address allowed two).
        let uncounted = gate.as_ref();
        let gate = gate.clone().map(|g| JoinGate {
            vouched: vouching.is_some(),
            ..g
        });
        let gate = gate.as_ref();
        let known_only = gate.is_some_and(|g| g.known_only);
        // A room with events passes them (the store decides the one in force by its clock), and
        // the visitor's place in each draw that has not opened.
        let events = r.events.for_join(vid, shared.clock.now_micros());
        let mut join = events.context(gate);
        // Back from a time the store was away: nobody walks in at once through this instance
        // until the store has heard of its own admissions meanwhile (see `Outage`).
        join.unsettled = r.live.cut() || r.local.untold() > 0;
        // When the store just failed to answer about the request's identities, its error is
        // the join's answer (found by review: two tickets waited out two store timeouts while
        // Redis was frozen).
        let joined = match who.unanswered.take() {
            Some(e) => Err(e),
            None => {
                shared
                    .store_call(
                        "join",
                        r.name(),
                        shared
                            .store
                            .join_with(&r.params_at(shared.clock.now_micros()), vid, &join),
                    )
                    .await
            }
        };
        // Past this instance's per-client limit only the store could tell a visitor in line from
        // a newcomer with an id of its own making: while it cannot answer, nobody is let in by
        // the store-error policy on such a request (found by review: made-up ids from one
        // address took the `local` admissions of an outage past join-limit and the challenge).
        if let (true, Err(e)) = (known_only, &joined) {
            shared.warn_store_error(e);
            return Verdict::Wait(Self::on_hold(shared, room));
        }
        // The store refuses such a newcomer without a count of its own, so its wait says
        // nothing: this instance's window does (found by review: `Retry-After: 1` whatever
        // was left, and a refused page reloaded every second, each reload a store call).
        let joined = match (known_only.then_some(local_wait).flatten(), joined) {
            (Some(wait), Ok(Admission::Limited { retry_after })) => Ok(Admission::Limited {
                retry_after: retry_after.max(wait),
            }),
            (_, joined) => joined,
        };
        let unanswered = joined.is_err();
        let verdict = Self::answer_join(shared, ctx, room, vid, ticket, joined, uncounted);
        match (&verdict, gate) {
            // Put on hold without a place: the store counted nothing.
            (Verdict::Wait(_), Some(g)) if unanswered && (took_turn || held) => {
                r.prelimit.note_held(vid, &g.client);
            }
            _ if !unanswered || held => r.prelimit.answered(vid),
            _ => {}
        }
        verdict
    }

    /// `429` for a request whose queue tickets (of the visitors `vids`) have asked the store
    /// their quota's worth on this instance: a copy replayed in a loop is refused without a
    /// store call (see `TicketAsks`; found by re-review: a second ticket beside it skipped the
    /// quota). Not while the store cannot be asked (its breaker open: the call fails at once,
    /// and the room's policy answers, which gives a replayed ticket its one session again).
    fn past_ticket_quota(
        shared: &Shared,
        room: usize,
        vids: impl Iterator<Item = crate::store::VisitorId>,
    ) -> Option<Verdict> {
        let r = &shared.rooms[room];
        if r.breaker.state(shared.clock.mono_micros()) != crate::breaker::BreakerState::Closed {
            return None;
        }
        let mut wait = None;
        for vid in vids {
            wait = wait.max(r.ticket_asks.check(vid));
        }
        wait.map(|retry_after| Verdict::Limited {
            retry_after,
            polls: true,
        })
    }

    /// Before the join challenge: a request whose tickets name several ids asks the store which
    /// it holds, for a visitor in line never needs the work (found by re-review: the challenge
    /// was judged for the earliest ticket, a stale one tossed in, and a visitor in line was
    /// asked for work on every poll, and without JavaScript lost the place). `None`: the
    /// challenge and the join as ever, for `who` as [`Self::enter_known`] leaves it.
    pub(super) async fn enter_held(
        shared: &Shared,
        session: &pingora::proxy::Session,
        ctx: &mut Ctx,
        room: usize,
        who: &mut Visitor,
    ) -> Option<Verdict> {
        if who.others.is_empty() {
            return None;
        }
        let gate = super::gate(shared, session, room);
        Self::enter_known(shared, ctx, room, who, gate.as_ref()).await
    }

    /// Asks the store about each identity the request's tickets name, in turn, as a visitor it
    /// knows only (a newcomer is refused, uncounted): the first whose place the store still
    /// holds where its ticket says decides, and `who` names it. `None` when none does, or the
    /// store does not answer: `who` is then one of them without its ticket, to join as ever
    /// (the id the join challenge is judged for: found by re-review, another id joining let
    /// one solved puzzle buy any number of places) — the first whose ticket spares the work
    /// (`challenge::holds_place`), else the first.
    ///
    /// The store is not asked on after an error: the challenge comes first, then the room's
    /// `on-store-error` policy (found by re-review: two old tickets during an outage were let
    /// in by the `local` policy with no work asked).
    ///
    /// A place of a sealed draw (before its opening) says nothing of which place is earlier:
    /// the other sealed ones the request carries are asked about too, so every one held stays
    /// held until the draw is revealed and orders them, and when more than one is, the answer
    /// sets no ticket or id cookie that would replace the visitor's own with another
    /// (`Ctx::hold_identity`; found by re-review: a registrant's ticket tossed in first took
    /// the visitor's place, and their own was swept).
    async fn enter_known(
        shared: &Shared,
        ctx: &mut Ctx,
        room: usize,
        who: &mut Visitor,
        gate: Option<&JoinGate>,
    ) -> Option<Verdict> {
        let r = &shared.rooms[room];
        let tickets = std::iter::once(who.ticket)
            .chain(who.others.iter().map(|c| c.ticket))
            .flatten()
            .map(|t| t.vid);
        if let Some(v) = Self::past_ticket_quota(shared, room, tickets) {
            return Some(v);
        }
        let known_only = JoinGate {
            client: gate.map_or_else(|| "-".to_string(), |g| g.client.clone()),
            limit: 0,
            per: std::time::Duration::ZERO,
            known_only: true,
            vouched: false,
        };
        let first = Candidate {
            vid: who.vid,
            ticket: who.ticket,
            had_vid: who.had_vid,
            sealed: who.sealed,
        };
        let others = std::mem::take(&mut who.others);
        let all = || std::iter::once(first).chain(others.iter().copied());
        let mut held: Option<(Candidate, Result<Admission, crate::store::StoreError>)> = None;
        let mut sealed_held = 0;
        for c in all() {
            if held.is_some() && !c.sealed {
                continue;
            }
            let now = shared.clock.now_micros();
            let events = r.events.for_join(c.vid, now);
            let join = events.context(Some(&known_only));
            let joined = shared
                .store_call(
                    "join",
                    r.name(),
                    shared.store.join_with(&r.params_at(now), c.vid, &join),
                )
                .await;
            if let Err(e) = joined {
                who.unanswered = Some(e);
                break;
            }
            if !holds_ticket_place(&joined, c.ticket.as_ref()) {
                continue;
            }
            if held.is_none() && !(c.sealed && is_a_place(&joined)) {
                Self::speak_as(ctx, who, c);
                return Some(Self::answer_join(
                    shared, ctx, room, c.vid, c.ticket, joined, None,
                ));
            }
            sealed_held += 1;
            held.get_or_insert((c, joined));
        }
        if let Some((c, joined)) = held {
            if sealed_held > 1 {
                Self::hold_identity(shared, ctx, room);
            }
            Self::speak_as(ctx, who, c);
            return Some(Self::answer_join(
                shared, ctx, room, c.vid, c.ticket, joined, None,
            ));
        }
        let spared = all()
            .find(|c| {
                c.ticket
                    .is_some_and(|t| super::challenge::holds_place(shared, room, &t))
            })
            .unwrap_or(first);
        Self::speak_as(
            ctx,
            who,
            Candidate {
                ticket: None,
                sealed: false,
                ..spared
            },
        );
        who.vouched = spared.ticket;
        None
    }

    /// This answer sets no ticket or id cookie of the room (see [`Self::enter_known`]).
    fn hold_identity(shared: &Shared, ctx: &mut Ctx, room: usize) {
        let r = &shared.rooms[room];
        ctx.hold_identity = true;
        ctx.set_cookies
            .retain(|c| !cookie::sets(c, &r.ticket_cookie) && !cookie::sets(c, cookie::VID_COOKIE));
    }

    /// The request speaks for `c` from now on; its id cookie is given again with `c`'s id
    /// when the request carried it.
    fn speak_as(ctx: &mut Ctx, who: &mut Visitor, c: Candidate) {
        who.vid = c.vid;
        who.ticket = c.ticket;
        who.had_vid = c.had_vid;
        who.sealed = c.sealed;
        who.vouched = c.ticket;
        if c.had_vid {
            ctx.kept_vid = Some(c.vid);
        }
    }
}

/// Whether a known-only join's answer speaks for the place `ticket` names: the store knew the
/// visitor, and, in line, at that place (found by re-review: a stale ticket whose id had
/// joined again later was taken for its new place, and moved the visitor back). An answer
/// that is no place (admitted, the room off) speaks for the visitor; a store error for nobody.
fn holds_ticket_place(
    joined: &Result<Admission, crate::store::StoreError>,
    ticket: Option<&crate::line::Ticket>,
) -> bool {
    match joined {
        // Not known: a newcomer would be refused, told the line is closed to newcomers, or
        // placed by events this instance has not read.
        Ok(Admission::Limited { .. } | Admission::Ended | Admission::Unplaced { .. }) | Err(_) => {
            false
        }
        Ok(
            Admission::Waiting { place, .. }
            | Admission::Paused { place, .. }
            | Admission::Registered { place, .. },
        ) => ticket.is_none_or(|t| t.place == *place),
        _ => true,
    }
}

/// Whether a join's answer is a place in line (not an admission).
fn is_a_place(joined: &Result<Admission, crate::store::StoreError>) -> bool {
    matches!(
        joined,
        Ok(Admission::Waiting { .. } | Admission::Paused { .. } | Admission::Registered { .. })
    )
}
