//! When the origin fails: refused or timed-out connections (`fail_to_proxy`) and the origin's
//! own 5xx responses (`upstream_response_filter`) get anteroom's error page — 502, 503 or 504
//! with `Retry-After` — from the message template, never a hang or a bare error. The visitor
//! keeps their admission: cookies already decided ride on the error page.
//!
//! The origin's answer also settles an order's pending consume ([`super::settle`]): the
//! give-back is tried before the visitor sees the error page, so that their retry finds the
//! admission.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::{FailToProxy, Session};
use pingora::{ErrorSource, ErrorType, Result};

use std::time::Duration;

use super::respond::{Reply, HTML, JSON};
use super::settle::{failure_settlement, settle, settlement};
use super::{wants_json, Ctx};
use crate::app::Shared;
use crate::page::MessageView;

/// Seconds a visitor is asked to wait before trying again.
const RETRY_SECS: u64 = 5;

/// What went wrong on the shop's side, as a visitor should be told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trouble {
    /// We could not connect, or the connection broke (502 of ours).
    Unreachable,
    /// No answer in time (504, ours or the shop's).
    TimedOut,
    /// The shop says it is unavailable for now (503).
    Busy,
    /// The shop does not do this request at all (501, 505): trying again does not help.
    Refused,
    /// The shop answered with an error of its own (500, its own 502, any other 5xx).
    Failed,
}

/// `status` is the response's; `reached` whether the shop itself answered with it (else the
/// request never got an answer and the status is ours).
fn trouble(status: u16, reached: bool) -> Trouble {
    match status {
        501 | 505 => Trouble::Refused,
        503 => Trouble::Busy,
        504 => Trouble::TimedOut,
        _ if !reached => Trouble::Unreachable,
        _ => Trouble::Failed,
    }
}

impl Trouble {
    /// (title, message, seconds until the page tries again: `None` when it would not help).
    fn wording(self) -> (&'static str, &'static str, Option<u64>) {
        match self {
            Trouble::TimedOut => (
                "The shop is taking too long",
                "The shop did not answer in time. Your place is kept: this page tries again in a few seconds.",
                Some(RETRY_SECS),
            ),
            Trouble::Busy => (
                "The shop is busy",
                "The shop cannot take your request right now. Your place is kept: this page tries again in a few seconds.",
                Some(RETRY_SECS),
            ),
            Trouble::Unreachable => (
                "The shop is not answering",
                "We could not reach the shop. Your place is kept: this page tries again in a few seconds.",
                Some(RETRY_SECS),
            ),
            Trouble::Failed => (
                "Something went wrong at the shop",
                "The shop could not complete your request. Your place is kept: this page tries again in a few seconds.",
                Some(RETRY_SECS),
            ),
            Trouble::Refused => (
                "The shop cannot do that",
                "The shop does not accept this kind of request, so trying again will not help. Your place is kept: go back and try another way.",
                None,
            ),
        }
    }
}

/// The error page body and its content type, and the `Retry-After` to send with it.
fn page(
    shared: &Shared,
    json: bool,
    status: u16,
    reached: bool,
    room: &str,
    url: &str,
) -> (&'static str, Bytes, Option<u64>) {
    let (title, message, retry) = trouble(status, reached).wording();
    if json {
        let v = serde_json::json!({ "room": room, "state": "error", "status": status, "error": message, "retry_after_ms": retry.map(|s| s * 1000) });
        (JSON, Bytes::from(v.to_string()), retry)
    } else {
        let html = shared.pages.message(&MessageView {
            status,
            title,
            message,
            retry_seconds: retry,
            refresh_url: url,
            room,
            lang: "en",
            form_note: None,
        });
        (HTML, Bytes::from(html), retry)
    }
}

/// An admitted request's answer from the origin (`None`: none came — refused, timed out,
/// broken) for the autopilot's health window: once per request, at its final answer (or a
/// 101). An informational answer (`100 Continue`, `103 Early Hints`) is not: the shop sends
/// it at once, before the work (found by re-review: a shop that sent Early Hints, or clients
/// that sent `Expect: 100-continue`, read as fast however slow the shop was).
fn note_health(session: &Session, ctx: &mut Ctx, status: Option<u16>) {
    if status.is_some_and(|s| s < 200 && s != 101) {
        return;
    }
    let admitted = matches!(ctx.outcome, super::Outcome::Admit | super::Outcome::Consume);
    let Some(at) = ctx
        .upstream_at
        .take()
        .filter(|_| admitted && ctx.room.is_some())
    else {
        return;
    };
    match status {
        Some(s) => sample(session, ctx, Some(at.elapsed()), shop_failed(s)),
        None => sample(session, ctx, None, true),
    }
}

