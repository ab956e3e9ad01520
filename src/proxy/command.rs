//! Origin commands (`origin-commands = true` on a room): a shop that can add a response
//! header ends an admission with `Anteroom-Command: complete` (the order is done: the slot is
//! free at once and nothing renews the admission) or `revoke` (the session ends: every
//! instance refuses its cookie within a tick, this one at once). The header is read on the
//! origin's final answer and never reaches the visitor; without `origin-commands` it is left
//! alone, as every other header of the origin is.
//!
//! The admitted path still makes no store call. An answer that carries a command is held
//! until the store has it ([`finish`]: one call, bounded by the store's timeout), so that no
//! order of the admission can go through another instance once the visitor has the answer;
//! while the store cannot answer, it learns the command in the background ([`finish_later`],
//! retried until it lands or the admission would have expired anyway). The instances learn
//! revocations from their per-tick admit call ([`crate::room::revoked`]). The visitor's own answer clears the admission cookie; a revoked
//! visitor who comes back is given a new visitor id, so that their next admission is a new one
//! and not refused with the old ([`super::Proxy::visitor`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use pingora::http::{RequestHeader, ResponseHeader};

use super::{secure, Ctx};
use crate::app::Shared;
use crate::cookie;
use crate::metrics::OriginCommand;
use crate::store::finish::{self, Command};
use crate::store::{Ending, Revocation, VisitorId};

/// The response header a shop sends its commands in.
pub const HEADER: http::HeaderName = http::HeaderName::from_static("anteroom-command");

/// The admission a request carried (or was given), for the origin's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Holder {
    pub vid: VisitorId,
    /// Until when its cookie verifies (unix seconds).
    pub expires: u64,
    /// Held by an order's receipt, not an admission (`order-receipt`): a `revoke` ends it, a
    /// `complete` has nothing to end (found by review: it took the visitor, who had joined
    /// the line again under the same id, out of it).
    pub receipt: bool,
}

/// Reads, removes and obeys the origin's `Anteroom-Command` on `resp`, for the request
/// `req`. A request outside every room (a shop's confirmation or logout page, where the
/// admission cookie, `Path=/`, comes too) is answered the same way: the header is removed
/// whenever a room of the file takes origin commands, and obeyed for each admission of such a
/// room on the same upstream that the request carries (found by review: it reached the
/// visitor, and the command was ignored).
pub(super) async fn on_response(req: &RequestHeader, resp: &mut ResponseHeader, ctx: &mut Ctx) {
    // The common case costs a header lookup (no clone of the configuration).
    if !resp.headers.contains_key(&HEADER) {
        return;
    }
    let shared = ctx.shared.clone();
    let rooms: Vec<(usize, Vec<Holder>)> = match ctx.room {
        // The admission the request carried or was given, and any other it carries; on a
        // request let past without one (a bypass rule, a room switched off) the cookies it
        // came with (found by review: a command there was counted `unadmitted` and the
        // admission it carried kept).
        Some(room) if shared.rooms[room].cfg.origin_commands => {
            vec![(room, held(&shared, req, room, ctx.holder))]
        }
        Some(_) => return,
        None => {
            if !shared.rooms.iter().any(|r| r.cfg.origin_commands) {
                return;
            }
            (0..shared.rooms.len())
                .filter(|&i| {
                    let r = &shared.rooms[i];
                    r.cfg.origin_commands && r.cfg.upstream == ctx.upstream
                })
                .map(|i| {
                    let mut holders = held(&shared, req, i, None);
                    // And the receipt it carries (found by review: a `revoke` on a logout page
                    // outside the room left it working).
                    if let Some(h) = super::Proxy::receipt_holder(&shared, req, i) {
                        if !holders.iter().any(|o| o.vid == h.vid) {
                            holders.push(h);
                        }
                    }
                    (i, holders)
                })
                .filter(|(_, holders)| !holders.is_empty())
                .collect()
        }
    };
    let (command, unknown) =
        finish::commanded(resp.headers.get_all(&HEADER).iter().map(|v| v.as_bytes()));
    resp.remove_header(&HEADER);
    // A 1xx is not the answer: a command rides on the final one, which a 101 is (the
    // connection is the protocol's from then on; found by review: it was dropped uncounted).
    if resp.status.is_informational() && resp.status != http::StatusCode::SWITCHING_PROTOCOLS {
        return;
    }
    let mut endings = Vec::new();
    for (room, holders) in rooms {
        endings.extend(obey(&shared, ctx, room, &holders, command, unknown));
    }
    // Together: a page outside every room may carry the admissions of several, and one after
    // another the answer waited one store timeout per room while the store was away (found by
    // re-review).
    let calls = endings
        .into_iter()
        .map(|(room, vid, ending)| finish(shared.arc(), room, vid, ending));
    futures_util::future::join_all(calls).await;
}

