//! A room's `consume` routes, and the check across rooms that each is decided by its room.
//! Part of [`super::build`].

use super::build::{k, Builder};
use super::file::RoomFile;
use super::locate::KeyPath;
use super::model::{ConsumeRoute, RoomConfig};
use super::room_parts::not_plain;
use crate::route::{path_covers, path_covers_folded};

impl Builder<'_> {
    pub(super) fn consume(
        &mut self,
        p: &KeyPath,
        routes: &[String],
        paths: &[String],
    ) -> Vec<ConsumeRoute> {
        let mut out = Vec::new();
        for (i, raw) in routes.iter().enumerate() {
            let key = p.key("consume").index(i);
            let Some((method, path)) = raw.trim().split_once(' ') else {
                self.fail(
                    key,
                    format!("{raw:?} is not \"METHOD /path\""),
                    "write it like \"POST /orders\"",
                );
                continue;
            };
            let method = method.trim();
            if method.bytes().any(|b| b.is_ascii_lowercase()) {
                // Methods are written in capitals: a route of "post" is a slip (the route
                // matches a request's method without case, but the file says what it means).
                // Found by review: the message said it would match no browser's order, which
                // is not so.
                self.fail(
                    key,
                    format!("{method:?} is not in capitals, as a route's method is written"),
                    format!(
                        "write it like \"{} {}\"",
                        method.to_ascii_uppercase(),
                        path.trim()
                    ),
                );
                continue;
            }
            let method = match http::Method::from_bytes(method.as_bytes()) {
                Ok(m) => m,
                Err(_) => {
                    self.fail(
                        key,
                        format!("{method:?} is not an HTTP method"),
                        "write it like \"POST /orders\"",
                    );
                    continue;
                }
            };
            let path = path.trim();
            if !path.starts_with('/') {
                self.fail(
                    key,
                    format!("{path:?} does not start with '/'"),
                    "write it like \"POST /orders\"",
                );
                continue;
            }
            if let Some(fix) = not_plain(path) {
                // Requests are matched on their normalised readings: such a route would never
                // match one, and the order behind it would never use the admission.
                self.fail(
                    key,
                    format!("{path:?} is not in plain form, so no request would ever match it"),
                    fix,
                );
                continue;
            }
            if !paths.iter().any(|rp| path_covers(rp, path)) {
                self.fail(
                    key,
                    format!("{path:?} is outside the room's paths, so it would never be checked"),
                    "add its prefix to `paths`, or move the rule to the room that protects it",
                );
                continue;
            }
            const STANDARD: [http::Method; 8] = [
                http::Method::GET,
                http::Method::HEAD,
                http::Method::POST,
                http::Method::PUT,
                http::Method::PATCH,
                http::Method::DELETE,
                http::Method::OPTIONS,
                http::Method::TRACE,
            ];
            if !STANDARD.contains(&method) {
                self.warn(
                    key.clone(),
                    format!("{method} is not a standard HTTP method: browsers send orders with POST (or PUT, PATCH, DELETE)"),
                    "check the method your shop's order form or API uses",
                );
            }
            let route = ConsumeRoute {
                method,
                path: path.to_string(),
            };
            if out.contains(&route) {
                self.warn(
                    key,
                    format!("{raw:?} is listed twice"),
                    "list each route once",
                );
                continue;
            }
            out.push(route);
        }
        out
    }

    /// A consume route is checked only on requests routed to its room. Where another room on an
    /// overlapping host has a longer path that takes such requests (`/orders` in a room of its
    /// own, while the shop's room `/` names `POST /orders`), the longest prefix sends the order
    /// there and nobody uses the admission up: one admission orders again and again (found by
    /// review). Refused, naming the room that takes the route.
    pub(super) fn shadowed_consume(&mut self, files: &[RoomFile], rooms: &[RoomConfig]) {
        for (i, r) in rooms.iter().enumerate() {
            for c in &r.consume {
                let Some(mine) = longest_covering(&r.paths, &c.path) else {
                    continue;
                };
                let taker = rooms.iter().enumerate().find_map(|(j, o)| {
                    let hosts = o
                        .hosts
                        .iter()
                        .any(|h| r.hosts.iter().any(|m| m.overlaps(h)));
                    let path = o.paths.iter().find(|op| {
                        op.len() > mine.len()
                            && (path_covers_folded(op, &c.path) || path_covers_folded(&c.path, op))
                    });
                    (j != i && hosts)
                        .then_some(path)
                        .flatten()
                        .map(|op| (o, op))
                });
                let Some((other, op)) = taker else {
                    continue;
                };
                let ci = files
                    .get(i)
                    .and_then(|f| {
                        f.consume
                            .iter()
                            .position(|raw| route_path(raw) == Some(c.path.as_str()))
                    })
                    .unwrap_or(0);
                self.fail(
                    k("room").index(i).key("consume").index(ci),
                    format!(
                        "\"{} {}\" is routed to room {:?} (its path {op:?} is longer), so this room would never check it and one admission would order again and again",
                        c.method,
                        c.path,
                        other.params.name
                    ),
                    format!(
                        "move the consume route to room {:?}, or take {op:?} out of its paths",
                        other.params.name
                    ),
                );
            }
        }
    }
}

