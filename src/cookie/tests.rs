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
        Just(b"\x0b".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\xff".to_vec()),
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

/// `trimmed` as it read every pair before its fast path: as text where the pair is UTF-8.
fn trimmed_plainly(pair: &[u8]) -> &[u8] {
    match std::str::from_utf8(pair) {
        Ok(p) => p.trim().as_bytes(),
        Err(_) => pair.trim_ascii(),
    }
}

proptest! {
    #[test]
    fn a_pair_is_trimmed_as_it_was_read_as_text(h in header()) {
        for pair in h.split(|&b| b == b';') {
            prop_assert_eq!(trimmed(pair), trimmed_plainly(pair), "{:?}", pair);
        }
    }

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
fn a_receipt_is_no_admission_and_an_admission_no_receipt() {
    let k = keys();
    let vid = VisitorId::random();
    let receipt = sign_receipt(&k, "sale", vid, 1000).unwrap();
    let admission = sign(&k, "sale", vid, 1000).unwrap();
    assert_eq!(
        verify_receipt(&k, "sale", &receipt, 999),
        Some(Verified { vid, expires: 1000 })
    );
    assert_eq!(verify_receipt(&k, "sale", &receipt, 1000), None, "expired");
    assert_eq!(verify_receipt(&k, "other", &receipt, 1), None, "cross-room");
    assert_eq!(verify(&k, "sale", &receipt, 1), None, "a receipt admits");
    assert_eq!(
        verify_receipt(&k, "sale", &admission, 1),
        None,
        "an admission is a receipt"
    );
    assert_ne!(receipt_cookie_name("sale"), room_cookie_name("sale"));
    assert!(
        !crate::config::valid_room_name("r.sale"),
        "a room's admission could be named so"
    );
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
