//! The dashboard: one self-contained page at `GET /` of the admin listener (inline CSS, JS
//! and SVG; no external asset). The page holds no data: it asks for an admin token, keeps it
//! in the tab's session storage, and reads and changes rooms through the API with it as a
//! bearer header, so serving it needs no token. Its charts come from
//! `GET /rooms/NAME/series` (this instance's last 15 minutes, [`crate::room::series`]).

use http::{Response, StatusCode};
use serde_json::{json, Value};

use crate::room::series;
use crate::room::Room;

const PAGE: &str = include_str!("dashboard.html");

/// Only this page's own inline code may run, it may only talk to this listener, and no other
/// site may frame it (its buttons change rooms).
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

pub fn page() -> Response<Vec<u8>> {
    let mut resp = Response::new(PAGE.as_bytes().to_vec());
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    for (k, v) in [
        ("content-type", "text/html; charset=utf-8"),
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
    ] {
        h.insert(k, http::HeaderValue::from_static(v));
    }
    h.insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from(PAGE.len()),
    );
    resp
}

/// `GET /rooms/NAME/series`.
pub fn series(r: &Room) -> Value {
    json!({
        "room": r.name(),
        "instance_only": true,
        "every_ms": series::EVERY.as_millis() as u64,
        // Every sample's values, in this order (found by review: the last two were not named).
        "fields": ["unix_ms", "waiting", "active", "admitted_per_second", "rate_in_force",
                   "origin_p90_ms", "origin_error_share", "eta_error_median", "eta_error_p90"],
        "samples": r.series.samples(),
    })
}
