-- consume: uses up an admission (e.g. POST /orders). Of concurrent calls for one visitor exactly
-- one gets 1. The winner's request id is kept for a minute, so a call whose reply was lost and
-- that is sent again (cluster clients re-send after a dropped connection) still gets 1, while
-- any other request, or a replay, gets 0.
--
-- KEYS[1] active ZSET   KEYS[2] consumed marker STRING for this visitor
-- ARGV[1] visitor id   ARGV[2] request id   ARGV[3] marker lifetime ms   ARGV[4] clock skew µs
-- Reply: 1 won, 0 already used or never admitted

local active, marker = KEYS[1], KEYS[2]
local now = now_us(tonumber(ARGV[4]))
local exp = redis.call('ZSCORE', active, ARGV[1])
if exp then
  redis.call('ZREM', active, ARGV[1])
  if tonumber(exp) > now then
    redis.call('SET', marker, ARGV[2], 'PX', tonumber(ARGV[3]))
    return 1
  end
end
if redis.call('GET', marker) == ARGV[2] then
  return 1
end
return 0
