-- clear_waiting: empties a room's line (everyone waiting must join again). Admitted sessions
-- are kept. Idempotent: a retry finds an empty line.
--
-- KEYS[1] waiting ZSET   KEYS[2] room HASH
-- ARGV: none
-- Reply: how many were removed

check_layout(KEYS[2])
local n = redis.call('ZCARD', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], 'epoch', 'last_off', 'sweep', 'sample_at', 'sample_epoch', 'sample')
return n
