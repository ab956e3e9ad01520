//! A small client of the admin API for operators at a terminal: `anteroom rooms`,
//! `anteroom room NAME ...`, `anteroom health`. Plain HTTP/1.1 over a socket: the admin
//! listener is loopback or a private network, and the binary stays free of an HTTP client stack.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{json, Map, Value};

/// A token given at the terminal (`--token`, `ANTEROOM_ADMIN_TOKEN`): the whitespace around it
/// dropped (a variable read from a file ends with a newline), and refused when what is left
/// holds anything but visible ASCII, which no header can carry (found by review: a token
/// ending in a newline ended the request's header block, and every change was sent without
/// its body; one with `\r\n` inside added a header of its own).
pub fn checked_token(t: &str) -> Result<String, String> {
    let t = t.trim_matches(|c: char| c.is_ascii_whitespace());
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "the admin token given (--token or ANTEROOM_ADMIN_TOKEN) is empty or holds a space \
             or a control character inside: pass the token alone"
                .to_string(),
        );
    }
    Ok(t.to_string())
}

/// Where the admin API is and how to authenticate.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub token: Option<String>,
}

/// The `HOST:PORT` of an `--admin` URL, or why it names none (found by review: `https://…`,
/// a path or a missing port each gave only the resolver's "invalid socket address").
fn admin_hostport(url: &str) -> Result<&str, &'static str> {
    let rest = match url.split_once("://") {
        None => url,
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some(_) => return Err("the admin API speaks plain HTTP only"),
    };
    let hostport = rest.strip_suffix('/').unwrap_or(rest);
    if hostport.contains(['/', '?', '#', '@']) {
        return Err("the admin API is named by its address alone, without a path or user");
    }
    let port = hostport.rsplit_once(':').map(|(_, p)| p);
    if hostport.ends_with(']') || port.is_none_or(|p| p.parse::<u16>().is_err()) {
        return Err("the port is missing");
    }
    Ok(hostport)
}

impl Target {
    /// From `--admin URL` (`http://host:port` or `host:port`).
    pub fn from_url(url: &str, token: Option<String>) -> Result<Self, String> {
        let hostport = admin_hostport(url)
            .map_err(|why| format!("--admin {url}: {why}; give http://HOST:PORT or HOST:PORT, the instance's listen.admin"))?;
        let addr = hostport
            .to_socket_addrs()
            .map_err(|e| format!("--admin {url}: {e}"))?
            .next()
            .ok_or_else(|| format!("--admin {url}: {hostport} has no address"))?;
        let token = token.map(|t| checked_token(&t)).transpose()?;
        Ok(Self { addr, token })
    }

    /// From a config file's `listen.admin` (an unspecified address means this machine) and
    /// `admin.token`.
    pub fn from_endpoint(c: &crate::config::AdminEndpoint) -> Self {
        let mut addr = c.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        Self {
            addr,
            token: c.token.clone(),
        }
    }

