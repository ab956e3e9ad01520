//! The admission cookie: HMAC-SHA256-signed, verified locally on every admitted request.
//!
//! Value format, version 1 (at most [`MAX_VALUE_LEN`] bytes):
//!
//! ```text
//! 1.<visitor id: 32 hex>.<expiry: unix seconds>.<key id: 8 hex>.<mac: 43 base64url>
//! ```
//!
//! The MAC covers the format version, the room name (so a cookie for one room opens no other),
//! the visitor id, the expiry and the key id. Verification needs no store round trip; that is
//! what keeps the admitted path fast and keeps admitted visitors working while Redis is down.
//! The first configured key signs and every key verifies, so keys rotate without logging anyone out.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::store::VisitorId;

type HmacSha256 = Hmac<Sha256>;

/// Cookie carrying the visitor id, set on a visitor's first protected request.
pub const VID_COOKIE: &str = "anteroom_vid";
/// Every cookie of ours starts with this; they are removed before the origin sees the request.
pub const COOKIE_PREFIX: &str = "anteroom_";
/// Longer cookie values are rejected before any parsing.
pub const MAX_VALUE_LEN: usize = 128;
/// How long the visitor-id cookie and a queue ticket live at least: long enough to survive a
/// browser restart while waiting. Both are given again as the visitor polls (with the ticket's
/// renewal), and in a pre-queue they live past its opening (`Proxy::visitor_cookie_secs`).
pub const VID_MAX_AGE_SECS: u64 = 24 * 3600;

const VERSION: &str = "1";
const MAC_B64_LEN: usize = 43;

/// One HMAC key with its public id.
#[derive(Clone)]
pub struct CookieKey {
    id: String,
    mac: HmacSha256,
}

impl CookieKey {
    /// The id is a hash of the secret, so it is stable across restarts and list reordering,
    /// and reveals nothing usable about the key.
    /// `None` only if the HMAC implementation refused the key, which HMAC-SHA256 never does.
    pub fn new(secret: &[u8]) -> Option<Self> {
        let mut h = Sha256::new();
        h.update(b"anteroom-key-id\0");
        h.update(secret);
        let digest = h.finalize();
        let id = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        let mac = HmacSha256::new_from_slice(secret).ok()?;
        Some(Self { id, mac })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// HMAC-SHA256 over `domain`, the room and `payload` with this key (and its id): for
    /// other signed values than the admission cookie (the queue ticket), each with its own
    /// domain string, so that no value of one kind verifies as another.
    pub fn tag(&self, domain: &[u8], room: &str, payload: &[u8]) -> [u8; 32] {
        let mut m = self.mac.clone();
        m.update(domain);
        m.update(room.as_bytes());
        m.update(b"|");
        m.update(payload);
        m.update(b"|");
        m.update(self.id.as_bytes());
        m.finalize().into_bytes().into()
    }

    fn mac(&self, domain: &[u8], room: &str, vid: &str, exp: &str) -> HmacSha256 {
        let mut m = self.mac.clone();
        m.update(domain);
        m.update(room.as_bytes());
        m.update(b"|");
        m.update(vid.as_bytes());
        m.update(b"|");
        m.update(exp.as_bytes());
        m.update(b"|");
        m.update(self.id.as_bytes());
        m
    }
}

/// A cookie that verified: who it admits and until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub vid: VisitorId,
    pub expires: u64,
}

/// What the MAC of an admission starts with.
const ADMISSION: &[u8] = b"anteroom/1|";
/// What the MAC of an order's receipt starts with: the same format as an admission, so that
/// neither verifies as the other.
const RECEIPT: &[u8] = b"anteroom-receipt/1|";

/// Signs an admission for `vid` in `room`, valid until `expires` (unix seconds), with the
/// first key.
pub fn sign(keys: &[CookieKey], room: &str, vid: VisitorId, expires: u64) -> Option<String> {
    sign_in(ADMISSION, keys, room, vid, expires)
}

/// Signs an order's receipt (`order-receipt`, see `proxy::receipt`): the visitor `vid` of
/// `room` ordered, and their GETs pass until `expires`. No admission: it orders nothing.
pub fn sign_receipt(
    keys: &[CookieKey],
    room: &str,
    vid: VisitorId,
    expires: u64,
) -> Option<String> {
    sign_in(RECEIPT, keys, room, vid, expires)
}

/// Checks a receipt value as [`verify`] checks an admission.
pub fn verify_receipt(
    keys: &[CookieKey],
    room: &str,
    value: &str,
    now_secs: u64,
) -> Option<Verified> {
    verify_in(RECEIPT, keys, room, value, now_secs)
}

