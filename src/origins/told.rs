//! An origin's failure as the log tells it: without the raw head Pingora quotes for one it
//! could not parse (`buf: ...`), which holds the answer's `Set-Cookie` values — visitors'
//! sessions (found by review: the "origin failed" line quoted them; by re-review, the health
//! check's "becomes unhealthy" line too; the admin listener's log quoted a request's
//! `Authorization` the same way).

use async_trait::async_trait;
use pingora::lb::health_check::{HealthCheck, HttpHealthCheck};
use pingora::lb::Backend;
use pingora::ErrorType;

/// `e` and its causes, as Pingora shows them, less any raw head.
pub fn told(e: &pingora::Error) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut at = Some(e);
    let mut previous: Option<&pingora::Error> = None;
    while let Some(e) = at {
        let mut level = String::new();
        if previous.is_none_or(|p| p.esource() != e.esource()) {
            let _ = write!(level, " {}", e.esource().as_str());
        }
        if previous.is_none_or(|p| p.etype() != e.etype()) {
            let _ = write!(level, " {}", e.etype().as_str());
        }
        let quoted = *e.etype() == ErrorType::InvalidHTTPHeader;
        if let Some(c) = e
            .context
            .as_ref()
            .filter(|c| !quoted && !c.as_str().starts_with("buf:"))
        {
            let _ = write!(level, " context: {c}");
        }
        if previous.is_some() && !level.trim().is_empty() {
            out.push_str(" cause:");
        }
        out.push_str(&level);
        previous = Some(e);
        at = match e.cause.as_ref() {
            Some(c) => match c.downcast_ref::<pingora::BError>() {
                Some(inner) => Some(inner),
                None => {
                    let _ = write!(out, " cause: {c}");
                    None
                }
            },
            None => None,
        };
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Pingora's HTTP health check, its failures told as [`told`] tells them: Pingora logs a
/// check's error when the server goes out of rotation.
pub struct Checked(pub HttpHealthCheck);

#[async_trait]
impl HealthCheck for Checked {
    async fn check(&self, target: &Backend) -> pingora::Result<()> {
        self.0
            .check(target)
            .await
            .map_err(|e| pingora::Error::explain(e.etype().clone(), told(&e)))
    }

    async fn health_status_change(&self, target: &Backend, healthy: bool) {
        self.0.health_status_change(target, healthy).await;
    }

    fn health_threshold(&self, success: bool) -> usize {
        self.0.health_threshold(success)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_pingora_could_not_read_is_never_told() {
        let inner = pingora::Error::because(
            ErrorType::InvalidHTTPHeader,
            "buf: HTTP/1.1 200 OK\r\nSet-Cookie: s=SECRET\r\n",
            pingora::Error::explain(ErrorType::InternalError, "invalid header value"),
        );
        let mut outer = inner.more_context("Peer: 127.0.0.1:8080");
        outer.esource = pingora::ErrorSource::Upstream;
        let shown = told(&outer);
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("InvalidHTTPHeader"), "{shown}");
        assert!(shown.contains("invalid header value"), "{shown}");
        assert!(!shown.contains("cause: cause:"), "{shown}");
        // Other failures are told whole.
        let refused = pingora::Error::explain(ErrorType::ConnectRefused, "Peer: 127.0.0.1:1");
        assert_eq!(told(&refused), refused.to_string().trim_start());
    }
}
