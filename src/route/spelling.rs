//! The ways an origin may spell a path differently from the standard reading
//! ([`super::path::normalize_path`]): each a [`Transform`] of the raw path, which
//! [`super::path::Readings`] applies where it could change anything.

use super::path::{bytes_as_path, encoded_at, hex_pair, plain_escapes};

/// One way an origin may read a path, as a bit of [`super::path::Readings`]' transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Transform {
    /// A NUL (raw or `%00`) ends the path (C-based servers and filters).
    Nul = 1,
    /// `;…` is stripped from every segment, so `..;` is `..` (Tomcat, Spring, Jetty).
    Params = 2,
    /// `\` and `%5C` are `/`, `%uXXXX` is the character it names (IIS: http.sys decodes it,
    /// `PercentUAllowed` being on by default), trailing dots and spaces of a segment are
    /// ignored (IIS, and frameworks that run on Windows or copy its rules), a segment that is an
    /// ASP.NET cookieless value (`(S(…))`, [`is_cookieless`]) is not there, and an NTFS stream
    /// or attribute after a segment's name is the file or directory it names
    /// ([`strip_stream`]).
    Windows = 4,
    /// A path that starts with `//` is read as a network-path reference: its first segment is
    /// a host, the path begins after it (Python's `urlsplit` on the request line, as Werkzeug
    /// before 2.2 and other WSGI servers did: `//x/orders` is `/orders`). Not applied when no
    /// path follows the host (`//orders`, the home page to such a server).
    Authority = 8,
    /// Dot segments are not resolved: Werkzeug, Express and Symfony route the path as sent
    /// (decoded, `%2F` included), so `/products/..` and `/products/1%2F..%2F..%2Fx` are under
    /// `/products` to a catch-all or `/products/{id}` route there. A reading of its own, not
    /// combined with the transforms above, and additive ([`super::path::Reading::additive`]).
    Dots = 16,
    /// A front controller's path info: `/index.php/products` is `/products` to Symfony and
    /// Laravel behind nginx's documented `try_files`, and to Apache's `PATH_INFO`;
    /// `/app.fcgi/orders` is `/orders` to Flask behind FastCGI. The path after a segment that
    /// names a script ([`path_infos`]), with or without `Dots`; additive.
    Script = 32,
    /// Java's `String.trim` of every segment: Spring's `AntPathMatcher` with `trimTokens` (its
    /// default before 4.3, CVE-2016-5007) reads `/orders%09` and `/%20orders` as `/orders`.
    /// Characters up to U+0020 at either end of a segment, raw or encoded, after `;params`
    /// are stripped as Spring strips them; additive.
    Trim = 64,
    /// The path decoded twice: a hop that decodes the path before it hands it on (nginx's
    /// `proxy_pass` with `$uri`, a rewrite that decodes its capture) in front of an app that
    /// decodes it again, or an app that decodes a decoded path (CWE-174): `/%2570roducts` is
    /// `/products` there. Every `%25XX` read as `%XX`, the path with every escape decoded
    /// ([`hop_decoded`]), and that as nginx's `$uri` hands it on ([`hop_resolved`]: dot
    /// segments resolved, which also reads an IIS or a Tomcat behind nginx, whose own decoding
    /// comes after), then every reading of each (once: a third decoding is not read); additive (found by review: double-encoded
    /// spellings reached the origin outside the room, and past a bypass path with
    /// `%252e%252e`).
    Twice = 128,
}

const ALL: [Transform; 8] = [
    Transform::Nul,
    Transform::Params,
    Transform::Windows,
    Transform::Authority,
    Transform::Dots,
    Transform::Script,
    Transform::Trim,
    Transform::Twice,
];

/// The transforms that are combined with each other (every subset that applies).
pub(super) const COMBINED: u8 = 15;