fn sign_in(
    domain: &[u8],
    keys: &[CookieKey],
    room: &str,
    vid: VisitorId,
    expires: u64,
) -> Option<String> {
    let key = keys.first()?;
    let vid = vid.to_string();
    let exp = expires.to_string();
    let tag = key.mac(domain, room, &vid, &exp).finalize().into_bytes();
    Some(format!(
        "{VERSION}.{vid}.{exp}.{}.{}",
        key.id,
        URL_SAFE_NO_PAD.encode(tag)
    ))
}

/// Checks an admission cookie value. Anything malformed, forged, expired, for another room or
/// signed with an unknown key is `None`: the caller treats it as no cookie at all.
pub fn verify(keys: &[CookieKey], room: &str, value: &str, now_secs: u64) -> Option<Verified> {
    verify_in(ADMISSION, keys, room, value, now_secs)
}

fn verify_in(
    domain: &[u8],
    keys: &[CookieKey],
    room: &str,
    value: &str,
    now_secs: u64,
) -> Option<Verified> {
    if value.len() > MAX_VALUE_LEN {
        return None;
    }
    let [ver, vid, exp, kid, tag] = five_parts(value)?;
    if ver != VERSION || tag.len() != MAC_B64_LEN {
        return None;
    }
    let visitor = VisitorId::parse(vid)?;
    if exp.is_empty() || exp.len() > 12 || !exp.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let expires: u64 = exp.parse().ok()?;
    let key = keys.iter().find(|k| k.id == kid)?;
    let mut raw = [0u8; 33];
    let n = URL_SAFE_NO_PAD.decode_slice(tag, &mut raw).ok()?;
    // Constant-time comparison: `verify_slice` does not short-circuit on the first wrong byte.
    key.mac(domain, room, vid, exp)
        .verify_slice(&raw[..n])
        .ok()?;
    if expires <= now_secs {
        return None;
    }
    Some(Verified {
        vid: visitor,
        expires,
    })
}

/// The five dot-separated parts of a cookie value, `None` for any other number: one pass of
/// `memchr` over the value (what `split('.')` answers, by a property test), as this runs on
/// every admitted request.
fn five_parts(value: &str) -> Option<[&str; 5]> {
    let mut dots = memchr::memchr_iter(b'.', value.as_bytes());
    let (a, b, c, d) = (dots.next()?, dots.next()?, dots.next()?, dots.next()?);
    if dots.next().is_some() {
        return None;
    }
    // Each index is that of an ASCII '.', so every slice falls on a character boundary.
    Some([
        value.get(..a)?,
        value.get(a + 1..b)?,
        value.get(b + 1..c)?,
        value.get(c + 1..d)?,
        value.get(d + 1..)?,
    ])
}

/// Finds a cookie by name in the request's `Cookie` header values: the first `;`-separated
/// pair that, without its leading whitespace, is `name=value` (the value without trailing
/// whitespace). A pair that is not UTF-8 is passed over, not the header it is in: a shop's
/// own cookie in Latin-1 does not hide ours. The pairs are found with `memchr` (what a split
/// on `;` gives, by a property test): this runs on every request in a room.
pub fn find<'a>(headers: impl IntoIterator<Item = &'a [u8]>, name: &str) -> Option<&'a str> {
    values(headers, name).next()
}

/// How many values of one cookie name [`find_map`] tries: a request may carry a few (below),
/// and each may cost a MAC; a header full of them costs no more than this many.
pub const VALUES_TRIED: usize = 4;

/// The first of the first [`VALUES_TRIED`] values of cookie `name` that `check` accepts, in
/// the order sent. A browser sends every cookie whose domain and path match the request, so
/// one of the same name set by a sibling site for the parent domain, or for a longer path
/// (sent first), comes beside ours: taking only the first value let such a cookie hide a valid
/// admission and send its holder back to the line (found by review).
pub fn find_map<'a, T>(
    headers: impl IntoIterator<Item = &'a [u8]>,
    name: &str,
    check: impl FnMut(&'a str) -> Option<T>,
) -> Option<T> {
    values(headers, name).take(VALUES_TRIED).find_map(check)
}

/// The values of cookie `name`, in the order sent (see [`find`]).
pub fn values<'a, 'n, H: IntoIterator<Item = &'a [u8]>>(
    headers: H,
    name: &'n str,
) -> impl Iterator<Item = &'a str> + use<'a, 'n, H> {
    headers.into_iter().flat_map(pairs).filter_map(move |pair| {
        let rest = pair.trim_ascii_start();
        if rest.first().is_some_and(|&b| solid(b)) {
            // `str::trim_start` stops there too: the name is compared as bytes, and only a
            // pair of that name is read as text (the pair is UTF-8 exactly when its value
            // is: what comes before it is `str` already).
            let v = rest.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
            return std::str::from_utf8(v).ok().map(str::trim_end);
        }
        let pair = std::str::from_utf8(pair).ok()?;
        let v = pair.trim_start().strip_prefix(name)?.strip_prefix('=')?;
        Some(v.trim_end())
    })
}

