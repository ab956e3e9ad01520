-- admit's judgements of the other instances of the room: their files (the configs hash) and
-- heartbeats (the instances ZSET). Loaded between admit_steps.lua and admit.lua (src/store/
-- redis.rs `lua!`); KEYS and ARGV as admit.lua documents them.
--
-- Each instance keeps "<config digest> <events digest> <its heartbeat lifetime µs>" in the
-- configs hash, and is judged live by its own lifetime (an instance ticking a room every 6 s
-- is not gone between its ticks to one ticking every 100 ms: re-review). Heartbeats are
-- stamped on the liveness clock (admit.lua).
local function config_parts(v)
  return string.match(v, '^(%S*) ?(%S*) ?(%S*)$')
end

-- Whether the instance of configs entry `i` of `cfgs` is live at `live`: its heartbeat is
-- younger than its lifetime and the caller's (ARGV[9]).
local function is_live(cfgs, i, live)
  local _, _, life = config_parts(cfgs[i + 1])
  local seen = tonumber(redis.call('ZSCORE', KEYS[4], cfgs[i]))
  life = math.max(tonumber(life) or 0, tonumber(ARGV[9]))
  return seen ~= nil and seen > live - life
end

-- A room hash field that is '1' while `on`, absent otherwise (`was`: what it is now).
local function flag(room, field, on, was)
  if on ~= was then
    if on then
      redis.call('HSET', room, field, '1')
    else
      redis.call('HDEL', room, field)
    end
  end
end

-- After a stall ('stall_live', set by admit.lua), whether a live instance has made no call of
-- its own since ('fresh:<id>' older): one may have reloaded other events during the stall,
-- which the store cannot know yet. An instance of a version before this writes no 'fresh:' and
-- is not waited for. Once every live instance has been heard, the stall is over.
local function unheard_since_stall(room, cfgs, live)
  local stall_live = tonumber(redis.call('HGET', room, 'stall_live'))
  if not stall_live then
    return false
  end
  for i = 1, #cfgs, 2 do
    local fresh = tonumber(redis.call('HGET', room, 'fresh:' .. cfgs[i]))
    if fresh and fresh < stall_live and is_live(cfgs, i, live) then
      return true
    end
  end
  redis.call('HDEL', room, 'stall_live')
  return false
end

-- After the store was away from an instance ('lc_since', set by admit_outage.lua), whether a
-- live instance has not told it yet of every session it admitted or kept on its own meanwhile
-- ('told:<id>' older, 0 while it has some to tell); after a loss of the store's data, also
-- whether fewer of the instances that found it (from before it: 'lc_back:<id>') have been
-- heard than the first counted ('lc_expect'; the configs hash went with the data), until
-- 'lc_until'. Once none is waited
-- for, the fields are dropped. A caller with such sessions to tell (`mine_untold`) is waited for
-- itself, whether or not the store knows it yet (found on the test of an empty restart: its own
-- first call after the loss, before its configs entry was written, ended the wait).
local function untold_since_cut(room, cfgs, live, mine_untold)
  local lc = redis.call('HMGET', room, 'lc_since', 'lc_expect', 'lc_until')
  local from = tonumber(lc[1])
  if not from then
    return false
  end
  if mine_untold then
    return true
  end
  local expect, until_live = tonumber(lc[2]), tonumber(lc[3])
  local function back(id)
    return redis.call('HEXISTS', room, 'lc_back:' .. id) == 1
  end
  if expect and until_live and live < until_live then
    local heard, me = 0, false
    for i = 1, #cfgs, 2 do
      if cfgs[i] == ARGV[8] then
        me = true
      end
      if back(cfgs[i]) and (cfgs[i] == ARGV[8] or is_live(cfgs, i, live)) then
        heard = heard + 1
      end
    end
    if not me and back(ARGV[8]) then
      heard = heard + 1
    end
    if heard < expect then
      return true
    end
  end
  for i = 1, #cfgs, 2 do
    local mark = tonumber(redis.call('HGET', room, 'told:' .. cfgs[i]))
    if mark and mark < from and is_live(cfgs, i, live) then
      return true
    end
  end
  if expect then
    redis.call('HSET', room, 'lc_gen', redis.call('HGET', room, 'gen') or '')
  end
  redis.call('HDEL', room, 'lc_since', 'lc_expect', 'lc_until', 'lc_back:' .. ARGV[8])
  for i = 1, #cfgs, 2 do
    redis.call('HDEL', room, 'lc_back:' .. cfgs[i])
  end
  return false
end

-- Whether a live instance other than the caller runs the room with other events than the
-- caller's (`mine_ev`: its events digest, nil for a caller that sends none). An instance of a
-- version before this says nothing of its events and is not counted.
local function events_disagree(cfgs, mine_ev, live)
  if not mine_ev then
    return false
  end
  for i = 1, #cfgs, 2 do
    local _, theirs = config_parts(cfgs[i + 1])
    if cfgs[i] ~= ARGV[8] and theirs ~= '' and theirs ~= mine_ev and is_live(cfgs, i, live) then
      return true
    end
  end
  return false
end

-- The instances gone at `live` (silent past the caller's lifetime and past their own, when
-- they say it): their heartbeats, files and per-instance fields of the room are dropped.
local function sweep_gone(room, cfgs, live)
  local lives = {}
  for i = 1, #cfgs, 2 do
    local _, _, life = config_parts(cfgs[i + 1])
    lives[cfgs[i]] = tonumber(life)
  end
  local gone = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', live - tonumber(ARGV[9]))) do
    local seen = tonumber(redis.call('ZSCORE', KEYS[4], id))
    if not (lives[id] and seen > live - lives[id]) then
      gone[#gone + 1] = id
    end
  end
  if #gone > 0 then
    redis.call('HDEL', KEYS[5], unpack(gone))
    redis.call('ZREM', KEYS[4], unpack(gone))
    for _, id in ipairs(gone) do
      redis.call('HDEL', room, 'step:' .. id, 'given:' .. id, 'fresh:' .. id, 'told:' .. id,
        'lc_back:' .. id)
    end
  end
  return gone
end

-- After the store lost the room's data (a caller knew a generation it no longer holds), the
-- instances' files are unknown to it until each has ticked again: for a heartbeat's life on the
-- liveness clock from the last call that found the loss ('lost_live'), a caller with events
-- (`has_events`) takes no event step by them and no newcomer is placed (found by review: after
-- an empty restart the instance still at the old opening stepped first, recorded it, and the
-- sale opened minutes early once both files agreed on the later one). A room without events
-- in the caller's file is not held (an instance that added one meanwhile is heard within that
-- life: README, the known limit).
local function after_loss(room, live, has_events)
  if ARGV[10] ~= '' and ARGV[10] ~= redis.call('HGET', room, 'gen') then
    redis.call('HSET', room, 'lost_live', live)
  end
  local lost_live = tonumber(redis.call('HGET', room, 'lost_live'))
  if not lost_live then
    return false
  end
  if live >= lost_live + tonumber(ARGV[9]) then
    redis.call('HDEL', room, 'lost_live')
    return false
  end
  return has_events
end
