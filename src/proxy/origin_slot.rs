//! `max-origin-inflight` on the request path: a request of a room with a cap takes a slot of
//! the room's gate ([`crate::room::gate`]) before it goes to the origin — before a consume
//! route's store call, so a request that waits in vain has consumed nothing. Past
//! `origin-queue-timeout` the visitor gets a 503 with `Retry-After` and keeps their admission
//! (a cookie renewed on the way is still set). Every forwarded request of a capped room takes a
//! slot, the room switched off or not; one whose connection switches protocols (101) gives it
//! back with the answer.
//!
//! Over HTTP/2 Pingora has no read timeout on a request body (`set_read_timeout` does nothing
//! there), so a stalled body is not cut at `client-timeout` as it is over HTTP/1.1: it runs
//! until the origin's `read-timeout` past its last piece, holding its slot: the origin has the
//! request open until then, and the cap counts it (a first version gave the slot back at
//! `client-timeout`, and the origin saw twice the cap: found by re-review). Its body is
//! watched ([`Held::Watched`]): not whole by its deadline, the request fails at its next piece
//! or its end, as over HTTP/1.1.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pingora::protocols::SocketDigest;
use pingora::proxy::Session;
use pingora::Result;

use super::respond::Refusal;
use super::{Ctx, Proxy};
use crate::app::Shared;
use crate::metrics::Reject;
use crate::room::gate::Refused;
use crate::room::share::Sharer;

/// Whether the visitor has gone (closed the connection, reset the stream), asked without
/// waiting and without reading anything: a body still to come and a request pipelined behind
/// stay where they are (found by review: only a request whose body was read whole was asked,
/// and an order streamed in whose visitor left used its admission up).
///
/// Whether the HTTP/2 stream was reset, or the peer closed the connection (a FIN or a reset,
/// told by the socket's TCP state, over either protocol); over HTTP/1 a half-close
/// after a whole request reads as gone, as Pingora reads it (its `abort_on_close`). Where the
/// socket has no TCP state (a Unix socket), a request whose body is all read is asked by a
/// read that must not wait, as before; one still sending its body is not asked.
async fn visitor_gone(session: &mut Session) -> bool {
    let now = std::time::Duration::ZERO;
    if let Some(reset) = session.downstream_session.watch_h2_stream_close() {
        if tokio::time::timeout(now, reset).await.is_ok() {
            return true;
        }
    }
    // The connection closed (over HTTP/2 too: found by review, a connection closed whole
    // reset none of its streams, and its waiting order was placed).
    if let Some(closed) = socket_of(session).as_deref().and_then(closed) {
        return closed;
    }
    if session.is_http2() || !(session.is_body_empty() || session.is_body_done()) {
        return false;
    }
    let idle = session.downstream_session.read_body_or_idle(true);
    matches!(tokio::time::timeout(now, idle).await, Ok(Err(_)))
}

/// How often a waiting request's connection is asked whether its visitor closed it.
const DEPARTURE_POLL: Duration = Duration::from_millis(500);

/// The visitor's socket.
fn socket_of(session: &Session) -> Option<Arc<SocketDigest>> {
    session.downstream_session.digest()?.socket_digest.clone()
}

/// Whether the visitor closed the connection (see [`peer_closed`]); `None` where the socket
/// has no TCP state to ask (a Unix socket).
fn closed(socket: &SocketDigest) -> Option<bool> {
    socket.tcp_info().map(|info| peer_closed(info.tcpi_state))
}

/// Resolves when the visitor closes the connection, asked every [`DEPARTURE_POLL`]; never
/// where the socket has no TCP state.
async fn peer_closes(socket: Option<Arc<SocketDigest>>) {
    loop {
        match socket.as_deref().and_then(closed) {
            Some(true) => return,
            Some(false) => tokio::time::sleep(DEPARTURE_POLL).await,
            None => return std::future::pending().await,
        }
    }
}