    /// One request; returns the status and the body. With a token, the server is asked first
    /// (without it) whether it is an admin listener of anteroom's, by its mark: an `--admin`
    /// that named another server (the public listener, which forwards to the shop) was sent
    /// the token (found by review).
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, String), String> {
        if self.token.is_some() {
            let (status, head, _) = self.exchange("GET", "/healthz", None, None)?;
            if status != 200 || !marked(&head) {
                return Err(format!(
                    "the server at {} is not anteroom's admin listener (its answer lacks the {} header; an instance older than this CLI's too): the token was not sent; give --admin the instance's listen.admin",
                    self.addr,
                    super::serve::MARK
                ));
            }
        }
        let (status, _, body) = self.exchange(method, path, body, self.token.as_deref())?;
        Ok((status, body))
    }

    /// `GET /healthz` without a token: the status and the body, from anteroom's admin listener
    /// only. Any server answers 200 somewhere: its mark says it is anteroom's (found by review:
    /// the public listener, which forwards to the shop, and a bare origin passed the check).
    pub fn health(&self) -> Result<(u16, String), String> {
        let (status, head, body) = self.exchange("GET", "/healthz", None, None)?;
        if !marked(&head) {
            return Err(format!(
                "the server at {} is not anteroom's admin listener (its answer lacks the {} header): give --admin the instance's listen.admin",
                self.addr,
                super::serve::MARK
            ));
        }
        Ok((status, body))
    }

    /// One request on its own connection: the status, the head and the body.
    fn exchange(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Result<(u16, String, String), String> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(3))
            .map_err(|e| format!("cannot reach the admin API at {}: {e}", self.addr))?;
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        if let Some(t) = token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        if !body.is_empty() {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let raw = read_answer(&mut s).map_err(|e| match e.kind() {
            // Found by review: "Resource temporarily unavailable (os error 11)".
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
                "the admin API at {} sent no answer within 10 s{}",
                self.addr,
                if method == "GET" {
                    ""
                } else {
                    ": the change may or may not have been made; look before you send it again"
                }
            ),
            _ => format!("the admin API at {} broke off: {e}", self.addr),
        })?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = split_head(&text);
        let status = head
            .strip_prefix("HTTP/1.")
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| "the admin API sent no HTTP status".to_string())?;
        Ok((status, head.to_string(), body.to_string()))
    }

    /// What a CLI user does about a 401 (the API's own message is about HTTP headers).
    pub fn refused(&self) -> String {
        let how = "pass --token TOKEN, set ANTEROOM_ADMIN_TOKEN, or give --config FILE to read admin.token";
        match self.token {
            None => format!("the admin API at {} needs its token: {how}", self.addr),
            Some(_) => format!(
                "the admin API at {} refused the token given: {how} (the one in the running instance's config)",
                self.addr
            ),
        }
    }

    pub fn json(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let (status, text) = self.call(method, path, body)?;
        if status == 401 {
            return Err(self.refused());
        }
        let v: Value = serde_json::from_str(&text)
            .map_err(|_| format!("HTTP {status}: {}", clipped(&text)))?;
        if status >= 400 {
            let why = v.get("error").and_then(Value::as_str).unwrap_or(&text);
            return Err(format!("HTTP {status}: {}", clipped(why)));
        }
        Ok(v)
    }
}

/// The most of an answer the CLI reads (the API's largest are a few hundred KiB).
const MAX_ANSWER: usize = 16 << 20;

/// An answer, read to the connection's close within 10 s in all (not each read: found by
/// review, a server sending a byte every few seconds kept the CLI waiting for good) and at
/// most [`MAX_ANSWER`] bytes.
fn read_answer(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf)? {
            0 => return Ok(raw),
            n if raw.len() + n > MAX_ANSWER => {
                return Err(std::io::Error::other("an answer larger than 16 MiB"))
            }
            n => raw.extend_from_slice(&buf[..n]),
        }
    }
}

/// An answer's head and body: the head ends at the first empty line, however its lines end
/// (found by review: a server answering with bare line feeds had its body read as head).
fn split_head(text: &str) -> (&str, &str) {
    let end = [("\r\n\r\n", 4), ("\n\n", 2), ("\n\r\n", 3)]
        .iter()
        .filter_map(|(sep, n)| text.find(sep).map(|i| (i, *n)))
        .min();
    match end {
        Some((i, n)) => (&text[..i], &text[i + n..]),
        None => (text, ""),
    }
}

/// Whether an answer's head carries the admin listener's mark: a header line of its own, not
/// a folded continuation of another.
fn marked(head: &str) -> bool {
    head.lines().skip(1).any(|l| {
        !l.starts_with([' ', '\t'])
            && l.split_once(':')
                .is_some_and(|(k, v)| k.eq_ignore_ascii_case(super::serve::MARK) && v.trim() == "1")
    })
}

