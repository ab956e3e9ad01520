-- events: a room's runtime event changes (change_event.lua writes them). Read only.
--
-- KEYS[1] events HASH   KEYS[2] room HASH
-- Reply: { version, name1, json1, name2, json2, ... } (parsed by src/store/redis/events.rs)

check_layout(KEYS[2])
local reply = { tonumber(redis.call('HGET', KEYS[2], 'ev_ver')) or 0 }
for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do
  reply[#reply + 1] = v
end
return reply