/// Which transforms could change this path at all; the others need not be tried.
pub(super) fn applicable(raw: &str) -> u8 {
    let b = raw.as_bytes();
    let mut flags = 0u8;
    // Only with a path after the host: `//products` would read as `/` (the home page), which
    // no room's line is kept from by this spelling, and a strict room would refuse it.
    if b.starts_with(b"//") && b[2..].contains(&b'/') {
        flags |= Transform::Authority as u8;
    }
    for i in 0..b.len() {
        if b[i] <= b' ' || b[i] == b'%' && encoded_below_space(b, i) {
            flags |= Transform::Trim as u8;
        }
        match b[i] {
            0 => flags |= Transform::Nul as u8,
            b';' => flags |= Transform::Params as u8,
            // `(`: maybe an ASP.NET cookieless value (`/(S(x))/orders`); `:`, an NTFS stream.
            b'\\' | b'(' | b':' => flags |= Transform::Windows as u8,
            b'.' | b' ' if i + 1 == b.len() || b[i + 1] == b'/' => {
                flags |= Transform::Windows as u8;
                if b[i] == b'.' && i > 0 && matches!(b[i - 1], b'.' | b'/') {
                    flags |= Transform::Dots as u8;
                }
            }
            b'.' if b.get(i + 1) == Some(&b'.') || encoded_at(b, i + 1, b'.') => {
                flags |= Transform::Dots as u8
            }
            b'%' if percent_u(b, i).is_some() => {
                // `%u002f`, `%u002e%u002e`: IIS reads them as `/` and `..` (found by review:
                // `/%u002fproducts` reached the origin outside the room). What it names counts
                // as if written so for the readings combined with IIS's: `%u003b` is a `;` to
                // a Java app behind IIS, `%u0000` a NUL (found by review).
                flags |= Transform::Windows as u8;
                match percent_u(b, i) {
                    Some(';') => flags |= Transform::Params as u8,
                    Some('\0') => flags |= Transform::Nul as u8,
                    Some(c) if c <= ' ' => flags |= Transform::Trim as u8,
                    // A dot segment, kept by origins that route the path as sent.
                    Some('.' | '/' | '\\') => flags |= Transform::Dots as u8,
                    // A `%`: IIS as the hop, an app that decodes what it hands on
                    // ([`iis_hop`]).
                    Some('%') => flags |= Transform::Twice as u8,
                    _ => {}
                }
            }
            b'%' => {
                // Any escape: a hop decodes it (and resolves the dots it makes) before the
                // app reads what is left, in an order no other reading takes.
                if b.len() >= i + 3 && hex_pair(b[i + 1], b[i + 2]).is_some() {
                    flags |= Transform::Twice as u8;
                }
                // Any encoded dot may make a dot segment (`%2e%2e`, `.%2e`); an encoded `/`
                // may end one (`..%2F`).
                if encoded_at(b, i, b'.') || encoded_at(b, i, b'/') {
                    flags |= Transform::Dots as u8;
                }
                if encoded_at(b, i, 0) {
                    flags |= Transform::Nul as u8;
                } else if encoded_at(b, i, b';') {
                    flags |= Transform::Params as u8;
                } else if encoded_at(b, i, b'\\')
                    || encoded_at(b, i, b'(')
                    || encoded_at(b, i, b':')
                    || (encoded_at(b, i, b' ') || encoded_at(b, i, b'.'))
                        && (i + 3 == b.len() || b[i + 3] == b'/' || b[i + 3] == b'%')
                {
                    flags |= Transform::Windows as u8;
                }
            }
            _ => {}
        }
    }
    flags
}

/// Applies the transforms in `set` to the raw path (a leading `//host` first, then NUL, then
/// `\`, then `;params` per segment, then trailing dots and spaces), before the standard
/// normalisation.
pub(super) fn apply(raw: &str, set: u8) -> String {
    let mut s: Vec<u8> = raw.as_bytes().to_vec();
    if set & Transform::Windows as u8 != 0 {
        // IIS decodes `%uXXXX` first, before what it (or an app behind it) reads into the path.
        s = decode_percent_u(raw).into_owned().into_bytes();
    }
    if set & Transform::Authority as u8 != 0 && s.starts_with(b"//") {
        // The host ends at the next `/`; without one the path is empty (read as `/`).
        let path = s[2..]
            .iter()
            .position(|&c| c == b'/')
            .map_or(s.len(), |i| i + 2);
        s.drain(..path);
    }
    if set & Transform::Nul as u8 != 0 {
        let end = (0..s.len())
            .find(|&i| s[i] == 0 || encoded_at(&s, i, 0))
            .unwrap_or(s.len());
        s.truncate(end);
    }
    if set & Transform::Windows as u8 != 0 {
        let mut out = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            if s[i] == b'\\' {
                out.push(b'/');
                i += 1;
            } else if encoded_at(&s, i, b'\\') || encoded_at(&s, i, b'/') {
                // `%2F` too: the server decodes it before it trims a segment's tail, so
                // `x%2f..` is `x` and `..`, not a name `x%2f` with dots trimmed.
                out.push(b'/');
                i += 3;
            } else {
                out.push(s[i]);
                i += 1;
            }
        }
        s = out;
    }
    if set & Transform::Params as u8 != 0 {
        let mut out = Vec::with_capacity(s.len());
        let mut skipping = false;
        let mut i = 0;
        while i < s.len() {
            if s[i] == b'/' {
                skipping = false;
            } else if s[i] == b';' || encoded_at(&s, i, b';') {
                skipping = true;
            }
            if !skipping {
                out.push(s[i]);
            }
            i += 1;
        }
        s = out;
    }
    let mut text = bytes_as_path(&s);
    if set & Transform::Windows as u8 != 0 {
        text = text
            .split('/')
            .map(strip_stream)
            .map(strip_windows_tail)
            .filter(|seg| !is_cookieless(seg))
            .collect::<Vec<_>>()
            .join("/");
    }
    text
}

