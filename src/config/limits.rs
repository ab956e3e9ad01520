//! A room's limits beside its rate: `join-limit` (new visitors per client) and
//! `max-origin-inflight` with `origin-queue-timeout` (requests in flight to the origin, per
//! instance). Part of [`super::build`].

use std::time::Duration;

use super::build::{k, Builder};
use super::file::{AutopilotFile, JoinLimitFile, RoomFile};
use super::locate::KeyPath;
use super::model::*;

/// The most `max-origin-inflight` may be (far past any shop's workers).
const MAX_ORIGIN_INFLIGHT: i64 = 1_000_000;

impl Builder<'_> {
    pub(super) fn join_limit(
        &mut self,
        p: &KeyPath,
        j: Option<&JoinLimitFile>,
    ) -> Option<JoinLimit> {
        let j = j?;
        let jp = p.key("join-limit");
        // At most an hour: a held newcomer's turn is kept that long at most (`prelimit::held_for`),
        // and a window longer than a sale counts a network's joins against the next one.
        let mut per = self.duration_at_most(
            &jp.key("per"),
            Some(&j.per),
            (Duration::from_secs(60), Duration::from_secs(3600), false),
            "a network that joined once would be counted against for that long",
        );
        // Found by review r86b: "1ns" passed, a window that counts nobody.
        if per < Duration::from_secs(1) {
            self.fail(
                jp.key("per"),
                format!(
                    "{} is shorter than a second: each window would end before the next join",
                    humantime::format_duration(per)
                ),
                "write a window of a second or more, e.g. per = \"1m\"",
            );
            per = Duration::from_secs(60);
        }
        if j.per_ip < 1 || j.per_ip > i64::from(u32::MAX) {
            self.fail(
                jp.key("per-ip"),
                format!("must be from 1 to {}, not {}", u32::MAX, j.per_ip),
                "e.g. join-limit = { per-ip = 30, per = \"1m\" }",
            );
            return None;
        }
        Some(JoinLimit {
            per_ip: j.per_ip as u32,
            per,
        })
    }

    /// `join-challenge`, with the stricter limit of visitors who join without a solution.
    pub(super) fn join_challenge(
        &mut self,
        p: &KeyPath,
        c: Option<&super::file::JoinChallengeFile>,
        join_limit: Option<&JoinLimit>,
    ) -> Option<JoinChallenge> {
        use crate::edge::challenge::{self, DEFAULT_DIFFICULTY, DIFFICULTIES};
        let c = c?;
        let difficulty = match c.difficulty {
            None => DEFAULT_DIFFICULTY,
            Some(d)
                if (i64::from(*DIFFICULTIES.start())..=i64::from(*DIFFICULTIES.end()))
                    .contains(&d) =>
            {
                d as u32
            }
            Some(d) => {
                self.fail(
                    p.key("join-challenge").key("difficulty"),
                    format!(
                        "{d} is outside {}..={}",
                        DIFFICULTIES.start(),
                        DIFFICULTIES.end()
                    ),
                    format!("leading zero bits of the hash: {DEFAULT_DIFFICULTY} (the default) takes a browser about a second"),
                );
                DEFAULT_DIFFICULTY
            }
        };
        let (no_script_per_ip, no_script_per) =
            challenge::strict_limit(join_limit.map(|j| (j.per_ip, j.per)));
        Some(JoinChallenge {
            difficulty,
            no_script_per_ip,
            no_script_per,
        })
    }

    /// `autopilot`, checked against the room's `admit-per-second` (its ceiling) and `tick`.
    pub(super) fn autopilot(
        &mut self,
        p: &KeyPath,
        a: Option<&AutopilotFile>,
        ceiling: f64,
        tick: Duration,
    ) -> Option<AutopilotConfig> {
        let a = a?;
        let key = p.key("autopilot");
        // A floor this room's ceiling allows (found by review: 5 was suggested under a ceiling
        // of 1).
        let floor = if ceiling >= 20.0 {
            5.0
        } else {
            (ceiling / 4.0 * 100.0).floor().max(1.0) / 100.0
        };
        let example = format!(
            "e.g. autopilot = {{ target-latency = \"800ms\", max-error-rate = 0.01, min-rate = {floor} }}"
        );
        let target_latency = self.duration(
            &key.key("target-latency"),
            Some(&a.target_latency),
            Duration::from_millis(800),
        );
        if target_latency < Duration::from_millis(1) || target_latency > Duration::from_secs(60) {
            self.fail(
                key.key("target-latency"),
                "must be between 1ms and 60s",
                format!("the p90 time the shop should take to answer an admitted visitor's request, above its normal one: {example}"),
            );
        }
        if !(a.max_error_rate > 0.0 && a.max_error_rate < 1.0) {
            self.fail(
                key.key("max-error-rate"),
                format!("must be above 0 and below 1, not {}", a.max_error_rate),
                format!("the share of failed origin requests (5xx, timeouts, refused) to tolerate: {example}"),
            );
        }
        if !(a.min_rate > 0.0 && a.min_rate <= ceiling) {
            self.fail(
                key.key("min-rate"),
                format!(
                    "must be above 0 and at most admit-per-second ({ceiling}), not {}",
                    a.min_rate
                ),
                format!("the slowest the line may move even when the shop struggles: {example}"),
            );
        }
        let window = self.duration(
            &key.key("window"),
            a.window.as_deref(),
            DEFAULT_AUTOPILOT_WINDOW,
        );
        if window < tick * 5 || window > Duration::from_secs(300) {
            self.fail(
                key.key("window"),
                format!(
                    "must be at least five ticks ({}) and at most 5m",
                    humantime::format_duration(tick * 5)
                ),
                "leave it out (2s), or a few seconds",
            );
        }
        Some(AutopilotConfig {
            target_latency,
            max_error_rate: a.max_error_rate,
            min_rate: a.min_rate,
            window,
        })
    }

    pub(super) fn origin_cap(&mut self, p: &KeyPath, r: &RoomFile) -> Option<OriginCap> {
        let Some(n) = r.max_origin_inflight else {
            if r.origin_queue_timeout.is_some() {
                self.fail(
                    p.key("origin-queue-timeout"),
                    "has no effect without max-origin-inflight",
                    "add max-origin-inflight = N (the shop's workers ÷ the number of instances), or remove it",
                );
            }
            return None;
        };
        if !(1..=MAX_ORIGIN_INFLIGHT).contains(&n) {
            self.fail(
                p.key("max-origin-inflight"),
                format!("must be between 1 and {MAX_ORIGIN_INFLIGHT}, not {n}"),
                "size it as the shop's workers ÷ the number of anteroom instances, e.g. 40",
            );
            return None;
        }
        let key = p.key("origin-queue-timeout");
        let queue_timeout = self.duration(
            &key,
            r.origin_queue_timeout.as_deref(),
            DEFAULT_ORIGIN_QUEUE_TIMEOUT,
        );
        if queue_timeout.is_zero() || queue_timeout > MAX_ORIGIN_QUEUE_TIMEOUT {
            self.fail(
                key,
                "must be above 0 and at most 5m",
                "a few seconds: how long an admitted visitor may wait for the shop before a 503 asks them to try again, e.g. \"10s\"",
            );
        }
        Some(OriginCap {
            max_inflight: n as usize,
            queue_timeout,
        })
    }
}

