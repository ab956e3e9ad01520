//! The readers of single values for [`Builder`]: `env:NAME` and `file:PATH`, secrets,
//! durations, addresses, CIDR lists and positive numbers. Each one that fails tells the key,
//! what is wrong and the fix, and answers a value the build can go on with.

use std::net::SocketAddr;
use std::time::Duration;

use super::build::Builder;
use super::locate::KeyPath;

/// The longest duration any key takes: each key has a bound of its own below it, and no
/// arithmetic on a value within it overflows (found by review: a tick of 2^64 s panicked the
/// build, and a `join-limit` window past 584 years panicked `run` after `check` passed it).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

impl Builder<'_> {
    /// Resolves `env:NAME` to the variable's value.
    pub(super) fn string(&mut self, key: &KeyPath, raw: &str) -> Option<String> {
        if let Some(path) = raw.strip_prefix("file:") {
            return self.file_value(key, path);
        }
        match raw.strip_prefix("env:") {
            None => Some(raw.to_string()),
            Some(name) => match std::env::var(name) {
                Ok(v) if !v.is_empty() => {
                    self.hidden.push((key.clone(), v.clone()));
                    Some(v)
                }
                Ok(_) => {
                    self.fail(
                        key.clone(),
                        format!("environment variable {name} is empty"),
                        format!("set {name} to a value, or write the value inline"),
                    );
                    None
                }
                Err(_) => {
                    self.fail(
                        key.clone(),
                        format!("environment variable {name} is not set"),
                        format!(
                            "export {name}=... before anteroom starts (a running process keeps \
                             the environment it started with: for a value a reload should \
                             change, use \"file:PATH\"), or write the value inline"
                        ),
                    );
                    None
                }
            },
        }
    }

    /// A `file:PATH` value: the file's text, read at every load, so a reload (SIGHUP) takes a
    /// rotated secret, which `env:` cannot give a running process (found by review). One line
    /// end at the end of the file is not part of the value (a secret written by `echo`, a
    /// mounted Kubernetes secret). A relative path is read from the config file's directory.
    fn file_value(&mut self, key: &KeyPath, path: &str) -> Option<String> {
        const MAX: u64 = 64 * 1024;
        let full = self.base_dir.join(path);
        let mut text = String::new();
        let read = crate::files::read_regular(&full, MAX)
            .and_then(|bytes| {
                String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())
            })
            .and_then(|t| {
                text = t;
                if text.is_empty() {
                    Err("it is empty".to_string())
                } else {
                    Ok(())
                }
            });
        if let Err(e) = read {
            self.fail(
                key.clone(),
                format!("file {} cannot be used: {e}", full.display()),
                "write the value to that file (readable by anteroom), or write it inline",
            );
            return None;
        }
        let value = text.strip_suffix('\n').unwrap_or(&text);
        let value = value.strip_suffix('\r').unwrap_or(value);
        if value.is_empty() {
            self.fail(
                key.clone(),
                format!("file {} holds only a line end", full.display()),
                "write the value to that file, or write it inline",
            );
            return None;
        }
        self.hidden.push((key.clone(), value.to_string()));
        Some(value.to_string())
    }

    /// A secret's text ([`Self::string`]), refused when it reads as a reference anteroom does
    /// not resolve: `ENV:NAME` or `File:PATH` in another case, a shell's `${NAME}` or `$NAME`,
    /// or the path of a file that exists. Taken as written, it became a secret anyone reading
    /// the file knew (found by review: `token = "ENV:ANTEROOM_ADMIN_TOKEN"` passed `check`,
    /// and that text signed in).
    pub(super) fn secret_string(&mut self, key: &KeyPath, raw: &str) -> Option<String> {
        // Only a whole reference is one: a generated secret may begin with `$` or `/` (and a
        // value read through `env:` is judged too, so nothing of a real secret is quoted back:
        // found by re-review, `$Super...` from an environment variable was refused and shown).
        let ident =
            |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let lower = raw.to_ascii_lowercase();
        let env_name = raw
            .split_once(':')
            .filter(|(prefix, name)| {
                prefix.eq_ignore_ascii_case("env") && *prefix != "env" && ident(name)
            })
            .map(|(_, name)| name);
        // `${NAME}`, or `$NAME` with a variable's usual name (upper case): a generated key that
        // merely begins with `$` is mixed case.
        let shell_name = raw
            .strip_prefix("${")
            .and_then(|r| r.strip_suffix('}'))
            .filter(|n| ident(n))
            .or_else(|| {
                raw.strip_prefix('$').filter(|n| {
                    ident(n)
                        && n.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
                        && !n.chars().any(|c| c.is_ascii_lowercase())
                })
            });
        // No part of the value is quoted back: it may have been read through `env:` (re-review).
        let why = if env_name.is_some() {
            Some((
                "\"env:\" is read in lower case only: this is the text itself".to_string(),
                "write env: in lower case, then the variable's name".to_string(),
            ))
        } else if lower.starts_with("file:") && raw.len() > 5 && !raw.starts_with("file:") {
            Some((
                "\"file:\" is read in lower case only: this is the text itself".to_string(),
                "write file: in lower case".to_string(),
            ))
        } else if shell_name.is_some() {
            Some((
                "anteroom does not expand shell variables: this is the text itself".to_string(),
                "write env: then the variable's name".to_string(),
            ))
        } else if raw.starts_with('/') && std::path::Path::new(raw).is_file() {
            Some((
                "is the path of a file: this is the text itself, not the file's".to_string(),
                "write file: before the path".to_string(),
            ))
        } else {
            None
        };
        if let Some((problem, fix)) = why {
            self.fail(key.clone(), problem, fix);
            return None;
        }
        self.string(key, raw)
    }

    /// A secret (a cookie key, the draw's seed, the origin's secret): a string value whose
    /// ends are not spaces and which holds no control character. A key read with a stray
    /// newline is another key, and instances that disagree on it split silently (found by
    /// review: `check` passed a cookie key with a trailing newline).
    pub(super) fn secret(&mut self, key: &KeyPath, raw: &str) -> Option<String> {
        let value = self.secret_string(key, raw)?;
        if let Some(c) = value.chars().find(|c| c.is_control()) {
            self.fail(
                key.clone(),
                format!("holds the control character {c:?} (a newline read into an environment variable?)"),
                "remove it; generate a key with: openssl rand -base64 32",
            );
            return None;
        }
        if value.trim() != value {
            self.fail(
                key.clone(),
                "begins or ends with a space",
                "remove the spaces; generate a key with: openssl rand -base64 32",
            );
            return None;
        }
        Some(value)
    }

    pub(super) fn socket(&mut self, key: &KeyPath, raw: Option<&str>, default: &str) -> SocketAddr {
        let fallback: SocketAddr = default
            .parse()
            .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
        let text = match raw {
            None => return fallback,
            Some(raw) => match self.string(key, raw) {
                Some(t) => t,
                None => return fallback,
            },
        };
        match text.parse::<SocketAddr>() {
            // Port 0 binds a port the system picks: nobody would know where to reach it, and
            // another at each start (found by review: `check` passed it).
            Ok(a) if a.port() == 0 => {
                self.fail(
                    key.clone(),
                    format!("{text:?} has port 0, which listens on a port picked at random"),
                    "give the port to listen on, like \"127.0.0.1:8080\"",
                );
                fallback
            }
            Ok(a) => a,
            Err(_) => {
                self.fail(
                    key.clone(),
                    format!("{text:?} is not an IP address with a port"),
                    "write it like \"127.0.0.1:8080\" or \"[::]:8080\"",
                );
                fallback
            }
        }
    }

    /// `10.0.0.0/8`, `2001:db8::/32`, or a single address.
    pub(super) fn cidrs(&mut self, key: &KeyPath, raw: &[String]) -> Vec<ipnet::IpNet> {
        let mut out = Vec::new();
        for (i, r) in raw.iter().enumerate() {
            let Some(text) = self.string(&key.index(i), r) else {
                continue;
            };
            let parsed = text
                .parse::<ipnet::IpNet>()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from));
            match parsed {
                Ok(n) => out.push(n),
                Err(_) => self.fail(
                    key.index(i),
                    format!("{text:?} is not an address or CIDR range"),
                    "write it like \"10.0.0.0/8\", \"192.0.2.10\" or \"2001:db8::/32\"",
                ),
            }
        }
        out
    }

    /// What is wrong when `nets` together cover more public addresses than one organisation
    /// holds: more than an IPv4 `/8`'s worth, or an IPv6 `/19`'s (private, loopback, shared and
    /// link-local ranges are not counted). Counted over every network, not one at a time (found
    /// by review: 128 networks of `/8`, or 256 rules of one each, passed), with the IPv6 ranges
    /// that carry IPv4 addresses (NAT64, 6to4, IPv4-compatible, Teredo) counted as the IPv4
    /// addresses they stand for (found by re-review: `64:ff9b::/96` passed and let every client
    /// behind a NAT64 translator past).
    pub(super) fn too_wide(nets: &[ipnet::IpNet]) -> Option<String> {
        use ipnet::IpNet;
        const PRIVATE: [&str; 9] = [
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "127.0.0.0/8",
            "100.64.0.0/10",
            "169.254.0.0/16",
            "fc00::/7",
            "fe80::/10",
            "::1/128",
        ];
        // (range, the bit after the IPv4 address it carries, from the top).
        const CARRY_V4: [(&str, u8); 5] = [
            ("64:ff9b::/96", 128),
            ("64:ff9b:1::/48", 128),
            ("::/96", 128),
            ("2002::/16", 48),
            ("2001::/32", 128),
        ];
        let size = |n: &IpNet| {
            let bits = u32::from(n.max_prefix_len() - n.prefix_len());
            1u128.checked_shl(bits).unwrap_or(u128::MAX)
        };
        let private: Vec<IpNet> = PRIVATE.iter().filter_map(|p| p.parse().ok()).collect();
        let carriers: Vec<(IpNet, u8)> = CARRY_V4
            .iter()
            .filter_map(|(p, end)| p.parse().ok().map(|n| (n, *end)))
            .collect();
        let (mut v4, mut v6) = (0u128, 0u128);
        for n in IpNet::aggregate(&nets.to_vec()) {
            if private.iter().any(|p| p.contains(&n)) {
                continue;
            }
            // Less the private ranges inside it (CIDR ranges nest or are apart).
            let inside: u128 = private.iter().filter(|p| n.contains(*p)).map(size).sum();
            let count = size(&n).saturating_sub(inside);
            match n {
                IpNet::V4(_) => v4 = v4.saturating_add(count),
                IpNet::V6(_) => {
                    v6 = v6.saturating_add(count);
                    if let Some((_, end)) = carriers.iter().find(|(c, _)| c.contains(&n)) {
                        let bits = u32::from(end.saturating_sub(n.prefix_len()).min(32));
                        v4 = v4.saturating_add(1u128 << bits);
                    }
                }
            }
        }
        if v4 > 1 << 24 {
            Some(format!(
                "together they cover {v4} IPv4 addresses (IPv6 forms of IPv4 included), more than a /8 (16777216) outside private ranges"
            ))
        } else if v6 > 1 << 109 {
            Some(
                "together they cover more IPv6 addresses than a /19 outside private ranges"
                    .to_string(),
            )
        } else {
            None
        }
    }

    pub(super) fn positive(
        &mut self,
        key: &KeyPath,
        raw: Option<i64>,
        default: Option<u64>,
    ) -> u64 {
        match (raw, default) {
            (Some(v), _) if v >= 1 => v as u64,
            (Some(v), _) => {
                self.fail(
                    key.clone(),
                    format!("must be at least 1, not {v}"),
                    "write a positive whole number",
                );
                default.unwrap_or(1)
            }
            (None, Some(d)) => d,
            (None, None) => {
                self.fail(key.clone(), "is required", "add it to this [[room]]");
                1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// The errors of a config whose one room has `extra` (`""` when it loads).
    fn errors(extra: &str) -> String {
        let text = format!(
            "[cookie]\nkeys = [\"test-key-0123456789-0123456789-0123456789\"]\n\n[[upstream]]\n\
             name = \"shop\"\naddr = \"127.0.0.1:9000\"\n\n[[room]]\nname = \"sale\"\n\
             paths = [\"/p\"]\nadmit-per-second = 5\nmax-active = 10\n{extra}\n"
        );
        match crate::config::parse(&text, "unit.toml", std::path::Path::new(".")) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    /// A duration past a year is refused by its key, and the build goes on without a panic
    /// (found by review: a tick of 2^64 s panicked `check` and a reload's thread; a
    /// `join-limit` window of 585 years passed `check` and panicked `run`).
    #[test]
    fn a_duration_past_a_year_is_refused_without_a_panic() {
        let huge = "\"18446744073709551615s\"";
        for extra in [
            format!("tick = {huge}"),
            format!("throttled-poll = {huge}"),
            format!("abandon-after = {huge}"),
            format!("poll = [ {{ every = {huge} }} ]"),
            "join-limit = { per-ip = 1, per = \"250000d\" }".to_string(),
        ] {
            let e = errors(&extra);
            assert!(e.contains("longer than any duration"), "{extra}: {e}");
            assert!(e.contains("room[0]"), "{extra}: {e}");
        }
        assert_eq!(errors("join-limit = { per-ip = 1, per = \"1h\" }"), "");
        let e = errors("join-limit = { per-ip = 1, per = \"365d\" }");
        assert!(e.contains("at most \"1h\""), "{e}");
    }

    /// A secret that reads as a reference anteroom does not resolve is refused, with the
    /// spelling that reads it (found by review: `ENV:NAME` and `${NAME}` were taken as the
    /// text itself, a secret anyone reading the file knew).
    #[test]
    fn a_secret_that_reads_as_an_unresolved_reference_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, "k").unwrap();
        let path = file.display().to_string();
        let config = |key: &str| {
            format!(
                "[cookie]\nkeys = [\"{key}\"]\n\n[[upstream]]\nname = \"shop\"\n\
                 addr = \"127.0.0.1:9000\"\n"
            )
        };
        for (key, fix) in [
            (
                "ENV:ANTEROOM_COOKIE_KEY_WITH_A_LONG_NAME_1",
                "write env: in lower case",
            ),
            (
                "File:/run/secrets/anteroom-cookie-key-0123",
                "file: in lower case",
            ),
            (
                "${ANTEROOM_COOKIE_KEY_WITH_A_LONG_NAME_12}",
                "does not expand shell variables",
            ),
            (
                "$ANTEROOM_COOKIE_KEY_WITH_A_LONG_NAME_1234",
                "does not expand shell variables",
            ),
            (
                "File:keys/anteroom-cookie-key-0123456789ab",
                "file: in lower case",
            ),
            (path.as_str(), "write file: before the path"),
        ] {
            let e = crate::config::parse(&config(key), "unit.toml", std::path::Path::new("."))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                e.contains("cookie.keys[0]") && e.contains(fix),
                "{key}: {e}"
            );
            assert!(!e.contains(&key[6..]), "part of the value quoted back: {e}");
        }
        // Generated secrets that merely begin like a reference are secrets (re-review).
        for key in [
            "/plain-key-0123456789-0123456789-0123456789",
            "$9fJ2kLmN0pQrStUvWxYz0123456789abcdefXYZ",
            "Env:9f-J2k/LmN0pQrStUvWxYz0123456789abcdef",
        ] {
            let text = config(key);
            assert!(
                crate::config::parse(&text, "unit.toml", std::path::Path::new(".")).is_ok(),
                "{key}"
            );
        }
    }

    /// A value past its bound is refused, not cut to it in silence (found by review:
    /// `breaker-failures = 5000` ran as 1000).
    #[test]
    fn breaker_failures_past_the_bound_is_refused() {
        let text = |n: u64| {
            format!(
                "[cookie]\nkeys = [\"test-key-0123456789-0123456789-0123456789\"]\n[store]\n\
                 breaker-failures = {n}\n[[upstream]]\nname = \"shop\"\naddr = \"127.0.0.1:9000\"\n"
            )
        };
        let e = crate::config::parse(&text(5000), "unit.toml", std::path::Path::new("."))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("store.breaker-failures") && e.contains("at most 1000"),
            "{e}"
        );
        assert!(crate::config::parse(&text(1000), "unit.toml", std::path::Path::new(".")).is_ok());
    }

    /// A text's placeholder it does not have is refused: it was shown as written (found by
    /// review: "{low} to 13 minutes").
    #[test]
    fn a_text_with_a_placeholder_it_does_not_have_is_refused() {
        let e = errors("[room.texts.en]\neta_range_minutes = \"{low} to {hi} minutes\"");
        assert!(e.contains("room[0].texts.en.eta_range_minutes"), "{e}");
        assert!(
            e.contains("{low} is not a placeholder") && e.contains("use {lo}, {hi}"),
            "{e}"
        );
        let e = errors("[room.texts.en]\ntitle_waiting = \"In line {n}\"");
        assert!(e.contains("has no placeholder"), "{e}");
        assert_eq!(
            errors("[room.texts.en]\neta_range_minutes = \"{lo}-{hi} min\""),
            ""
        );
        assert_eq!(
            errors("[room.texts.en]\ntitle_waiting = \"In line {for you}\""),
            ""
        );
    }

    #[test]
    fn networks_are_too_wide_by_what_they_cover_together() {
        let wide = |nets: &[&str]| {
            let nets: Vec<ipnet::IpNet> = nets.iter().map(|n| n.parse().unwrap()).collect();
            super::Builder::too_wide(&nets).is_some()
        };
        assert!(wide(&["0.0.0.0/0"]));
        assert!(wide(&["0.0.0.0/1", "128.0.0.0/1"]));
        assert!(wide(&["::/0"]));
        let evens: Vec<String> = (0..128).map(|i| format!("{}.0.0.0/8", 2 * i)).collect();
        let evens: Vec<&str> = evens.iter().map(String::as_str).collect();
        assert!(wide(&evens), "128 networks of /8");
        assert!(wide(&["1.0.0.0/8", "3.0.0.0/8"]), "two public /8s");
        assert!(!wide(&["17.0.0.0/8"]), "one organisation's /8");
        assert!(!wide(&[
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "127.0.0.0/8",
            "17.0.0.0/8"
        ]));
        assert!(!wide(&["fc00::/7", "2001:db8::/32"]));
        assert!(wide(&["2600::/7"]));
        assert!(wide(&["2600::/16"]), "more than one organisation holds");
        // Private neighbours merge into a wider network; only what is public counts (review).
        assert!(!wide(&["10.0.0.0/8", "11.0.0.0/8"]));
        assert!(!wide(&["126.0.0.0/8", "127.0.0.0/8"]));
        // IPv6 forms of all of IPv4 (review).
        for n in [
            "64:ff9b::/96",
            "2002::/16",
            "::/96",
            "2001::/32",
            "64:ff9b:1::/48",
        ] {
            assert!(wide(&[n]), "{n}");
        }
        assert!(
            !wide(&["64:ff9b::cb00:7100/120"]),
            "one IPv4 /24 through NAT64"
        );
        assert!(
            !wide(&["::ffff:0:0/96"]),
            "matches no address: clients are read as IPv4"
        );
        // Over the room's rules, not one at a time.
        let e = errors("bypass = [{ client = [\"1.0.0.0/8\"] }, { client = [\"3.0.0.0/8\"] }]");
        assert!(
            e.contains("room[0].bypass[1].client") && e.contains("other client rules"),
            "{e}"
        );
        assert_eq!(errors("bypass = [{ client = [\"1.0.0.0/8\"] }]"), "");
    }
}
