//! The refusals anteroom writes where a visitor would have queued: too many new visitors from
//! one client (`join-limit`), and a search crawler (`crawlers = "refuse"`).

use pingora::proxy::Session;
use pingora::Result;

use super::respond::Refusal;
use super::{Ctx, Proxy};
use crate::app::Shared;
use crate::metrics::Reject;

/// When a refused crawler is told to come back: a sale's line is usually gone within the hour.
const CRAWLER_RETRY_SECS: u64 = 1800;

impl Proxy {
    /// 429 for a client past its room's `join-limit`, as a page or JSON.
    pub(super) async fn send_limited(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
        retry_after: std::time::Duration,
    ) -> Result<()> {
        let refusal = Refusal {
            status: 429,
            state: "limited",
            title: "Please wait a moment",
            message: "Too many new visitors have come from your network in a short time. Please wait a moment and try again.",
            retry_secs: Some(retry_after.as_secs_f64().ceil().max(1.0) as u64),
            reject: Reject::JoinLimit,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await
    }

    /// A search crawler where a visitor would wait (`crawlers = "refuse"`): a 503 it retries
    /// later, so the waiting page is never indexed in place of the shop's page.
    pub(super) async fn send_crawler(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
    ) -> Result<()> {
        let refusal = Refusal {
            status: 503,
            state: "busy",
            title: "Busy",
            message: "This page is busy with a sale. Please come back later.",
            retry_secs: Some(CRAWLER_RETRY_SECS),
            reject: Reject::Crawler,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await
    }
}