impl Builder<'_> {
    /// `[[upstream]] admit-per-second`.
    pub(super) fn upstream_cap(&mut self, p: &KeyPath, v: Option<f64>) -> Option<f64> {
        let v = v?;
        if !valid_rate(v) {
            self.fail(
                p.key("admit-per-second"),
                format!("{RATE_RULE}, not {}", shown(v)),
                "what the shop behind this upstream can take per second, all rooms together",
            );
            return None;
        }
        Some(v)
    }
}

/// Rooms on an upstream with `admit-per-second` share it: when their rates add up to more,
/// each room's rate (its ceiling, with an autopilot) is cut in proportion, so that together
/// they never admit more than the shop takes. (An operator's override at run time is not cut:
/// it is a decision made with the figures in view.)
pub(super) fn share_upstream_caps(rooms: &mut [RoomConfig], upstreams: &[Upstream]) {
    for (i, u) in upstreams.iter().enumerate() {
        let Some(cap) = u.admit_per_second else {
            continue;
        };
        let sum: f64 = rooms
            .iter()
            .filter(|r| r.upstream == i)
            .map(|r| r.params.admit_per_second)
            .sum();
        if sum <= cap {
            continue;
        }
        for r in rooms.iter_mut().filter(|r| r.upstream == i) {
            let share = r.params.admit_per_second * cap / sum;
            r.params.admit_per_second = share;
            if let Some(a) = r.autopilot.as_mut() {
                a.min_rate = a.min_rate.min(share);
            }
        }
    }
}

