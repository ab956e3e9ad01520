-- room_state: reads, and optionally changes, a room's runtime state. Setting values is
-- idempotent, so a retried call is harmless. An operator's change (ARGV[6] set) is recorded in
-- the room's history in the same step, with each field it names before and after; a retried
-- call finds its id in the history and records nothing more.
--
-- KEYS[1] room HASH   KEYS[2] history LIST (newest first; only read when ARGV[6] is set)
-- ARGV[1] enabled: '1', '0' or '' (leave)   ARGV[2] queue_all: '1', '0' or ''
-- ARGV[3] rate override: a number, '-' (back to the configured rate) or ''
-- ARGV[4] max-active override: a number, '-' or ''
-- ARGV[5] autopilot switch: '1', '0', '-' (back to the config) or ''
-- ARGV[6] the change's id, or '' (a read, or a change not recorded)
-- ARGV[7] who (a token's label)   ARGV[8] from which address   ARGV[9] entries kept
-- ARGV[10] a re-assertion after a data loss: when (µs) an operator changed the state it
--          puts back ('st_at' as the caller last saw it; 0 when it saw none). It is applied
--          only if the room holds no state changed as late or later (an operator's change
--          since, or a re-assertion of a newer one): else the room's state is answered as it
--          is. Absent: a read or a change.
-- An operator's change records when it was made ('st_at', Redis TIME µs). A hold a data loss
-- put on the line ('loss_hold', see admit.lua) ends here.
-- Reply: { enabled, queue_all, rate override or '', max-active override or '',
--          autopilot switch ('1', '0' or ''), the autopilot's rate if it runs, or '',
--          'st_at' or 0 }
-- History entry (parsed by src/store/history.rs): JSON
--   {"id","at_ms","by","client","changes":[{"field","from","to"}]} (null: the configured value)

local room = KEYS[1]
check_layout(room)
local fields = { 'enabled', 'queue_all', 'rate', 'max_active', 'autopilot' }
local names = { 'enabled', 'queue_all', 'admit_per_second', 'max_active', 'autopilot' }
-- A field's value as the admin API shows it.
local function shown(i, v)
  if i == 1 then return v ~= '0' end
  if i == 2 then return v == '1' end
  if i == 5 then
    if v == '1' then return true elseif v == '0' then return false end
    return cjson.null
  end
  return tonumber(v) or cjson.null
end
local record = ARGV[6] ~= nil and ARGV[6] ~= ''
local before = record and redis.call('HMGET', room, unpack(fields)) or {}
local as_of = tonumber(ARGV[10])
local apply = true
if as_of then
  local held = tonumber(redis.call('HGET', room, 'st_at'))
  apply = held == nil or held < as_of
end
-- A hold a loss put on the line (admit.lua, 'loss_hold': what it covers) ends with the first
-- word on queue_all: a change or re-assertion that sets it, or a re-assertion not applied,
-- which leaves the store's state as it was before the loss's hold.
local loss_hold = redis.call('HGET', room, 'loss_hold')
if loss_hold then
  if as_of and not apply then
    if loss_hold == '' then
      redis.call('HDEL', room, 'queue_all', 'loss_hold')
    else
      redis.call('HSET', room, 'queue_all', loss_hold)
      redis.call('HDEL', room, 'loss_hold')
    end
  elseif apply and ARGV[2] ~= nil and ARGV[2] ~= '' then
    redis.call('HDEL', room, 'loss_hold')
  end
end
if apply then
  for i = 1, 5 do
    local v = ARGV[i]
    if v == '-' then
      redis.call('HDEL', room, fields[i])
    elseif v ~= nil and v ~= '' then
      redis.call('HSET', room, fields[i], v)
    end
  end
  if as_of then
    redis.call('HSET', room, 'st_at', string.format('%.0f', as_of))
  elseif record then
    local t = redis.call('TIME')
    redis.call('HSET', room, 'st_at', string.format('%.0f', t[1] * 1000000 + t[2]))
  end
end
local h = redis.call('HMGET', room, 'enabled', 'queue_all', 'rate', 'max_active', 'autopilot',
  'ap_rate', 'ap_conf')
if record then
  local changes = {}
  for i = 1, 5 do
    if ARGV[i] ~= nil and ARGV[i] ~= '' then
      changes[#changes + 1] = { field = names[i], from = shown(i, before[i] or nil),
        to = shown(i, h[i] or nil) }
    end
  end
  record_change(KEYS[2], ARGV[6], ARGV[7], ARGV[8], tonumber(ARGV[9]), changes)
end
-- The autopilot runs when configured (as the last admit call said), not switched off, and no
-- override pins the rate; join reads the same from 'ap_on'.
local running = h[7] == '1' and h[5] ~= '0' and not h[3]
redis.call('HSET', room, 'ap_on', running and '1' or '0')
return { h[1] == '0' and 0 or 1, h[2] == '1' and 1 or 0, h[3] or '', h[4] or '', h[5] or '',
  running and h[6] or '', tonumber(redis.call('HGET', room, 'st_at')) or 0 }
