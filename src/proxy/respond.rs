//! Answers anteroom writes itself: waiting pages, status JSON, 409s, 404s under `/.anteroom/`.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::Result;

use super::{wants_json, Ctx, Outcome, Proxy};
use crate::app::Shared;
use crate::metrics::Reject;
use crate::page::MessageView;

/// A response of our own, written in one go.
pub struct Reply<'a> {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Bytes,
    pub retry_after: Option<u64>,
    pub cookies: &'a [String],
}

impl Reply<'_> {
    pub async fn send(self, session: &mut Session) -> Result<()> {
        self.write(session, "no-store").await
    }

    /// A file that may be kept: [`Reply::send`] with this `Cache-Control`.
    pub async fn send_cached(self, session: &mut Session, cache_control: &str) -> Result<()> {
        self.write(session, cache_control).await
    }

    async fn write(self, session: &mut Session, cache_control: &str) -> Result<()> {
        let mut h = ResponseHeader::build(self.status, Some(9))?;
        h.insert_header(http::header::CONTENT_TYPE, self.content_type)?;
        h.insert_header(http::header::CACHE_CONTROL, cache_control)?;
        ours(&mut h)?;
        h.insert_header(http::header::CONTENT_LENGTH, self.body.len())?;
        if let Some(secs) = self.retry_after {
            h.insert_header(http::header::RETRY_AFTER, secs)?;
        }
        // Our 405s are for addresses of our own that read only (the status, the page's
        // files), which RFC 9110 has the answer name (found by review); not a `TRACE` refused
        // on the shop's paths, whose methods are the shop's.
        if self.status == 405 && session.req_header().method != http::Method::TRACE {
            h.insert_header(http::header::ALLOW, "GET, HEAD")?;
        }
        for c in self.cookies {
            h.append_header(http::header::SET_COOKIE, c.as_str())?;
        }
        let head_only = session.req_header().method == http::Method::HEAD;
        session
            .write_response_header(Box::new(h), head_only)
            .await?;
        if !head_only {
            session.write_response_body(Some(self.body), true).await?;
        }
        Ok(())
    }
}

pub const HTML: &str = "text/html; charset=utf-8";
pub const JSON: &str = "application/json";

/// A small JSON error body such as `{"error":"not found"}`.
pub fn json_error(message: &str) -> Bytes {
    Bytes::from(serde_json::json!({ "error": message }).to_string())
}

/// What [`Proxy::send_refusal`] answers.
pub struct Refusal<'a> {
    pub status: u16,
    /// The JSON `state`.
    pub state: &'a str,
    pub title: &'a str,
    pub message: &'a str,
    pub retry_secs: Option<u64>,
    pub reject: Reject,
    /// The page's language (the words above are in it).
    pub lang: &'a str,
    /// JSON whatever the `Accept` (`/.anteroom/status` answers nothing else).
    pub always_json: bool,
}

impl Proxy {
    /// A request refused here, as the message page or, for a JSON client,
    /// `{"room","state","error"}` (with `retry_after_ms` when there is a retry); counted as a
    /// rejection for its reason. Cookies decided on the way (a renewal) go with it.
    pub(super) async fn send_refusal(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        f: &Refusal<'_>,
    ) -> Result<()> {
        let r = &shared.rooms[room];
        ctx.outcome = Outcome::Reject;
        ctx.reject = Some(f.reject);
        let json = f.always_json || wants_json(session.req_header());
        let body = if json {
            let mut v =
                serde_json::json!({ "room": r.name(), "state": f.state, "error": f.message });
            if let Some(secs) = f.retry_secs {
                v["retry_after_ms"] = serde_json::json!(secs * 1000);
            }
            Bytes::from(v.to_string())
        } else {
            Bytes::from(shared.pages.message(&MessageView {
                status: f.status,
                title: f.title,
                message: f.message,
                retry_seconds: f.retry_secs,
                refresh_url: &super::request::page_url(session.req_header()),
                room: r.name(),
                lang: f.lang,
                form_note:
                    super::method::is_form(session.req_header()).then(crate::page::form_note),
            }))
        };
        Reply {
            status: f.status,
            content_type: if json { JSON } else { HTML },
            body,
            retry_after: f.retry_secs,
            cookies: &ctx.set_cookies,
        }
        .send(session)
        .await
    }
}

/// Every answer of ours is read as the type it says (`nosniff`), and framed by the shop's own
/// pages only: a waiting or challenge page inside another site's frame is a clickjacking
/// surface (found by review). Also the page that replaces a shop's 5xx (found by review: it
/// had none of these).
pub(super) fn ours(h: &mut ResponseHeader) -> Result<()> {
    h.insert_header(http::header::X_CONTENT_TYPE_OPTIONS, "nosniff")?;
    h.insert_header(http::header::X_FRAME_OPTIONS, "SAMEORIGIN")?;
    h.insert_header(
        http::header::CONTENT_SECURITY_POLICY,
        "frame-ancestors 'self'",
    )?;
    Ok(())
}