/// Whether a connection in TCP state `state` (Linux's numbering) has heard its peer close:
/// `CLOSE_WAIT` (a FIN came), `LAST_ACK`, or `CLOSE` (a reset came).
fn peer_closed(state: u8) -> bool {
    const CLOSE: u8 = 7;
    const CLOSE_WAIT: u8 = 8;
    const LAST_ACK: u8 = 9;
    matches!(state, CLOSE | CLOSE_WAIT | LAST_ACK)
}

/// What a visitor who waited in vain is asked to wait before trying again: 1–3 s at random,
/// so that a crowd turned away together does not come back together.
fn retry_secs() -> u64 {
    fastrand::u64(1..=3)
}

impl Proxy {
    /// Holds a slot to the origin for this request in `ctx` (released when the request ends).
    /// `true`: no slot came in time and the 503 was sent.
    pub(super) async fn wait_for_origin(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
    ) -> Result<bool> {
        let r = &shared.rooms[room];
        let (Some(gate), Some(cap)) = (&r.gate, r.cfg.origin_cap) else {
            // An order's small body is read whole before its admission is used, cap or not: a
            // visitor whose upload broke off keeps the admission and the shop gets no cut-off
            // order (found by review r85b: without a cap, an HTTP/2 stream reset after the
            // order's head used the admission up, and the shop got the head alone).
            if ctx.order {
                Self::prefetch_body(session, ctx).await?;
            }
            return Ok(false);
        };
        // A small body is read whole first, holding nothing; a request whose body is still to
        // come counts in its visitor's share first.
        let buffered = Self::prefetch_body(session, ctx).await?;
        let asked = Instant::now();
        if !buffered && !session.is_body_empty() {
            let sharer = match &ctx.holder {
                Some(h) => Some(Sharer::Visitor(h.vid)),
                None => super::client_key(shared, session).map(Sharer::Client),
            };
            if let Some(sharer) = sharer {
                let share = || crate::room::share::share_of(gate.limit());
                let place = gate.shares.enter(sharer, share, cap.queue_timeout);
                let Some(place) = Self::unless_gone(session, place).await else {
                    return Self::left_waiting();
                };
                match place {
                    Some(place) => ctx.uploading = Some(Box::new(place)),
                    None => {
                        r.metrics.origin_timeouts.inc();
                        Self::send_busy(shared, session, ctx, room).await?;
                        return Ok(true);
                    }
                }
            }
        }
        let left = cap.queue_timeout.saturating_sub(asked.elapsed());
        // Every request waits its turn, an `Upgrade` too (the header alone proves nothing: an
        // origin that ignores it answers an ordinary request). A connection that really switches
        // protocols gives its slot back with the 101 ([`Proxy::origin_answered`]): a WebSocket
        // would otherwise pin a slot for its whole life.
        let Some(entered) = Self::unless_gone(session, gate.enter(left)).await else {
            return Self::left_waiting();
        };
        match entered {
            Ok(slot) => {
                // A visitor who left while the request waited sends nothing to the shop: the
                // slot goes to the next, and an order takes no admission (found by review: the
                // head of each such request reached the origin at once, all of them together
                // past the cap, and an order's admission was used up with no order placed).
                // Asked only of a request that waited, for the slot or for a place in its
                // visitor's share: one that
                // had its slot at once was never in a line to leave, and is treated as without a
                // cap (found by re-review: an order that half-closed its side was dropped in an
                // idle capped room, and placed in a room without a cap; and by re-review, one
                // that left in the last moment of its wait for its share was served).
                if (slot.waited() || Self::waited_for_share(ctx)) && visitor_gone(session).await {
                    drop(slot);
                    return Self::left_waiting();
                }
                ctx.body_from = Instant::now();
                ctx.body_due = shared.config.server.client_timeout;
                let h2_body = session.is_http2() && !session.is_body_empty();
                ctx.origin_slot = Some(if h2_body {
                    Held::Watched(Watch::start(
                        slot,
                        ctx.body_from,
                        ctx.body_due,
                        r.name().to_string(),
                    ))
                } else {
                    Held::Plain(slot)
                });
                Ok(false)
            }
            // A reload took the cap away meanwhile: on without one, as the requests after it,
            // unless the visitor left (found by re-review: one who closed the connection just
            // before such a reload had the order placed).
            Err(Refused::Lifted { waited }) => {
                if (waited || Self::waited_for_share(ctx)) && visitor_gone(session).await {
                    return Self::left_waiting();
                }
                ctx.body_from = Instant::now();
                ctx.body_due = shared.config.server.client_timeout;
                Ok(false)
            }
            Err(Refused::TimedOut) => {
                // Not a failure in the shop's health window: the cap is this room's on this
                // instance, and one admitted visitor may hold all its slots (slow uploads), so
                // counted there it let one visitor cut every room on the shop to `min-rate`
                // (re-review of a first version that counted it).
                r.metrics.origin_timeouts.inc();
                Self::send_busy(shared, session, ctx, room).await?;
                Ok(true)
            }
        }
    }

