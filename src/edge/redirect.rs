//! `[listen] redirect-http = true`: a request over plain HTTP is answered with a `308` to the
//! same URL over HTTPS (a 308 keeps the method and body of a form sent to `http://`).

use crate::route::normalize_host;

/// Where a plain-HTTP request for `host` and `path_and_query` is sent: the host as the request
/// named it (without its port, which was the HTTP one), HTTPS' port when it is not 443. `None`
/// when the request names no usable host (it gets a 400: anteroom will not make one up).
pub fn location(host: Option<&str>, path_and_query: &str, https_port: u16) -> Option<String> {
    // An IPv6 literal keeps its brackets.
    let host = normalize_host(host?)?;
    let path = if path_and_query.starts_with('/') {
        path_and_query
    } else {
        "/"
    };
    Some(if https_port == 443 {
        format!("https://{host}{path}")
    } else {
        format!("https://{host}:{https_port}{path}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_url_over_https() {
        assert_eq!(
            location(Some("Shop.Test:8080"), "/p?q=1", 443).as_deref(),
            Some("https://Shop.Test/p?q=1")
        );
        assert_eq!(
            location(Some("shop.test"), "/", 8443).as_deref(),
            Some("https://shop.test:8443/")
        );
        assert_eq!(
            location(Some("[::1]:8080"), "/a", 8443).as_deref(),
            Some("https://[::1]:8443/a")
        );
        assert_eq!(
            location(Some("shop.test"), "*", 443).as_deref(),
            Some("https://shop.test/")
        );
    }

    #[test]
    fn no_usable_host_no_redirect() {
        for bad in [
            None,
            Some(""),
            Some("a b"),
            Some("evil.test/x"),
            Some("a@b"),
        ] {
            assert_eq!(location(bad, "/", 443), None, "{bad:?}");
        }
    }
}
