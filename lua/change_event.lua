-- change_event: keeps one event's runtime definition (added, changed or cancelled through the
-- admin API; src/event/schedule.rs reads them) if nobody changed the room's events since the
-- caller read them, and records the change in the room's history in the same step. A retried
-- call finds its definition in force and changes nothing more.
--
-- KEYS[1] events HASH   KEYS[2] room HASH   KEYS[3] history LIST
-- ARGV[1] the event's name   ARGV[2] its runtime definition (JSON)   ARGV[3] the version the
-- caller read   ARGV[4] the definition in force before (JSON, for the record)
-- ARGV[5] the change's id   ARGV[6] who   ARGV[7] from which address   ARGV[8] entries kept
-- Reply: { 1, the new version } when kept, or { 0, version, name1, json1, ... } (the current
-- runtime definitions) when the events changed since the caller read them, or { 2, version }
-- when the change moves the opening of the event (ARGV[4]) whose opening admit.lua recorded

check_layout(KEYS[2])
local version = tonumber(redis.call('HGET', KEYS[2], 'ev_ver')) or 0
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return { 1, version }
end
if tonumber(ARGV[3]) ~= version then
  local reply = { 0, version }
  for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do
    reply[#reply + 1] = v
  end
  return reply
end
-- An opening the store recorded ('opened') does not move: checked here, in the step that
-- writes, as well as by the caller from what it read (found by re-review: an opening recorded
-- between the caller's read and this write was moved an hour later).
local before, after = cjson.decode(ARGV[4]), cjson.decode(ARGV[2])
if type(before) == 'table' and type(after) == 'table' and type(after.event) == 'table'
  and before['opens-at'] ~= after.event['opens-at'] then
  local id = tostring(before.name) .. '@'
    .. string.format('%.0f', tonumber(before['prequeue-from']) or -1)
  if redis.call('HGET', KEYS[2], 'opened') == id then
    return { 2, version }
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
version = redis.call('HINCRBY', KEYS[2], 'ev_ver', 1)
record_change(KEYS[3], ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]),
  { { field = 'event ' .. ARGV[1], from = cjson.decode(ARGV[4]), to = cjson.decode(ARGV[2]) } })
return { 1, version }
