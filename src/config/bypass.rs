//! A room's `bypass` rules and `crawlers` policy. Part of [`super::build`].

use sha2::{Digest, Sha256};

use super::build::Builder;
use super::file::BypassFile;
use super::locate::KeyPath;
use super::model::{BypassRule, ConsumeRoute, CrawlerPolicy};
use crate::route::path_covers_folded;

/// Shorter header secrets are refused: a partner key must not be guessable.
pub const MIN_BYPASS_SECRET_LEN: usize = 16;

impl Builder<'_> {
    /// `paths` and `consume`: the room's, which no rule may exempt whole.
    pub(super) fn bypass(
        &mut self,
        p: &KeyPath,
        rules: &[BypassFile],
        paths: &[String],
        consume: &[ConsumeRoute],
    ) -> Vec<BypassRule> {
        let mut out = Vec::new();
        // The file's index of each rule in `out`.
        let mut at = Vec::new();
        for (i, b) in rules.iter().enumerate() {
            let bp = p.key("bypass").index(i);
            let kinds = [
                b.path.is_some(),
                b.client.is_some(),
                b.header.is_some(),
                b.preflight.is_some(),
            ];
            if kinds.iter().filter(|k| **k).count() != 1
                || (b.equals.is_some() != b.header.is_some())
            {
                self.fail(
                    bp,
                    "a bypass rule names exactly one of path, client, header with equals, or preflight",
                    "write { path = \"/feed.xml\" }, { client = [\"10.20.0.0/16\"] }, { header = \"X-Partner-Key\", equals = \"env:PARTNER_KEY\" } or { preflight = true }",
                );
                continue;
            }
            if let Some(on) = b.preflight {
                if !on {
                    self.fail(
                        bp.key("preflight"),
                        "is false: a rule that lets nothing past",
                        "write { preflight = true }, or leave the rule out",
                    );
                    continue;
                }
                out.push(BypassRule::Preflight);
                at.push(i);
                continue;
            }
            if let Some(path) = &b.path {
                let clean = crate::route::normalize_path(path);
                if !path.starts_with('/') || clean != path.as_str() {
                    let fix = if path.starts_with('/') {
                        format!("write it as {clean:?}, its plain form (requests are matched in it: a path's own characters unescaped, non-ASCII escaped, no dot segments or repeated slashes)")
                    } else {
                        "write it as the origin names it, from the root: e.g. \"/products/feed.xml\"".to_string()
                    };
                    self.fail(bp.key("path"), format!("{path:?} is not a plain path"), fix);
                    continue;
                }
                // A trailing `/` would exempt everything under a room path but the path
                // itself: the whole room, to the checks below (found by review).
                if let Some(bare) = path.strip_suffix('/').filter(|b| !b.is_empty()) {
                    self.fail(
                        bp.key("path"),
                        format!("{path:?} ends with '/'"),
                        format!("write it as {bare:?}: a path rule covers the path and everything under it"),
                    );
                    continue;
                }
                // The path as read by a front controller too: at run time the rule
                // `/index.php/p` exempts the requests Symfony reads as `/p` (found by review:
                // it let the room `/p` and its orders past the line).
                let readings: Vec<&str> = std::iter::once(path.as_str())
                    .chain(crate::route::path::path_infos(path))
                    .collect();
                let covers = |other: &str| {
                    readings
                        .iter()
                        .find(|r| path_covers_folded(r, other))
                        .copied()
                };
                // Compared without case: a room path or consume route with capitals holds its
                // paths in any case, and a bypass rule runs first (found by review: bypass
                // `/sale` under the room path `/Sale` let the room's requests past the line).
                if let Some(whole) = paths.iter().find(|room| covers(room).is_some()) {
                    self.fail(
                        bp.key("path"),
                        format!("{path:?} lets the whole room path {whole:?} past the line"),
                        "name only what must skip the line, e.g. \"/products/feed.xml\"",
                    );
                    continue;
                }
                if let Some(order) = consume.iter().find(|c| {
                    covers(&c.path).is_some()
                        || readings.iter().any(|r| path_covers_folded(&c.path, r))
                }) {
                    self.fail(
                        bp.key("path"),
                        format!(
                            "{path:?} would let the consume route {:?} past the line (orders without an admission)",
                            order.path
                        ),
                        "leave the consume routes to the line; bypass a path outside them",
                    );
                    continue;
                }
                out.push(BypassRule::Path(path.clone()));
                at.push(i);
            } else if let Some(clients) = &b.client {
                let mut nets = Vec::new();
                for c in clients {
                    let net = c
                        .parse::<ipnet::IpNet>()
                        .or_else(|_| c.parse::<std::net::IpAddr>().map(ipnet::IpNet::from));
                    match net {
                        Ok(n) => nets.push(n.trunc()),
                        Err(_) => self.fail(
                            bp.key("client"),
                            format!("{c:?} is not an address or a network"),
                            "write e.g. \"10.20.0.0/16\" or \"192.0.2.7\"",
                        ),
                    }
                }
                if nets.is_empty() {
                    self.fail(
                        bp.key("client"),
                        "no network is given",
                        "list the networks to let past, e.g. client = [\"10.20.0.0/16\"]",
                    );
                    continue;
                }
                // As a path rule that covers the room (found by review: 0.0.0.0/0 let everyone
                // past the line, and `check` said nothing); with the room's other client rules.
                let room_nets: Vec<ipnet::IpNet> = out
                    .iter()
                    .filter_map(|r| match r {
                        BypassRule::Client(n) => Some(n.iter().copied()),
                        _ => None,
                    })
                    .flatten()
                    .chain(nets.iter().copied())
                    .collect();
                if let Some(wide) = Self::too_wide(&room_nets) {
                    self.fail(
                        bp.key("client"),
                        format!("with the room's other client rules, {wide}: that lets a large part of the internet past the line"),
                        "name only the networks of partners, monitors or offices, e.g. client = [\"10.20.0.0/16\"]",
                    );
                    continue;
                }
                out.push(BypassRule::Client(nets));
                at.push(i);
            } else if let (Some(header), Some(equals)) = (&b.header, &b.equals) {
                let Ok(name) = http::HeaderName::from_bytes(header.as_bytes()) else {
                    self.fail(
                        bp.key("header"),
                        format!("{header:?} is not a header name"),
                        "e.g. header = \"X-Partner-Key\"",
                    );
                    continue;
                };
                let Some(value) = self.secret_string(&bp.key("equals"), equals) else {
                    continue;
                };
                if value.trim() != value || http::HeaderValue::from_str(&value).is_err() {
                    self.fail(
                        bp.key("equals"),
                        "the value has spaces around it or characters a header cannot carry",
                        "use printable ASCII with nothing around it, e.g. the output of `openssl rand -base64 24`",
                    );
                    continue;
                }
                if value.len() < MIN_BYPASS_SECRET_LEN {
                    self.fail(
                        bp.key("equals"),
                        format!(
                            "the value has {} characters; at least {MIN_BYPASS_SECRET_LEN} are needed",
                            value.len()
                        ),
                        "use a random value, e.g. equals = \"env:PARTNER_KEY\" with the output of `openssl rand -base64 24`",
                    );
                    continue;
                }
                out.push(BypassRule::Header {
                    name,
                    digest: Sha256::digest(value.as_bytes()).into(),
                });
                at.push(i);
            }
        }
        // A rule written twice is a slip (a merge of two files, a copy meant to be edited), and
        // so is a path rule under another (found by re-review: only literal repeats were told).
        for (j, rule) in out.iter().enumerate() {
            let other = (0..out.len()).find_map(|i| {
                let why = redundant(rule, &out[i], i < j)?;
                Some((i, why))
            });
            if let Some((i, why)) = other {
                self.warn(
                    p.key("bypass").index(at[j]),
                    format!("{why} bypass[{}]", at[i]),
                    "leave one of them out (or change the one meant to differ)",
                );
            }
        }
        out
    }

    pub(super) fn crawlers(&mut self, p: &KeyPath, c: Option<&str>) -> CrawlerPolicy {
        match c {
            None | Some("refuse") => CrawlerPolicy::Refuse,
            Some("wait") => CrawlerPolicy::Wait,
            Some(other) => {
                self.fail(
                    p.key("crawlers"),
                    format!("unknown policy {other:?}"),
                    "use \"refuse\" (503 with Retry-After, the default) or \"wait\"",
                );
                CrawlerPolicy::Refuse
            }
        }
    }
}

