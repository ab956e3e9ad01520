//! `anteroom verify-draw --event URL-or-FILE --ticket T`: what a visitor (or anyone) runs to
//! check a draw. It reads the room's published event (`GET /.anteroom/event?room=NAME`, or a
//! file saved from it), fetches the list of registrations when the document only names it, and
//! checks that the seed is the one committed to, that the whole list is in the seed's order,
//! and where the ticket is in it (see [`super::draw`] for what that proves and what not).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::draw::{self, RegTicket, TICKET_LEN};

/// What a check found, for the command's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub room: String,
    pub event: String,
    pub commitment: String,
    pub place: u64,
    pub registrations: u64,
}

/// Reads the event (a URL or a file) and checks the draw for `ticket`. `committed`: the
/// commitment the visitor saw before the opening (on the countdown page); without it the check
/// can only use the one the document names, which whoever publishes it also chose.
pub fn run(
    source: &str,
    ticket: &str,
    committed: Option<&str>,
    ca: Option<&Path>,
) -> Result<Report, String> {
    let mine = draw::unhex::<TICKET_LEN>(ticket.trim()).ok_or_else(|| {
        format!("--ticket {ticket:?} is not a registration ticket (32 hex digits, as the page shows it)")
    })?;
    let is_url = scheme_of(source).is_some();
    let text = if is_url {
        fetch(source, ca)?
    } else {
        // A regular file within the bound: a FIFO or `/dev/zero` would hang or fill memory
        // (found by review).
        crate::files::read_regular_text(Path::new(source), MAX_DOCUMENT)
            .map_err(|e| format!("{source}: {e}"))?
    };
    let mut doc = document(&text).map_err(|e| format!("{source}: {e}"))?;
    if doc.get("tickets").is_none() {
        let Some(rel) = doc["tickets_url"].as_str() else {
            return Err(match doc["seed"] {
                Value::Null => {
                    "the seed is not revealed yet: the draw is published at the opening".into()
                }
                _ => format!("{source} has no list of tickets, and names none"),
            });
        };
        if !is_url {
            return Err(format!(
                "{source} has no list of tickets: save the event with its list (the URL {rel} of the room) and check that"
            ));
        }
        let url = join_url(source, rel);
        if origin_of(&url) != origin_of(source) {
            return Err(format!(
                "{source} names its list at another site ({rel}): check the list the room itself publishes"
            ));
        }
        let list = document(&fetch(&url, ca)?).map_err(|e| format!("the list at {rel}: {e}"))?;
        same_draw(&doc, &list, rel)?;
        doc = list;
    }
    if let Some(c) = committed {
        let published = doc["commitment"].as_str().unwrap_or("");
        if !published.eq_ignore_ascii_case(c.trim()) {
            return Err(format!(
                "the room publishes commitment {published}, not the {} you saw before the opening: the seed was changed",
                c.trim()
            ));
        }
    }
    check(&doc, &mine)
}

/// Whether `list` (fetched from `rel`) is of the draw `doc` names: the list of this room's
/// event, not another's it might name (found by review), nor of an earlier event of the name,
/// or of a draw under another commitment (re-review: a document that named a genuine list of
/// another draw passed as checked). Each field `doc` has must be the list's.
fn same_draw(doc: &Value, list: &Value, rel: &str) -> Result<(), String> {
    for field in ["room", "event", "id", "prequeue_from", "commitment", "seed"] {
        if !doc[field].is_null() && list[field] != doc[field] {
            return Err(format!(
                "the list at {rel} is of {field} {}, not {}",
                list[field], doc[field]
            ));
        }
    }
    Ok(())
}

/// Checks a document that has `commitment`, `seed` and `tickets`.
pub fn check(doc: &Value, mine: &RegTicket) -> Result<Report, String> {
    let commitment = doc["commitment"]
        .as_str()
        .ok_or("the event has no commitment: it is not a draw")?;
    let seed = match &doc["seed"] {
        Value::Null => return Err(draw::VerifyError::NotRevealed.to_string()),
        v => v
            .as_str()
            .and_then(draw::unhex::<32>)
            .ok_or("the seed is not 64 hex digits")?,
    };
    let list: Vec<RegTicket> = doc["tickets"]
        .as_array()
        .ok_or("tickets is not a list")?
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.as_str()
                .and_then(draw::unhex::<TICKET_LEN>)
                .ok_or_else(|| format!("ticket {} of the list is not 32 hex digits", i + 1))
        })
        .collect::<Result<_, _>>()?;
    // The list against the count the room publishes beside it: a list with tickets left out
    // checks for the tickets in it, and "all N registrations" would not be true (found by
    // review: a saved list with another's ticket removed passed).
    // A count that is missing or no whole number checks nothing: refused, not passed over
    // (found by review: without it, a list with a ticket left out said "all 19").
    let counted = doc["registrations"]
        .as_u64()
        .ok_or("the event does not count its registrations (`registrations`, a whole number): the list cannot be checked whole")?;
    if counted != list.len() as u64 {
        return Err(format!(
            "the list has {} tickets but the event counted {counted} registrations: tickets are missing from it, or it was added to",
            list.len()
        ));
    }
    let v = draw::verify(commitment, &seed, &list, mine).map_err(|e| e.to_string())?;
    Ok(Report {
        room: doc["room"].as_str().unwrap_or("?").to_string(),
        event: doc["event"].as_str().unwrap_or("?").to_string(),
        commitment: commitment.to_string(),
        place: v.place,
        registrations: v.registrations,
    })
}