    /// `wait`, unless the visitor leaves first (`None`): a stream's reset is seen at once, a
    /// closed connection within [`DEPARTURE_POLL`] (found by review: streams an HTTP/2 client
    /// opened and reset at once waited for slots by the ten thousand, costing the proxy's
    /// memory until the timeout, as did connections closed while they waited).
    async fn unless_gone<F: std::future::Future>(
        session: &mut Session,
        wait: F,
    ) -> Option<F::Output> {
        let socket = socket_of(session);
        let gone = async move {
            match session.downstream_session.watch_h2_stream_close() {
                Some(reset) => {
                    tokio::select! {
                        _ = reset => {}
                        () = peer_closes(socket) => {}
                    }
                }
                None => peer_closes(socket).await,
            }
        };
        tokio::select! {
            biased;
            done = wait => Some(done),
            () = gone => None,
        }
    }

    /// Whether the request waited for a place in its visitor's share.
    fn waited_for_share(ctx: &Ctx) -> bool {
        ctx.uploading.as_ref().is_some_and(|u| u.waited())
    }

    /// The error a request whose visitor left while it waited ends with: nothing is answered.
    fn left_waiting() -> Result<bool> {
        pingora::Error::e_explain(
            pingora::ErrorType::ConnectionClosed,
            "the visitor left while the request waited for its origin slot",
        )
        .map_err(|e| e.into_down())
    }

    /// The origin's answer has come: a connection that switches protocols (101, a WebSocket)
    /// leaves the gate, as it is no longer a request in flight but a channel.
    pub(super) fn origin_answered(ctx: &mut Ctx, status: u16) {
        if status == 101 {
            ctx.origin_slot = None;
        }
    }

    /// The origin has sent its whole answer: the slot is free for the next in line, whatever
    /// the visitor's side still takes (found by re-review: an HTTP/2 client that never opened
    /// its flow-control window held one slot per stream while the origin sat idle, and one
    /// admission shut a capped room). An answer the origin streams to a visitor who reads it
    /// slowly keeps its slot: the origin is busy with it.
    pub(super) fn origin_done(ctx: &mut Ctx) {
        ctx.origin_slot = None;
        ctx.uploading = None;
    }

    /// The origin's answer is whole: the exchange is over when the request's body is too
    /// (found by re-review: an origin that answers before the body's end goes on reading it,
    /// and a slot given back at the answer let one visitor open any number of such requests).
    pub(super) fn origin_answered_whole(ctx: &mut Ctx, body_done: bool) {
        ctx.answer_whole = true;
        if body_done {
            Self::origin_done(ctx);
        } else if let Some(Held::Watched(w)) = &ctx.origin_slot {
            w.answered.store(true, Ordering::SeqCst);
            if w.state.load(Ordering::SeqCst) == LAPSED {
                give_back(&w.slot);
            }
        }
    }

    /// Whether this request's watched body was not whole in time: the request must not go
    /// on to the origin (re-review: a body finished after its deadline reached the origin).
    pub(super) fn slot_lapsed(ctx: &Ctx) -> bool {
        matches!(&ctx.origin_slot, Some(Held::Watched(w)) if w.state.load(Ordering::Acquire) == LAPSED)
    }

