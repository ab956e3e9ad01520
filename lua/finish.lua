-- finish: the origin's word on an admission (Anteroom-Command: complete | revoke). The visitor
-- leaves active (the slot is free at once) and the line, whatever state the admission was in
-- (a pending order of it included: the shop's word settles it), and a confirmed marker living
-- at least until the last cookie of it expires stops touch from renewing it. A revoke is also
-- numbered in the room's revocation log, which admit hands back to every instance: they refuse
-- the cookie within a tick. Safe to retry: the marker is set to the same value, and a
-- retried revoke renumbers its one entry (instances learn it again, harmlessly).
--
-- The session as this store holds it may outlive the cookie the command came with: another
-- instance renewed it under a longer session-ttl (a rolling change, a reload) and its cookie
-- lives as long. The marker and the revocation then last past the session's deadline here, by
-- the margin, too (found by review: a cookie renewed under session-ttl 200 s outlived a revoke
-- told with 10 s, then browsed and ordered).
--
-- KEYS[1] active ZSET   KEYS[2] consumed marker STRING for this visitor   KEYS[3] room HASH
-- KEYS[4] waiting ZSET   KEYS[5] revoked ZSET   KEYS[6] the visitor's order record STRING
-- (note_ordered: the session the origin ended counts as ordered for join-limit)   KEYS[7] used
-- ZSET (note_used: the admission is used on the liveness clock as long as its marker lives)
-- ARGV[1] visitor id   ARGV[2] request id (names the marker)   ARGV[3] 'complete' | 'revoke'
-- ARGV[4] marker lifetime ms (until the last cookie expires)   ARGV[5] until (unix s, the
-- store's clock as the proxies read it: the revocation's end)   ARGV[6] clock (prelude `now_us`)
-- ARGV[7] margin s past the session's deadline here (the other instances' clocks)
-- ARGV[8] the caller's abandon-after µs (how long the order's record lives)
-- ARGV[9] tick µs (the liveness clock's cap, read_live)
-- Reply: the revocation's end as recorded (unix s): ARGV[5], or later by the session here

local active, marker, room = KEYS[1], KEYS[2], KEYS[3]
local vid, req, how = ARGV[1], ARGV[2], ARGV[3]
local now = now_us(ARGV[6])
local live = read_live(room, now, tonumber(ARGV[9]) or 0)
local life_ms, until_s = tonumber(ARGV[4]), tonumber(ARGV[5])
-- `until` is on the store's clock (the proxies write cookies on it); the lifetime the caller
-- worked out from its own clock is lengthened to reach it here.
life_ms = math.max(life_ms, math.ceil(until_s * 1000 - now / 1000))
local held = tonumber(redis.call('ZSCORE', active, vid))
if held and held > now then
  local margin = tonumber(ARGV[7]) or 0
  life_ms = math.max(life_ms, math.ceil((held - now) / 1000) + margin * 1000)
  until_s = math.max(until_s, math.ceil(held / 1000000) + margin)
end

redis.call('ZREM', active, vid)
redis.call('ZREM', KEYS[4], vid)
life_ms = math.max(life_ms, redis.call('PTTL', marker))
redis.call('SET', marker, 'c ' .. req, 'PX', life_ms)
redis.call('ZREM', KEYS[7], 'p' .. vid)
note_used(KEYS[7], vid, live, life_ms)
note_ordered(KEYS[6], room, ARGV[8], now)
local until_txt = string.format('%.0f', until_s)
if how == 'revoke' then
  trim_revoked(KEYS[5], room, now)
  -- Numbered by the store's clock (µs), above the last: a store restored from an older copy
  -- (a snapshot, a failover that lost writes) numbers after anything it handed out before,
  -- where a count would hand the same numbers out again, and an instance that had read them
  -- would skip the new entries for good (found by review).
  local seq = math.max(now, (tonumber(redis.call('HGET', room, 'revoke_seq')) or 0) + 1)
  redis.call('HSET', room, 'revoke_seq', string.format('%.0f', seq))
  redis.call('ZADD', KEYS[5], string.format('%.0f', seq), vid .. ' ' .. until_txt)
end
return until_txt
