//! What a browser reads from an answer: the status JSON and the waiting page's script.

use std::time::Duration;

use serde::Deserialize;

use crate::eta::{self, Prediction};

#[derive(Debug, Deserialize)]
pub(super) struct Status {
    pub(super) state: Option<String>,
    pub(super) position: Option<u64>,
    pub(super) retry_after_ms: Option<u64>,
    // Kept as JSON values: an unexpected form makes no prediction, never a failed status.
    eta_seconds: Option<serde_json::Value>,
    eta_low_seconds: Option<serde_json::Value>,
    eta_high_seconds: Option<serde_json::Value>,
}

impl Status {
    pub(super) fn prediction(&self) -> Option<Prediction> {
        eta::from_status(
            self.eta_seconds.as_ref(),
            self.eta_low_seconds.as_ref(),
            self.eta_high_seconds.as_ref(),
        )
    }
}

/// The first wait on the waiting page, as its script reads it: the built-in page sets
/// `var wait = MILLISECONDS;` (the server's `retry_after_ms`). `Retry-After` is whole seconds;
/// a browser with JavaScript uses the milliseconds, so the tool does too.
pub(super) fn page_wait(body: &[u8]) -> Option<Duration> {
    page_var(body, "var wait = ").map(Duration::from_millis)
}

/// The place the waiting page shows (`var pos = N;`, 0 when it has none).
pub(super) fn page_position(body: &[u8]) -> Option<u64> {
    page_var(body, "var pos = ").filter(|p| *p > 0)
}

fn page_var(body: &[u8], var: &str) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let rest = &text[text.find(var)? + var.len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

pub(super) fn parse_status(body: &[u8]) -> Option<Status> {
    serde_json::from_slice(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_wait_comes_from_the_page_script() {
        let page = b"<script>\n  var wait = 2345;\n  var x = 1;</script>";
        assert_eq!(page_wait(page), Some(Duration::from_millis(2345)));
        assert_eq!(page_wait(b"<p>no script</p>"), None);
        assert_eq!(page_wait(b"var wait = ;"), None);
    }
}
