//! The Redis side of an admission's life after it is granted: the sliding renewal (`touch`),
//! orders (`consume`, `settle`) and the origin's word (`finish`), one script each.

use std::time::Duration;

use super::keys::{marker_key, marker_ms, ordered_key, Keys};
use super::{micros, unavailable, RedisStore};
use crate::store::order::MARKER_MARGIN;
use crate::store::{
    Consumed, Ending, Order, RequestId, RoomParams, Settle, Settled, StoreError, Taking, Touched,
    VisitorId,
};

/// `touch.lua`'s reply: 1 renewed, 3 taken back, 2 not taken back while a loss is young, else
/// refused.
fn touched_of(code: i64) -> Touched {
    match code {
        1 => Touched::Held,
        3 => Touched::TakenBack,
        2 => Touched::TooSoon,
        _ => Touched::Refused,
    }
}

impl RedisStore {
    pub(super) async fn touch_call(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        seen: Option<&crate::store::SeenGeneration>,
        expires: u64,
        taking: Taking,
    ) -> Result<Touched, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.touch.prepare_invoke();
        inv.key(&k.active)
            .key(&k.room)
            .key(marker_key(&p.name, vid))
            .key(&k.waiting)
            .key(&k.ended)
            .key(&k.used)
            .arg(&vid.as_bytes()[..])
            .arg(micros(p.session_ttl))
            .arg(p.max_active)
            .arg(self.clock_arg())
            .arg(marker_ms(p))
            .arg(micros(p.tick))
            .arg(micros(p.claim_ttl))
            .arg(seen.map_or("", |g| g.id.as_str()))
            .arg(seen.map_or(0, |g| micros(g.quiet)))
            .arg(if taking.past_cap() { "1" } else { "" })
            .arg(expires)
            .arg(u64::try_from(MARKER_MARGIN.as_millis()).unwrap_or(u64::MAX));
        let code: i64 = self.run("touch", &p.name, &inv).await?;
        Ok(touched_of(code))
    }

    pub(super) async fn consume_call(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        order: &Order,
    ) -> Result<Consumed, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.consume.prepare_invoke();
        inv.key(&k.active)
            .key(marker_key(&p.name, vid))
            .key(&k.room)
            .key(&k.ended)
            .key(&k.waiting)
            .key(&k.used)
            .arg(&vid.as_bytes()[..])
            .arg(order.request.as_str())
            .arg(micros(order.grace))
            .arg(u64::try_from(order.marker_life(p.session_ttl).as_millis()).unwrap_or(u64::MAX))
            .arg(micros(p.session_ttl))
            .arg(u8::from(order.vouched))
            .arg(self.clock_arg_until(&p.name))
            .arg(u64::try_from(MARKER_MARGIN.as_millis()).unwrap_or(u64::MAX))
            .arg(micros(p.tick))
            .arg(order.cookie_expires)
            .arg(order.generation.as_ref().map_or("", |g| g.id.as_str()))
            .arg(order.generation.as_ref().map_or(0, |g| micros(g.quiet)));
        match order.events_version {
            Some(v) => inv.arg(v),
            None => inv.arg(""),
        };
        let (code, ms): (i64, u64) = self.run("consume", &p.name, &inv).await?;
        match code {
            1 => Ok(Consumed::Won),
            0 => Ok(Consumed::Used),
            3 => Ok(Consumed::Ended),
            2 => Ok(Consumed::Busy {
                retry_after: Duration::from_millis(ms),
            }),
            other => Err(unavailable(
                "consume",
                &p.name,
                format!("unknown reply code {other}"),
            )),
        }
    }

    pub(super) async fn settle_call(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        request: &RequestId,
        how: Settle,
    ) -> Result<Settled, StoreError> {
        let k = Keys::of(&p.name);
        let mut inv = self.scripts.settle.prepare_invoke();
        inv.key(&k.active)
            .key(marker_key(&p.name, vid))
            .key(&k.room)
            .key(&k.ended)
            .key(&k.waiting)
            .key(ordered_key(&p.name, vid))
            .key(&k.used)
            .arg(&vid.as_bytes()[..])
            .arg(request.as_str())
            .arg(match how {
                Settle::Confirm => "confirm",
                Settle::GiveBack => "give_back",
                Settle::Extend(_) => "extend",
            })
            .arg(marker_ms(p))
            .arg(micros(p.session_ttl))
            .arg(self.clock_arg())
            .arg(match how {
                Settle::Extend(grace) => micros(grace),
                _ => 0,
            })
            .arg(micros(p.tick))
            .arg(micros(p.abandon_after));
        let code: i64 = self.run("settle", &p.name, &inv).await?;
        match code {
            1 => Ok(Settled::Done),
            2 => Ok(Settled::Already),
            3 => Ok(Settled::Reversed),
            0 => Ok(Settled::Gone),
            other => Err(unavailable(
                "settle",
                &p.name,
                format!("unknown reply code {other}"),
            )),
        }
    }

    pub(super) async fn finish_call(
        &self,
        p: &RoomParams,
        vid: VisitorId,
        ending: &Ending,
    ) -> Result<u64, StoreError> {
        let k = Keys::of(&p.name);
        let now = self.now_secs();
        let mut inv = self.scripts.finish.prepare_invoke();
        inv.key(&k.active)
            .key(marker_key(&p.name, vid))
            .key(&k.room)
            .key(&k.waiting)
            .key(&k.revoked)
            .key(ordered_key(&p.name, vid))
            .key(&k.used)
            .arg(&vid.as_bytes()[..])
            .arg(ending.request.as_str())
            .arg(ending.command.as_str())
            .arg(u64::try_from(ending.marker_life(now).as_millis()).unwrap_or(u64::MAX))
            .arg(ending.until)
            .arg(self.clock_arg())
            .arg(MARKER_MARGIN.as_secs())
            .arg(micros(p.abandon_after))
            .arg(micros(p.tick));
        let until: String = self.run("finish", &p.name, &inv).await?;
        // An older script answers 1: the caller's own `until` then stands.
        Ok(until
            .parse::<u64>()
            .map_or(ending.until, |u| u.max(ending.until)))
    }
}