/// Whether a path segment is an ASP.NET cookieless value: `(`, then one or more of a letter
/// and a value in parentheses, then `)` — `(S(x))`, `(A(a)S(b)F(c))`, any case, read with its
/// escapes decoded as IIS hands the path on. ASP.NET (Framework) takes it out of every
/// request's path before anything routes it, whatever the configuration
/// (`CookielessHelper.RemoveCookielessValuesFromPath`), anywhere in the path before
/// CVE-2023-36899's fix and with `aspnet:RestoreAggressiveCookielessPathRemoval` (found by
/// review: `/(S(x))/orders` placed an order without an admission).
pub(super) fn is_cookieless(seg: &str) -> bool {
    let decoded = decode_escapes(seg.as_bytes());
    let Some(inner) = decoded
        .strip_prefix(b"(")
        .and_then(|d| d.strip_suffix(b")"))
    else {
        return false;
    };
    let mut rest = inner;
    let mut values = 0;
    while let [letter, b'(', after @ ..] = rest {
        if !letter.is_ascii_alphabetic() {
            return false;
        }
        // A value ends at the first `)` and may hold anything but `/`, a `(` too, as
        // ASP.NET's `CookielessHelper.IsValidHeader` reads it (found by re-review:
        // `/(S(a(b))/orders` placed orders without an admission).
        let Some(close) = after.iter().position(|&c| c == b')') else {
            return false;
        };
        if after[..close].contains(&b'/') {
            return false;
        }
        rest = &after[close + 1..];
        values += 1;
    }
    values > 0 && rest.is_empty()
}

