-- settle: the origin's answer to an order settles its pending consume. Confirm: the admission
-- is used up (out of active, a confirmed marker that outlives every cookie of it). Give back:
-- the same visitor holds the same slot again, max-active notwithstanding. Idempotent: a retry
-- finds it settled. A confirm that comes after the deadline gave the admission back still uses
-- it up, unless another order has taken it since; so does a confirm of an order the store never
-- saw (it went through while the store was away: no marker, or an earlier order's, settled).
--
-- KEYS[1] active ZSET   KEYS[2] consumed marker STRING for this visitor   KEYS[3] room HASH
-- (read only: its key layout version and liveness clock)   KEYS[4] ended ZSET (end_sessions in the prelude: an
-- order of a session a pre-queue ended does not bring the session back)   KEYS[5] waiting ZSET
-- (a confirm that uses an admission up takes its visitor out of the line, as consume's does; a
-- retried one that finds it done leaves a place taken since alone: found by re-review)
-- KEYS[6] the visitor's order record STRING (note_ordered: a confirm records the order)
-- KEYS[7] used ZSET (note_used: a confirm records the admission used on the liveness clock, for
-- as long as its marker lives from now; note_pending: a beat keeps the order in flight there)
-- Extend (a heartbeat while the order is in flight): a pending consume's deadline moves to
-- now + ARGV[7], its slot held at least as long; a settled one is left alone (3); a marker the
-- store lost is written again, pending.
--
-- ARGV[1] visitor id   ARGV[2] request id   ARGV[3] 'confirm' | 'give_back' | 'extend'
-- ARGV[4] marker lifetime ms   ARGV[5] session-ttl µs   ARGV[6] clock (prelude `now_us`)
-- ARGV[7] grace µs (extend only)   ARGV[8] tick µs (the liveness clock's cap, see pending_left)
-- ARGV[9] the caller's abandon-after µs (how long the order's record lives: note_ordered)
-- Reply: 1 done, 2 already done that way, 3 settled the other way already (nothing changed),
--   0 gone: another order of this admission is known, not this one

local active, marker = KEYS[1], KEYS[2]
local vid, req, how = ARGV[1], ARGV[2], ARGV[3]
local marker_ms, session_us = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_us(ARGV[6])
local live, cap = read_live(KEYS[3], now, tonumber(ARGV[8]))

local m = read_marker(redis.call('GET', marker))
if how == 'confirm' and (not m or (m.req ~= req and m.kind ~= 'p')) then
  -- The origin took an order the store never saw (let through while it was away, under
  -- on-store-error = open): the admission is used up all the same, or the kept cookie orders
  -- again once the store is back (found by review). Also when the marker is an earlier order's,
  -- settled (a given-back order, or one of an earlier admission): that order is not this one
  -- (found by a property test). The marker outlives the session's deadline by the margin, as
  -- consume's does.
  local held = tonumber(redis.call('ZSCORE', active, vid))
  redis.call('ZREM', active, vid)
  redis.call('ZREM', KEYS[5], vid)
  local life = marker_ms
  if held then
    life = math.max(life, math.ceil((held - now) / 1000) + marker_ms - math.floor(session_us / 1000))
  end
  redis.call('SET', marker, 'c ' .. req, 'PX', life)
  redis.call('ZREM', KEYS[7], 'p' .. vid)
  note_used(KEYS[7], vid, live, life)
  note_ordered(KEYS[6], KEYS[3], ARGV[9], now)
  return 1
end
if how == 'extend' and not m then
  -- The store lost the order's marker (its data) while the order is in flight: its instance
  -- vouches for it, as a cookie does for a session, and writes it again, so that a second order
  -- of the admission on another instance finds it pending (found by review: Redis restarted
  -- empty under an order in flight, and another instance took a second one). Its slot counts
  -- again as well.
  local deadline = now + tonumber(ARGV[7])
  local exp = tonumber(redis.call('ZSCORE', active, vid))
  if (not exp or exp < deadline) and not ended_either(KEYS[4], KEYS[7], vid, now, live) then
    redis.call('ZADD', active, deadline, vid)
  end
  redis.call('SET', marker, pending_marker(req, deadline, 0, live + tonumber(ARGV[7]) + cap),
    'PX', marker_ms + math.ceil(tonumber(ARGV[7]) / 1000))
  note_pending(KEYS[7], vid, live + tonumber(ARGV[7]) + cap, live)
  return 1
end
if not m or m.req ~= req then
  if how == 'give_back' and not m then
    -- The shop failed an order whose marker ran out during an outage: its record on the
    -- liveness clock goes, or the admission stayed busy until its grace had run there (found
    -- by re-review r100a).
    redis.call('ZREM', KEYS[7], 'p' .. vid)
  end
  return 0
end
if how == 'extend' then
  if m.kind ~= 'p' then
    return 3
  end
  local deadline = now + tonumber(ARGV[7])
  local exp = tonumber(redis.call('ZSCORE', active, vid))
  if (not exp or exp < deadline) and not ended_either(KEYS[4], KEYS[7], vid, now, live) then
    redis.call('ZADD', active, deadline, vid)
  end
  -- The marker keeps the life the consume gave it (past every cookie of the admission), if
  -- longer: a beat must not shorten it (found by review, after a reload lowered session-ttl).
  redis.call('SET', marker, pending_marker(req, deadline, m.held or 0, live + tonumber(ARGV[7]) + cap),
    'PX', math.max(marker_ms + math.ceil(tonumber(ARGV[7]) / 1000), redis.call('PTTL', marker)))
  note_pending(KEYS[7], vid, live + tonumber(ARGV[7]) + cap, live)
  return 1
end
if how == 'confirm' then
  if m.kind == 'c' then
    return 2
  end
  redis.call('ZREM', active, vid)
  redis.call('ZREM', KEYS[5], vid)
  -- The marker keeps the life the consume gave it (past the cookie that vouched), if longer.
  local life = math.max(marker_ms, redis.call('PTTL', marker))
  redis.call('SET', marker, 'c ' .. req, 'PX', life)
  redis.call('ZREM', KEYS[7], 'p' .. vid)
  note_used(KEYS[7], vid, live, life)
  note_ordered(KEYS[6], KEYS[3], ARGV[9], now)
  return 1
end
if m.kind == 'g' then
  return 2
end
if m.kind == 'c' then
  return 3
end
give_back(active, marker, vid, m, now, session_us, marker_ms, KEYS[4], KEYS[7], live)
return 1
