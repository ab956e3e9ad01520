//! Validation of `[[room]]` tables: paths and hosts (and their overlaps), rates, TTLs, poll
//! tiers, consume routes, templates and texts. Part of [`super::build`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use super::build::{k, valid_room_name, Builder};
use super::file::*;
use super::model::*;
use super::room_parts::carries_a_page;
use crate::cookie;
use crate::route::{HostPattern, OtherHosts};
use crate::store::RoomParams;

/// The longest `order-receipt`: the pages right after an order, not another visit.
pub const MAX_ORDER_RECEIPT: Duration = Duration::from_secs(600);

impl Builder<'_> {
    pub(super) fn rooms(
        &mut self,
        rooms: &[RoomFile],
        ups: &[Upstream],
        default_up: usize,
    ) -> Vec<RoomConfig> {
        let mut out: Vec<RoomConfig> = Vec::new();
        let mut names = HashSet::new();
        // The (host, room index) pairs that claimed each path, by the path without case, for
        // overlap checks (a list searched whole for every path was quadratic: found by review,
        // a file of many paths took seconds to check).
        let mut claimed: HashMap<String, Vec<(HostPattern, usize)>> = HashMap::new();
        for (i, r) in rooms.iter().enumerate() {
            let p = k("room").index(i);
            if !valid_room_name(&r.name) {
                self.fail(
                    p.key("name"),
                    format!("{:?} is not a valid room name", r.name),
                    "use 1-32 characters of a-z, 0-9, '-' and '_', starting with a letter or digit (it becomes the cookie name)",
                );
            } else if cookie::room_cookie_name(&r.name) == cookie::VID_COOKIE {
                self.fail(
                    p.key("name"),
                    format!(
                        "room name {:?} would make its admission cookie {:?}, the visitor-id cookie",
                        r.name,
                        cookie::VID_COOKIE
                    ),
                    "choose another name: each visitor's id would be overwritten by the admission",
                );
            } else if !names.insert(r.name.clone()) {
                self.fail(
                    p.key("name"),
                    format!("room {:?} is defined twice", r.name),
                    "give every [[room]] its own name",
                );
            }
            let upstream = match &r.upstream {
                Some(n) => self.upstream_index(p.key("upstream"), n, ups),
                None => default_up,
            };
            let hosts = self.hosts(&p, r.hosts.as_deref());
            let paths = self.paths(&p, &r.paths);
            for (pi, path) in paths.iter().enumerate() {
                for h in &hosts {
                    // Without case: a case-insensitive origin reads `/Products` as
                    // `/products`, and routing refuses a path two rooms hold (400).
                    if let Some((_, other)) = claimed
                        .get(&path.to_ascii_lowercase())
                        .and_then(|by| by.iter().find(|(oh, _)| oh.overlaps(h)))
                    {
                        let other_name = rooms.get(*other).map(|o| o.name.as_str()).unwrap_or("?");
                        self.fail(
                            p.key("paths").index(pi),
                            format!("path {path:?} is already claimed by room {other_name:?} for an overlapping host (paths are compared without case)"),
                            "give each path to one room, or separate the rooms by hosts",
                        );
                    }
                }
            }
            for path in &paths {
                let by = claimed.entry(path.to_ascii_lowercase()).or_default();
                by.extend(hosts.iter().map(|h| (h.clone(), i)));
            }
            let rate = match r.admit_per_second {
                Some(v) if valid_rate(v) => v,
                Some(v) => {
                    self.fail(
                        p.key("admit-per-second"),
                        format!("{RATE_RULE}, not {}", shown(v)),
                        "size it from what the shop can take, e.g. 175",
                    );
                    1.0
                }
                None => {
                    self.fail(
                        p.key("admit-per-second"),
                        "is required",
                        "add admit-per-second = N: how many visitors per second the shop can take",
                    );
                    1.0
                }
            };
            let max_active = self.positive(&p.key("max-active"), r.max_active, None);
            if max_active > super::model::MAX_ACTIVE {
                self.fail(
                    p.key("max-active"),
                    format!("{}, not {max_active}", super::model::MAX_ACTIVE_RULE),
                    "write the number of visitors the shop serves at once, such as 500",
                );
            }
            let max_waiting = self.positive(
                &p.key("max-waiting"),
                r.max_waiting,
                Some(DEFAULT_MAX_WAITING),
            );
            let session_ttl = self.duration(
                &p.key("session-ttl"),
                r.session_ttl.as_deref(),
                DEFAULT_SESSION_TTL,
            );
            let claim_ttl = self.duration(
                &p.key("claim-ttl"),
                r.claim_ttl.as_deref(),
                DEFAULT_CLAIM_TTL,
            );
            // Bounded (found by review): a session-ttl of u64::MAX seconds passed and every
            // request of its admission overflowed a sum of durations; one of 1ms let an admitted
            // visitor make one request.
            for (key, d, most, fix) in [
                (
                    "session-ttl",
                    session_ttl,
                    MAX_SESSION_TTL,
                    "the seed's 10m is a good start",
                ),
                (
                    "claim-ttl",
                    claim_ttl,
                    MAX_CLAIM_TTL,
                    // The seed's 1m is under two throttled polls, which `check` warns of (review).
                    "the default 90s is a good start",
                ),
            ] {
                if d < Duration::from_secs(1) || d > most {
                    self.fail(
                        p.key(key),
                        format!(
                            "must be between 1s and {}",
                            humantime::format_duration(most)
                        ),
                        fix,
                    );
                }
            }
            let order_receipt = self.order_receipt(&p, r.order_receipt.as_deref(), session_ttl);
            let abandon_after = self.duration(
                &p.key("abandon-after"),
                r.abandon_after.as_deref(),
                DEFAULT_ABANDON_AFTER,
            );
            if abandon_after > MAX_ABANDON_AFTER {
                self.fail(
                    p.key("abandon-after"),
                    "must be at most 30m",
                    "a visitor silent that long has left; use a few times the slowest poll interval",
                );
            }
            let tick = self.duration(&p.key("tick"), r.tick.as_deref(), DEFAULT_TICK);
            if tick < Duration::from_millis(10) || tick > Duration::from_secs(10) {
                self.fail(
                    p.key("tick"),
                    "must be between 10ms and 10s",
                    "the seed's 100ms is a good start",
                );
            }
            let poll = self.poll(&p, r.poll.as_deref());
            let throttled = self.duration(
                &p.key("throttled-poll"),
                r.throttled_poll.as_deref(),
                DEFAULT_THROTTLED_POLL,
            );
            let slowest = poll.iter().map(|t| t.every).max().unwrap_or_default();
            self.abandon_after(&p, abandon_after, slowest, throttled);
            let least = claim_ttl_least(throttled, tick);
            if claim_ttl < least {
                let f = humantime::format_duration;
                self.warn(
                    p.key("claim-ttl"),
                    format!(
                        "({}) is shorter than a hidden tab's poll (throttled-poll = {} with its jitter, after a tick): a visitor whose tab is in the background when the turn comes loses it and rejoins at the back",
                        f(claim_ttl),
                        f(throttled)
                    ),
                    format!(
                        "make claim-ttl at least {} (the default is 90s), or lower throttled-poll if the visitors are not browsers",
                        f(Duration::from_secs(least.as_secs_f64().ceil() as u64))
                    ),
                );
            }
            let on_store_error = match r.on_store_error.as_deref() {
                None | Some("local") => StorePolicy::Local,
                Some("open") => StorePolicy::Open,
                Some("closed") => StorePolicy::Closed,
                Some(other) => {
                    self.fail(
                        p.key("on-store-error"),
                        format!("unknown policy {other:?}"),
                        "use \"open\", \"closed\" or \"local\"",
                    );
                    StorePolicy::Local
                }
            };
            let consume = self.consume(&p, &r.consume, &paths);
            // Only an order's answer gives one (a `complete` on another page does not).
            if order_receipt.is_some() && consume.is_empty() {
                self.warn(
                    p.key("order-receipt"),
                    "gives no receipt: the room has no consume route",
                    "add the order's route to consume, e.g. [\"POST /orders\"], or leave order-receipt out",
                );
            }
            let template = r
                .template
                .as_ref()
                .and_then(|t| self.template(&p.key("template"), t));
            let join_limit = self.join_limit(&p, r.join_limit.as_ref());
            let origin_cap = self.origin_cap(&p, r);
            let autopilot = self.autopilot(&p, r.autopilot.as_ref(), rate, tick);
            let waiting_status = match r.waiting_status {
                None => DEFAULT_WAITING_STATUS,
                // A status whose answer carries the waiting page: not 1xx, 204, 205 or a
                // redirect (no body a browser shows, or one it follows without a Location).
                Some(s) if carries_a_page(s) => s as u16,
                Some(s) => {
                    self.fail(
                        p.key("waiting-status"),
                        format!("{s} is not a status that carries the waiting page"),
                        "use 200 (default) or 503",
                    );
                    DEFAULT_WAITING_STATUS
                }
            };
            let texts = self.texts(&p, r.texts.as_ref());
            let bypass = self.bypass(
                &p,
                r.bypass.as_deref().unwrap_or_default(),
                &paths,
                &consume,
            );
            let crawlers = self.crawlers(&p, r.crawlers.as_deref());
            let queueing = self.queueing(&p, r.queueing.as_deref());
            let closed_status = self.closed_status(&p, r.closed_status);
            let join_challenge =
                self.join_challenge(&p, r.join_challenge.as_ref(), join_limit.as_ref());
            let (events, event_pages) = self.events(&p, &r.event, &texts, queueing);
            // Found by review r84b: fifty requests from one address without a cookie were fifty
            // registrations, each a draw of its own, and `check` said nothing.
            let drawn = r.event.iter().position(|e| e.draw == Some(true));
            if let (Some(j), None, None) = (drawn, &join_limit, &join_challenge) {
                self.warn(
                    p.key("event").index(j).key("draw"),
                    "draws places, but the room has neither join-limit nor join-challenge: one \
                     client can register as many identities as it likes, each drawn on its own",
                    "add join-limit = { per-ip = 30, per = \"1m\" } to the room (and \
                     join-challenge for a large sale; docs/SECURITY.md)",
                );
            }
            out.push(RoomConfig {
                params: RoomParams {
                    name: Arc::from(r.name.as_str()),
                    admit_per_second: rate,
                    max_active,
                    max_waiting,
                    session_ttl,
                    claim_ttl,
                    abandon_after: crate::line::sweep_after(abandon_after),
                    tick,
                    queueing: queueing.store(),
                },
                abandon_after,
                upstream,
                hosts,
                paths,
                on_store_error,
                consume,
                template,
                poll,
                join_limit,
                origin_cap,
                autopilot,
                waiting_status,
                texts,
                bypass,
                crawlers,
                origin_commands: r.origin_commands.unwrap_or(false),
                order_receipt,
                queueing,
                closed_status,
                join_challenge,
                events,
                event_pages,
            });
        }
        self.shadowed_consume(rooms, &out);
        out
    }

    /// `order-receipt`: off when absent or zero; else between a second and
    /// [`MAX_ORDER_RECEIPT`], and no longer than the session it follows (a receipt outliving
    /// the admission it came from would let a visitor browse longer than their turn did).
    fn order_receipt(
        &mut self,
        room: &super::locate::KeyPath,
        raw: Option<&str>,
        session_ttl: Duration,
    ) -> Option<Duration> {
        let key = room.key("order-receipt");
        let d = self.duration_or_zero(&key, raw, Duration::ZERO);
        if d.is_zero() {
            return None;
        }
        let most = MAX_ORDER_RECEIPT.min(session_ttl);
        // A suggestion that passes (found by review: "1m" under a session-ttl of 30s).
        let fix = format!(
            "write \"{}\": long enough for the pages the shop shows right after an order",
            humantime::format_duration(Duration::from_secs(most.as_secs().clamp(1, 60)))
        );
        if d < Duration::from_secs(1) || d > most {
            self.fail(
                key,
                format!(
                    "must be 0 (off) or between 1s and {} (and at most the room's session-ttl)",
                    humantime::format_duration(most)
                ),
                fix,
            );
        } else if d.subsec_nanos() != 0 {
            // A receipt's life is signed in whole seconds (found by review: 1500ms was 1s).
            self.fail(key, "is not a whole number of seconds", fix);
        }
        Some(d)
    }

    /// With `other-hosts = "room"`, a request for a host no room names, on a path two
    /// host-bound rooms of one origin both protect as written, is queued in the first of them
    /// in the file (the origin's default site is one of theirs, and only the file can say
    /// which). Said where it is decided (found by review: two rooms on `/products`, the cheap
    /// one first, let anyone skip the sale's line with another `Host` or none).
    pub(super) fn warn_rooms_ordered_for_other_hosts(
        &mut self,
        rooms: &[RoomConfig],
        upstreams: &[Upstream],
        other_hosts: OtherHosts,
    ) {
        if other_hosts != OtherHosts::Room {
            return;
        }
        let origin = super::origins::origin_groups(upstreams);
        let origin_of = |i: usize| origin.get(i).copied().unwrap_or(i);
        let bound = |r: &RoomConfig| r.hosts.iter().any(HostPattern::is_bound);
        for (j, later) in rooms.iter().enumerate().filter(|(_, r)| bound(r)) {
            for (pi, path) in later.paths.iter().enumerate() {
                let Some(first) = rooms[..j].iter().find(|r| {
                    bound(r)
                        && origin_of(r.upstream) == origin_of(later.upstream)
                        && r.paths.iter().any(|q| q.eq_ignore_ascii_case(path))
                }) else {
                    continue;
                };
                self.warn(
                    k("room").index(j).key("paths").index(pi),
                    format!(
                        "room {:?} protects {path:?} too, on the same origin, and comes first: with other-hosts = \"room\" a request for another host (or none) on it is queued there, not in room {:?}",
                        first.name(),
                        later.name()
                    ),
                    "list first the room whose site the origin serves for unknown hosts, or set [listen] other-hosts = \"refuse\" (the default)",
                );
            }
        }
    }
}
