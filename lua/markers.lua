-- markers: the helpers of an admission's life after it is granted (consumed markers, the used
-- set, the liveness clock read without a step), prepended after lua/prelude.lua to the scripts
-- that need them: touch, consume, settle, finish (src/store/redis.rs `lua!`).

-- Consumed markers (consume, settle, touch). The value is "KIND REQUEST[@LIVE] [DEADLINE HELD]":
--   p  pending: taken by REQUEST, not settled; comes back once DEADLINE (µs, TIME) and LIVE
--      (µs, the liveness clock) have both passed (pending_left), with the session expiry HELD
--      it had before (or more). LIVE rides on the request id so that an older version, which
--      knows no LIVE, reads the marker as the pending order it is (TIME alone) and does not
--      take a second order under it; a marker it writes has no LIVE, and is read so here.
--      (A fifth field, the first try, read as a confirmed marker to an older version, whose
--      consume then took a second order while the session was held: found by review.)
--   c  confirmed: used up by REQUEST
--   g  given back by REQUEST
-- A bare request id (the marker of an older version) reads as confirmed.
local function read_marker(v)
  if not v then
    return nil
  end
  local kind, req, deadline, held = string.match(v, '^(%a) (%S+) ?(%d*) ?(%d*)$')
  if not kind then
    return { kind = 'c', req = v }
  end
  local id, live = string.match(req, '^([^@]+)@(%d+)$')
  return { kind = kind, req = id or req, deadline = tonumber(deadline), held = tonumber(held),
    live_deadline = tonumber(live) }
end

-- Whether the store lost its data too lately for a session it does not hold to be taken back
-- on a cookie's word (consume, touch): its generation is not `known`, the one the caller last
-- saw, or is younger than `quiet` µs (every instance's time to see the loss, after which their
-- heartbeats have written their orders' markers again). `known` '' (the caller never saw one):
-- not judged.
local function loss_too_recent(room, known, quiet, now)
  if (known or '') == '' then
    return false
  end
  local gen = redis.call('HGET', room, 'gen')
  local born = tonumber(string.match(gen or '', '^(%d+)-'))
  return gen ~= known or not born or now - born < quiet
end

-- The liveness clock now, read without storing it (consume, settle, touch, finish), with the key
-- layout check (one read of the room hash for both), and the clock's cap: the most one call
-- after a pause adds to it, which a pending order's grace period is given on top.
local function read_live(room, now, tick_us)
  local layout, live, live_at = unpack(redis.call('HMGET', room, 'layout', 'live', 'live_at'))
  check_layout(room, layout)
  local cap = liveness_cap(tick_us)
  return (liveness(live, live_at, now, cap, false)), cap
end

-- µs until a pending order's grace period is up (0: it is). It runs on TIME and on the
-- liveness clock both, and is up only when both deadlines have passed: time in which no call
-- could reach the room (Redis paused or down, every instance cut off from it) does not run
-- it down. Before, an order that went through while Redis was paused for longer than the
-- grace period found its admission given back when Redis resumed, before its confirm could
-- land, and the kept cookie ordered again through another instance (found by review). The
-- liveness deadline is the grace period plus the clock's cap (read_live) from the consume or
-- the last beat: the first call after a pause moves the clock by up to the cap, which must not
-- eat the time the confirm has to land (found by review, with a tick of 3 s: a cap of 12 s).
local function pending_left(m, now, live)
  local left = m.deadline - now
  if m.live_deadline then
    left = math.max(left, m.live_deadline - live)
  end
  return math.max(0, left)
end

local function pending_marker(req, deadline, held, live_deadline)
  return string.format('p %s@%.0f %.0f %.0f', req, live_deadline, deadline, held)
end

-- Whether a pre-queue ended `vid`'s session and a cookie of it may still verify, on the
-- liveness clock (end_sessions in the prelude; `live`: the clock now, read_live).
local function ended_lately(used, vid, live)
  local s = tonumber(redis.call('ZSCORE', used, 'e' .. vid))
  return s ~= nil and s > live
end

-- Whether a pre-queue ended `vid`'s session, by the ended set (Redis's clock) or its record on
-- the liveness clock: every reader asks both.
local function ended_either(ended, used, vid, now, live)
  return session_ended(ended, vid, now) or ended_lately(used, vid, live)
