//! The admin API, on its own listener (`listen.admin`, loopback by default).
//!
//! - `GET /`: the dashboard (a page that asks for a token; no token needed to load it).
//! - `GET /healthz`: the process is alive (no token needed, for probes).
//! - `GET /readyz`: config loaded and store reachable (breaker closed, a recent success, every
//!   room's runtime event changes read);
//!   503 otherwise (no token needed).
//! - Everything else needs `Authorization: Bearer <token>` of one of `admin.tokens` (or the
//!   single `admin.token`), compared in constant time; 401 without it, with a wrong one, or
//!   when no token is configured. A `read` token may `GET`; changes (`PATCH`, `DELETE`) need an
//!   `operate` one (403 otherwise). Every change is logged with the token's label (never the
//!   token) and the caller's address.
//! - `GET /metrics`: Prometheus text format.
//! - `GET /rooms`, `GET /rooms/NAME`: configuration plus live figures from the store.
//! - `PATCH /rooms/NAME` with any of `enabled`, `queue_all`, `admit_per_second`, `max_active`
//!   (`null` returns an override to the configured value): kept in the store, so every instance
//!   follows within one admission tick.
//! - `DELETE /rooms/NAME/waiting`: empties the line.
//! - `GET /rooms/NAME/series`: this instance's last 15 minutes of the room, one sample a
//!   second (the dashboard's charts).
//! - `GET /rooms/NAME/changes[?limit=N]`: the operators' changes, newest first, as the store
//!   keeps them (who, when, from where, each field from what to what).
//! - `/rooms/NAME/events`: the room's events at run time ([`super::events`]).

use bytes::BytesMut;
use http::{Method, Response, StatusCode};
use pingora::protocols::http::ServerSession;
use serde_json::{json, Value};

use crate::app::{Current, Shared};
use crate::breaker::BreakerState;
use crate::config::{AdminRole, AdminToken};
use crate::store::history::Actor;

/// Request bodies larger than this are refused.
const MAX_BODY: usize = 16 * 1024;

pub struct AdminApp {
    pub(super) current: Current,
    /// The connections open now, and the second a full listener was last warned of
    /// ([`super::serve`]).
    pub(super) open: std::sync::Mutex<super::serve::Conns>,
    pub(super) crowded_warned: std::sync::atomic::AtomicU64,
}

/// Who made a call: the token's label and the caller's address (for the logs and the audit).
pub struct Caller {
    pub label: String,
    pub addr: String,
}

impl Caller {
    /// This call as the store records a change (a new id per call).
    pub(super) fn actor(&self) -> Actor {
        Actor {
            id: uuid::Uuid::new_v4().to_string(),
            by: self.label.clone(),
            client: self.addr.clone(),
        }
    }
}

impl AdminApp {
    pub fn new(current: Current) -> Self {
        Self {
            current,
            open: Default::default(),
            crowded_warned: Default::default(),
        }
    }
}

fn reply(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    let mut resp = Response::new(Vec::new());
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    if let Ok(v) = content_type.parse() {
        h.insert(http::header::CONTENT_TYPE, v);
    }
    h.insert(http::header::CONTENT_LENGTH, body.len().into());
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    *resp.body_mut() = body;
    resp
}

pub(super) fn json_reply(status: StatusCode, v: &Value) -> Response<Vec<u8>> {
    let mut body = serde_json::to_vec_pretty(v).unwrap_or_default();
    body.push(b'\n');
    reply(status, "application/json", body)
}

/// A request body that must be one JSON object. A derived `Deserialize` also reads an array,
/// its items taken as the fields in order (found by review: `[null,true,7.5,3]` held the
/// line and set the rate), so anything but an object is refused first; the object is then read
/// from the bytes, not through a `Value`, whose map keeps only the last of a repeated key
/// (re-review: `{"admit_per_second": 7, "admit_per_second": null}` removed the pin): serde
/// refuses a duplicate field.
pub(super) fn json_object<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err("the body is not a JSON object".to_string());
    }
    serde_json::from_slice(body).map_err(|e| e.to_string())
}

/// `503` for a change whose store call failed. A call that timed out, or whose connection
/// broke, may have been made all the same (the script ran, the answer was lost): the answer
/// says so and where to look, and the log has who asked (found by review: a `PATCH` answered
/// "failed" was made, and its `enabled = false` let the crowd in with nothing logged).
pub(super) fn change_unsure(
    e: &crate::store::StoreError,
    room: &str,
    what: &str,
    who: &Caller,
) -> Response<Vec<u8>> {
    // Refused by the open breaker: never sent, so surely not made (found by review: it was
    // told as one that may have been made, and the operator sent to check).
    let not_made = matches!(e, crate::store::StoreError::BreakerOpen { .. });
    tracing::warn!(
        room,
        by = who.label,
        client = %who.addr,
        error = %e,
        "{what} through the admin API {}",
        if not_made { "was not made" } else { "may or may not have been made" }
    );
    let told = if not_made {
        "nothing was changed: send it again once the store answers (GET /readyz)".to_string()
    } else {
        format!("the change may have been made all the same: GET /rooms/{room} and /rooms/{room}/changes say")
    };
    error(StatusCode::SERVICE_UNAVAILABLE, &format!("{e}; {told}"))
}