/// The path with IIS's `%uXXXX` decoded ([`push_percent_u`]); borrowed when it has none.
fn decode_percent_u(raw: &str) -> std::borrow::Cow<'_, str> {
    let b = raw.as_bytes();
    if !(0..b.len()).any(|i| percent_u(b, i).is_some()) {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if let Some(c) = percent_u(b, i) {
            push_percent_u(&mut out, c);
            i += 6;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    std::borrow::Cow::Owned(bytes_as_path(&out))
}

/// `%uXXXX` at `i`, IIS's spelling of a UTF-16 code unit: the character it names (`None`
/// for a surrogate or anything else).
fn percent_u(s: &[u8], i: usize) -> Option<char> {
    let hex = s.get(i..i + 6)?;
    if hex[0] != b'%' || !matches!(hex[1], b'u' | b'U') {
        return None;
    }
    let mut v = 0u32;
    for &c in &hex[2..] {
        v = v * 16 + (c as char).to_digit(16)?;
    }
    char::from_u32(v)
}

/// The character `%uXXXX` names, as the readings after take it: `/` (and `\`) as `/`, an
/// unreserved character and `;` as themselves, anything else `%`-encoded in UTF-8, so that the
/// normalisation that follows decodes nothing IIS did not (`%u0025` is a `%`, not the start
/// of another escape; `%u0000` is `%00`, at which the NUL reading ends the path).
fn push_percent_u(out: &mut Vec<u8>, c: char) {
    if c == '/' || c == '\\' {
        out.push(b'/');
    } else if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | ';') {
        out.push(c as u8);
    } else {
        let mut buf = [0u8; 4];
        for b in c.encode_utf8(&mut buf).bytes() {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
}

/// `products. ` and `products%20.` read as `products` on Windows; `.` and `..` stay.
/// A segment without an NTFS stream or attribute after its name (`orders::$DATA`,
/// `pay::$INDEX_ALLOCATION`, `pay:$I30:$INDEX_ALLOCATION`, the colon raw or `%3A`): IIS serving
/// files from NTFS reads the file or directory named before the colon (found by review: such
/// spellings reached the origin outside the room, and ordered twice with one admission). Cut
/// at the first colon when a `$` follows it, whatever the stream's name: a named stream is no
/// name of a protected path, and queueing one costs nothing.
fn strip_stream(seg: &str) -> &str {
    let b = seg.as_bytes();
    let colon = (0..b.len()).find(|&i| b[i] == b':' || encoded_at(b, i, b':'));
    match colon {
        Some(i) if i > 0 && (seg[i..].contains('$') || seg[i..].contains("%24")) => &seg[..i],
        _ => seg,
    }
}

fn strip_windows_tail(seg: &str) -> &str {
    let mut s = seg;
    loop {
        let before = s.len();
        s = s.trim_end_matches([' ', '.']);
        for enc in ["%20", "%2e", "%2E"] {
            if let Some(rest) = s.strip_suffix(enc) {
                s = rest;
            }
        }
        if s.len() == before {
            break;
        }
    }
    if s.is_empty() || s.bytes().all(|c| c == b'.') {
        seg
    } else {
        s
    }
}

/// Whether `s` at `i` is `%25XX`: an escape of `%` before two hex digits, which a second
/// decoding reads as the byte they name ([`Transform::Twice`]).
fn encoded_percent_escape(s: &[u8], i: usize) -> bool {
    encoded_at(s, i, b'%') && s.len() >= i + 5 && hex_pair(s[i + 3], s[i + 4]).is_some()
}

/// The path as IIS hands it on when it is the hop ([`Transform::Twice`]): its `%u0025` read
/// as the `%` it names, for the app behind to decode what follows (an IIS URL Rewrite rule
/// that forwards the decoded path: `/q%u00253Ar` is `/q:r` to the app; found by re-review
/// r91a, such spellings reached the origin outside every room and ordered again). `None`
/// without one.
pub(super) fn iis_hop(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    if !(0..b.len()).any(|i| percent_u(b, i) == Some('%')) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if percent_u(b, i) == Some('%') {
            out.push(b'%');
            i += 6;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(bytes_as_path(&out))
}

/// The path with every `%25XX` read as `%XX` ([`Transform::Twice`]): what an app that decodes
/// again is handed by a hop that decoded the path once (the other escapes it decoded are read
/// by the other transforms, which take them encoded or not alike).
pub(super) fn decode_percent_escapes(raw: &str) -> String {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if encoded_percent_escape(b, i) {
            out.push(b'%');
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    bytes_as_path(&out)
}

/// The path as a hop that decodes it hands it on ([`Transform::Twice`]): every `%XX` decoded
/// (a rewrite that decodes its capture). What a decoded `?`, `#` or NUL begins is no part of
/// the path the app routes ([`routed_part`]: `/orders%3F` is `/orders` with a query to it;
/// found by re-review, an order went through without an admission). `None` when nothing is
/// decoded.
pub(super) fn hop_decoded(raw: &str) -> Option<String> {
    let out = decode_escapes(raw.as_bytes());
    if out.len() == raw.len() {
        return None;
    }
    Some(bytes_as_path(&out))
}

/// `b` with every `%XX` decoded to its byte, in one pass (what it names is not decoded again).
fn decode_escapes(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1), b.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex_pair(h, l).is_some() => {
                out.extend(hex_pair(h, l));
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// `path` up to a `?`, `#` or NUL: what the app routes of a path a hop decoded.
pub(super) fn routed_part(path: &str) -> &str {
    path.split(['?', '#', '\0']).next().unwrap_or("")
}

/// [`hop_decoded`] as nginx's `$uri` hands it on: dot segments resolved and slashes merged
/// before the app decodes what is left (an IIS or a Tomcat behind nginx reads its own
/// spellings only after nginx resolved the dots).
pub(super) fn hop_resolved(decoded: &str) -> String {
    format!("/{}", super::path::resolved_segments(decoded).join("/"))
}

/// Whether `s` at `i` is `%XX` for a byte up to U+0020 (what Java's `String.trim` drops).
fn encoded_below_space(s: &[u8], i: usize) -> bool {
    s.len() >= i + 3 && s[i] == b'%' && hex_pair(s[i + 1], s[i + 2]).is_some_and(|c| c <= b' ')
}

/// The path as Spring with `trimTokens` reads it ([`Transform::Trim`]): `;params` stripped,
/// then every segment trimmed of characters up to U+0020 at both ends, raw or encoded; a
/// segment left empty is dropped (by the normalisation that follows).
pub(super) fn trim_segments(raw: &str) -> String {
    let stripped = apply(raw, Transform::Params as u8);
    stripped
        .split('/')
        .map(|seg| {
            let b = seg.as_bytes();
            let (mut from, mut to) = (0, b.len());
            loop {
                if from < to && b[from] <= b' ' {
                    from += 1;
                } else if from + 3 <= to && encoded_below_space(b, from) {
                    from += 3;
                } else {
                    break;
                }
            }
            loop {
                if to > from && b[to - 1] <= b' ' {
                    to -= 1;
                } else if to >= from + 3 && encoded_below_space(b, to - 3) {
                    to -= 3;
                } else {
                    break;
                }
            }
            &seg[from..to]
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The path with dot segments kept ([`Transform::Dots`]): its bytes in their plain form
/// ([`plain_escapes`]), empty and `.` segments dropped, `..` kept as a name.
pub(super) fn keep_dots(raw: &str) -> String {
    let decoded = plain_escapes(raw);
    let mut out = String::with_capacity(decoded.len() + 1);
    for seg in decoded.split('/').filter(|s| !s.is_empty() && *s != ".") {
        out.push('/');
        out.push_str(seg);
    }
    if out.is_empty() || decoded.ends_with('/') {
        out.push('/');
    }
    out
}

/// Extensions of scripts that take a path info after their name: PHP's, CGI and FastCGI
/// (Flask's documented `yourapplication.fcgi/hello`, Apache's `RewriteRule ^(.*)$ app.fcgi/$1`),
/// WSGI, ASP and ASP.NET handlers, IIS's ISAPI extensions, JSP and ColdFusion (found by review:
/// `/app.fcgi/orders` reached a shop behind FastCGI outside every room, where only `.php` was
/// read). Not `.exe`, `.py`, `.pl` or `.rb`: far more often a download or a domain than a
/// front controller (re-review: `/files/setup.exe/download` was refused as two rooms).
const SCRIPT_EXTENSIONS: &[&[u8]] = &[
    b"php", b"php3", b"php4", b"php5", b"php7", b"php8", b"phtml", b"cgi", b"fcgi", b"wsgi",
    b"asp", b"aspx", b"ashx", b"asmx", b"dll", b"jsp", b"cfm",
];

/// At most this many scripts are read in one path (each adds readings): the first ones and
/// the last.
pub(super) const SCRIPTS_READ: usize = 4;

/// Whether a path segment names a script ([`SCRIPT_EXTENSIONS`], any case), with or without
/// a name before the extension (nginx's `fastcgi_split_path_info ^(.+\.php)(/.+)$` splits
/// `/.php/orders` too: re-review).
pub(super) fn is_script(seg: &[u8]) -> bool {
    memchr::memrchr(b'.', seg).is_some_and(|dot| {
        SCRIPT_EXTENSIONS
            .iter()
            .any(|e| seg[dot + 1..].eq_ignore_ascii_case(e))
    })
}

/// A front controller's path info ([`Transform::Script`]): what follows a segment that names
/// a script ([`SCRIPT_EXTENSIONS`]), when a `/` follows it — for the first such segments
/// (Apache reads the first that is a file, and a directory may carry a script's name) and for
/// the last (nginx's documented `fastcgi_split_path_info` is greedy: re-review, a fifth script
/// segment walked around the room), [`SCRIPTS_READ`] at most, in the path's order.
pub fn path_infos(path: &str) -> impl Iterator<Item = &str> {
    let b = path.as_bytes();
    let mut ends: Vec<usize> = Vec::new();
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'/', &b[from..]).map(|i| i + from) {
        if is_script(&b[from..i]) {
            if ends.len() == SCRIPTS_READ {
                ends[SCRIPTS_READ - 1] = i;
            } else {
                ends.push(i);
            }
        }
        from = i + 1;
    }
    ends.into_iter().map(move |i| &path[i..])
}

/// The path info after the first segment that names a script ([`path_infos`]).
pub fn path_info(path: &str) -> Option<&str> {
    path_infos(path).next()
}

/// The transforms, for documentation and tests.
pub fn transforms() -> &'static [Transform] {
    &ALL
}

#[cfg(test)]
mod tests;