/// One sample of an admitted request for its upstream's health window, if its visitor has
/// not voted this second.
fn sample(session: &Session, ctx: &Ctx, latency: Option<Duration>, failed: bool) {
    let Some(h) = ctx
        .shared
        .origin_health
        .get(ctx.upstream)
        .and_then(Option::as_ref)
    else {
        return;
    };
    let second = ctx.shared.clock.mono_micros() / 1_000_000;
    let Some(v) = ctx.holder.filter(|v| h.vote(&v.vid, second)) else {
        return;
    };
    // The network it came from (once a second per visitor): whose votes they are.
    let client = super::request::client_key(&ctx.shared, session).unwrap_or_default();
    let network = crate::admission::health::network_key(&client);
    h.record(network, latency, failed);
    h.voted_from(&v.vid, network, second, (failed, latency));
}

/// Whether an answer says the shop is failing: a 5xx, but not 501 or 505, which refuse the
/// request itself (a method or version the shop does not do): the sender's doing, not the
/// shop's health (found by review: an admitted visitor's made-up method cut the rate).
fn shop_failed(status: u16) -> bool {
    status >= 500 && trouble(status, true) != Trouble::Refused
}

/// The origin answered 5xx: replace its page with ours (when the upstream's `error-pages` is on).
pub(super) async fn on_response(
    session: &mut Session,
    resp: &mut ResponseHeader,
    ctx: &mut Ctx,
) -> Result<()> {
    let status = resp.status.as_u16();
    super::Proxy::origin_answered(ctx, status);
    note_health(session, ctx, Some(status));
    let shared = ctx.shared.clone();
    if let Some(how) = settlement(status) {
        settle(&shared, ctx, how).await;
    }
    if status < 500 || !shared.config.upstreams[ctx.upstream].error_pages {
        return Ok(());
    }
    let room = ctx.room.map(|i| shared.rooms[i].name()).unwrap_or("");
    let (content_type, body, retry) = page(
        &shared,
        wants_json(session.req_header()),
        status,
        true,
        room,
        &super::request::page_url(session.req_header()),
    );
    for h in [
        http::header::CONTENT_ENCODING,
        http::header::TRANSFER_ENCODING,
        http::header::ETAG,
        http::header::LAST_MODIFIED,
        http::header::CONTENT_LENGTH,
    ] {
        resp.remove_header(&h);
    }
    resp.insert_header(http::header::CONTENT_TYPE, content_type)?;
    resp.insert_header(http::header::CONTENT_LENGTH, body.len())?;
    resp.insert_header(http::header::CACHE_CONTROL, "no-store")?;
    // The page is ours, not the shop's: none of its caching applies (a CDN reads its own
    // fields before `no-store`), and the body depends on `Accept` (found by review).
    super::cache_safe::keep_private(resp)?;
    resp.insert_header(http::header::VARY, "Accept")?;
    super::respond::ours(resp)?;
    resp.remove_header(&http::header::RETRY_AFTER);
    if let Some(secs) = retry {
        resp.insert_header(http::header::RETRY_AFTER, secs)?;
    }
    ctx.replace_body = Some(body);
    Ok(())
}