/// `401` with the scheme to use.
fn unauthorized() -> Response<Vec<u8>> {
    let mut resp = error(
        StatusCode::UNAUTHORIZED,
        "send Authorization: Bearer <token>, a token of admin.tokens (or admin.token)",
    );
    resp.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer"),
    );
    resp
}

pub(super) fn error(status: StatusCode, message: &str) -> Response<Vec<u8>> {
    json_reply(status, &json!({ "error": message }))
}

/// A request's body, at most [`MAX_BODY`].
/// A client that asked for `100 Continue` (curl does for a body over 1 KiB) is told to go on
/// first: it waited a second for it, or for good (found by review).
pub(super) async fn read_body(session: &mut ServerSession) -> Result<Vec<u8>, Response<Vec<u8>>> {
    let req = session.req_header();
    // Not to an HTTP/1.0 client, which cannot read it (RFC 9110 10.1.1).
    let expects = req.version >= http::Version::HTTP_11
        && req
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if expects && session.write_continue_response().await.is_err() {
        return Err(unread(
            session,
            StatusCode::BAD_REQUEST,
            "could not read the body",
        ));
    }
    let mut body = BytesMut::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(unread(
                        session,
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "body too large",
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body.to_vec()),
            Err(_) => {
                return Err(unread(
                    session,
                    StatusCode::BAD_REQUEST,
                    "could not read the body",
                ))
            }
        }
    }
}

/// The answer to a request whose body was not read to its end: the connection closes after it,
/// so that what is left of the body is never read as the next request (found by review: after
/// a malformed chunked body, the bytes that followed were).
fn unread(session: &mut ServerSession, status: StatusCode, message: &str) -> Response<Vec<u8>> {
    session.set_keepalive(None);
    error(status, message)
}