/// The highest rate `event` of room `room` may run at under its upstream's `admit-per-second`:
/// the cap less the most the other rooms on it admit at any moment while it admits (from its
/// opening to its closing) — each its rate (`rate_of`: the one in force) or that of its event
/// admitting at that moment (`events_of`) — and never less than the room's own. `None` without
/// a cap (found by review: an event at 1000/s ran under an upstream capped at 100/s; by
/// re-review, two rooms' events at once each passed against the other's own rate, and events
/// that never admit at the same time were refused).
pub fn event_rate_bound(
    rooms: &[RoomConfig],
    upstreams: &[Upstream],
    room: usize,
    event: &crate::event::Event,
    events_of: &dyn Fn(usize) -> Vec<crate::event::Event>,
    rate_of: &dyn Fn(usize) -> f64,
    now: crate::clock::Micros,
) -> Option<f64> {
    let r = rooms.get(room)?;
    let cap = upstreams.get(r.upstream)?.admit_per_second?;
    let admits = |e: &crate::event::Event| (e.opens_at, e.closes_at.unwrap_or(u64::MAX));
    // From now on: what other rooms admitted while it ran before now is past (found by
    // review: an event of another room that had closed cut a running sale's bound at a reload).
    let (from, to) = admits(event);
    let from = from.max(now);
    if from >= to {
        return None;
    }
    let others: Vec<(f64, Vec<crate::event::Event>)> = rooms
        .iter()
        .enumerate()
        .filter(|(i, o)| *i != room && o.upstream == r.upstream)
        .map(|(i, _)| (rate_of(i), events_of(i)))
        .collect();
    // The sum changes only where an event opens: at the event's own opening, and at each of
    // the others' openings within its time.
    let moments = std::iter::once(from).chain(
        others
            .iter()
            .flat_map(|(_, es)| es.iter().map(|e| e.opens_at))
            .filter(|t| (from..to).contains(t)),
    );
    let at = |t: u64| -> f64 {
        others
            .iter()
            .map(|(rate, es)| {
                es.iter()
                    .filter(|e| {
                        let (f, c) = admits(e);
                        f <= t && t < c
                    })
                    .filter_map(|e| e.admit_per_second)
                    .fold(*rate, f64::max)
            })
            .sum()
    };
    let most = moments.map(at).fold(0.0, f64::max);
    Some((cap - most).max(r.params.admit_per_second))
}