/// Where the origin's answer may carry a command (a room that takes them, or a page outside
/// every room on the upstream of one), the origin's answer is awaited also when the visitor
/// closes their side first (HTTP/1.1; a TCP FIN: a reset still ends it): the command rides on
/// that answer, and Pingora otherwise ends the origin's side with the visitor's (found by
/// review: a tab closed while the shop confirmed the order lost its `complete`, and a visitor
/// who closed before the answer escaped a `revoke`).
pub(super) fn await_answer(session: &mut pingora::proxy::Session, ctx: &Ctx) {
    let rooms = &ctx.shared.rooms;
    let commands = match ctx.room {
        Some(room) => rooms[room].cfg.origin_commands,
        None => rooms
            .iter()
            .any(|r| r.cfg.origin_commands && r.cfg.upstream == ctx.upstream),
    };
    if commands {
        session.set_abort_on_close(false);
    }
}

/// The admissions of `room` that the command ends: `first` (the one the request was let in
/// with or given) and every other of another visitor that `req` carries, each verified as a
/// protected request's is (no more than the cookie is read: no store call). All of them: the
/// shop answers the browser, which cannot be told apart from its admissions, and a command
/// that ended the first alone left the others ordering (found by review: a throwaway
/// admission sent first took a `revoke` in place of the visitor's own).
fn held(shared: &Shared, req: &RequestHeader, room: usize, first: Option<Holder>) -> Vec<Holder> {
    let now = shared.cookie_secs(room);
    let mut holders: Vec<Holder> = first.into_iter().collect();
    let mut tried: Vec<VisitorId> = holders.iter().map(|h| h.vid).collect();
    for _ in 0..cookie::VALUES_TRIED {
        let Some(v) = super::Proxy::admission_besides(shared, req, room, now, false, &tried) else {
            break;
        };
        tried.push(v.vid);
        holders.push(Holder {
            vid: v.vid,
            expires: v.expires,
            receipt: false,
        });
    }
    holders
}

