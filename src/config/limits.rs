//! A room's limits beside its rate: `join-limit` (new visitors per client) and
//! `max-origin-inflight` with `origin-queue-timeout` (requests in flight to the origin, per
//! instance). Part of [`super::build`].

use std::time::Duration;

use super::build::Builder;
use super::file::{JoinLimitFile, RoomFile};
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
        let per = self.duration(&jp.key("per"), Some(&j.per), Duration::from_secs(60));
        if j.per_ip < 1 || j.per_ip > i64::from(u32::MAX) {
            self.fail(
                jp.key("per-ip"),
                "must be at least 1",
                "e.g. join-limit = { per-ip = 30, per = \"1m\" }",
            );
            return None;
        }
        Some(JoinLimit {
            per_ip: j.per_ip as u32,
            per,
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
