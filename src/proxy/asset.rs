//! `GET /.anteroom/waiting.js?room=NAME&lang=L&v=V` and `GET /.anteroom/waiting.css?v=V`: the
//! built-in waiting page's script and style ([`crate::page::assets`]). Answered from memory, with
//! no store call and no line: a visitor's browser asks once and keeps them.

use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::Result;

use super::respond::{json_error, Reply, JSON};
use super::{Ctx, Outcome};
use crate::app::Shared;
use crate::page::assets::Found;

/// A version the page named: the same URL always has the same bytes.
const FOREVER: &str = "public, max-age=31536000, immutable";
/// Another version (a page from before a reload): today's file, asked for again next time.
const AGAIN: &str = "no-cache";

pub(super) async fn serve(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut Ctx,
    path: &str,
) -> Result<()> {
    let req = session.req_header();
    let found = if req.method == http::Method::GET || req.method == http::Method::HEAD {
        Ok(shared.pages.assets.find(path, req.uri.query()))
    } else {
        Err(())
    };
    let (asset, current) = match found {
        Ok(Found::File { asset, current }) => (asset, current),
        Ok(Found::NotFound) | Err(()) => {
            ctx.outcome = Outcome::Reject;
            ctx.reject = Some(crate::metrics::Reject::BadRequest);
            let (status, msg) = if found.is_err() {
                (405, "use GET")
            } else {
                (
                    404,
                    "not found: pass the room and lang of a configured room",
                )
            };
            return Reply {
                status,
                content_type: JSON,
                body: json_error(msg),
                retry_after: None,
                cookies: &[],
            }
            .send(session)
            .await;
        }
    };
    ctx.outcome = Outcome::Asset;
    let mut h = ResponseHeader::build(200, Some(5))?;
    h.insert_header(http::header::CONTENT_TYPE, asset.content_type)?;
    h.insert_header(
        http::header::CACHE_CONTROL,
        if current { FOREVER } else { AGAIN },
    )?;
    h.insert_header(http::header::CONTENT_LENGTH, asset.body.len())?;
    h.insert_header(http::header::X_CONTENT_TYPE_OPTIONS, "nosniff")?;
    let head_only = session.req_header().method == http::Method::HEAD;
    session
        .write_response_header(Box::new(h), head_only)
        .await?;
    if !head_only {
        session
            .write_response_body(Some(asset.body.clone()), true)
            .await?;
    }
    Ok(())
}
