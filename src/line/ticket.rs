//! The queue ticket: a visitor's place in a room's line, signed like the admission cookie and
//! checked locally, so that a status poll needs no store call.
//!
//! Cookie `anteroom_q.ROOM` (a `.` no room name contains, so no room's admission cookie can be
//! another room's ticket), value version 3 (at most [`MAX_VALUE_LEN`] bytes):
//!
//! ```text
//! 3.<payload: 71 base64url>.<key id: 8 hex>.<mac: 22 base64url>
//! payload = visitor id (16 bytes) · epoch (u64) · place key (u64) · seen (u32) · shown (u32)
//!           · predicted at (u64) · predicted wait (u32) · flags (u8)
//! ```
//!
//! Flag 1, `drawn`: the place is a draw's (an event's pre-queue, `src/event/draw.rs`), and the
//! place key in the payload is sealed: XORed with 8 bytes of an HMAC under the signing key over
//! the room, the visitor and the epoch. A registrant cannot read their draw before the opening
//! (and keep only lucky identities); an instance unseals it at once. Version 2 (the same
//! without the flags, 70 characters) still verifies, as a ticket that is not drawn.
//!
//! `seen` is when this visitor's liveness was last sent to the store (unix seconds), `shown` the
//! last position they were shown. `predicted at` (unix milliseconds) and `predicted wait`
//! (milliseconds; `u32::MAX` for none) are the first ETA this visitor was told for this place:
//! the instance that admits them compares it with the wait they had (`anteroom_eta_error`).
//! Version 1 (the same without the prediction, 54 base64url characters of payload) still
//! verifies, as a ticket with no prediction: a ticket an older instance gave over a rolling
//! upgrade keeps its place. The MAC (HMAC-SHA256, 128 bits kept) covers a domain string
//! that no admission cookie has (one per version), the room, the payload and the key id. The place is the store's
//! order for the line: a ticket only tells an instance where to look in its sample of the line;
//! the store stays the only judge of who is admitted. A ticket that does not verify — tampered,
//! of another room, another visitor or an unknown key — is no ticket: the visitor joins (polls)
//! through the store as before, and their place there is untouched.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::cookie::{CookieKey, COOKIE_PREFIX};
use crate::store::line::Place;
use crate::store::VisitorId;

/// (version, domain, payload bytes, payload base64url characters); the first is signed.
const VERSIONS: [(&str, &[u8], usize, usize); 3] = [
    ("3", b"anteroom-ticket/3|", V2_LEN + 1, 71),
    ("2", b"anteroom-ticket/2|", V2_LEN, 70),
    ("1", b"anteroom-ticket/1|", V1_LEN, 54),
];
const V1_LEN: usize = 16 + 8 + 8 + 4 + 4;
const V2_LEN: usize = V1_LEN + 8 + 4;
const MAX_PAYLOAD_LEN: usize = V2_LEN + 1;
/// The flag of a sealed (drawn) place.
const DRAWN: u8 = 1;
const TAG_LEN: usize = 16;
const TAG_B64_LEN: usize = 22;
/// No prediction (`predicted wait`).
const NO_PREDICTION: u32 = u32::MAX;
/// `shown` of a ticket whose visitor was shown no place yet (a draw's, before the opening).
pub const NOT_SHOWN: u64 = u32::MAX as u64;
/// Longer values are refused before any decoding.
pub const MAX_VALUE_LEN: usize = 112;

/// What a ticket says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub vid: VisitorId,
    pub place: Place,
    /// When the store last heard of this visitor through a ticket (unix seconds).
    pub seen: u64,
    /// The position last shown (1 = next).
    pub shown: u64,
    /// The first ETA this visitor was told for this place, if they were told one.
    pub predicted: Option<Predicted>,
    /// The place is a draw's: sealed in the cookie, never shown before the opening.
    pub drawn: bool,
}

/// An ETA as told: when, and the wait it predicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Predicted {
    /// Unix milliseconds.
    pub at_ms: u64,
    /// Milliseconds (below `u32::MAX`: about 49 days).
    pub wait_ms: u32,
}

impl Predicted {
    /// The prediction of `wait_secs` told at `at_ms`; `None` for a wait not worth measuring
    /// against (none, negative, or 49 days and more).
    pub fn new(at_ms: u64, wait_secs: f64) -> Option<Self> {
        let ms = (wait_secs * 1000.0).round();
        (ms.is_finite() && ms >= 0.0 && ms < f64::from(NO_PREDICTION)).then_some(Self {
            at_ms,
            wait_ms: ms as u32,
        })
    }

