//! A visitor without an admission: held at the edge, asked for the join challenge, or joined
//! to the line through the store, and told what that means.

use pingora::proxy::Session;
use pingora::Result;

use super::{challenge, command, gate, Ctx, Outcome, Proxy};
use crate::app::Shared;
use crate::page::Status;

/// What `join` means for the request.
pub(super) enum Verdict {
    /// Go on to the origin (admitted now, or the room is off, or the store policy is `open`).
    Pass { admitted: bool },
    /// Show the waiting response.
    Wait(Status),
    /// Refuse: too many new visitors from this client (`join-limit`), or, `polls`, a queue
    /// ticket that asked the store too often ([`crate::room::prelimit::TicketAsks`]).
    Limited {
        retry_after: std::time::Duration,
        polls: bool,
    },
    /// The room's event has closed: a newcomer is not added.
    Ended,
}

impl Proxy {
    /// The rest of `request_filter` for a request to `room` that carries no admission.
    pub(super) async fn to_the_line(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        is_consume: bool,
        cookie_now: u64,
    ) -> Result<bool> {
        let r = &shared.rooms[room];
        let mut who = Self::visitor(shared, session.req_header(), ctx, room);
        let verdict = match Self::enter_held(shared, session, ctx, room, &mut who).await {
            Some(v) => v,
            None => {
                let vid = who.vid;
                let gate = match Self::challenge_gate(
                    shared,
                    session,
                    room,
                    vid,
                    &challenge::Presented {
                        had_vid: who.had_vid,
                        ticket: who.vouched.as_ref(),
                        solution: None,
                    },
                    gate(shared, session, room),
                ) {
                    challenge::Gated::Join(gate) => gate,
                    // A crawler is refused as where it would wait: no page of ours gets
                    // indexed.
                    challenge::Gated::Ask if Self::refuses_crawler(shared, session, room) => {
                        Self::send_crawler(shared, session, ctx, room).await?;
                        return Ok(true);
                    }
                    challenge::Gated::Ask => {
                        Self::keep_vid(shared, ctx, room, vid);
                        Self::send_challenge(shared, session, ctx, room, vid, false).await?;
                        return Ok(true);
                    }
                };
                Self::enter(shared, ctx, room, &mut who, gate).await
            }
        };
        let vid = who.vid;
        match verdict {
            Verdict::Pass { admitted } => {
                // Let through without an admission (room off, or the `open` store policy).
                ctx.outcome = if admitted {
                    ctx.holder = Some(command::Holder {
                        vid,
                        expires: cookie_now,
                        receipt: false,
                    });
                    Outcome::Admit
                } else {
                    Outcome::Pass
                };
                if Self::wait_for_origin(shared, session, ctx, room).await? {
                    return Ok(true);
                }
                if admitted && is_consume {
                    let ttl = r.cfg.params.session_ttl.as_secs();
                    let cookie = (cookie_now.saturating_add(ttl), cookie_now);
                    return Self::consume(shared, session, ctx, room, vid, cookie, Vec::new())
                        .await;
                }
                Ok(false)
            }
            Verdict::Wait(status) => {
                if Self::refuses_crawler(shared, session, room) {
                    Self::send_crawler(shared, session, ctx, room).await?;
                } else {
                    Self::keep_vid(shared, ctx, room, vid);
                    Self::send_wait(shared, session, ctx, room, &status).await?;
                }
                Ok(true)
            }
            Verdict::Limited { retry_after, polls } => {
                Self::send_limited(shared, session, ctx, room, retry_after, polls, false).await?;
                Ok(true)
            }
            Verdict::Ended => {
                Self::send_ended(shared, session, ctx, room, false).await?;
                Ok(true)
            }
        }
    }
}
