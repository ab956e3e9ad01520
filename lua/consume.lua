-- consume: takes an admission for an order (e.g. POST /orders). Of concurrent calls for one
-- visitor exactly one wins. The admission stays pending, its slot still counted, until settle
-- confirms or gives it back, or until its deadline passes (then the next consume or touch of
-- this visitor gives it back). A call re-sent with the winner's request id (a reply that was
-- lost; cluster clients re-send) wins again; any other request, or a replay, loses.
-- A verified cookie (ARGV[6] = 1) with neither a session nor a marker wins and re-registers the
-- admission: the store lost its data, the cookie is the proof (not for a session a pre-queue
-- ended: see end_sessions).
--
-- An order that wins takes its visitor out of the line: one place in line buys one admission,
-- and the admission this order uses may have been one the line never gave (a local admission
-- during an outage, a session a failover lost while the visitor stayed in line). Left in line,
-- the visitor's turn came and bought a second order (found by review).
--
-- KEYS[1] active ZSET   KEYS[2] consumed marker STRING for this visitor   KEYS[3] room HASH
-- (read only: its key layout version and liveness clock)   KEYS[4] ended ZSET (end_sessions in the prelude)
-- KEYS[5] waiting ZSET   KEYS[6] used ZSET (note_used in lua/markers.lua: no cookie's word takes a
-- used admission back, however long the store was away; note_pending: nor one whose order is in
-- flight)
-- ARGV[1] visitor id   ARGV[2] request id   ARGV[3] grace µs   ARGV[4] marker lifetime ms
-- (session-ttl + margin)   ARGV[5] session-ttl µs   ARGV[6] vouched (1/0)   ARGV[7] clock (prelude
-- `now_us`, with the caller's deadline: `late_call`)
-- ARGV[8] margin ms: the marker also outlives the session's deadline here by it — every cookie
-- of the admission was issued against that deadline (admission, renewal), also one issued
-- under a longer session-ttl than the one in force now   ARGV[9] tick µs (the liveness clock's
-- cap: the grace period runs on it too, see pending_left)   ARGV[10] the vouching cookie's
-- expiry (unix s, the store's clock as the proxy read it; 0 or absent: not known): a cookie
-- expired by this clock vouches for nothing, and the marker lives past it by the margin
-- ARGV[11] the store generation the caller last saw ('' if none)   ARGV[12] how long after a
-- generation is born the wait below lasts (µs; at least three ticks): see it
-- ARGV[13] the version of the runtime event changes the caller's events come from ('' unknown:
-- not checked): see stale_events below
-- Reply: { code, ms }  code 1 won, 0 used (or never admitted), 2 busy: another order of this
--   admission is pending, ms until its deadline (or the caller's events are stale: a tick),
--   3 a session a pre-queue ended (never used)

local active, marker = KEYS[1], KEYS[2]
local vid, req = ARGV[1], ARGV[2]
local grace, marker_ms, session_us = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_us(ARGV[7])
local live, cap = read_live(KEYS[3], now, tonumber(ARGV[9]))

local m = read_marker(redis.call('GET', marker))
if m and m.req == req and (m.kind == 'p' or m.kind == 'c') then
  return { 1, 0 }
end
if m and m.kind == 'p' then
  local left = pending_left(m, now, live)
  if left > 0 then
    return { 2, math.ceil(left / 1000) }
  end
end
if not m then
  -- The marker ran out while an order of this admission is in flight (an outage longer than
  -- its life): busy until the order is settled or its grace period is up on the liveness clock.
  local left = pending_lately(KEYS[6], vid, live)
  if left > 0 then
    return { 2, math.ceil(left / 1000) }
  end
end
m = settled_marker(active, marker, vid, now, session_us, marker_ms, KEYS[4], live, KEYS[6])

local held = tonumber(redis.call('ZSCORE', active, vid))
if held and held <= now then
  redis.call('ZREM', active, vid)
  held = nil
end
local expires_s = tonumber(ARGV[10]) or 0
if not held then
  if ARGV[6] ~= '1' or (m and m.kind == 'c') or (expires_s > 0 and expires_s * 1000000 <= now)
      or used_lately(KEYS[6], vid, live) then
    return { 0, 0 }
  end
  if ended_either(KEYS[4], KEYS[6], vid, now, live) then
    return { 3, 0 }
  end
  -- The store lost its data since the caller last saw it (another generation, or none), or
  -- its generation is younger than ARGV[12] (every instance's breaker cooldown, a call's
  -- timeout and two ticks: found by re-review, three ticks were shorter than a cooling
  -- breaker): an order of this admission may be in flight on an instance that has not yet
  -- seen the loss, and whose heartbeat then writes its marker again. The cookie waits, as for
  -- an order pending (found by re-review: a second order won 30 ms after a FLUSHALL, the first
  -- still at the shop).
  local quiet = math.max(3 * tonumber(ARGV[9]), tonumber(ARGV[12]) or 0)
  if loss_too_recent(KEYS[3], ARGV[11], quiet, now) then
    return { 2, math.max(1, math.ceil(quiet / 1000)) }
  end
  held = now
end
-- The caller's events are older than the store's runtime changes, or the store waits to hear
-- every live instance after a stall ('ev_wait', admit.lua), or this call runs past its
-- caller's deadline: the caller may not yet have read a pre-queue that has begun, whose first
-- tick ends this session. Nothing is taken; the order is busy for a tick, and asked again by
-- events read since (found by review r104a: through an instance that had not yet read a
-- pre-queue added at run time to begin at once, a session from before it ordered in the
-- pre-queue's first tick, ahead of every registrant). As a join by such events (join.lua).
-- So while live instances run the room with different events in their files ('ev_mixed',
-- admit.lua): one may be in a pre-queue the caller's file lacks, which no tick enters until
-- they agree (found by re-review r107a: during a rolling reload that added a drawn pre-queue,
-- sessions from before it ordered through the instances not yet reloaded, for as long as the
-- rollout took).
local caller_ver = ARGV[13] or ''
local ev_ver, ev_wait, ev_mixed = unpack(redis.call('HMGET', KEYS[3], 'ev_ver', 'ev_wait',
  'ev_mixed'))
if (caller_ver ~= '' and tonumber(caller_ver) ~= (tonumber(ev_ver) or 0)) or ev_wait == '1'
    or ev_mixed == '1' or late_call(ARGV[7], now) then
  return { 2, math.max(1, math.ceil(tonumber(ARGV[9]) / 1000)) }
end
local deadline = now + grace
local life_ms = math.max(marker_ms, math.ceil((held - now) / 1000) + tonumber(ARGV[8]),
  math.ceil(expires_s * 1000 - now / 1000) + tonumber(ARGV[8]))
redis.call('ZADD', active, math.max(held, deadline), vid)
redis.call('SET', marker, pending_marker(req, deadline, held, live + grace + cap),
  'PX', life_ms + math.ceil(grace / 1000))
note_pending(KEYS[6], vid, live + grace + cap, live)
redis.call('ZREM', KEYS[5], vid)
return { 1, 0 }
