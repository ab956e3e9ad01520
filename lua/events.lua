-- events: a room's runtime event changes (change_event.lua writes them). Read only.
--
-- KEYS[1] events HASH   KEYS[2] room HASH
-- Reply: { version, opened, name1, json1, name2, json2, ... } (parsed by
-- src/store/redis/events.rs); opened: the id of the event whose opening admit.lua recorded, or ''

check_layout(KEYS[2])
local h = redis.call('HMGET', KEYS[2], 'ev_ver', 'opened')
local reply = { tonumber(h[1]) or 0, h[2] or '' }
for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do
  reply[#reply + 1] = v
end
return reply