    /// More of the body came: a watched body's deadline moves to `ctx.body_due`.
    pub(super) fn body_moved(ctx: &Ctx) {
        if let Some(Held::Watched(w)) = &ctx.origin_slot {
            w.due.store(micros(ctx.body_due), Ordering::Release);
        }
    }

    /// The request's body is whole (its place in its visitor's share is given back). `false`:
    /// its watch found it late first, and the request fails.
    pub(super) fn body_whole(ctx: &mut Ctx) -> bool {
        ctx.uploading = None;
        let Some(Held::Watched(w)) = &mut ctx.origin_slot else {
            return true;
        };
        let whole =
            match w
                .state
                .compare_exchange(WATCHING, WHOLE, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => true,
                Err(now) => now == WHOLE,
            };
        if let Some(done) = w.done.take() {
            let _ = done.send(());
        }
        whole
    }

    async fn send_busy(
        shared: &Shared,
        session: &mut Session,
        ctx: &mut Ctx,
        room: usize,
    ) -> Result<()> {
        let refusal = Refusal {
            status: 503,
            state: "busy",
            title: "One moment, please",
            message: "The shop is busy with the visitors just before you. Your turn is kept: please try again in a moment.",
            retry_secs: Some(retry_secs()),
            reject: Reject::OriginBusy,
            lang: "en",
            always_json: false,
        };
        Self::send_refusal(shared, session, ctx, room, &refusal).await
    }
}

/// Whether an origin's answer ends with its head: a final status with no body (204, 304, an
/// answer to `HEAD`, `Content-Length: 0`). A 1xx is not the answer.
pub(super) fn head_ends_answer(
    req: &pingora::http::RequestHeader,
    resp: &pingora::http::ResponseHeader,
) -> bool {
    let status = resp.status.as_u16();
    if (100..200).contains(&status) {
        return false;
    }
    let empty = || {
        !resp.headers.contains_key(http::header::TRANSFER_ENCODING)
            && resp
                .headers
                .get(http::header::CONTENT_LENGTH)
                .is_some_and(|v| zero_length(v.as_bytes()))
    };
    req.method == http::Method::HEAD || status == 204 || status == 304 || empty()
}

/// Whether a `Content-Length` value says no body, read as Pingora reads it (an `i64`): `00`
/// and `+0` are 0 too (found by review: an origin's `Content-Length: 00` left an HTTP/2
/// stream's stalled upload holding its origin slot until the client went away).
fn zero_length(v: &[u8]) -> bool {
    std::str::from_utf8(v.trim_ascii())
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        == Some(0)
}

