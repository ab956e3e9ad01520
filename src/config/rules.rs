//! What a request may be let past or must carry, as loaded: a room's `bypass` rules and
//! `crawlers` policy, and an upstream's `origin-secret`. Re-exported by [`super::model`].

/// A request that skips the room's line: never queued, never counted as active, not held by
/// `max-origin-inflight`. Checked in this order; the first that matches wins.
#[derive(Clone, PartialEq, Eq)]
pub enum BypassRule {
    /// A path prefix that every reading of the request's path falls under.
    Path(String),
    /// The client's address (the socket peer, or what a trusted proxy reports).
    Client(Vec<ipnet::IpNet>),
    /// A header whose value equals a secret: SHA-256 of the secret, compared in constant time.
    Header {
        name: http::HeaderName,
        digest: [u8; 32],
    },
    /// A CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`, no body,
    /// no method override), which browsers send without cookies: the shop answers what it
    /// allows.
    Preflight,
}

impl BypassRule {
    /// The rule as `/metrics` and the log name it (no secret in it).
    pub fn label(&self) -> String {
        match self {
            BypassRule::Path(p) => format!("path:{p}"),
            BypassRule::Client(nets) => format!(
                "client:{}",
                nets.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            BypassRule::Header { name, .. } => format!("header:{name}"),
            BypassRule::Preflight => "preflight".into(),
        }
    }
}

impl std::fmt::Debug for BypassRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

/// What a search crawler gets where a visitor would get the waiting page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrawlerPolicy {
    /// `503` with `Retry-After`: a search engine keeps the page it had and comes back, and the
    /// waiting page is never indexed.
    Refuse,
    /// The waiting page, like any visitor.
    Wait,
}

/// The header by which an origin knows a request came through anteroom.
#[derive(Clone, PartialEq, Eq)]
pub struct OriginSecret {
    pub name: http::HeaderName,
    pub value: http::HeaderValue,
}

impl std::fmt::Debug for OriginSecret {
    /// The value is a secret: never in a log or a summary.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OriginSecret {{ name: {:?}, value: <secret> }}",
            self.name
        )
    }
}