    /// The wait had, if admitted at `now_ms`, ÷ the wait predicted; `None` when the prediction
    /// was under a second (noise at the poll floor) or the clock says the admission came
    /// before it.
    pub fn ratio(&self, now_ms: u64) -> Option<f64> {
        let actual = now_ms.checked_sub(self.at_ms)?;
        (self.wait_ms >= 1000).then(|| actual as f64 / f64::from(self.wait_ms))
    }
}

/// The ticket cookie's name for a room.
pub fn cookie_name(room: &str) -> String {
    format!("{COOKIE_PREFIX}q.{room}")
}

/// The pad a drawn place key is sealed with: 8 bytes of an HMAC under `key` over the room, the
/// visitor and the epoch (a place is one key per visitor and epoch, so a pad seals one value).
fn seal(key: &CookieKey, room: &str, vid: VisitorId, epoch: u64) -> u64 {
    let mut input = [0u8; 24];
    input[..16].copy_from_slice(vid.as_bytes());
    input[16..].copy_from_slice(&epoch.to_be_bytes());
    let t = key.tag(b"anteroom-seal/1|", room, &input);
    let mut b = [0u8; 8];
    b.copy_from_slice(&t[..8]);
    u64::from_be_bytes(b)
}

fn payload(t: &Ticket, pad: u64) -> [u8; MAX_PAYLOAD_LEN] {
    let mut p = [0u8; MAX_PAYLOAD_LEN];
    p[..16].copy_from_slice(t.vid.as_bytes());
    p[16..24].copy_from_slice(&t.place.epoch.to_be_bytes());
    p[24..32].copy_from_slice(&(t.place.key ^ pad).to_be_bytes());
    p[32..36].copy_from_slice(&u32::try_from(t.seen).unwrap_or(u32::MAX).to_be_bytes());
    p[36..40].copy_from_slice(&u32::try_from(t.shown).unwrap_or(u32::MAX).to_be_bytes());
    let (at, wait) = t
        .predicted
        .map_or((0, NO_PREDICTION), |p| (p.at_ms, p.wait_ms));
    p[40..48].copy_from_slice(&at.to_be_bytes());
    p[48..52].copy_from_slice(&wait.to_be_bytes());
    p[52] = if t.drawn { DRAWN } else { 0 };
    p
}

fn tag(key: &CookieKey, domain: &[u8], room: &str, payload: &[u8]) -> [u8; TAG_LEN] {
    let full = key.tag(domain, room, payload);
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(&full[..TAG_LEN]);
    t
}

/// Signs a ticket for `room` with the first key.
pub fn sign(keys: &[CookieKey], room: &str, t: &Ticket) -> Option<String> {
    let key = keys.first()?;
    let (version, domain, _, _) = VERSIONS[0];
    let pad = if t.drawn {
        seal(key, room, t.vid, t.place.epoch)
    } else {
        0
    };
    let p = payload(t, pad);
    Some(format!(
        "{version}.{}.{}.{}",
        URL_SAFE_NO_PAD.encode(p),
        key.id(),
        URL_SAFE_NO_PAD.encode(tag(key, domain, room, &p))
    ))
}

