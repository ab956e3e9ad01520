-- changes: the newest of a room's recorded operator changes (see room_state.lua). Read only.
--
-- KEYS[1] history LIST   ARGV[1] how many at most
-- Reply: the entries' JSON, newest first

return redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