/// A yes-or-no value of the CLI: `true`/`false`, and the usual `yes`/`no`, `on`/`off`, `1`/`0`,
/// in any case.
pub fn boolean(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// `KEY=VALUE` pairs of `anteroom room NAME set` as the PATCH body.
pub fn patch_body(pairs: &[String]) -> Result<Value, String> {
    let mut body = Map::new();
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?}: write KEY=VALUE"))?;
        let key = k.trim().replace('-', "_");
        let v = v.trim();
        let value = match key.as_str() {
            "enabled" | "queue_all" => match boolean(v) {
                Some(b) => json!(b),
                None => return Err(format!("{key}={v}: use true or false")),
            },
            "autopilot" if v == "default" => Value::Null,
            "autopilot" => match boolean(v) {
                Some(b) => json!(b),
                None => return Err(format!("{key}={v}: use true, false or default")),
            },
            "admit_per_second" | "max_active" if v == "default" => Value::Null,
            // A number that is not finite would be encoded as null, which means "back to the
            // configured rate" (found by review: `1e400` removed an operator's pin).
            "admit_per_second" => match v.parse::<f64>() {
                Ok(n) if n.is_finite() => json!(n),
                _ => return Err(format!("{key}={v}: a number, or default")),
            },
            "max_active" => json!(v
                .parse::<u64>()
                .map_err(|_| format!("{key}={v}: a whole number, or default"))?),
            _ => {
                return Err(format!(
                    "unknown key {k:?}: use enabled, queue_all, admit_per_second, max_active or autopilot"
                ))
            }
        };
        // Twice, the last one won silently (found by review): the admin API refuses a
        // duplicate field, and so does the CLI.
        if body.insert(key.clone(), value).is_some() {
            return Err(format!("{key} is given twice: give each key once"));
        }
    }
    if body.is_empty() {
        return Err("nothing to set: give KEY=VALUE pairs".into());
    }
    Ok(Value::Object(body))
}

/// The `anteroom room NAME changes` table: newest first, one line per change.
pub fn changes_table(history: &Value) -> String {
    let mut out = format!(
        "{:<20}  {:<12}  {:<22}  CHANGES\n",
        "WHEN (UTC)", "BY", "FROM"
    );
    let shown = |v: &Value| match v {
        Value::Null => "default".to_string(),
        other => other.to_string(),
    };
    for c in history["changes"].as_array().into_iter().flatten() {
        let when = c["at_ms"].as_u64().map_or_else(
            || "?".to_string(),
            |ms| {
                // RFC 3339 has four-digit years: a later time (a server's nonsense) is told as
                // its number (found by review: formatting it panicked).
                if ms >= LAST_RFC3339_MS {
                    return ms.to_string();
                }
                let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
                humantime::format_rfc3339_seconds(t)
                    .to_string()
                    .trim_end_matches('Z')
                    .replace('T', " ")
            },
        );
        let what: Vec<String> = c["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                format!(
                    "{} {} -> {}",
                    f["field"].as_str().unwrap_or("?"),
                    shown(&f["from"]),
                    shown(&f["to"])
                )
            })
            .collect();
        out.push_str(&format!(
            "{:<20}  {:<12}  {:<22}  {}\n",
            when,
            c["by"].as_str().unwrap_or("?"),
            c["client"].as_str().unwrap_or("?"),
            what.join(", ")
        ));
    }
    if history["changes"].as_array().is_none_or(|a| a.is_empty()) {
        out.push_str("(no change recorded)\n");
    }
    out
}

