//! The plain form of a path's bytes: one spelling for every byte an origin reads the same,
//! escaped or not. Room prefixes are written in it (`check` refuses any other,
//! `config::room_parts::not_plain`), and every reading of a request path is brought to it, so
//! the two meet whatever the request sent.
//!
//! - An escape of a character that is a path's own (RFC 3986's `pchar` less `;`: the
//!   unreserved characters, the sub-delimiters `! $ & ' ( ) * + , =`, `:` and `@`) and of `/`
//!   is decoded: `/%70roducts` is `/products`, `/q%3Ar` is `/q:r` to every origin that
//!   decodes its path (found by review r89a: a room on `/q%3Ar` missed `/q:r`).
//! - Any other escape is kept, its hex digits in upper case (`%d1` and `%D1` are one byte to
//!   every origin): `;` (Tomcat's parameters), `?`, `#`, `%`, `\`, NUL, white space and
//!   every non-ASCII byte.
//! - A byte that is no path's raw (non-ASCII, a control, `" < > [ ] ^ ` { | }`, and a `%`
//!   that starts no escape) is escaped: a raw UTF-8 `/주문` is `/%EC%A3%BC%EB%AC%B8`, as a
//!   browser sends it (found by review r89a: a room on the escaped form missed the raw bytes,
//!   and an order went through twice). `\` stays raw: the IIS reading makes it `/`.

/// Per byte: what the plain form does with it.
const RAW: u8 = 0;
/// Escaped when raw (no path holds it raw).
const ESCAPE: u8 = 1;
/// Decoded when escaped (a path's own character).
const DECODE: u8 = 2;

const fn classes() -> [u8; 256] {
    let mut t = [RAW; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if b >= 0x80 || b < 0x20 || b == 0x7f {
            ESCAPE
        } else if b.is_ascii_alphanumeric() {
            DECODE
        } else {
            match b {
                b'-' | b'.' | b'_' | b'~' | b'/' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')'
                | b'*' | b'+' | b',' | b'=' | b':' | b'@' => DECODE,
                b' ' | b'"' | b'<' | b'>' | b'[' | b']' | b'^' | b'`' | b'{' | b'|' | b'}' => {
                    ESCAPE
                }
                _ => RAW,
            }
        };
        c += 1;
    }
    t
}

static CLASS: [u8; 256] = classes();

/// Whether [`plain_escapes`] may change `path` for a byte other than `%`: it holds a byte
/// that is escaped in the plain form. One table lookup per byte.
pub(crate) fn has_bytes_to_escape(path: &[u8]) -> bool {
    path.iter().any(|&b| CLASS[b as usize] == ESCAPE)
}

/// Bytes a decoding made, as a path: a byte past ASCII is written escaped (`%XX`), valid UTF-8
/// or not. Read as text, bytes that are no UTF-8 of their own (one decoding of a path escaped
/// twice hands on `%EC` and raw `A3 BC`) became U+FFFD, and the reading missed the room an
/// origin that decodes again finds (found by re-review r90a: `/%25%45C%A3%BC%EB%AC%B8`
/// reached the shop outside a room on `/주문`, and one admission ordered twice).
pub(crate) fn bytes_as_path(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    for &c in bytes {
        if c.is_ascii() {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// `path` in the plain form of its bytes (see the module's text); dot segments and slashes are
/// left to the caller.
pub(crate) fn plain_escapes(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = String::with_capacity(b.len() + 8);
    let push_escaped = |out: &mut String, c: u8| {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        out.push('%');
        out.push(HEX[(c >> 4) as usize] as char);
        out.push(HEX[(c & 15) as usize] as char);
    };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'%' {
            match b
                .get(i + 1..i + 3)
                .and_then(|h| super::hex_pair(h[0], h[1]))
            {
                Some(d) if CLASS[d as usize] == DECODE => out.push(d as char),
                Some(d) => push_escaped(&mut out, d),
                // A `%` that starts no escape is the character itself.
                None => {
                    push_escaped(&mut out, b'%');
                    i += 1;
                    continue;
                }
            }
            i += 3;
            continue;
        }
        if CLASS[c as usize] == ESCAPE {
            push_escaped(&mut out, c);
        } else {
            out.push(c as char);
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_byte_has_one_plain_form() {
        for (raw, plain) in [
            ("/%70roducts", "/products"),
            ("/q%3Ar", "/q:r"),
            ("/q:r", "/q:r"),
            ("/a%7Bb%7d", "/a%7Bb%7D"),
            ("/a{b}", "/a%7Bb%7D"),
            ("/주문", "/%EC%A3%BC%EB%AC%B8"),
            ("/%ec%a3%bc%eb%ac%b8", "/%EC%A3%BC%EB%AC%B8"),
            ("/pct%", "/pct%25"),
            ("/pct%25", "/pct%25"),
            ("/%%33", "/%253"),
            ("/a%3Bb", "/a%3Bb"),
            ("/a;b", "/a;b"),
            ("/a%5Cb", "/a%5Cb"),
            ("/a\\b", "/a\\b"),
            ("/a%2fb", "/a/b"),
            ("/a%20b", "/a%20b"),
            ("/a%00", "/a%00"),
            ("/w%2Bx", "/w+x"),
            ("/k[l]", "/k%5Bl%5D"),
            ("/i|j", "/i%7Cj"),
        ] {
            assert_eq!(plain_escapes(raw), plain, "{raw}");
            // The plain form is its own.
            assert_eq!(plain_escapes(plain), plain, "{plain}");
        }
    }

    /// Every byte, raw or escaped in either case, comes out the same; and nothing the plain
    /// form keeps raw is one it would escape (a fixed point).
    #[test]
    fn a_byte_raw_or_escaped_reads_the_same() {
        for c in 0u8..=255 {
            // `;` and `\` raw are not their escapes to Tomcat and IIS (the readings of those
            // origins handle both); `%`, `?` and `#` raw are no path's byte.
            if matches!(c, b'%' | b'?' | b'#' | b';' | b'\\') {
                continue;
            }
            let raw = [b'/', c];
            let Ok(raw) = std::str::from_utf8(&raw) else {
                continue;
            };
            let upper = format!("/%{c:02X}");
            let lower = format!("/%{c:02x}");
            let plain = plain_escapes(&upper);
            assert_eq!(plain_escapes(&lower), plain, "{c:#x}");
            assert_eq!(plain_escapes(raw), plain, "{c:#x}");
            assert_eq!(plain_escapes(&plain), plain, "{c:#x}");
            assert!(!has_bytes_to_escape(plain.as_bytes()), "{c:#x}");
        }
    }
}
