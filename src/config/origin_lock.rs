//! `[[upstream]] origin-secret = { header, value }`: a header anteroom adds to every request it
//! sends that upstream, so that the origin can refuse requests that did not come through the
//! line (docs/ORIGIN-LOCK.md). Part of [`super::build`].

use super::build::Builder;
use super::file::OriginSecretFile;
use super::locate::KeyPath;
use super::model::OriginSecret;

/// Shorter secrets are refused: `openssl rand -base64 32` gives 44 characters.
pub const MIN_ORIGIN_SECRET_LEN: usize = 24;

/// Headers that mean something to HTTP itself or to anteroom: a secret in one of them would be
/// mangled on the way or change what the origin does with the request.
const RESERVED: [&str; 13] = [
    "host",
    "cookie",
    "connection",
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
    "expect",
    "authorization",
    "x-forwarded-for",
    "x-forwarded-proto",
];

/// Whether anteroom uses or removes the header itself: HTTP's own, and the headers it strips
/// before forwarding (where a secret would be removed again and the origin refuse everyone).
fn reserved(name: &str) -> bool {
    RESERVED.contains(&name)
        || crate::route::headers::STRIPPED_HEADERS
            .iter()
            .any(|h| h.iter().any(|l| crate::route::headers::named(name, l)))
}

impl Builder<'_> {
    pub(super) fn origin_secret(
        &mut self,
        p: &KeyPath,
        s: Option<&OriginSecretFile>,
    ) -> Option<OriginSecret> {
        let s = s?;
        let sp = p.key("origin-secret");
        let name = match http::HeaderName::from_bytes(s.header.as_bytes()) {
            Ok(n) if !reserved(n.as_str()) => n,
            Ok(n) => {
                self.fail(
                    sp.key("header"),
                    format!("{:?} is a header HTTP or anteroom uses", n.as_str()),
                    "use a header of your own, e.g. header = \"X-Anteroom-Secret\"",
                );
                return None;
            }
            Err(_) => {
                self.fail(
                    sp.key("header"),
                    format!("{:?} is not a header name", s.header),
                    "use letters, digits and '-', e.g. header = \"X-Anteroom-Secret\"",
                );
                return None;
            }
        };
        let value = self.secret(&sp.key("value"), &s.value)?;
        if value.len() < MIN_ORIGIN_SECRET_LEN {
            self.fail(
                sp.key("value"),
                format!(
                    "the secret has {} characters; at least {MIN_ORIGIN_SECRET_LEN} are needed",
                    value.len()
                ),
                "use a random value, e.g. value = \"env:ANTEROOM_ORIGIN_SECRET\" with the output of `openssl rand -base64 32`",
            );
            return None;
        }
        let Ok(mut value) = http::HeaderValue::from_str(&value) else {
            self.fail(
                sp.key("value"),
                "the secret has characters a header value cannot carry",
                "use printable ASCII, e.g. the output of `openssl rand -base64 32`",
            );
            return None;
        };
        // Kept out of HPACK's table and of anything that prints header values.
        value.set_sensitive(true);
        Some(OriginSecret { name, value })
    }
}
