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

    fn mac(&self, room: &str, vid: &str, exp: &str) -> HmacSha256 {
        let mut m = self.mac.clone();
        m.update(b"anteroom/1|");
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

/// Signs an admission for `vid` in `room`, valid until `expires` (unix seconds), with the
/// first key.
pub fn sign(keys: &[CookieKey], room: &str, vid: VisitorId, expires: u64) -> Option<String> {
    let key = keys.first()?;
    let vid = vid.to_string();
    let exp = expires.to_string();
    let tag = key.mac(room, &vid, &exp).finalize().into_bytes();
    Some(format!(
        "{VERSION}.{vid}.{exp}.{}.{}",
        key.id,
        URL_SAFE_NO_PAD.encode(tag)
    ))
}

/// Checks an admission cookie value. Anything malformed, forged, expired, for another room or
/// signed with an unknown key is `None`: the caller treats it as no cookie at all.
pub fn verify(keys: &[CookieKey], room: &str, value: &str, now_secs: u64) -> Option<Verified> {
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
    key.mac(room, vid, exp).verify_slice(&raw[..n]).ok()?;
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
    headers
        .into_iter()
        .flat_map(pairs)
        .filter_map(|pair| std::str::from_utf8(pair).ok())
        .filter_map(move |pair| {
            let v = pair.trim_start().strip_prefix(name)?.strip_prefix('=')?;
            Some(v.trim_end())
        })
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `find` as a split on `;` reads it: the first UTF-8 pair that is `name=value` once its
    /// leading whitespace is gone.
    fn find_by_split<'a>(headers: &[&'a [u8]], name: &str) -> Option<&'a str> {
        for h in headers {
            for pair in h.split(|&b| b == b';') {
                let Ok(pair) = std::str::from_utf8(pair) else {
                    continue;
                };
                if let Some(v) = pair.trim_start().strip_prefix(name) {
                    if let Some(v) = v.strip_prefix('=') {
                        return Some(v.trim_end());
                    }
                }
            }
        }
        None
    }

    /// How the header was stripped when it was read as text (a header that was not UTF-8
    /// was kept whole): for UTF-8 headers the bytes version must agree.
    fn stripped_as_text(values: &[&[u8]]) -> String {
        let mut kept: Vec<&str> = Vec::new();
        for v in values {
            for pair in std::str::from_utf8(v).unwrap_or("").split(';') {
                let pair = pair.trim();
                if !pair.is_empty() && !pair.starts_with(COOKIE_PREFIX) {
                    kept.push(pair);
                }
            }
        }
        kept.join("; ")
    }

    /// Headers made of the bytes that matter to finding a cookie (separators, whitespace
    /// including a non-ASCII one, `=`, the letters of the names), and a byte that is not UTF-8.
    fn header() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b";".to_vec()),
            Just(b"; ".to_vec()),
            Just(b"=".to_vec()),
            Just(b" ".to_vec()),
            Just(b"\t".to_vec()),
            Just("\u{a0}".as_bytes().to_vec()),
            Just("é".as_bytes().to_vec()),
            Just(b"a".to_vec()),
            Just(b"b".to_vec()),
            Just(b"ab".to_vec()),
            Just(b"anteroom_".to_vec()),
            Just(b"anteroom_vid".to_vec()),
            Just(b"x.y".to_vec()),
        ];
        prop::collection::vec(piece, 0..14).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn finding_a_cookie_answers_what_splitting_every_pair_answers(
            hs in prop::collection::vec(header(), 0..3),
            bad in any::<bool>(),
            name in prop_oneof![Just(""), Just("a"), Just("ab"), Just("anteroom_vid"), Just("anteroom_a")],
        ) {
            let mut hs = hs;
            if bad {
                hs.insert(0, b"anteroom_vid=1\xff".to_vec());
            }
            let refs: Vec<&[u8]> = hs.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(find(refs.iter().copied(), name), find_by_split(&refs, name));
        }

        #[test]
        fn find_map_answers_the_first_value_the_check_takes_of_the_first_few(
            hs in prop::collection::vec(header(), 0..3),
            name in prop_oneof![Just("a"), Just("anteroom_vid"), Just("anteroom_a")],
            wanted in prop_oneof![Just(""), Just("1"), Just("x.y")],
        ) {
            let refs: Vec<&[u8]> = hs.iter().map(Vec::as_slice).collect();
            let all: Vec<&str> = values(refs.iter().copied(), name).collect();
            prop_assert_eq!(all.first().copied(), find(refs.iter().copied(), name));
            let taken = find_map(refs.iter().copied(), name, |v| (v == wanted).then_some(v));
            let expected = all.iter().take(VALUES_TRIED).find(|v| **v == wanted).copied();
            prop_assert_eq!(taken, expected);
        }

        #[test]
        fn stripping_leaves_none_of_ours_and_all_of_the_rest(
            hs in prop::collection::vec(header(), 0..3),
            latin1 in any::<bool>(),
        ) {
            let mut hs = hs;
            if latin1 {
                hs.insert(0, b"theme=\xe9t\xe9; anteroom_sale=1.x".to_vec());
            }
            let refs: Vec<&[u8]> = hs.iter().map(Vec::as_slice).collect();
            let kept = all_without_ours(refs.iter().copied());
            let out: Vec<&[u8]> = kept.split(|&b| b == b';').map(trimmed).collect();
            prop_assert!(!out.iter().any(|p| p.starts_with(COOKIE_PREFIX.as_bytes())), "{kept:?}");
            let theirs: Vec<&[u8]> = refs
                .iter()
                .flat_map(|h| h.split(|&b| b == b';'))
                .map(trimmed)
                .filter(|p| !p.is_empty() && !p.starts_with(COOKIE_PREFIX.as_bytes()))
                .collect();
            // Their pairs, in order, byte for byte (a pair of theirs with a `;`-free
            // value reads back the same).
            prop_assert_eq!(kept.clone(), theirs.join(&b"; "[..]));
            if refs.iter().all(|h| std::str::from_utf8(h).is_ok()) {
                prop_assert_eq!(kept, stripped_as_text(&refs).into_bytes());
            }
        }

        #[test]
        fn a_value_has_five_parts_exactly_when_split_gives_five(v in "[1a.é]{0,12}") {
            let split: Vec<&str> = v.split('.').collect();
            let parts = five_parts(&v).map(|p| p.to_vec());
            prop_assert_eq!(parts, (split.len() == 5).then_some(split));
        }
    }

    fn keys() -> Vec<CookieKey> {
        vec![CookieKey::new(b"0123456789abcdef0123456789abcdef").unwrap()]
    }

    #[test]
    fn a_signed_cookie_verifies_until_it_expires() {
        let k = keys();
        let vid = VisitorId::random();
        let v = sign(&k, "sale", vid, 1000).unwrap();
        assert!(v.len() <= MAX_VALUE_LEN);
        assert_eq!(
            verify(&k, "sale", &v, 999),
            Some(Verified { vid, expires: 1000 })
        );
        assert_eq!(verify(&k, "sale", &v, 1000), None);
    }

    #[test]
    fn every_byte_matters() {
        let k = keys();
        let v = sign(&k, "sale", VisitorId::random(), 5000).unwrap();
        for i in 0..v.len() {
            let mut b = v.clone().into_bytes();
            b[i] = if b[i] == b'A' { b'B' } else { b'A' };
            let t = String::from_utf8(b).unwrap();
            assert_eq!(verify(&k, "sale", &t, 1), None, "tampered at {i}: {t}");
        }
        assert_eq!(verify(&k, "other", &v, 1), None, "cross-room");
        assert_eq!(verify(&k, "sale", &v[..v.len() - 1], 1), None, "truncated");
        assert_eq!(verify(&k, "sale", &format!("{v}.x"), 1), None, "extended");
    }

    #[test]
    fn rotation_verifies_with_old_keys_and_signs_with_the_first() {
        let old = CookieKey::new(b"old-key-old-key-old-key-old-key-!").unwrap();
        let new = CookieKey::new(b"new-key-new-key-new-key-new-key-!").unwrap();
        let vid = VisitorId::random();
        let by_old = sign(std::slice::from_ref(&old), "sale", vid, 100).unwrap();
        let both = vec![new.clone(), old.clone()];
        assert!(verify(&both, "sale", &by_old, 1).is_some());
        assert!(sign(&both, "sale", vid, 100).unwrap().contains(new.id()));
        assert_eq!(verify(&[new], "sale", &by_old, 1), None);
    }

    #[test]
    fn our_cookies_are_seen_anywhere_in_a_header() {
        assert!(has_ours(b"anteroom_vid=1"));
        assert!(has_ours(b"a=1; x_anteroom_=2"));
        assert!(!has_ours(b"a=1; anteroo=2"));
        assert!(!has_ours(b""));
    }

    #[test]
    fn cookies_are_found_and_stripped() {
        let h: &[u8] = b"a=1; anteroom_vid=abc; anteroom_sale=x.y; b=2";
        assert_eq!(find([h], "anteroom_vid"), Some("abc"));
        assert_eq!(find([h], "anteroom_sale"), Some("x.y"));
        assert_eq!(find([h], "anteroom_s"), None);
        // A value the check refuses does not hide a later one of the same name; a fifth is
        // not tried.
        let tossed: &[u8] = b"anteroom_sale=bad; theme=x; anteroom_sale=good";
        assert_eq!(
            find_map([tossed], "anteroom_sale", |v| (v == "good").then_some(v)),
            Some("good")
        );
        let many: &[u8] = b"c=1; c=2; c=3; c=4; c=5";
        assert_eq!(
            find_map([many], "c", |v| (v == "4").then_some(v)),
            Some("4")
        );
        assert_eq!(find_map([many], "c", |v| (v == "5").then_some(v)), None);
        assert_eq!(without_ours(h).as_deref(), Some(&b"a=1; b=2"[..]));
        assert_eq!(without_ours(b"a=1"), None);
        assert_eq!(without_ours(b"anteroom_vid=1").as_deref(), Some(&b""[..]));
        // A shop's cookie that is not UTF-8 hides neither ours nor itself.
        let latin1: &[u8] = b"theme=\xe9t\xe9; anteroom_sale=x.y";
        assert_eq!(find([latin1], "anteroom_sale"), Some("x.y"));
        assert_eq!(
            without_ours(latin1).as_deref(),
            Some(&b"theme=\xe9t\xe9"[..])
        );
        // Several headers, one buffer: the same as each header stripped and joined.
        let headers: [&[u8]; 4] = [
            b"a=1; anteroom_sale=x",
            b"anteroom_vid=2",
            b" b=2 ;anteroom_q.sale=t; c=3",
            b"",
        ];
        assert_eq!(all_without_ours(headers), b"a=1; b=2; c=3");
        let one_by_one: Vec<Vec<u8>> = headers
            .iter()
            .filter_map(|h| without_ours(h).or_else(|| Some(h.to_vec())))
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(one_by_one.join(&b"; "[..]), b"a=1; b=2; c=3");
        assert!(all_without_ours([b"anteroom_vid=1".as_slice()]).is_empty());
    }

    #[test]
    fn a_set_cookie_is_matched_by_its_whole_name() {
        assert!(sets("anteroom_v=abc; Path=/", "anteroom_v"));
        assert!(!sets("anteroom_vid=abc; Path=/", "anteroom_v"));
        assert!(!sets("anteroom_q.v=abc", "anteroom_q"));
        assert!(sets("anteroom_v=; Max-Age=0", "anteroom_v"));
    }
}
