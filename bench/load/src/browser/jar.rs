//! A browser's cookie jar.

/// A browser's cookies: name → value, sent back as one `Cookie` header.
#[derive(Debug, Default, Clone)]
pub struct CookieJar {
    cookies: Vec<(String, String)>,
}

impl CookieJar {
    /// Takes in one `Set-Cookie` value: `name=value` before the first `;`; an empty value or
    /// `Max-Age=0` (or a negative one) removes the cookie.
    pub fn store(&mut self, set_cookie: &str) {
        let mut parts = set_cookie.split(';');
        let Some((name, value)) = parts.next().and_then(|nv| nv.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return;
        }
        let expired = parts.any(|attr| {
            attr.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("max-age")
                    && v.trim().parse::<i64>().is_ok_and(|s| s <= 0)
            })
        });
        self.cookies.retain(|(n, _)| n != name);
        if !expired && !value.is_empty() {
            self.cookies.push((name.to_string(), value.to_string()));
        }
    }

    #[cfg(test)]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `Cookie` header, `None` when the jar is empty.
    pub fn header(&self) -> Option<String> {
        if self.cookies.is_empty() {
            return None;
        }
        Some(
            self.cookies
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_jar_sets_replaces_and_removes() {
        let mut j = CookieJar::default();
        assert_eq!(j.header(), None);
        j.store("anteroom_vid=abc123; Max-Age=86400; Path=/; HttpOnly; SameSite=Lax");
        j.store("anteroom_sale=1.abc.99.k1.sig; Max-Age=600; Path=/; HttpOnly");
        assert_eq!(j.get("anteroom_vid"), Some("abc123"));
        assert_eq!(
            j.header().as_deref(),
            Some("anteroom_vid=abc123; anteroom_sale=1.abc.99.k1.sig")
        );
        j.store("anteroom_vid=def; Path=/");
        assert_eq!(j.get("anteroom_vid"), Some("def"));
        j.store("anteroom_sale=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax");
        assert_eq!(j.get("anteroom_sale"), None);
        j.store("anteroom_vid=gone; max-age = 0");
        assert_eq!(j.get("anteroom_vid"), None);
        assert_eq!(j.header(), None);
        // A value with '=' in it is kept whole; junk is ignored.
        j.store("t=a=b; Path=/");
        j.store("novalue");
        j.store("=x");
        assert_eq!(j.header().as_deref(), Some("t=a=b"));
    }
}
