-- stats: a room's figures for the admin API and metrics. Expired sessions are removed first, so
-- the active count is exact.
--
-- KEYS[1] waiting ZSET   KEYS[2] active ZSET   KEYS[3] room HASH   KEYS[4] instances ZSET
-- KEYS[5] configs HASH
-- ARGV[1] clock (prelude `now_us`)   ARGV[2] tick µs   ARGV[3] claim-ttl µs (for a gap, see the
-- prelude)
-- Reply: { waiting, active, admitted total, joined total, abandoned total, measured rate (string),
--          enabled, queue_all, rate override or '', max-active override or '',
--          autopilot switch or '', the autopilot's rate if it runs or '',
--          visitors a passthrough room let in that the line would have held,
--          then digest, instances pairs: the configuration digests of the live instances }

check_layout(KEYS[3])
local now = now_us(ARGV[1])
forgive_gap(KEYS[3], KEYS[2], now, liveness_cap(tonumber(ARGV[2])), tonumber(ARGV[3]))
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local h = redis.call('HMGET', KEYS[3], 'admitted', 'joined', 'abandoned', 'm_rate',
  'enabled', 'queue_all', 'rate', 'max_active', 'autopilot', 'ap_on', 'ap_rate', 'would_queue')
local reply = { redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), tonumber(h[1]) or 0,
  tonumber(h[2]) or 0, tonumber(h[3]) or 0, h[4] or '0',
  h[5] == '0' and 0 or 1, h[6] == '1' and 1 or 0, h[7] or '', h[8] or '', h[9] or '',
  h[10] == '1' and h[11] or '', tonumber(h[12]) or 0 }
-- Only instances still in the heartbeat set count (admit removes the silent ones, with their
-- digests, at each tick).
local counts, order = {}, {}
local fields = redis.call('HGETALL', KEYS[5])
for i = 1, #fields, 2 do
  if redis.call('ZSCORE', KEYS[4], fields[i]) then
    -- The room's digest, without its events' (after a space: admit.lua, ARGV[12]).
    local digest = string.match(fields[i + 1], '^(%S*)')
    if not counts[digest] then
      counts[digest] = 0
      order[#order + 1] = digest
    end
    counts[digest] = counts[digest] + 1
  end
end
for _, digest in ipairs(order) do
  reply[#reply + 1] = digest
  reply[#reply + 1] = counts[digest]
end
return reply
