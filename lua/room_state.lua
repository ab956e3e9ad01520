-- room_state: reads, and optionally changes, a room's runtime state. Setting values is
-- idempotent, so a retried call is harmless.
--
-- KEYS[1] room HASH
-- ARGV[1] enabled: '1', '0' or '' (leave)   ARGV[2] queue_all: '1', '0' or ''
-- ARGV[3] rate override: a number, '-' (back to the configured rate) or ''
-- ARGV[4] max-active override: a number, '-' or ''
-- ARGV[5] autopilot switch: '1', '0', '-' (back to the config) or ''
-- Reply: { enabled, queue_all, rate override or '', max-active override or '',
--          autopilot switch ('1', '0' or ''), the autopilot's rate if it runs, or '' }

local room = KEYS[1]
check_layout(room)
local fields = { 'enabled', 'queue_all', 'rate', 'max_active', 'autopilot' }
for i = 1, 5 do
  local v = ARGV[i]
  if v == '-' then
    redis.call('HDEL', room, fields[i])
  elseif v ~= nil and v ~= '' then
    redis.call('HSET', room, fields[i], v)
  end
end
local h = redis.call('HMGET', room, 'enabled', 'queue_all', 'rate', 'max_active', 'autopilot',
  'ap_rate', 'ap_conf')
-- The autopilot runs when configured (as the last admit call said), not switched off, and no
-- override pins the rate; join reads the same from 'ap_on'.
local running = h[7] == '1' and h[5] ~= '0' and not h[3]
redis.call('HSET', room, 'ap_on', running and '1' or '0')
return { h[1] == '0' and 0 or 1, h[2] == '1' and 1 or 0, h[3] or '', h[4] or '', h[5] or '',
  running and h[6] or '' }
