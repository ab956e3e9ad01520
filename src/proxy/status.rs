//! The reserved `/.anteroom/` prefix: the status endpoint the waiting page polls.
//!
//! `GET /.anteroom/status?room=NAME` answers the status JSON. Like a protected request it joins
//! the line and, once the visitor's turn has come, sets the admission cookie, so the page's
//! script only has to reload. Nothing under `/.anteroom/` is ever forwarded to the origin.

use bytes::Bytes;
use pingora::proxy::Session;
use pingora::Result;

use super::respond::{json_error, Reply, JSON};
use super::{Ctx, Outcome, Proxy, Verdict};
use crate::app::Shared;
use crate::page::{State, Status};

/// A poll from one of our pages (`page=1`, which their scripts add) that carries neither the
/// visitor-id cookie nor a queue ticket: the page that sent it set the cookie, so the browser
/// does not keep it (cookies blocked, a `Secure` cookie on plain HTTP, an extension). Joining
/// would put a new visitor at the end of the line with every poll (found by review: a place
/// nobody holds, which later takes a turn, and the network's `join-limit` spent): it is told
/// `cookies_required` instead, and its page says so. Anyone may send the mark: it only keeps
/// the poll from joining.
fn refuses_cookies(req: &pingora::http::RequestHeader, ticket_cookie: &str) -> bool {
    let from_page = crate::route::query_param(req.uri.query(), "page") == Some("1");
    from_page
        && crate::cookie::find(super::cookie_values(req), crate::cookie::VID_COOKIE).is_none()
        && crate::cookie::find(super::cookie_values(req), ticket_cookie).is_none()
}

/// The `room` parameter of a query string.
fn room_param(query: Option<&str>) -> Option<&str> {
    crate::route::query_param(query, "room").filter(|v| !v.is_empty())
}

pub(super) async fn serve(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut Ctx,
    path: &str,
) -> Result<()> {
    ctx.outcome = Outcome::Reject;
    let req = session.req_header();
    let fail = |status: u16, msg: &str| (status, json_error(msg));
    let problem = if path != "/.anteroom/status" && path != "/.anteroom/event" {
        Some(fail(404, "not found"))
    } else if req.method != http::Method::GET && req.method != http::Method::HEAD {
        Some(fail(405, "use GET"))
    } else {
        None
    };
    let room = room_param(req.uri.query()).and_then(|name| shared.room_index(name));
    let (room, problem) = match (problem, room) {
        (Some(p), _) => (None, Some(p)),
        (None, None) => (
            None,
            Some(fail(
                404,
                "unknown room: pass ?room=NAME of a configured room",
            )),
        ),
        (None, Some(r)) => (Some(r), None),
    };
    let Some(room) = room else {
        ctx.reject = Some(crate::metrics::Reject::BadRequest);
        let (status, body) = problem.unwrap_or_else(|| fail(404, "not found"));
        return Reply {
            status,
            content_type: JSON,
            body,
            retry_after: None,
            cookies: &[],
        }
        .send(session)
        .await;
    };
    ctx.room = Some(room);
    ctx.outcome = Outcome::Status;
    if path == "/.anteroom/event" {
        return super::published::serve(shared, session, ctx, room).await;
    }
    let r = &shared.rooms[room];
    let admitted = Status {
        room: r.name().to_string(),
        state: State::Admitted,
        position: None,
        waiting: r.live.waiting(),
        eta_seconds: Some(0),
        eta_low_seconds: None,
        eta_high_seconds: None,
        retry_after_ms: 0,
        held_by: None,
        event: None,
        placed_by: None,
    };
    let verified = Proxy::admission(shared, req, room, shared.cookie_secs(room), false);
    let status = if !r.live.enabled() || verified.is_some() {
        admitted
    } else if r.cfg.queueing == crate::config::QueueMethod::Reject {
        return Proxy::send_closed(shared, session, ctx, room, true).await;
    } else if refuses_cookies(req, &r.ticket_cookie) {
        Status {
            state: State::CookiesRequired,
            eta_seconds: None,
            ..admitted
        }
    } else {
        let mut who = Proxy::visitor(shared, session.req_header(), ctx, room);
        let verdict = match Proxy::enter_held(shared, session, ctx, room, &mut who).await {
            Some(v) => v,
            None => {
                let vid = who.vid;
                let solution = crate::route::query_param(session.req_header().uri.query(), "pow")
                    .map(str::to_owned);
                let gate = match Proxy::challenge_gate(
                    shared,
                    session,
                    room,
                    vid,
                    &super::challenge::Presented {
                        had_vid: who.had_vid,
                        ticket: who.vouched.as_ref(),
                        solution: solution.as_deref(),
                    },
                    super::gate(shared, session, room),
                ) {
                    super::challenge::Gated::Join(gate) => gate,
                    super::challenge::Gated::Ask => {
                        return Proxy::send_challenge(shared, session, ctx, room, vid, true).await;
                    }
                };
                Proxy::enter(shared, ctx, room, &mut who, gate).await
            }
        };
        match verdict {
            Verdict::Pass { .. } => admitted,
            Verdict::Wait(s) => s,
            Verdict::Limited { retry_after, polls } => {
                // JSON, as every answer here (the page reads its `retry_after_ms`).
                return Proxy::send_limited(shared, session, ctx, room, retry_after, polls, true)
                    .await;
            }
            Verdict::Ended => {
                return Proxy::send_ended(shared, session, ctx, room, true).await;
            }
        }
    };
    let retry_after = (status.state != State::Admitted).then(|| status.retry_after_secs());
    Reply {
        status: 200,
        content_type: JSON,
        body: Bytes::from(serde_json::to_vec(&status).unwrap_or_default()),
        retry_after,
        cookies: &ctx.set_cookies,
    }
    .send(session)
    .await
}

#[cfg(test)]
mod tests {
    use super::room_param;

    #[test]
    fn room_parameter() {
        assert_eq!(room_param(Some("room=sale")), Some("sale"));
        assert_eq!(room_param(Some("x=1&room=sale&y=2")), Some("sale"));
        assert_eq!(room_param(Some("room=")), None);
        assert_eq!(room_param(None), None);
    }
}
