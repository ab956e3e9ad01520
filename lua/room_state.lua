-- room_state: reads, and optionally changes, a room's runtime state. Setting values is
-- idempotent, so a retried call is harmless.
--
-- KEYS[1] room HASH
-- ARGV[1] enabled: '1', '0' or '' (leave)   ARGV[2] queue_all: '1', '0' or ''
-- ARGV[3] rate override: a number, '-' (back to the configured rate) or ''
-- ARGV[4] max-active override: a number, '-' or ''
-- Reply: { enabled, queue_all, rate override or '', max-active override or '' }

local room = KEYS[1]
check_layout(room)
local fields = { 'enabled', 'queue_all', 'rate', 'max_active' }
for i = 1, 4 do
  local v = ARGV[i]
  if v == '-' then
    redis.call('HDEL', room, fields[i])
  elseif v ~= '' then
    redis.call('HSET', room, fields[i], v)
  end
end
local h = redis.call('HMGET', room, 'enabled', 'queue_all', 'rate', 'max_active')
return { h[1] == '0' and 0 or 1, h[2] == '1' and 1 or 0, h[3] or '', h[4] or '' }
