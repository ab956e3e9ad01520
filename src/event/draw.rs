//! The draw: a random order for everyone who registered before the opening, that the room
//! commits to before anyone registers and that every visitor can check afterwards.
//!
//! - **Seed.** `seed = HMAC-SHA256(draw secret, "anteroom-draw-seed/1", room, event,
//!   prequeue-from)`. It is derived, never stored: no store failure (a Redis that lost its
//!   data, a failover) can lose or change it, and every instance computes the same one. The
//!   pre-queue's start is part of it, so an event added again under the same name (its start
//!   is then another) gets a new seed, never one already revealed.
//! - **Commitment.** `sha256(seed)`, lowercase hex: published from the start of the pre-queue
//!   (countdown page, `GET /.anteroom/event`); the seed itself from the opening.
//! - **Registration ticket.** `T = SHA-256("anteroom-registration/1", room, event id, visitor
//!   id)[..16]` (the event id is its name and pre-queue start), shown to the registrant as 32 hex digits. The list of tickets is public; the
//!   visitor id is a bearer credential and is never published, and `T` cannot be turned back
//!   into it.
//! - **Place.** Registrations are ordered by `key(T) = the first 40 bits of HMAC-SHA256(seed,
//!   T)`, then by `T`: the place is the rank in that order. (The rank of the whole HMAC, as
//!   the issue puts it, with the key cut to 40 bits so that the store can keep it in a line's
//!   score exactly; two registrations share a key about once in 55 draws of 200,000, and
//!   then `T` orders them in the list, while the line lets the two neighbours in by their
//!   visitor ids, within a batch of each other.) The order is fixed at registration and
//!   revealed at the opening: the opening itself moves nobody, so it costs the store nothing.
//!
//! What a check proves: the order was fixed by a seed chosen before the commitment was
//! published and not changed since, and each listed registration is at the place the seed
//! gives it. What it does not prove: that every listed registration is a real visitor (the
//! operator could add registrations, and knows the seed), or that a registration was not
//! left out (a visitor whose ticket is in the list knows theirs was not).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::clock::Micros;
use crate::store::VisitorId;

type HmacSha256 = Hmac<Sha256>;

/// Bits of a draw key: the part of the HMAC a line's score holds exactly.
pub const KEY_BITS: u32 = 40;
/// Registration tickets are this many bytes.
pub const TICKET_LEN: usize = 16;
/// A registration ticket.
pub type RegTicket = [u8; TICKET_LEN];

/// HMAC-SHA256 under `key`. HMAC takes keys of any length, so the fallback (a key of zeros,
/// built without a fallible call) is never taken; it keeps this free of a panic.
fn mac(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key)
        .unwrap_or_else(|_| <HmacSha256 as hmac::digest::KeyInit>::new(&Default::default()))
}

/// The seed of an event's draw.
pub fn seed(secret: &[u8], room: &str, event: &str, prequeue_from: Micros) -> [u8; 32] {
    let mut m = mac(secret);
    m.update(b"anteroom-draw-seed/1\n");
    m.update(room.as_bytes());
    m.update(b"\n");
    m.update(event.as_bytes());
    m.update(b"\n");
    m.update(prequeue_from.to_string().as_bytes());
    m.finalize().into_bytes().into()
}

/// `sha256(seed)`, lowercase hex: what the room publishes before anyone registers.
pub fn commitment(seed: &[u8]) -> String {
    hex(&Sha256::digest(seed))
}

/// The registration ticket of `vid` for an event (`event`: its id, `NAME@PREQUEUE_FROM`, so
/// that a name used again gives other tickets).
pub fn ticket(room: &str, event: &str, vid: VisitorId) -> RegTicket {
    let mut h = Sha256::new();
    h.update(b"anteroom-registration/1\n");
    h.update(room.as_bytes());
    h.update(b"\n");
    h.update(event.as_bytes());
    h.update(b"\n");
    h.update(vid.to_string().as_bytes());
    let d = h.finalize();
    let mut t = [0u8; TICKET_LEN];
    t.copy_from_slice(&d[..TICKET_LEN]);
    t
}

/// The draw key of a ticket under `seed`: the first [`KEY_BITS`] bits of `HMAC-SHA256(seed,
/// T)`.
pub fn key(seed: &[u8; 32], t: &RegTicket) -> u64 {
    let mut m = mac(seed);
    m.update(t);
    let d = m.finalize().into_bytes();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b) >> (64 - KEY_BITS)
}

/// Sorts tickets into the draw's order: by key, then by ticket.
pub fn order(seed: &[u8; 32], tickets: &mut [RegTicket]) {
    tickets.sort_by_cached_key(|t| (key(seed, t), *t));
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Lowercase or uppercase hex of exactly `N` bytes, nothing around it: a published list's
/// ticket with a space in it is not the ticket (found by review: it verified). What a person
/// types (`--ticket`, `--commitment`) is trimmed where it is read.
pub fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    // Hex digits only: `from_str_radix` would take a `+` for a sign (found by review: two
    // spellings of one ticket verified).
    if s.len() != N * 2 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The ticket's place in the draw, 1 = first.
    pub place: u64,
    pub registrations: u64,
}

