//! `GET /.anteroom/waiting.js?room=NAME&lang=L&v=V` and `GET /.anteroom/waiting.css?v=V`: the
//! built-in waiting page's script and style ([`crate::page::assets`]). Answered from memory, with
//! no store call and no line: a visitor's browser asks once and keeps them.

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
    let (status, msg) = if req.method != http::Method::GET && req.method != http::Method::HEAD {
        (405, "use GET")
    } else if let Found::File { asset, current } = shared.pages.assets.find(path, req.uri.query()) {
        ctx.outcome = Outcome::Asset;
        return Reply {
            status: 200,
            content_type: asset.content_type,
            body: asset.body.clone(),
            retry_after: None,
            cookies: &[],
        }
        .send_cached(session, if current { FOREVER } else { AGAIN })
        .await;
    } else {
        (
            404,
            "not found: pass the room and lang of a configured room",
        )
    };
    ctx.outcome = Outcome::Reject;
    ctx.reject = Some(crate::metrics::Reject::BadRequest);
    Reply {
        status,
        content_type: JSON,
        body: json_error(msg),
        retry_after: None,
        cookies: &[],
    }
    .send(session)
    .await
}
