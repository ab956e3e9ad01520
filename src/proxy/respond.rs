//! Answers anteroom writes itself: waiting pages, status JSON, 409s, 404s under `/.anteroom/`.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::Result;

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
        let mut h = ResponseHeader::build(self.status, Some(6))?;
        h.insert_header(http::header::CONTENT_TYPE, self.content_type)?;
        h.insert_header(http::header::CACHE_CONTROL, "no-store")?;
        h.insert_header(http::header::CONTENT_LENGTH, self.body.len())?;
        if let Some(secs) = self.retry_after {
            h.insert_header(http::header::RETRY_AFTER, secs)?;
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