/// Reads a ticket of `room`; anything that does not verify is `None`.
pub fn verify(keys: &[CookieKey], room: &str, value: &str) -> Option<Ticket> {
    if value.len() > MAX_VALUE_LEN {
        return None;
    }
    let mut parts = value.split('.');
    let (ver, body, kid, mac) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let &(_, domain, len, b64_len) = VERSIONS.iter().find(|v| v.0 == ver)?;
    if parts.next().is_some() || body.len() != b64_len || mac.len() != TAG_B64_LEN {
        return None;
    }
    let key = keys.iter().find(|k| k.id() == kid)?;
    let mut p = [0u8; MAX_PAYLOAD_LEN + 2];
    if URL_SAFE_NO_PAD.decode_slice(body, &mut p).ok()? != len {
        return None;
    }
    let p = &p[..len];
    let mut m = [0u8; TAG_LEN + 2];
    if URL_SAFE_NO_PAD.decode_slice(mac, &mut m).ok()? != TAG_LEN {
        return None;
    }
    let want = tag(key, domain, room, p);
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
    let vid = VisitorId::from_bytes(vid);
    let drawn = len > V2_LEN && p[V2_LEN] & DRAWN != 0;
    let epoch = u64_at(16);
    let pad = if drawn {
        seal(key, room, vid, epoch)
    } else {
        0
    };
    Some(Ticket {
        vid,
        place: Place {
            epoch,
            key: u64_at(24) ^ pad,
        },
        seen: u32_at(32),
        shown: u32_at(36),
        predicted: (len > V1_LEN)
            .then(|| Predicted {
                at_ms: u64_at(40),
                wait_ms: u32_at(48) as u32,
            })
            .filter(|p| p.wait_ms != NO_PREDICTION),
        drawn,
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
            predicted: Predicted::new(1_764_000_000_123, 95.5),
            drawn: false,
        }
    }

    /// A version 1 ticket, signed as an older instance signed it.
    fn sign_v1(key: &CookieKey, room: &str, t: &Ticket) -> String {
        let p = &payload(t, 0)[..V1_LEN];
        format!(
            "1.{}.{}.{}",
            URL_SAFE_NO_PAD.encode(p),
            key.id(),
            URL_SAFE_NO_PAD.encode(tag(key, b"anteroom-ticket/1|", room, p))
        )
    }

    #[test]
    fn a_ticket_of_an_older_instance_keeps_its_place_without_a_prediction() {
        let (k, t) = (keys(), ticket());
        let v1 = sign_v1(&k[0], "sale", &t);
        assert_eq!(v1.len(), 2 + 54 + 1 + 8 + 1 + 22);
        let read = verify(&k, "sale", &v1).expect("a version 1 ticket verifies");
        assert_eq!(
            read,
            Ticket {
                predicted: None,
                ..t
            }
        );
        // The version is bound by the MAC's domain: relabelled, it is no ticket.
        assert_eq!(verify(&k, "sale", &format!("2{}", &v1[1..])), None);
        let v3 = sign(&k, "sale", &t).expect("signed");
        assert_eq!(verify(&k, "sale", &format!("1{}", &v3[1..])), None);
        assert_eq!(verify(&k, "sale", &format!("2{}", &v3[1..])), None);
        // A version 2 ticket (before draws) reads as one that is not drawn.
        let p = &payload(&t, 0)[..V2_LEN];
        let v2 = format!(
            "2.{}.{}.{}",
            URL_SAFE_NO_PAD.encode(p),
            k[0].id(),
            URL_SAFE_NO_PAD.encode(tag(&k[0], b"anteroom-ticket/2|", "sale", p))
        );
        assert_eq!(verify(&k, "sale", &v2), Some(t));
    }

    #[test]
    fn a_drawn_place_is_sealed_in_the_cookie_and_read_back_whole() {
        let k = keys();
        let t = Ticket {
            drawn: true,
            ..ticket()
        };
        let v = sign(&k, "sale", &t).expect("signed");
        assert!(v.len() <= MAX_VALUE_LEN, "{} bytes", v.len());
        assert_eq!(verify(&k, "sale", &v), Some(t));
        // The payload does not show the key: it is not where an unsealed one would be.
        let body = |v: &str| {
            URL_SAFE_NO_PAD
                .decode(v.split('.').nth(1).unwrap())
                .unwrap()
        };
        let sealed = body(&v);
        assert_ne!(&sealed[24..32], &t.place.key.to_be_bytes());
        let open = body(&sign(&k, "sale", &ticket()).expect("signed"));
        assert_eq!(&open[24..32], &ticket().place.key.to_be_bytes());
        // Another visitor's seal is another pad.
        let other = Ticket {
            vid: VisitorId::random(),
            ..t
        };
        let theirs = body(&sign(&k, "sale", &other).expect("signed"));
        assert_ne!(&theirs[24..32], &sealed[24..32]);
    }

    #[test]
    fn a_prediction_is_measured_against_the_wait_had() {
        let p = Predicted::new(10_000, 20.0).expect("a prediction");
        assert_eq!(p.wait_ms, 20_000);
        assert_eq!(p.ratio(40_000), Some(1.5));
        assert_eq!(p.ratio(10_000), Some(0.0));
        assert_eq!(
            p.ratio(9_999),
            None,
            "admitted before it was told: a clock step"
        );
        let short = Predicted::new(10_000, 0.4).expect("a prediction");
        assert_eq!(short.ratio(11_000), None, "under a second is not measured");
        assert_eq!(Predicted::new(0, f64::INFINITY), None);
        assert_eq!(Predicted::new(0, -1.0), None);
        assert_eq!(Predicted::new(0, 5e6), None, "49 days and more");
        // No prediction survives signing as none.
        let (k, t) = (
            keys(),
            Ticket {
                predicted: None,
                ..ticket()
            },
        );
        let v = sign(&k, "sale", &t).expect("signed");
        assert_eq!(verify(&k, "sale", &v), Some(t));
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
        fn tampering_is_no_ticket(i in 0usize..112, b in any::<u8>()) {
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
