//! The queue ticket: a visitor's place in a room's line, signed like the admission cookie and
//! checked locally, so that a status poll needs no store call.
//!
//! Cookie `anteroom_q.ROOM` (a `.` no room name contains, so no room's admission cookie can be
//! another room's ticket), value version 1 (at most [`MAX_VALUE_LEN`] bytes):
//!
//! ```text
//! 1.<payload: 54 base64url>.<key id: 8 hex>.<mac: 22 base64url>
//! payload = visitor id (16 bytes) · epoch (u64) · place key (u64) · seen (u32) · shown (u32)
//! ```
//!
//! `seen` is when this visitor's liveness was last sent to the store (unix seconds), `shown` the
//! last position they were shown. The MAC (HMAC-SHA256, 128 bits kept) covers a domain string
//! that no admission cookie has, the room, the payload and the key id. The place is the store's
//! order for the line: a ticket only tells an instance where to look in its sample of the line;
//! the store stays the only judge of who is admitted. A ticket that does not verify — tampered,
//! of another room, another visitor or an unknown key — is no ticket: the visitor joins (polls)
//! through the store as before, and their place there is untouched.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::cookie::{CookieKey, COOKIE_PREFIX};
use crate::store::line::Place;
use crate::store::VisitorId;

const VERSION: &str = "1";
const DOMAIN: &[u8] = b"anteroom-ticket/1|";
const PAYLOAD_LEN: usize = 16 + 8 + 8 + 4 + 4;
const PAYLOAD_B64_LEN: usize = 54;
const TAG_LEN: usize = 16;
const TAG_B64_LEN: usize = 22;
/// Longer values are refused before any decoding.
pub const MAX_VALUE_LEN: usize = 96;

/// What a ticket says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub vid: VisitorId,
    pub place: Place,
    /// When the store last heard of this visitor through a ticket (unix seconds).
    pub seen: u64,
    /// The position last shown (1 = next).
    pub shown: u64,
}

/// The ticket cookie's name for a room.
pub fn cookie_name(room: &str) -> String {
    format!("{COOKIE_PREFIX}q.{room}")
}

fn payload(t: &Ticket) -> [u8; PAYLOAD_LEN] {
    let mut p = [0u8; PAYLOAD_LEN];
    p[..16].copy_from_slice(t.vid.as_bytes());
    p[16..24].copy_from_slice(&t.place.epoch.to_be_bytes());
    p[24..32].copy_from_slice(&t.place.key.to_be_bytes());
    p[32..36].copy_from_slice(&u32::try_from(t.seen).unwrap_or(u32::MAX).to_be_bytes());
    p[36..40].copy_from_slice(&u32::try_from(t.shown).unwrap_or(u32::MAX).to_be_bytes());
    p
}

fn tag(key: &CookieKey, room: &str, payload: &[u8]) -> [u8; TAG_LEN] {
    let full = key.tag(DOMAIN, room, payload);
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(&full[..TAG_LEN]);
    t
}

/// Signs a ticket for `room` with the first key.
pub fn sign(keys: &[CookieKey], room: &str, t: &Ticket) -> Option<String> {
    let key = keys.first()?;
    let p = payload(t);
    Some(format!(
        "{VERSION}.{}.{}.{}",
        URL_SAFE_NO_PAD.encode(p),
        key.id(),
        URL_SAFE_NO_PAD.encode(tag(key, room, &p))
    ))
}

/// Reads a ticket of `room`; anything that does not verify is `None`.
pub fn verify(keys: &[CookieKey], room: &str, value: &str) -> Option<Ticket> {
    if value.len() > MAX_VALUE_LEN {
        return None;
    }
    let mut parts = value.split('.');
    let (ver, body, kid, mac) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || ver != VERSION
        || body.len() != PAYLOAD_B64_LEN
        || mac.len() != TAG_B64_LEN
    {
        return None;
    }
    let key = keys.iter().find(|k| k.id() == kid)?;
    let mut p = [0u8; PAYLOAD_LEN + 2];
    if URL_SAFE_NO_PAD.decode_slice(body, &mut p).ok()? != PAYLOAD_LEN {
        return None;
    }
    let p = &p[..PAYLOAD_LEN];
    let mut m = [0u8; TAG_LEN + 2];
    if URL_SAFE_NO_PAD.decode_slice(mac, &mut m).ok()? != TAG_LEN {
        return None;
    }
    let want = tag(key, room, p);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(&want[..], &m[..TAG_LEN])) {
        return None;
    }
    let u64_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&p[i..i + 8]);
        u64::from_be_bytes(b)
    };
    let u32_at = |i: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&p[i..i + 4]);
        u64::from(u32::from_be_bytes(b))
    };
    let mut vid = [0u8; 16];
    vid.copy_from_slice(&p[..16]);
    Some(Ticket {
        vid: VisitorId::from_bytes(vid),
        place: Place {
            epoch: u64_at(16),
            key: u64_at(24),
        },
        seen: u32_at(32),
        shown: u32_at(36),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys() -> Vec<CookieKey> {
        vec![
            CookieKey::new(b"k1-0123456789abcdef0123456789abcdef").expect("key"),
            CookieKey::new(b"k2-0123456789abcdef0123456789abcdef").expect("key"),
        ]
    }

    fn ticket() -> Ticket {
        Ticket {
            vid: VisitorId::random(),
            place: Place {
                epoch: 1_764_000_000_000_000,
                key: 123_456_789,
            },
            seen: 1_764_000_000,
            shown: 4321,
        }
    }

    #[test]
    fn a_ticket_reads_back_in_its_room_only() {
        let (k, t) = (keys(), ticket());
        let v = sign(&k, "sale", &t).expect("signed");
        assert!(v.len() <= MAX_VALUE_LEN, "{} bytes", v.len());
        assert_eq!(verify(&k, "sale", &v), Some(t));
        assert_eq!(verify(&k, "other", &v), None, "another room's ticket");
        assert_eq!(verify(&k[1..], "sale", &v), None, "an unknown key");
        // Rotation: signed with the second key, verified by a list that has it.
        assert_eq!(
            verify(&k, "sale", &sign(&k[1..], "sale", &t).expect("signed")),
            Some(t)
        );
    }

    #[test]
    fn an_admission_cookie_is_no_ticket() {
        let k = keys();
        let admission =
            crate::cookie::sign(&k, "sale", VisitorId::random(), 9_999_999_999).expect("signed");
        assert_eq!(verify(&k, "sale", &admission), None);
        assert_ne!(cookie_name("sale"), crate::cookie::room_cookie_name("sale"));
        // `anteroom_q.sale` could only be the admission cookie of a room "q.sale", which no
        // room can be called.
        assert!(!crate::config::valid_room_name("q.sale"));
    }

    proptest! {
        /// Any change of any byte of the value is no ticket (or, when it decodes to the same
        /// bytes, the same ticket): nobody moves their place by editing it.
        #[test]
        fn tampering_is_no_ticket(i in 0usize..96, b in any::<u8>()) {
            let (k, t) = (keys(), ticket());
            let v = sign(&k, "sale", &t).expect("signed");
            let mut bytes = v.clone().into_bytes();
            let i = i % bytes.len();
            prop_assume!(bytes[i] != b);
            bytes[i] = b;
            let edited = String::from_utf8_lossy(&bytes).to_string();
            let read = verify(&k, "sale", &edited);
            prop_assert!(read.is_none() || read == Some(t), "{edited} read as {read:?}");
        }
    }
}