/// The longest of a room's paths that holds `route` (as routing would pick it).
fn longest_covering<'a>(paths: &'a [String], route: &str) -> Option<&'a String> {
    paths
        .iter()
        .filter(|p| path_covers_folded(p, route))
        .max_by_key(|p| p.len())
}

/// The path of a raw `"METHOD /path"` route, as [`Builder::consume`] reads it.
fn route_path(raw: &str) -> Option<&str> {
    raw.trim().split_once(' ').map(|(_, p)| p.trim())
}

#[cfg(test)]
mod tests {
    /// The errors of a config with these rooms (after a cookie key and an upstream).
    fn errors(rooms: &str) -> String {
        let text = format!(
            "[cookie]\nkeys = [\"test-key-0123456789-0123456789-0123456789\"]\n\n[[upstream]]\nname = \"shop\"\naddr = \"127.0.0.1:9000\"\n\n{rooms}"
        );
        match crate::config::parse(&text, "unit.toml", std::path::Path::new(".")) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    fn room(name: &str, paths: &str, extra: &str) -> String {
        format!("[[room]]\nname = \"{name}\"\npaths = {paths}\nadmit-per-second = 5\nmax-active = 10\n{extra}\n")
    }

    #[test]
    fn a_query_or_fragment_in_a_path_or_route_is_refused() {
        // A prefix with one matches no request: the room would protect nothing (found by
        // review: every request reached the shop).
        for paths in ["[\"/products?x=1\"]", "[\"/products#top\"]", "[\"/?a\"]"] {
            let e = errors(&room("sale", paths, ""));
            assert!(e.contains("room[0].paths[0]"), "{paths}: {e}");
            assert!(e.contains("'?' query or '#' fragment"), "{paths}: {e}");
        }
        let e = errors(&room("sale", "[\"/products?x=1\"]", ""));
        assert!(e.contains("write it as \"/products\""), "{e}");
        let e = errors(&room(
            "sale",
            "[\"/orders\"]",
            "consume = [\"POST /orders?a=1\"]",
        ));
        assert!(e.contains("room[0].consume[0]"), "{e}");
        assert!(errors(&room("sale", "[\"/products\"]", "")).is_empty());
    }

    /// A prefix is literal, and a space or a control character never reaches a path unescaped
    /// (found by review: `"/products/*"` passed `check` and the room held no product page).
    #[test]
    fn a_pattern_a_space_or_a_control_character_in_a_path_is_refused() {
        for (paths, fix) in [
            ("[\"/products/*\"]", "write it as \"/products\""),
            ("[\"/pro ducts\"]", "write it as \"/pro%20ducts\""),
            ("[\"/a\\tb\"]", "write it as \"/a%09b\""),
        ] {
            let e = errors(&room("sale", paths, ""));
            assert!(
                e.contains("room[0].paths[0]") && e.contains(fix),
                "{paths}: {e}"
            );
        }
        assert!(
            errors(&room("sale", "[\"/a*b\"]", "")).is_empty(),
            "a '*' inside a path"
        );
        let e = errors(&room(
            "sale",
            "[\"/orders\"]",
            "consume = [\"POST /orders/*\"]",
        ));
        assert!(
            e.contains("room[0].consume[0]") && e.contains("not a pattern"),
            "{e}"
        );
    }

    #[test]
    fn a_consume_route_another_room_takes_is_refused() {
        let shop = room("shop", "[\"/\"]", "consume = [\"POST /orders\"]");
        // The route itself, a path under it, a path it is under but longer than the room's.
        for (paths, taken) in [
            ("[\"/orders\"]", "/orders"),
            ("[\"/orders/vip\"]", "/orders/vip"),
            ("[\"/ORDERS\"]", "/ORDERS"),
        ] {
            let e = errors(&format!("{shop}{}", room("checkout", paths, "")));
            assert!(e.contains("room[0].consume[0]"), "{paths}: {e}");
            assert!(e.contains("routed to room \"checkout\""), "{paths}: {e}");
            assert!(e.contains(&format!("its path {taken:?}")), "{paths}: {e}");
        }
        // A longer path elsewhere, a shorter one, or another host: the route stays the room's.
        for other in [
            room("other", "[\"/ord\"]", ""),
            room("other", "[\"/products\"]", ""),
            room("other", "[\"/orders\"]", "hosts = [\"b.test\"]"),
        ] {
            let shop = room(
                "shop",
                "[\"/\"]",
                "hosts = [\"a.test\"]\nconsume = [\"POST /orders\"]",
            );
            let e = errors(&format!("{shop}{other}"));
            assert!(!e.contains("consume"), "{other}: {e}");
        }
        let deeper = room(
            "shop",
            "[\"/\", \"/orders\"]",
            "consume = [\"POST /orders\"]",
        );
        let e = errors(&format!("{deeper}{}", room("n", "[\"/products\"]", "")));
        assert!(!e.contains("consume"), "{e}");
    }

    #[test]
    fn a_bypass_is_compared_without_case_with_the_room_and_its_orders() {
        let e = errors(&room(
            "sale",
            "[\"/Sale\"]",
            "bypass = [{ path = \"/sale\" }]",
        ));
        assert!(e.contains("past the line"), "{e}");
        let e = errors(&room(
            "sale",
            "[\"/Shop\"]",
            "consume = [\"POST /Shop/Orders\"]\nbypass = [{ path = \"/shop/orders\" }]",
        ));
        assert!(e.contains("consume route"), "{e}");
    }
}
