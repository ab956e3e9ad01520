//! The end of a request: its metrics, and its access line (through the background writer
//! when there is one, so the request path never waits on stderr).

use pingora::proxy::Session;

use super::Ctx;

/// Count the request and write its access line.
pub(super) fn log(session: &Session, ctx: &Ctx) {
    let seconds = ctx.started.elapsed().as_secs_f64();
    let shared = &*ctx.shared;
    let room = ctx.room.and_then(|i| shared.rooms.get(i));
    let room_metrics = room.map(|r| &r.metrics);
    shared
        .metrics
        .request(room_metrics, ctx.outcome, ctx.reject, seconds);
    if tracing::enabled!(target: "anteroom::access", tracing::Level::INFO) {
        let req = session.req_header();
        let status = session
            .response_written()
            .map(|r| r.status.as_u16())
            .unwrap_or(0);
        let room = room.map(|r| r.name()).unwrap_or("-");
        // The path without its query: queries can carry tokens of the shop's own.
        if let Some(log) = crate::logwriter::writer() {
            log.push(&crate::logwriter::Access {
                at: std::time::SystemTime::now(),
                room,
                outcome: ctx.outcome.as_str(),
                status,
                method: req.method.as_str(),
                path: req.uri.path(),
                duration_ms: crate::logwriter::millis(seconds),
            });
            return;
        }
        tracing::info!(
            target: "anteroom::access",
            room,
            outcome = ctx.outcome.as_str(),
            status,
            method = req.method.as_str(),
            path = req.uri.path(),
            duration_ms = crate::logwriter::millis(seconds),
        );
    }
}
