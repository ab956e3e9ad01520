-- clear_waiting: empties a room's line (everyone waiting must join again). Admitted sessions
-- are kept. Idempotent: a retry finds an empty line. An operator's clear (ARGV[1] set) is
-- recorded in the room's history in the same step, and its id in the room hash ('clear_id'):
-- a re-sent call of it clears nothing, so visitors who joined after the clear keep their
-- places (found by review: a re-sent clear removed them).
--
-- KEYS[1] waiting ZSET   KEYS[2] room HASH   KEYS[3] history LIST (only when ARGV[1] is set)
-- ARGV[1] the change's id or ''   ARGV[2] who   ARGV[3] from which address   ARGV[4] kept
-- Reply: how many were removed

check_layout(KEYS[2])
local id = ARGV[1] ~= nil and ARGV[1] ~= '' and ARGV[1] or nil
if id and redis.call('HGET', KEYS[2], 'clear_id') == id then
  -- This clear ran already (a re-sent call): the visitors who joined since stay.
  return 0
end
local n = redis.call('ZCARD', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], 'epoch', 'last_off', 'sweep', 'sample_at', 'sample_epoch', 'sample', 'sample_total')
if id then
  redis.call('HSET', KEYS[2], 'clear_id', id)
  record_change(KEYS[3], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]),
    { { field = 'waiting', from = n, to = 0 } })
end
return n
