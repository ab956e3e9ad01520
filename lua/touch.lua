-- touch: sliding expiry of an admitted session. Extends it by session-ttl; a session the store
-- no longer holds (expired, or Redis lost it) is taken back only while max-active allows.
-- Idempotent: a retry extends to the same deadline, give or take the time between the calls.
--
-- KEYS[1] active ZSET   KEYS[2] room HASH
-- ARGV[1] visitor id   ARGV[2] session-ttl µs   ARGV[3] configured max-active   ARGV[4] clock skew µs
-- Reply: 1 when the session is held (now extended), 0 when there was no room for it

local active, room = KEYS[1], KEYS[2]
local now = now_us(tonumber(ARGV[4]))
redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
local max_active = tonumber(redis.call('HGET', room, 'max_active')) or tonumber(ARGV[3])
if redis.call('ZSCORE', active, ARGV[1]) or redis.call('ZCARD', active) < max_active then
  redis.call('ZADD', active, now + tonumber(ARGV[2]), ARGV[1])
  return 1
end
return 0