impl Builder<'_> {
    /// An event's rate above what its upstream's cap leaves its room is refused at its key.
    pub(super) fn events_within_upstream_caps(
        &mut self,
        rooms: &[RoomConfig],
        upstreams: &[Upstream],
    ) {
        let events_of = |i: usize| rooms.get(i).map_or_else(Vec::new, |r| r.events.clone());
        let rate_of = |i: usize| rooms.get(i).map_or(0.0, |r| r.params.admit_per_second);
        for (i, r) in rooms.iter().enumerate() {
            for (j, e) in r.events.iter().enumerate() {
                // The whole schedule, past included: a file is judged the same at any time.
                let Some(bound) = event_rate_bound(rooms, upstreams, i, e, &events_of, &rate_of, 0)
                else {
                    continue;
                };
                if let Some(rate) = e.admit_per_second.filter(|rate| *rate > bound) {
                    self.fail(
                        k("room").index(i).key("event").index(j).key("admit-per-second"),
                        format!(
                            "{rate}/s is more than upstream {:?}'s admit-per-second leaves this room ({bound}/s, after what the other rooms admit meanwhile, their events included)",
                            upstreams.get(r.upstream).map_or("", |u| u.name.as_str())
                        ),
                        format!("write at most {bound}, or raise the upstream's admit-per-second"),
                    );
                }
            }
        }
    }

    /// Over HTTP/2 (anteroom's HTTPS listener) Pingora cuts no stalled request body: such a
    /// request stays open at the origin until the upstream's `read-timeout` past its last
    /// piece, and holds its origin slot as long (the cap counts it). With `read-timeout` the
    /// longer, a visitor stalling bodies holds the room's slots longer than over HTTP/1.1,
    /// where `client-timeout` cuts them (found by review).
    pub(super) fn warn_stalls_past_the_cap(
        &mut self,
        rooms: &[RoomConfig],
        upstreams: &[Upstream],
        server: &ServerSettings,
        https: bool,
    ) {
        if !https {
            return;
        }
        for (i, r) in rooms.iter().enumerate() {
            let Some(u) = upstreams.get(r.upstream) else {
                continue;
            };
            if r.origin_cap.is_some() && u.read_timeout > server.client_timeout {
                self.warn(
                    super::build::k("room").index(i).key("max-origin-inflight"),
                    format!(
                        "upstream {:?} has read-timeout {} above client-timeout {}: an HTTP/2 request that stalls its body holds its slot of this cap until read-timeout past its last piece (over HTTP/1.1 it is cut at client-timeout)",
                        u.name,
                        humantime::format_duration(u.read_timeout),
                        humantime::format_duration(server.client_timeout)
                    ),
                    "keep the upstream's read-timeout at or below [server] client-timeout (the defaults are 30s and 60s)",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// The errors of a file with an upstream capped at 100/s and these rooms on it.
    fn errors(rooms: &str) -> String {
        let text = format!(
            "[cookie]\nkeys = [\"test-key-0123456789-0123456789-0123456789\"]\n[[upstream]]\n\
             name = \"shop\"\naddr = \"127.0.0.1:9000\"\nadmit-per-second = 100\n{rooms}"
        );
        crate::config::parse(&text, "unit.toml", std::path::Path::new("."))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    fn room(name: &str, path: &str, rate: u32, event_rate: Option<u32>) -> String {
        let event = event_rate.map_or(String::new(), |r| {
            format!(
                "[[room.event]]\nname = \"drop\"\nopens-at = \"2030-01-01T10:00:00+00:00\"\n\
                 admit-per-second = {r}\n"
            )
        });
        format!(
            "[[room]]\nname = \"{name}\"\npaths = [\"{path}\"]\nadmit-per-second = {rate}\n\
             max-active = 10\n{event}"
        )
    }

    /// An event runs within what its upstream's cap leaves its room (found by review: an event
    /// at 1000/s under an upstream capped at 100/s for all its rooms passed `check`).
    #[test]
    fn an_event_runs_within_what_the_upstream_cap_leaves_its_room() {
        let e = errors(&room("a", "/a", 50, Some(1000)));
        assert!(
            e.contains("room[0].event[0].admit-per-second") && e.contains("at most 100"),
            "{e}"
        );
        let two = |event| {
            format!(
                "{}{}",
                room("a", "/a", 50, Some(event)),
                room("b", "/b", 30, None)
            )
        };
        let e = errors(&two(80));
        assert!(e.contains("at most 70"), "{e}");
        assert_eq!(errors(&two(70)), "");
        // Two rooms' events at once share the cap (re-review: 90 and 90 under 100 passed).
        let both = format!(
            "{}{}",
            room("a", "/a", 10, Some(90)),
            room("b", "/b", 10, Some(90))
        );
        let e = errors(&both);
        assert!(
            e.contains("room[0].event[0]") && e.contains("room[1].event[0]"),
            "{e}"
        );
        let halves = format!(
            "{}{}",
            room("a", "/a", 10, Some(50)),
            room("b", "/b", 10, Some(50))
        );
        assert_eq!(errors(&halves), "");
    }

    /// Events count against each other only while both admit: from opening to closing, at the
    /// moments that really coincide (re-review: back-to-back sales whose pre-queues overlapped,
    /// and three rooms whose events never all ran at once, were refused).
    #[test]
    fn events_count_against_each_other_only_while_both_admit() {
        let timed = |name: &str, pre: &str, opens: &str, closes: &str, rate: u32| {
            format!(
                "[[room]]\nname = \"{name}\"\npaths = [\"/{name}\"]\nadmit-per-second = 10\n\
                 max-active = 10\n[[room.event]]\nname = \"e\"\n\
                 prequeue-from = \"2030-01-01T{pre}:00+00:00\"\n\
                 opens-at = \"2030-01-01T{opens}:00+00:00\"\n\
                 closes-at = \"2030-01-01T{closes}:00+00:00\"\nadmit-per-second = {rate}\n"
            )
        };
        let back_to_back = format!(
            "{}{}",
            timed("a", "00:00", "00:15", "01:00", 80),
            timed("b", "00:30", "01:00", "02:00", 80)
        );
        assert_eq!(errors(&back_to_back), "");
        let three = format!(
            "{}{}{}",
            timed("a", "01:00", "01:00", "03:00", 45),
            timed("b", "01:00", "01:00", "02:00", 45),
            timed("c", "02:30", "02:30", "03:00", 45)
        );
        assert_eq!(errors(&three), "");
        let all_at_once = format!(
            "{}{}{}",
            timed("a", "01:00", "01:00", "03:00", 45),
            timed("b", "01:00", "01:00", "02:00", 45),
            timed("c", "01:30", "01:30", "03:00", 45)
        );
        assert!(errors(&all_at_once).contains("room[0].event[0]"));
    }

    /// Judged from `now` (a reload, the admin API): what another room's event admitted before
    /// now, and has stopped admitting, cuts nothing (found by review: a closed event of another
    /// room cut a running sale's bound to 20 of 70).
    #[test]
    fn an_event_is_judged_from_now_on() {
        let timed = |name: &str, opens: &str, closes: &str, rate: u32| {
            format!(
                "[[room]]\nname = \"{name}\"\npaths = [\"/{name}\"]\nadmit-per-second = 10\n\
                 max-active = 10\n[[room.event]]\nname = \"e\"\n\
                 opens-at = \"2030-01-01T{opens}:00+00:00\"\n\
                 closes-at = \"2030-01-01T{closes}:00+00:00\"\nadmit-per-second = {rate}\n"
            )
        };
        let text = format!(
            "[cookie]\nkeys = [\"test-key-0123456789-0123456789-0123456789\"]\n[[upstream]]\n\
             name = \"shop\"\naddr = \"127.0.0.1:9000\"\nadmit-per-second = 100\n{}{}",
            timed("a", "01:00", "05:00", 30),
            timed("b", "02:00", "03:00", 60)
        );
        let c = crate::config::parse(&text, "unit.toml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        let events_of = |i: usize| c.rooms[i].events.clone();
        let rate_of = |i: usize| c.rooms[i].params.admit_per_second;
        let bound = |now| {
            super::event_rate_bound(
                &c.rooms,
                &c.upstreams,
                0,
                &c.rooms[0].events[0],
                &events_of,
                &rate_of,
                now,
            )
        };
        let b = &c.rooms[1].events[0];
        assert_eq!(bound(0), Some(40.0), "b's 60/s meets a's time");
        let after_b = b.closes_at.unwrap() + 1;
        assert_eq!(bound(after_b), Some(90.0), "b closed: only its room's 10/s");
        let a_closed = c.rooms[0].events[0].closes_at.unwrap();
        assert_eq!(bound(a_closed), None, "a closed: nothing to bound");
    }
}
