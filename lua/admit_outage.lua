-- admit's record of the times the store was away from the instances, and of what they admitted
-- on their own meanwhile. Loaded between admit_instances.lua and admit.lua (src/store/redis.rs
-- `lua!`); KEYS and ARGV as admit.lua documents them.
--
-- Sessions an instance admitted on its own (`local`) while the store was away are in the shop
-- before the store hears of them: a slot the store sees free may be one of theirs. So are the
-- sessions an instance kept running through the outage, under any policy, when their renewal
-- came due (src/proxy/visitor.rs keep_unrenewed). After the store was away from an instance
-- (its calls failed, or it has such sessions to tell: 'lc_since', on the liveness clock),
-- nobody is let in (the line's turns, and join's fast path by 'lc_wait') until every live
-- instance has told it of every such session since ('told:<id>', 0 while it has some to tell;
-- every instance, whatever its policy: found by review r97a, an instance on `closed` with a
-- long breaker-cooldown kept four sessions through a pause, and four newcomers walked in
-- through the other beside them). Before (found by review r94a), a newcomer's join
-- on any instance walked into their slots in the moments before their instance told the
-- store: five in for a cap of three.
-- A store that lost its data lost these marks with it, and the instances it knew: the caller
-- that finds the loss waits for as many instances as it last counted live ('lc_expect') to be
-- heard again, for a heartbeat's life at most ('lc_until'), and for each to tell its own
-- admissions as above (found by review r95a: after an empty restart, newcomers walked in at once
-- beside the sessions another instance had admitted on its own, six in for a cap of four).
-- An instance tells a heartbeat's life at least as long as it may be away after an outage
-- before it tells the store (src/store/redis.rs; found by review r95a: a cooldown of 3 s
-- kept one away past the five seconds, and the line took its sessions' slots).
--
-- The longest heartbeat life an instance runs the room with lately ('hb_hi', longest_lately)
-- is told back to the instances, which keep it past a loss (src/room/recovery.rs) and pass it
-- as ARGV[34]: the finder of a loss waits at most that long, not only its own heartbeat's life
-- (found by re-review r96a: after a loss, an instance with a longer breaker-cooldown than the
-- finder's told its own admissions after the wait had ended, and the line moved beside them).
-- `live`: the liveness clock now; `late`: the call runs past its caller's deadline (nothing it
-- carries is the caller's word). Returns the sessions the caller has to tell (ARGV[31]) and the
-- longest heartbeat life lately, µs.
local function note_outage(room, now, live, late)
  local untold = tonumber(ARGV[31]) or 0
  local life = tonumber(ARGV[9])
  local hb_hi = longest_lately(room, 'hb_hi', 'hb_hi_until', life, now, life)
  local hb_known = tonumber(ARGV[34]) or 0
  -- Whatever the caller's own policy (found by re-review r96a: a finder on `closed` set nothing,
  -- and the line moved beside another's sessions); counted, each instance that finds the loss,
  -- so from before it ('lc_back:<id>'): not one started since (re-review r96a: a third instance
  -- started during the wait made up the count, and the line moved before the one away told).
  -- Once per loss: an instance that finds it after the wait for it ended ('lc_gen', the generation
  -- it ended in) starts none again, and tells its own sessions as any caller does.
  local gen_now = redis.call('HGET', room, 'gen')
  if ARGV[10] ~= '' and ARGV[10] ~= gen_now
      and (not gen_now or gen_now ~= redis.call('HGET', room, 'lc_gen')) then
    redis.call('HSET', room, 'lc_back:' .. ARGV[8], 1)
    local expect = tonumber(redis.call('HGET', room, 'lc_expect'))
    if not expect then
      redis.call('HSET', room, 'lc_since', live,
        'lc_until', string.format('%.0f', live + math.max(life, hb_known)))
    end
    redis.call('HSET', room, 'lc_expect', math.max(expect or 0, tonumber(ARGV[33]) or 0))
  elseif late then
    -- A call past its caller's deadline is not its word (see the prelude): it starts no wait
    -- and tells nothing (found by re-review r98a: an instance whose admits all reached Redis
    -- late moved 'lc_since' on with each, never wrote its 'told' mark, and the line stood
    -- still for every instance as long as that lasted). Its sessions to tell are told by its
    -- own calls that are on time, or by their visitors' requests.
  elseif ARGV[32] == '1' then
    redis.call('HSET', room, 'lc_since', live)
  elseif untold > 0 then
    redis.call('HSETNX', room, 'lc_since', live)
  end
  if late then
    -- Nothing (above).
  elseif untold > 0 then
    redis.call('HSET', room, 'told:' .. ARGV[8], 0)
  else
    redis.call('HSET', room, 'told:' .. ARGV[8], live)
  end
  return untold, hb_hi
end