/// A slot of the room's gate this request holds; given back when dropped.
pub(super) enum Held {
    Plain(#[allow(dead_code)] crate::room::gate::Slot),
    /// An HTTP/2 request whose body is still coming: the slot with a watch on the body.
    Watched(Watch),
}

/// The body of a watched request.
const WATCHING: u8 = 0;
/// Whole in time: the request goes on to the origin.
const WHOLE: u8 = 1;
/// Not whole in time: the request fails at the body's next piece or end.
const LAPSED: u8 = 2;

/// A slot held by a request whose body is still coming over HTTP/2, where Pingora cuts no
/// stalled body, and a timer that marks the request lapsed when its body is not whole by its
/// deadline ([`super::slow::body_due`]). The body's next piece or its end then fails the
/// request; whole or lapsed is decided once, by whichever comes first (found by re-review: a
/// timer that fired as the last piece came could let a whole body go on without its slot).
///
/// The slot is held until the request ends (dropped): a stalled stream stays open at the
/// origin until the upstream's `read-timeout` past its last piece, and a slot given back at
/// the lapse let the origin see more than the cap (found by re-review: twice the cap, kept up
/// by new streams of the same visitor). Once the origin has also answered whole, nothing on
/// its side ends a stalled stream (Pingora only writes to it then): a late body there gives
/// its slot back, lapsed and answered in either order.
pub(super) struct Watch {
    slot: Arc<std::sync::Mutex<Option<crate::room::gate::Slot>>>,
    answered: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
    state: Arc<AtomicU8>,
    /// When the body is due, in microseconds from `body_from`: moved by each piece.
    due: Arc<AtomicU64>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Watch {
    fn start(slot: crate::room::gate::Slot, from: Instant, due: Duration, room: String) -> Self {
        let (done, mut whole) = tokio::sync::oneshot::channel::<()>();
        let state = Arc::new(AtomicU8::new(WATCHING));
        let due = Arc::new(AtomicU64::new(micros(due)));
        let (flag, moved) = (state.clone(), due.clone());
        let slot = Arc::new(std::sync::Mutex::new(Some(slot)));
        let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (held, told) = (slot.clone(), answered.clone());
        let task = tokio::spawn(async move {
            let due_at = || from + Duration::from_micros(moved.load(Ordering::Acquire));
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(due_at().into()) => {
                        // The body may have earned more time meanwhile.
                        if Instant::now() < due_at() {
                            continue;
                        }
                        let lapsed = flag
                            .compare_exchange(WATCHING, LAPSED, Ordering::SeqCst, Ordering::SeqCst)
                            .is_ok();
                        if lapsed {
                            tracing::debug!(
                                room,
                                "an HTTP/2 request body not whole in time: the request fails at its next piece"
                            );
                            if told.load(Ordering::SeqCst) {
                                give_back(&held);
                            }
                        }
                        return;
                    }
                    _ = &mut whole => return,
                }
            }
        });
        Self {
            slot,
            answered,
            task,
            done: Some(done),
            state,
            due,
        }
    }
}

/// Gives a watched slot back (once).
fn give_back(slot: &std::sync::Mutex<Option<crate::room::gate::Slot>>) {
    drop(slot.lock().unwrap_or_else(|e| e.into_inner()).take());
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::head_ends_answer;
    use pingora::http::{RequestHeader, ResponseHeader};

    fn answer(status: u16, length: Option<&str>) -> ResponseHeader {
        let mut r = ResponseHeader::build(status, None).unwrap();
        if let Some(l) = length {
            r.insert_header("content-length", l).unwrap();
        }
        r
    }

    #[test]
    fn an_answer_without_a_body_is_whole_with_its_head() {
        let post = RequestHeader::build("POST", b"/up", None).unwrap();
        let head = RequestHeader::build("HEAD", b"/up", None).unwrap();
        assert!(head_ends_answer(&post, &answer(204, None)));
        assert!(head_ends_answer(&post, &answer(304, None)));
        assert!(head_ends_answer(&post, &answer(401, Some("0"))));
        assert!(head_ends_answer(&head, &answer(200, Some("512"))));
        assert!(!head_ends_answer(&post, &answer(200, Some("5"))));
        assert!(!head_ends_answer(&post, &answer(200, None)));
        assert!(!head_ends_answer(&post, &answer(100, None)));
        assert!(!head_ends_answer(&post, &answer(101, None)));
        // The length as Pingora reads it (found by review: `00` held an HTTP/2 upload's slot).
        for zero in ["00", "000", "+0", "-0", " 0"] {
            assert!(head_ends_answer(&post, &answer(200, Some(zero))), "{zero}");
        }
        for some in ["01", "0x0", "", "0 0", "1"] {
            assert!(!head_ends_answer(&post, &answer(200, Some(some))), "{some}");
        }
    }

    #[test]
    fn a_connection_is_gone_once_its_peer_closed() {
        // ESTABLISHED, SYN_RECV: here; CLOSE_WAIT (a FIN), LAST_ACK, CLOSE (a reset): gone.
        for (state, gone) in [(1, false), (3, false), (7, true), (8, true), (9, true)] {
            assert_eq!(super::peer_closed(state), gone, "{state}");
        }
    }
}