impl AdminApp {
    /// The token the request carries, if it is one of the config's.
    fn caller<'a>(s: &'a Shared, session: &ServerSession) -> Option<&'a AdminToken> {
        let given = session
            .req_header()
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                // The scheme is case-insensitive (RFC 9110 11.1): `bearer` is `Bearer`.
                let (scheme, token) = v.split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| token.trim_start_matches(' '))
            })
            .unwrap_or("");
        s.config.admin.find(given)
    }

    async fn route(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let snapshot = self.current.load_full();
        let s = &*snapshot;
        // HEAD is GET without the body (Pingora leaves the body out): a probe or an uptime
        // monitor sending HEAD gets what GET gets, and a read token may send it.
        let method = match &session.req_header().method {
            m if m == Method::HEAD => Method::GET,
            m => m.clone(),
        };
        let path = session.req_header().uri.path().to_string();
        match (&method, path.as_str()) {
            (&Method::GET, "/") => return super::dashboard::page(),
            (&Method::GET, "/healthz") => {
                return json_reply(StatusCode::OK, &json!({ "status": "ok" }))
            }
            (&Method::GET, "/readyz") => {
                let healthy = s.store_healthy();
                let status = if healthy {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                return json_reply(
                    status,
                    &json!({
                        "ready": healthy,
                        "config": s.config.source,
                        "store": s.store.backend(),
                        "breaker": s.breaker_state().as_str(),
                        "last_error": if healthy { None } else { s.last_store_error() },
                        "last_reload": s.last_reload(),
                    }),
                );
            }
            _ => {}
        }
        let who = match Self::authorize(s, session, &method) {
            Ok(who) => who,
            Err(resp) => return *resp,
        };
        if method == Method::GET {
            return Self::dispatch(s, session, &method, &path, &who, &[]).await;
        }
        // A change's body is read whole within `client-timeout`, and its token is checked
        // again against the configuration in force then, which the change is made under:
        // before (found by review), a body trickled in a space at a time kept a request open
        // for as long as its sender liked, and the change it carried was made with a token
        // removed from the file minutes before.
        let due = s.config.server.client_timeout;
        let body = match tokio::time::timeout(due, read_body(session)).await {
            Ok(Ok(body)) => body,
            Ok(Err(resp)) => return resp,
            Err(_) => {
                return error(
                    StatusCode::REQUEST_TIMEOUT,
                    "the body did not arrive within client-timeout",
                )
            }
        };
        let now = self.current.load_full();
        let who = match Self::authorize(&now, session, &method) {
            Ok(again) if again.label == who.label => again,
            Ok(_) | Err(_) => return unauthorized(),
        };
        Self::dispatch(&now, session, &method, &path, &who, &body).await
    }

    /// The caller, when the request's token is one of `s`'s and its role allows `method`.
    fn authorize(
        s: &Shared,
        session: &ServerSession,
        method: &Method,
    ) -> Result<Caller, Box<Response<Vec<u8>>>> {
        let Some(token) = Self::caller(s, session) else {
            return Err(Box::new(unauthorized()));
        };
        if *method != Method::GET && token.role != AdminRole::Operate {
            return Err(Box::new(error(
                StatusCode::FORBIDDEN,
                &format!(
                    "the token labelled {:?} may only read (role = \"read\"): changes need an operate token",
                    token.label
                ),
            )));
        }
        Ok(Caller {
            label: token.label.clone(),
            addr: session
                .client_addr()
                .map_or_else(|| "-".to_string(), |a| a.to_string()),
        })
    }

    /// An authorized request: `body` is a change's, read whole.
    async fn dispatch(
        s: &Shared,
        session: &ServerSession,
        method: &Method,
        path: &str,
        who: &Caller,
        body: &[u8],
    ) -> Response<Vec<u8>> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        match (method, segments.as_slice()) {
            (&Method::GET, ["metrics"]) => {
                // The origin gates' figures and the breakers are read when scraped (no work
                // per request).
                let now = s.clock.mono_micros();
                for r in s.rooms.iter() {
                    let open = r.breaker.state(now) != BreakerState::Closed;
                    s.metrics
                        .room_breaker_open
                        .with_label_values(&[r.name()])
                        .set(i64::from(open));
                    // A room without a cap has none in flight (found by review: a reload
                    // that took the cap away left its last figures standing).
                    let (in_flight, queued) = r
                        .gate
                        .as_ref()
                        .map_or((0, 0), |g| (g.in_flight(), g.waiting()));
                    r.metrics.origin_inflight.set(in_flight as i64);
                    r.metrics.origin_queued.set(queued as i64);
                }
                s.metrics
                    .breaker_open
                    .set(i64::from(s.breaker_state() != BreakerState::Closed));
                reply(
                    StatusCode::OK,
                    "text/plain; version=0.0.4",
                    s.metrics.render(),
                )
            }
            (&Method::GET, ["rooms"]) => {
                let mut rooms = Vec::new();
                for i in 0..s.rooms.len() {
                    rooms.push(super::view::room(s, i).await);
                }
                json_reply(StatusCode::OK, &Value::Array(rooms))
            }
            (_, ["rooms", name, rest @ ..]) => {
                let Some(i) = s.room_index(name) else {
                    return error(StatusCode::NOT_FOUND, &format!("no room named {name:?}"));
                };
                match (method, rest) {
                    (&Method::GET, []) => {
                        json_reply(StatusCode::OK, &super::view::room(s, i).await)
                    }
                    (&Method::PATCH, []) => super::changes::patch(s, body, i, who).await,
                    (&Method::GET, ["changes"]) => super::changes::list(s, session, i).await,
                    (&Method::GET, ["events"]) => super::events::list(s, i).await,
                    (&Method::POST, ["events"]) => {
                        super::events::change(s, body, i, None, false, who).await
                    }
                    (&Method::PATCH, ["events", event]) => {
                        super::events::change(s, body, i, Some(event), false, who).await
                    }
                    (&Method::DELETE, ["events", event]) => {
                        super::events::change(s, body, i, Some(event), true, who).await
                    }
                    (&Method::GET, ["series"]) => {
                        json_reply(StatusCode::OK, &super::dashboard::series(&s.rooms[i]))
                    }
                    (&Method::DELETE, ["waiting"]) => {
                        let r = &s.rooms[i];
                        match s
                            .store_call(
                                "clear_waiting",
                                r.name(),
                                s.store.clear_waiting_by(&r.cfg.params, &who.actor()),
                            )
                            .await
                        {
                            Ok(n) => {
                                tracing::info!(
                                    room = r.name(),
                                    removed = n,
                                    by = who.label,
                                    client = %who.addr,
                                    "line cleared through the admin API"
                                );
                                json_reply(
                                    StatusCode::OK,
                                    &json!({ "room": r.name(), "removed": n }),
                                )
                            }
                            Err(e) => change_unsure(&e, r.name(), "a clearing of the line", who),
                        }
                    }
                    (_, [_, ..]) => error(StatusCode::NOT_FOUND, "not found"),
                    _ => error(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "use GET or PATCH on /rooms/NAME",
                    ),
                }
            }
            (&Method::GET, _) => error(StatusCode::NOT_FOUND, "not found"),
            _ => error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
        }
    }
}

impl AdminApp {
    /// The answer to one request (served by [`super::serve`]).
    pub(super) async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let resp = self.route(session).await;
        tracing::debug!(
            target: "anteroom::admin",
            method = %session.req_header().method,
            path = session.req_header().uri.path(),
            status = resp.status().as_u16(),
            "admin request"
        );
        resp
    }
}