/// Why a draw does not check out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the seed is not revealed yet (the draw opens at the opening)")]
    NotRevealed,
    #[error("sha256(seed) is {found}, but the room committed to {committed}: this is not the seed it chose")]
    Commitment { committed: String, found: String },
    #[error("the list is not in the draw's order at place {place}: the order is not the seed's")]
    Order { place: u64 },
    #[error("the list names ticket {0} twice")]
    Duplicate(String),
    #[error("ticket {0} is not in the list of registrations")]
    NotListed(String),
    #[error("{0}")]
    Malformed(String),
}

/// Checks a revealed draw: the seed against the commitment, the whole list against the seed's
/// order, and where `mine` is in it.
pub fn verify(
    commitment_hex: &str,
    seed: &[u8; 32],
    list: &[RegTicket],
    mine: &RegTicket,
) -> Result<Verified, VerifyError> {
    let found = commitment(seed);
    if !found.eq_ignore_ascii_case(commitment_hex.trim()) {
        return Err(VerifyError::Commitment {
            committed: commitment_hex.trim().to_string(),
            found,
        });
    }
    let mut place = None;
    let mut prev: Option<(u64, &RegTicket)> = None;
    for (i, t) in list.iter().enumerate() {
        let k = key(seed, t);
        if let Some((pk, pt)) = prev {
            match (pk, pt).cmp(&(k, t)) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Err(VerifyError::Duplicate(hex(t))),
                std::cmp::Ordering::Greater => {
                    return Err(VerifyError::Order {
                        place: i as u64 + 1,
                    })
                }
            }
        }
        if t == mine {
            place = Some(i as u64 + 1);
        }
        prev = Some((k, t));
    }
    let place = place.ok_or_else(|| VerifyError::NotListed(hex(mine)))?;
    Ok(Verified {
        place,
        registrations: list.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vids(n: usize) -> Vec<VisitorId> {
        (0..n as u128)
            .map(|i| VisitorId::from_bytes((i * 7919 + 13).to_be_bytes()))
            .collect()
    }

    #[test]
    fn the_seed_is_derived_and_the_commitment_is_its_hash() {
        let s = seed(b"secret", "sale", "drop", 1);
        assert_eq!(s, seed(b"secret", "sale", "drop", 1), "derived, not drawn");
        for other in [
            seed(b"secret2", "sale", "drop", 1),
            seed(b"secret", "sale2", "drop", 1),
            seed(b"secret", "sale", "drop2", 1),
            seed(b"secret", "sale", "drop", 2),
        ] {
            assert_ne!(s, other);
        }
        let c = commitment(&s);
        assert_eq!(c.len(), 64);
        assert_eq!(c, hex(&Sha256::digest(s)));
        assert_eq!(unhex::<32>(&hex(&s)), Some(s));
        assert_eq!(
            unhex::<32>(&c.to_uppercase()),
            Some(Sha256::digest(s).into())
        );
        assert_eq!(unhex::<16>("zz"), None);
    }

    #[test]
    fn a_drawn_list_verifies_and_any_change_to_it_does_not() {
        let s = seed(b"k", "sale", "drop", 5);
        let c = commitment(&s);
        let mut list: Vec<RegTicket> = vids(500)
            .into_iter()
            .map(|v| ticket("sale", "drop", v))
            .collect();
        order(&s, &mut list);
        for (i, t) in list.iter().enumerate().step_by(37) {
            assert_eq!(
                verify(&c, &s, &list, t),
                Ok(Verified {
                    place: i as u64 + 1,
                    registrations: 500
                })
            );
        }
        let mine = list[10];
        // Another seed: the commitment does not hold.
        let other = seed(b"k", "sale", "drop", 6);
        assert!(matches!(
            verify(&c, &other, &list, &mine),
            Err(VerifyError::Commitment { .. })
        ));
        // Two places swapped: caught where the order breaks.
        let mut swapped = list.clone();
        swapped.swap(3, 4);
        assert_eq!(
            verify(&c, &s, &swapped, &mine),
            Err(VerifyError::Order { place: 5 })
        );
        // Someone moved to the front.
        let mut moved = list.clone();
        let t = moved.remove(250);
        moved.insert(0, t);
        assert!(matches!(
            verify(&c, &s, &moved, &mine),
            Err(VerifyError::Order { .. })
        ));
        // Not registered.
        let stranger = ticket("sale", "drop", VisitorId::from_bytes([9; 16]));
        assert!(matches!(
            verify(&c, &s, &list, &stranger),
            Err(VerifyError::NotListed(_))
        ));
        let mut twice = list.clone();
        twice.insert(1, twice[0]);
        assert!(matches!(
            verify(&c, &s, &twice, &mine),
            Err(VerifyError::Duplicate(_))
        ));
    }

    #[test]
    fn tickets_are_per_room_and_event_and_keys_fit_their_bits() {
        let v = VisitorId::from_bytes([3; 16]);
        let t = ticket("sale", "drop", v);
        assert_ne!(t, ticket("sale", "drop2", v));
        assert_ne!(t, ticket("sale2", "drop", v));
        let s = seed(b"k", "sale", "drop", 5);
        assert!(key(&s, &t) < 1 << KEY_BITS);
        assert_ne!(key(&s, &t), key(&seed(b"k", "sale", "drop", 6), &t));
    }
}