/// How `rule` adds nothing beside `other` (`earlier`: written before it), if it does: the same
/// rule (networks in any order, each once), or a path under `other`'s path.
fn redundant(rule: &BypassRule, other: &BypassRule, earlier: bool) -> Option<&'static str> {
    let nets = |n: &[ipnet::IpNet]| {
        let mut n = n.to_vec();
        n.sort();
        n.dedup();
        n
    };
    match (rule, other) {
        (BypassRule::Path(a), BypassRule::Path(b)) if a != b && path_covers_folded(b, a) => {
            Some("is a path under")
        }
        (BypassRule::Client(a), BypassRule::Client(b)) if earlier && nets(a) == nets(b) => {
            Some("repeats")
        }
        (a, b) if earlier && a == b => Some("repeats"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_that_adds_nothing_is_told() {
        let path = |p: &str| BypassRule::Path(p.into());
        let nets = |n: &[&str]| BypassRule::Client(n.iter().map(|s| s.parse().unwrap()).collect());
        let a = nets(&["10.0.0.0/24", "10.0.1.0/24"]);
        let b = nets(&["10.0.1.0/24", "10.0.0.0/24", "10.0.1.0/24"]);
        assert_eq!(
            redundant(&b, &a, true),
            Some("repeats"),
            "any order, each once"
        );
        assert_eq!(
            redundant(&a, &b, false),
            None,
            "the first of two is told nothing"
        );
        assert_eq!(redundant(&nets(&["10.0.0.0/24"]), &a, true), None);
        assert_eq!(
            redundant(&path("/feed/x"), &path("/feed"), false),
            Some("is a path under")
        );
        assert_eq!(redundant(&path("/feed"), &path("/feed/x"), true), None);
        assert_eq!(redundant(&path("/feedx"), &path("/feed"), true), None);
        assert_eq!(
            redundant(&path("/feed"), &path("/feed"), true),
            Some("repeats")
        );
        assert_eq!(
            redundant(&BypassRule::Preflight, &BypassRule::Preflight, true),
            Some("repeats")
        );
    }
}
