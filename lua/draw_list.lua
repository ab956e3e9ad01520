-- draw_list: a page of an event's draw, in the draw's order (the registrations ZSET is ordered
-- by draw key, then by ticket: src/event/draw.rs). Read only.
--
-- KEYS[1] the draw's registrations ZSET   KEYS[2] room HASH
-- ARGV[1] the first place (0-based)   ARGV[2] how many
-- Reply: the registration tickets (16 bytes each)

check_layout(KEYS[2])
local from = tonumber(ARGV[1])
return redis.call('ZRANGE', KEYS[1], from, from + tonumber(ARGV[2]) - 1)