/// The most of a published event (with its list) read, from a file or a URL: about 14 million
/// tickets. A bound, so that a hostile publisher's endless answer fills no memory (review).
pub const MAX_DOCUMENT: u64 = 512 * 1024 * 1024;

/// The longest a download may take, whatever arrives meanwhile (a slow, endless answer).
const FETCH_DEADLINE: Duration = Duration::from_secs(300);

/// The JSON object of a published event.
fn document(text: &str) -> Result<Value, String> {
    let doc: Value =
        serde_json::from_str(text).map_err(|e| format!("not the event's JSON ({e})"))?;
    if !doc.is_object() {
        return Err("not the event's JSON (it is no object)".into());
    }
    Ok(doc)
}

/// `http` or `https` when `s` is a URL of either (in any case).
fn scheme_of(s: &str) -> Option<&'static str> {
    let (scheme, _) = s.split_once("://")?;
    if scheme.eq_ignore_ascii_case("https") {
        Some("https")
    } else if scheme.eq_ignore_ascii_case("http") {
        Some("http")
    } else {
        None
    }
}

/// The scheme and the host (with its port, as written, lower case) of a URL.
fn origin_of(url: &str) -> (Option<&'static str>, String) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    (scheme_of(url), host.to_ascii_lowercase())
}

/// `rel` (a path) at the scheme and host of `base`.
fn join_url(base: &str, rel: &str) -> String {
    if scheme_of(rel).is_some() {
        return rel.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    let host = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{host}{rel}")
}

/// The host and port of a URL's authority: `[::1]:8080`, `[::1]`, `host:80`, `host`.
fn host_port(hostport: &str, default: u16) -> Option<(&str, u16)> {
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            match after {
                "" => return Some((host, default)),
                p => (host, p.strip_prefix(':')?),
            }
        }
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h, p),
            None => return Some((hostport, default)),
        },
    };
    Some((host, port.parse().ok()?))
}

/// A GET over HTTP/1.1 (plain, or TLS checked against the system's roots, or `ca`).
fn fetch(url: &str, ca: Option<&Path>) -> Result<String, String> {
    let scheme = scheme_of(url).ok_or("not a URL")?;
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let tls = scheme == "https";
    let (host, port) = host_port(hostport, if tls { 443 } else { 80 })
        .ok_or_else(|| format!("{url}: bad host or port"))?;
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{url}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url}: no address"))?;
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .map_err(|e| format!("{url}: {e}"))?;
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(30)));
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {hostport}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    let raw = if tls {
        let config = tls_config(ca)?;
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| format!("{url}: {e}"))?;
        let conn = rustls::ClientConnection::new(Arc::new(config), name)
            .map_err(|e| format!("{url}: {e}"))?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        exchange(&mut s, &request).map_err(|e| format!("{url}: {e}"))?
    } else {
        let mut s = tcp;
        exchange(&mut s, &request).map_err(|e| format!("{url}: {e}"))?
    };
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("{url}: no HTTP answer"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let body = &raw[split + 4..];
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{url}: no HTTP status"))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:")
            && l.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    let body = String::from_utf8(body).map_err(|_| format!("{url}: the answer is not UTF-8"))?;
    if status != 200 {
        let why = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or(body);
        return Err(format!("{url}: HTTP {status}: {why}"));
    }
    Ok(body)
}

/// Sends `request` and reads the answer to its end: at most [`MAX_DOCUMENT`] bytes (and a head)
/// within [`FETCH_DEADLINE`].
fn exchange(s: &mut (impl Read + Write), request: &str) -> std::io::Result<Vec<u8>> {
    exchange_within(s, request, MAX_DOCUMENT + 64 * 1024, FETCH_DEADLINE)
}

/// [`exchange`] with the bound and the deadline given.
fn exchange_within(
    s: &mut (impl Read + Write),
    request: &str,
    limit: u64,
    deadline: Duration,
) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind};
    s.write_all(request.as_bytes())?;
    let started = std::time::Instant::now();
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if started.elapsed() > deadline {
            return Err(Error::new(
                ErrorKind::TimedOut,
                format!("the answer took longer than {} s", deadline.as_secs()),
            ));
        }
        match s.read(&mut buf) {
            Ok(0) => return Ok(raw),
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if raw.len() as u64 > limit {
                    return Err(Error::other(format!(
                        "the answer is longer than {limit} bytes"
                    )));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // A TLS peer that closes without close_notify: what arrived is the answer.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof && !raw.is_empty() => return Ok(raw),
            Err(e) => return Err(e),
        }
    }
}

/// A chunked body's bytes (chunk extensions ignored); stops at the last chunk or at anything
/// malformed.
fn dechunk(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&rest[..eol]);
        let size = size.split(';').next().unwrap_or("").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            break;
        };
        let data = &rest[eol + 2..];
        if n == 0 || data.len() < n {
            break;
        }
        out.extend_from_slice(&data[..n]);
        rest = data[n..].strip_prefix(b"\r\n").unwrap_or(&data[n..]);
    }
    out
}

fn tls_config(ca: Option<&Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| format!("--ca {}: {e}", path.display()))?;
            for cert in rustls_pemfile_certs(&pem) {
                roots
                    .add(cert)
                    .map_err(|e| format!("--ca {}: {e}", path.display()))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}

/// The certificates of a PEM file.
fn rustls_pemfile_certs(pem: &[u8]) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect()
}

#[cfg(test)]
mod tests;