/// Counts and obeys a command for `room`'s admissions `holders`: what the store is to be told.
fn obey(
    shared: &super::held::Held,
    ctx: &mut Ctx,
    room: usize,
    holders: &[Holder],
    command: Option<Command>,
    unknown: u32,
) -> Vec<(usize, VisitorId, Ending)> {
    let r = &shared.rooms[room];
    let count = |c: OriginCommand| {
        if let Some(m) = r.metrics.origin_commands.get(c as usize) {
            m.inc();
        }
    };
    for _ in 0..unknown {
        count(OriginCommand::Unknown);
    }
    let Some(command) = command else {
        return Vec::new();
    };
    let holders: Vec<Holder> = holders
        .iter()
        .copied()
        .filter(|h| command == Command::Revoke || !h.receipt)
        .collect();
    if holders.is_empty() {
        // No valid admission came with the request: nothing to end.
        count(OriginCommand::Unadmitted);
        return Vec::new();
    }
    count(match command {
        Command::Complete => OriginCommand::Complete,
        Command::Revoke => OriginCommand::Revoke,
    });
    let now = shared.cookie_secs(room);
    let mut endings = Vec::with_capacity(holders.len());
    for holder in &holders {
        let ending = Ending::of(command, now, holder.expires, r.cfg.params.session_ttl);
        if command == Command::Revoke {
            r.revoked.note(
                Revocation {
                    vid: holder.vid,
                    until: ending.until,
                },
                now,
            );
        }
        // Until the store has heard, this instance refuses an order of this admission itself,
        // as for a confirm it owes (found by review: an order placed the moment Redis came
        // back from an outage went through before the command's retry landed).
        r.owed.owe_command(holder.vid, ending.request.clone());
        endings.push((room, holder.vid, ending));
    }
    // The shop's word settles an order in flight too: `finish` ends it in the store.
    let ours = ctx.room == Some(room);
    if let Some(t) = ctx.consumed.take_if(|_| ours) {
        super::settle::end_heartbeat(ctx);
        // An order the shop says is done has its receipt (`order-receipt`); a revoked one not.
        if command == Command::Complete {
            super::Proxy::give_receipt(shared, ctx, room, t.vid, t.expires);
        }
    }
    // No renewal rides on this answer, and the cookie the visitor holds is cleared (every
    // admission the request carried has ended: the clearing replaces none that works).
    ctx.set_cookies.retain(|c| !cookie::sets(c, &r.cookie_name));
    ctx.set_cookies
        .push(cookie::clear_admission(r.name(), secure(shared, ctx)));
    // A revoked visitor's receipt is refused: the browser need not keep it (review).
    if command == Command::Revoke && r.cfg.order_receipt.is_some() {
        ctx.set_cookies
            .retain(|c| !cookie::sets(c, &r.receipt_cookie));
        ctx.set_cookies.push(cookie::set_named(
            &r.receipt_cookie,
            "",
            0,
            secure(shared, ctx),
        ));
    }
    tracing::info!(
        room = r.name(),
        command = command.as_str(),
        admissions = holders.len(),
        "the origin ended an admission"
    );
    endings
}

/// Tells the store, before the answer that carries the command is released: another instance
/// takes an order of the admission by the store's word alone, and without this wait one sent
/// the moment the visitor had the answer went through before the store heard (found by
/// review: 10 of 39 orders after a `revoke`, through a second instance, with Redis healthy).
/// One call, bounded by the store's timeout; while the store cannot answer, in the background.
async fn finish(shared: Arc<Shared>, room: usize, vid: VisitorId, ending: Ending) {
    if !finish_once(&shared, room, vid, &ending).await {
        finish_later(shared, room, vid, ending);
    }
}

/// One call of `finish`: whether the store has the command.
async fn finish_once(shared: &Shared, room: usize, vid: VisitorId, ending: &Ending) -> bool {
    let r = &shared.rooms[room];
    let call = shared.store.finish(&r.cfg.params, vid, ending);
    match shared.store_call("finish", r.name(), call).await {
        Ok(until) => {
            r.owed.paid(vid, &ending.request);
            // The store held the session longer than the cookie this instance saw (renewed
            // under a longer session-ttl elsewhere): refused as long here too.
            if ending.command == Command::Revoke && until > ending.until {
                r.revoked
                    .note(Revocation { vid, until }, shared.cookie_secs(room));
            }
            true
        }
        Err(e) => {
            shared.warn_store_error(&e);
            false
        }
    }
}

/// Tells the store in the background after a call that failed, retrying with backoff while it
/// cannot answer, for as long as the admission could still be used (after that the store has
/// nothing to end). The backoff stays short (at most a second: a call the breaker stops costs
/// nothing), so the other instances learn the command soon after the store is back.
fn finish_later(shared: Arc<Shared>, room: usize, vid: VisitorId, ending: Ending) {
    tokio::spawn(async move {
        let r = &shared.rooms[room];
        let life = ending.until.saturating_sub(shared.cookie_secs(room));
        let until = Instant::now() + Duration::from_secs(life);
        let mut pause = Duration::from_millis(100);
        loop {
            if Instant::now() + pause > until {
                tracing::warn!(
                    room = r.name(),
                    command = ending.command.as_str(),
                    "could not tell the store of an origin command before the admission ran out"
                );
                r.owed.paid(vid, &ending.request);
                return;
            }
            // Backoff between attempts, not a wait for a condition.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
            if finish_once(&shared, room, vid, &ending).await {
                return;
            }
        }
    });
}