/// The `anteroom rooms` table.
pub fn rooms_table(rooms: &Value) -> String {
    let row = |cells: [&str; 7]| {
        format!(
            "{:<12} {:<6} {:>9} {:>8} {:>16} {:<11} {:>9}\n",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]
        )
    };
    let mut out = row([
        "ROOM",
        "STATE",
        "WAITING",
        "ACTIVE",
        "ADMIT/S NOW/SET",
        "HELD BY",
        "NEW WAIT",
    ]);
    for r in rooms.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let flag = |k: &str| r.get(k).and_then(Value::as_bool);
        let rejects = r.get("queueing").and_then(Value::as_str) == Some("reject");
        // An event's pre-queue holds the line for its opening; its closing turns newcomers away.
        let phase = r.get("event_phase").and_then(Value::as_str);
        let state = match (flag("enabled"), flag("queue_all")) {
            (Some(false), _) => "off",
            (_, Some(true)) => "held",
            _ if rejects || phase == Some("closed") => "closed",
            _ if phase == Some("prequeue") => "prequeue",
            _ => "open",
        };
        let num = |k: &str| r.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let held = r.get("held_by").and_then(Value::as_str).unwrap_or("-");
        // Nobody waiting: no line is moving, whatever the last one measured.
        let now = if num("waiting") > 0.0 {
            format!("{:.1}", num("admitted_per_second"))
        } else {
            "-".into()
        };
        let wait = match r.get("new_visitor_wait_seconds").and_then(Value::as_u64) {
            Some(0) => "none".to_string(),
            Some(s) => format!("{s}s"),
            None if held == "max-active" => "unknown".into(),
            None => "-".into(),
        };
        out.push_str(&row([
            r.get("name").and_then(Value::as_str).unwrap_or("?"),
            state,
            &num("waiting").to_string(),
            &num("active").to_string(),
            &format!(
                "{now}/{}{}",
                num("admit_per_second"),
                if r["autopilot"]["running"] == true {
                    " auto"
                } else {
                    ""
                }
            ),
            held,
            &wait,
        ]));
    }
    for r in rooms.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        if let Some(note) = configs_note(r) {
            out.push_str(&note);
        }
        if let Some(note) = autopilot_note(r) {
            out.push_str(&note);
        }
    }
    out
}

/// A line under the table for a room with an autopilot: its inputs and its last step.
fn autopilot_note(r: &Value) -> Option<String> {
    let a = r.get("autopilot").filter(|a| a.is_object())?;
    let name = r.get("name").and_then(Value::as_str).unwrap_or("?");
    let f = |k: &str| a.get(k).and_then(Value::as_f64);
    let state = match a.get("paused_because").and_then(Value::as_str) {
        Some(why) => why.to_string(),
        None => format!(
            "{}/s of {} (min {})",
            f("rate").unwrap_or(0.0),
            f("ceiling").unwrap_or(0.0),
            f("min_rate").unwrap_or(0.0)
        ),
    };
    let last = a
        .get("last_change")
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("-");
    Some(format!(
        "  room {name} autopilot: {state}; origin p90 {} ms (target {}), errors {:.1} % (max {:.1} %); last step: {last}\n",
        f("origin_p90_ms").unwrap_or(0.0),
        f("target_latency_ms").unwrap_or(0.0),
        f("origin_error_share").unwrap_or(0.0) * 100.0,
        f("max_error_rate").unwrap_or(0.0) * 100.0,
    ))
}

/// A line under the table when a room's instances run different configurations.
fn configs_note(r: &Value) -> Option<String> {
    let configs = r.get("instance_configs")?.as_object()?;
    if configs.len() < 2 {
        return None;
    }
    let runs: Vec<String> = configs
        .iter()
        .map(|(digest, n)| format!("{} on {digest}", n.as_u64().unwrap_or(0)))
        .collect();
    Some(format!(
        "! room {}: instances run {} configurations ({}); this one runs {}. \
         SIGHUP (or restart) every instance after a change.\n",
        r.get("name").and_then(Value::as_str).unwrap_or("?"),
        configs.len(),
        runs.join(", "),
        r.get("config_digest")
            .and_then(Value::as_str)
            .unwrap_or("?")
    ))
}

/// The first millisecond after 9999-12-31T23:59:59Z, past which RFC 3339 has no year.
const LAST_RFC3339_MS: u64 = 253_402_300_800_000;

/// A server's text as an error tells it: at most a line's worth (found by review: a body of
/// megabytes was printed whole).
pub fn clipped(text: &str) -> std::borrow::Cow<'_, str> {
    const MOST: usize = 512;
    match text.char_indices().nth(MOST) {
        Some((i, _)) => std::borrow::Cow::Owned(format!("{}… ({} bytes)", &text[..i], text.len())),
        None => std::borrow::Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests;