/// Proxying failed before a response: connection refused, timeouts, a broken origin.
pub(super) async fn on_failure(
    session: &mut Session,
    e: &pingora::Error,
    ctx: &mut Ctx,
) -> FailToProxy {
    let code = match (e.esource(), e.etype()) {
        // The visitor's side: a slow, vanished or broken client gets no page.
        (
            ErrorSource::Downstream,
            ErrorType::WriteError
            | ErrorType::ReadError
            | ErrorType::ConnectionClosed
            | ErrorType::ReadTimedout
            | ErrorType::WriteTimedout,
        ) => 0,
        (_, ErrorType::HTTPStatus(code)) => *code,
        (ErrorSource::Downstream, _) => 400,
        (
            _,
            ErrorType::ConnectTimedout
            | ErrorType::ReadTimedout
            | ErrorType::WriteTimedout
            | ErrorType::TLSHandshakeTimedout,
        ) => 504,
        _ => 502,
    };
    let shared = ctx.shared.clone();
    let whole = ctx.body_complete || session.is_body_empty();
    // An origin that timed out waiting while the request's body was still coming was waiting
    // for the visitor: the visitor's side, as a body cut at `client-timeout` is (no page, no
    // "origin failed", no sample of the shop's health). Found by review: over HTTP/2, where
    // Pingora cuts no stalled body, it ended as the shop's 504 and failure.
    let waited_for_visitor = *e.etype() == ErrorType::ReadTimedout && !whole;
    let code = if waited_for_visitor { 0 } else { code };
    if *e.esource() != ErrorSource::Downstream && !waited_for_visitor {
        note_health(session, ctx, None);
    }
    let how = failure_settlement(e.esource(), e.etype(), ctx.handed_over, whole);
    settle(&shared, ctx, how).await;
    if code == 0 {
        return FailToProxy {
            error_code: 0,
            can_reuse_downstream: false,
        };
    }
    if code < 500 {
        let _ = session.respond_error(code).await;
        return FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        };
    }
    tracing::warn!(upstream = shared.config.upstreams[ctx.upstream].name, error = %crate::origins::told::told(e), status = code, "origin failed");
    if session.response_written().is_none() {
        let room = ctx.room.map(|i| shared.rooms[i].name()).unwrap_or("");
        let reached = matches!(e.etype(), ErrorType::HTTPStatus(_));
        let (content_type, body, retry) = page(
            &shared,
            wants_json(session.req_header()),
            code,
            reached,
            room,
            &super::request::page_url(session.req_header()),
        );
        let _ = Reply {
            status: code,
            content_type,
            body,
            retry_after: retry,
            cookies: &ctx.set_cookies,
        }
        .send(session)
        .await;
    }
    FailToProxy {
        error_code: code,
        can_reuse_downstream: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Settle;

    #[test]
    fn only_a_failure_of_the_shop_gives_the_admission_back() {
        for (status, how) in [
            (100, None),
            (101, Some(Settle::Confirm)),
            (103, None),
            (200, Some(Settle::Confirm)),
            (201, Some(Settle::Confirm)),
            (302, Some(Settle::Confirm)),
            (400, Some(Settle::Confirm)),
            (408, Some(Settle::GiveBack)),
            (409, Some(Settle::Confirm)),
            (429, Some(Settle::GiveBack)),
            (499, Some(Settle::Confirm)),
            (500, Some(Settle::GiveBack)),
            (502, Some(Settle::GiveBack)),
            (503, Some(Settle::GiveBack)),
            (504, Some(Settle::GiveBack)),
        ] {
            assert_eq!(settlement(status), how, "{status}");
        }
    }

    #[test]
    fn the_wording_follows_what_went_wrong() {
        use Trouble::*;
        for (status, reached, want) in [
            (500, true, Failed),
            (501, true, Refused),
            (502, true, Failed),
            (502, false, Unreachable),
            (503, true, Busy),
            (503, false, Busy),
            (504, true, TimedOut),
            (504, false, TimedOut),
            (505, true, Refused),
            (507, true, Failed),
            (599, false, Unreachable),
        ] {
            assert_eq!(trouble(status, reached), want, "{status} {reached}");
        }
        // Only a request that cannot succeed is not retried by the page.
        for t in [Unreachable, TimedOut, Busy, Failed, Refused] {
            assert_eq!(t.wording().2.is_none(), t == Refused, "{t:?}");
        }
    }

    #[test]
    fn walking_away_from_an_order_does_not_give_it_back() {
        use ErrorSource::{Downstream, Internal, Upstream};
        use ErrorType::{ConnectTimedout, ConnectionClosed, ReadError, ReadTimedout};
        use ErrorType::{WriteError, WriteTimedout};
        let all = [
            ReadTimedout,
            ReadError,
            ConnectionClosed,
            WriteTimedout,
            WriteError,
            ConnectTimedout,
        ];
        for whole in [true, false] {
            for t in &all {
                assert_eq!(
                    failure_settlement(&Downstream, t, true, whole),
                    Settle::Confirm
                );
                // Refused before it reached the shop: no order was made.
                assert_eq!(
                    failure_settlement(&Downstream, t, false, whole),
                    Settle::GiveBack
                );
                for source in [Upstream, Internal] {
                    assert_eq!(
                        failure_settlement(&source, t, false, whole),
                        Settle::GiveBack
                    );
                    // The shop failed a whole order: given back.
                    assert_eq!(failure_settlement(&source, t, true, true), Settle::GiveBack);
                }
            }
        }
        // The shop waited for the rest of the body (its read failed): the visitor's doing.
        for t in [ReadTimedout, ReadError, ConnectionClosed] {
            assert_eq!(
                failure_settlement(&Upstream, &t, true, false),
                Settle::Confirm
            );
        }
        // The shop did not read what was sent (a write to it failed): the shop's.
        for t in [WriteTimedout, WriteError] {
            assert_eq!(
                failure_settlement(&Upstream, &t, true, false),
                Settle::GiveBack
            );
        }
        assert_eq!(
            failure_settlement(&Internal, &ReadTimedout, true, false),
            Settle::GiveBack
        );
    }
}