/// A byte at which `str::trim` and `trim_ascii` both stop, whatever follows it: ASCII and not
/// whitespace (`\x0b` is whitespace to the first and not to the second).
fn solid(b: u8) -> bool {
    b.is_ascii() && !char::from(b).is_whitespace()
}

/// The `;`-separated pairs of a `Cookie` header value, as sent (whitespace and all).
fn pairs(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(value);
    std::iter::from_fn(move || {
        let r = rest?;
        match memchr::memchr(b';', r) {
            Some(i) => {
                rest = r.get(i + 1..);
                r.get(..i)
            }
            None => rest.take(),
        }
    })
}

/// A pair without the whitespace around it: as `str::trim` for a pair that is UTF-8, ASCII
/// whitespace for one that is not.
fn trimmed(pair: &[u8]) -> &[u8] {
    // The common pair: ASCII whitespace around solid ends gives the same either way, and needs
    // no UTF-8 check (which read every pair of every admitted request whole).
    let inner = pair.trim_ascii();
    match (inner.first(), inner.last()) {
        (None, _) => return inner,
        (Some(&a), Some(&z)) if solid(a) && solid(z) => return inner,
        _ => {}
    }
    match std::str::from_utf8(pair) {
        Ok(p) => p.trim().as_bytes(),
        Err(_) => pair.trim_ascii(),
    }
}

/// Whether a `Cookie` header value holds any cookie of ours (the prefix anywhere in it), by a
/// substring search prepared once.
pub fn has_ours(value: &[u8]) -> bool {
    static FINDER: std::sync::OnceLock<memchr::memmem::Finder<'static>> =
        std::sync::OnceLock::new();
    FINDER
        .get_or_init(|| memchr::memmem::Finder::new(COOKIE_PREFIX))
        .find(value)
        .is_some()
}

/// A `Cookie` header value with our cookies removed: `None` when there were none to remove.
pub fn without_ours(value: &[u8]) -> Option<Vec<u8>> {
    has_ours(value).then(|| all_without_ours([value]))
}

/// Every `Cookie` header value joined into one, our cookies left out, in one pass into one
/// buffer (what the origin gets instead of them; empty when nothing is left). Read as bytes,
/// pair by pair: a shop's cookie that is not UTF-8 is kept byte for byte, and ours are taken
/// out of the same header.
pub fn all_without_ours<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut kept = Vec::new();
    for pair in values.into_iter().flat_map(pairs).map(trimmed) {
        if pair.is_empty() || pair.starts_with(COOKIE_PREFIX.as_bytes()) {
            continue;
        }
        if !kept.is_empty() {
            kept.extend_from_slice(b"; ");
        }
        kept.extend_from_slice(pair);
    }
    kept
}

/// Whether a `Set-Cookie` value sets the cookie `name` (exactly: a room named `v` is not the
/// visitor id's `anteroom_vid`, found by review).
pub fn sets(set_cookie: &str, name: &str) -> bool {
    set_cookie
        .strip_prefix(name)
        .is_some_and(|rest| rest.starts_with('='))
}

/// The cookie name for a room's admission.
pub fn room_cookie_name(room: &str) -> String {
    format!("{COOKIE_PREFIX}{room}")
}

fn attrs(secure: bool) -> &'static str {
    if secure {
        "; Path=/; HttpOnly; SameSite=Lax; Secure"
    } else {
        "; Path=/; HttpOnly; SameSite=Lax"
    }
}

/// `Set-Cookie` for an admission.
pub fn set_admission(room: &str, value: &str, max_age: u64, secure: bool) -> String {
    format!(
        "{COOKIE_PREFIX}{room}={value}; Max-Age={max_age}{}",
        attrs(secure)
    )
}

/// The cookie name of a room's order receipt (`anteroom_r.ROOM`: a room name has no `.`, so
/// it is no room's admission).
pub fn receipt_cookie_name(room: &str) -> String {
    format!("{COOKIE_PREFIX}r.{room}")
}

/// `Set-Cookie` for another cookie of ours (the queue ticket), with the same attributes.
pub fn set_named(name: &str, value: &str, max_age: u64, secure: bool) -> String {
    format!("{name}={value}; Max-Age={max_age}{}", attrs(secure))
}

/// `Set-Cookie` that removes a room's admission (after it was consumed).
pub fn clear_admission(room: &str, secure: bool) -> String {
    format!("{COOKIE_PREFIX}{room}=; Max-Age=0{}", attrs(secure))
}

/// `Set-Cookie` for the visitor id, living `max_age` seconds.
pub fn set_vid(vid: VisitorId, max_age: u64, secure: bool) -> String {
    format!("{VID_COOKIE}={vid}; Max-Age={max_age}{}", attrs(secure))
}

#[cfg(test)]
mod tests;
