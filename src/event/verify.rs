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
    let mine = draw::unhex::<TICKET_LEN>(ticket).ok_or_else(|| {
        format!("--ticket {ticket:?} is not a registration ticket (32 hex digits, as the page shows it)")
    })?;
    let is_url = source.starts_with("http://") || source.starts_with("https://");
    let text = if is_url {
        fetch(source, ca)?
    } else {
        std::fs::read_to_string(source).map_err(|e| format!("{source}: {e}"))?
    };
    let mut doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("{source}: not the event's JSON ({e})"))?;
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
        doc = serde_json::from_str(&fetch(&join_url(source, rel), ca)?)
            .map_err(|e| format!("the list at {rel}: {e}"))?;
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
    if let Some(counted) = doc["registrations"].as_u64() {
        if counted != list.len() as u64 {
            return Err(format!(
                "the list has {} tickets but the event counted {counted} registrations: tickets are missing from it, or it was added to",
                list.len()
            ));
        }
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

/// `rel` (a path) at the scheme and host of `base`.
fn join_url(base: &str, rel: &str) -> String {
    if rel.starts_with("http://") || rel.starts_with("https://") {
        return rel.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    let host = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{host}{rel}")
}

/// A GET over HTTP/1.1 (plain, or TLS checked against the system's roots, or `ca`).
fn fetch(url: &str, ca: Option<&Path>) -> Result<String, String> {
    let (scheme, rest) = url.split_once("://").ok_or("not a URL")?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let tls = scheme == "https";
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => (
            h.trim_matches(|c| c == '[' || c == ']'),
            p.parse::<u16>().map_err(|_| format!("{url}: bad port"))?,
        ),
        _ => (hostport, if tls { 443 } else { 80 }),
    };
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

fn exchange(s: &mut (impl Read + Write), request: &str) -> std::io::Result<Vec<u8>> {
    s.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    match s.read_to_end(&mut raw) {
        Ok(_) => Ok(raw),
        // A TLS peer that closes without close_notify: what arrived is the answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => Ok(raw),
        Err(e) => Err(e),
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
mod tests {
    use super::*;
    use crate::store::VisitorId;
    use serde_json::json;

    #[test]
    fn a_saved_draw_checks_out_and_a_changed_one_does_not() {
        let seed = draw::seed(b"secret-of-the-test-0123456789abcdef", "sale", "drop", 7);
        let mut list: Vec<RegTicket> = (0..300u128)
            .map(|i| {
                draw::ticket(
                    "sale",
                    "drop",
                    VisitorId::from_bytes((i * 31 + 5).to_be_bytes()),
                )
            })
            .collect();
        draw::order(&seed, &mut list);
        let doc = |list: &[RegTicket], seed: &[u8; 32]| {
            json!({
                "room": "sale", "event": "drop",
                "commitment": draw::commitment(&draw::seed(b"secret-of-the-test-0123456789abcdef", "sale", "drop", 7)),
                "seed": draw::hex(seed),
                "tickets": list.iter().map(|t| draw::hex(t)).collect::<Vec<_>>(),
            })
        };
        let r = check(&doc(&list, &seed), &list[41]).unwrap();
        assert_eq!((r.place, r.registrations), (42, 300));
        let mut moved = list.clone();
        moved.swap(0, 200);
        assert!(check(&doc(&moved, &seed), &list[41])
            .unwrap_err()
            .contains("order"));
        let other = draw::seed(b"another-secret-0123456789abcdef-xx", "sale", "drop", 7);
        assert!(check(&doc(&list, &other), &list[41])
            .unwrap_err()
            .contains("committed"));
        let mut unrevealed = doc(&list, &seed);
        unrevealed["seed"] = Value::Null;
        assert!(check(&unrevealed, &list[0])
            .unwrap_err()
            .contains("not revealed"));
        // A list with another's ticket left out, beside the count the room published.
        let mut counted = doc(&list, &seed);
        counted["registrations"] = json!(300);
        assert!(check(&counted, &list[41]).is_ok());
        let mut short = list.clone();
        short.remove(7);
        let mut left_out = doc(&short, &seed);
        left_out["registrations"] = json!(300);
        assert!(check(&left_out, &list[41])
            .unwrap_err()
            .contains("counted 300"));
    }

    #[test]
    fn urls_and_chunks() {
        assert_eq!(
            join_url(
                "https://shop.example:8443/.anteroom/event?room=sale",
                "/.anteroom/event?room=sale&tickets=1"
            ),
            "https://shop.example:8443/.anteroom/event?room=sale&tickets=1"
        );
        assert_eq!(
            dechunk(b"5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n"),
            b"hello world"
        );
        assert_eq!(dechunk(b"zz\r\n"), b"");
    }
}
