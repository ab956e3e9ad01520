//! When the origin fails: refused or timed-out connections (`fail_to_proxy`) and the origin's
//! own 5xx responses (`upstream_response_filter`) get anteroom's error page — 502, 503 or 504
//! with `Retry-After` — from the message template, never a hang or a bare error. The visitor
//! keeps their admission: cookies already decided ride on the error page, and an order that
//! consumed the admission but failed at the origin gives it back.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::{FailToProxy, Session};
use pingora::{ErrorSource, ErrorType, Result};

use super::respond::{Reply, HTML, JSON};
use super::{wants_json, Ctx};
use crate::app::Shared;
use crate::cookie;
use crate::page::MessageView;

/// Seconds a visitor is asked to wait before trying again.
const RETRY_SECS: u64 = 5;

fn wording(status: u16) -> (&'static str, &'static str) {
    match status {
        504 => (
            "The shop is taking too long",
            "The shop did not answer in time. Your place is kept: this page tries again in a few seconds.",
        ),
        503 => (
            "The shop is busy",
            "The shop cannot take your request right now. Your place is kept: this page tries again in a few seconds.",
        ),
        _ => (
            "The shop is not answering",
            "We could not reach the shop. Your place is kept: this page tries again in a few seconds.",
        ),
    }
}

/// The error page body and its content type.
fn page(shared: &Shared, json: bool, status: u16, room: &str) -> (&'static str, Bytes) {
    let (title, message) = wording(status);
    if json {
        let v = serde_json::json!({ "room": room, "state": "error", "status": status, "error": message, "retry_after_ms": RETRY_SECS * 1000 });
        (JSON, Bytes::from(v.to_string()))
    } else {
        let html = shared.pages.message(&MessageView {
            status,
            title,
            message,
            retry_seconds: Some(RETRY_SECS),
            room,
            lang: "en",
        });
        (HTML, Bytes::from(html))
    }
}

/// Gives back an admission this request consumed: the order did not reach the shop.
async fn refund(shared: &Shared, ctx: &mut Ctx) {
    let (Some(vid), Some(i)) = (ctx.consumed.take(), ctx.room) else {
        return;
    };
    let r = &shared.rooms[i];
    let clear = cookie::clear_admission(r.name(), false);
    let clear_secure = cookie::clear_admission(r.name(), true);
    ctx.set_cookies
        .retain(|c| *c != clear && *c != clear_secure);
    match shared
        .store_call("touch", r.name(), shared.store.touch(&r.cfg.params, vid))
        .await
    {
        Ok(true) => tracing::info!(
            room = r.name(),
            "the origin failed an order: admission given back"
        ),
        Ok(false) => tracing::warn!(
            room = r.name(),
            "the origin failed an order; no slot to give the admission back"
        ),
        Err(e) => shared.warn_store_error(&e),
    }
}

/// The origin answered 5xx: replace its page with ours (when the upstream's `error-pages` is on).
pub(super) async fn on_response(
    session: &mut Session,
    resp: &mut ResponseHeader,
    ctx: &mut Ctx,
) -> Result<()> {
    let status = resp.status.as_u16();
    let shared = ctx.shared.clone();
    if status < 500 || !shared.config.upstreams[ctx.upstream].error_pages {
        return Ok(());
    }
    refund(&shared, ctx).await;
    let room = ctx.room.map(|i| shared.rooms[i].name()).unwrap_or("");
    let (content_type, body) = page(&shared, wants_json(session.req_header()), status, room);
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
    resp.insert_header(http::header::RETRY_AFTER, RETRY_SECS)?;
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
    let shared = ctx.shared.clone();
    {
        tracing::warn!(upstream = shared.config.upstreams[ctx.upstream].name, error = %e, status = code, "origin failed");
        refund(&shared, ctx).await;
    }
    if session.response_written().is_none() {
        let room = ctx.room.map(|i| shared.rooms[i].name()).unwrap_or("");
        let (content_type, body) = page(&shared, wants_json(session.req_header()), code, room);
        let _ = Reply {
            status: code,
            content_type,
            body,
            retry_after: Some(RETRY_SECS),
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