end

-- A pending consume that failed or was never settled: the same visitor holds the slot again,
-- whatever max-active says (it never left the count) — unless a pre-queue ended that session
-- meanwhile (end_sessions), by the ended set or, past its life on Redis's clock, on the liveness
-- clock (`live`; found by review r100b: an order in flight at the pre-queue's start failed, its
-- give-back landed after an outage longer than the ended set's life, and brought the session
-- back, which ordered after the opening ahead of the registrants).
local function give_back(active, marker, vid, m, now, session_us, marker_ms, ended, used, live)
  redis.call('ZREM', used, 'p' .. vid)
  if not ended_either(ended, used, vid, now, live) then
    redis.call('ZADD', active, math.max(m.held or 0, now + session_us), vid)
  end
  redis.call('SET', marker, 'g ' .. m.req, 'PX', marker_ms)
end

-- The marker, after giving back a pending consume whose grace period is up (`live`: the
-- liveness clock now, read_live).
local function settled_marker(active, marker, vid, now, session_us, marker_ms, ended, live, used)
  local m = read_marker(redis.call('GET', marker))
  if m and m.kind == 'p' and pending_left(m, now, live) == 0 then
    give_back(active, marker, vid, m, now, session_us, marker_ms, ended, used, live)
    m = { kind = 'g', req = m.req }
  end
  return m
end

-- A used admission on the liveness clock (the 'used' set). A consumed marker is a key whose
-- life runs on Redis's own clock, outage or not; a copy of a used admission's cookie that an
-- instance gave a new life while the store was away from it (a renewal kept it running)
-- outlived the marker when the outage did, and once the store answered the instance told it
-- of a session it had no record of as used: taken back, and the copy ordered a second time
-- (found by re-review r98a). This record stands still with the liveness clock. It is written
-- where a marker becomes confirmed (settle, finish) for the marker's life from now (`life_ms`)
-- and stretched where touch stretches one; read where a session the store does not hold would
-- be taken back on a cookie's word (consume, touch: used_lately); dropped for a visitor
-- admitted again (admit, join's fast path), as 'ended' is; and trimmed here as the clock
-- passes its entries.
-- The record outlives that life by the longest an instance keeps an admission running on its
-- own after the store last answered it (KEPT_AT_MOST_US in the prelude). `member`: the visitor
-- id, or 'e' .. it for an ended session (end_sessions).
local function note_used(used, vid, live, life_ms, member)
  member = member or vid
  local want = live + life_ms * 1000 + KEPT_AT_MOST_US
  local had = tonumber(redis.call('ZSCORE', used, member))
  if not had or had < want then
    redis.call('ZADD', used, string.format('%.0f', want), member)
  end
  redis.call('ZREMRANGEBYSCORE', used, '-inf', string.format('%.0f', live))
end

-- Whether `vid`'s last admission was used and a cookie of it may still verify (`live`: the
-- liveness clock now, read_live).
local function used_lately(used, vid, live)
  local s = tonumber(redis.call('ZSCORE', used, vid))
  return s ~= nil and s > live
end

-- An order in flight on the liveness clock (the used set's member 'p' .. visitor id, score the
-- end of its grace period on that clock: the pending marker's LIVE). The pending marker is a
-- key whose life runs on Redis's clock: an outage longer than it, an order in flight at its
-- start, and once the store answered a copy of the cookie ordered through another instance
-- before the owed confirm landed (found by reviews r99a and r99b). Written where a consume wins
-- and a heartbeat beats, dropped where the order is settled (confirm, give back, the origin's
-- word); read where no marker is found (consume: busy; touch: not taken back).
local function note_pending(used, vid, live_deadline, live)
  redis.call('ZADD', used, string.format('%.0f', live_deadline), 'p' .. vid)
  redis.call('ZREMRANGEBYSCORE', used, '-inf', string.format('%.0f', live))
end

-- µs until the grace period of `vid`'s order in flight is up on the liveness clock (0: none).
local function pending_lately(used, vid, live)
  local s = tonumber(redis.call('ZSCORE', used, 'p' .. vid))
  if s and s > live then
    return s - live
  end
  return 0
end
