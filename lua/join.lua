-- join: enter the line, or look up the place in it (this is also the status poll). Claims an
-- admission whose turn has come; admits at once (fast path) when nobody waits and the rate
-- budget and max-active allow (less the slots admit.lua holds back after a loss of the store's
-- data, its 'hold_back' field). Idempotent: a retried call finds the visitor where the first left
-- them (ZADD NX for a newcomer; a claimed or fast-path admission is found in active).
--
-- KEYS[1] waiting ZSET   KEYS[2] active ZSET   KEYS[3] room HASH
-- KEYS[4] this client's new-join counter STRING (the second seed's INCR + PEXPIRE)
-- ARGV[1] visitor id   ARGV[2] configured rate/s   ARGV[3] configured max-active
-- ARGV[4] max-waiting   ARGV[5] session-ttl µs   ARGV[6] tick µs   ARGV[7] abandon-after µs
-- ARGV[8] clock skew µs (0 in production; tests move time with it)
-- ARGV[9] new joins allowed per client and window (0: no limit)   ARGV[10] window µs
-- ARGV[11] claim-ttl µs (how long a fast-path entry holds its slot until the visitor is back)
-- ARGV[12] the store generation the caller's last admit saw ('' if none): another one (or none,
--          the room's data lost in an empty restart) means the caller's admission loop has not
--          yet noticed the loss and re-asserted the room's state, perhaps a held line; until
--          it has, this join lets nobody in at once (the newcomer queues, as paused)
-- ARGV[13] the queueing method: 'passthrough' (a dry run: everyone is let in, anyone in line
--          too, and counted in 'would_queue' where the line would have held them; only those
--          who would have walked in spend the bucket and the tick's window), else the line's
-- Reply (parsed by src/store/redis/join_reply.rs):
--   { code, position, waiting, eta rate (string), joined now (1/0), offset, epoch }
--   (offset and epoch, the visitor's place for the queue ticket, with codes 1 and 2 only)
--   code 0 admitted (claimed), 1 waiting, 2 paused (queue_all), 3 full, 4 open (room switched
--   off), 5 entered (a newcomer admitted at once), 6 limited (too many new visitors from this
--   client; the eta field carries the milliseconds until the window ends)

local waiting, active, room = KEYS[1], KEYS[2], KEYS[3]
check_layout(room)
local vid = ARGV[1]
local now = now_us(tonumber(ARGV[8]))
-- The liveness clock (see the prelude) is read first, and stored only when its step must be.
local clock = redis.call('HMGET', room, 'live', 'live_at')
local live, keep_live = liveness(clock[1], clock[2], now, liveness_cap(tonumber(ARGV[6])), false)
if keep_live then
  redis.call('HSET', room, 'live', live, 'live_at', now)
end
local h = redis.call('HMGET', room, 'enabled', 'queue_all', 'rate', 'max_active',
  'tokens', 'refilled', 'epoch', 'last_off', 'm_rate', 'recent', 'gen', 'ap_on', 'ap_rate')
local lost = ARGV[12] ~= nil and ARGV[12] ~= '' and ARGV[12] ~= h[11]
if h[1] == '0' and not lost then
  return { 4, 0, 0, '0', 0 }
end
local held = h[2] == '1' or lost
-- The rate in force: an override, the autopilot's while it runs (admit.lua), the configured.
local rate = tonumber(h[3]) or (h[12] == '1' and tonumber(h[13])) or tonumber(ARGV[2])
local max_active = tonumber(h[4]) or tonumber(ARGV[3])
local measured = tonumber(h[9]) or 0
local code = held and 2 or 1

-- A newcomer counted against the client's limit: the reply that refuses them, or nil.
local function limited()
  local limit = tonumber(ARGV[9])
  if limit > 0 then
    local joins = redis.call('INCR', KEYS[4])
    if joins == 1 then
      redis.call('PEXPIRE', KEYS[4], math.max(1, math.ceil(tonumber(ARGV[10]) / 1000)))
    end
    if joins > limit then
      return { 6, 0, 0, tostring(math.max(redis.call('PTTL', KEYS[4]), 1000)), 0 }
    end
  end
  return nil
end

-- Whether a newcomer walks in now (the fast path), and the bucket and window it would spend.
local function fast_path()
  redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
  local n = redis.call('ZCARD', waiting)
  local burst = burst_of(rate, tonumber(ARGV[6]))
  local tokens = refill(tonumber(h[5]) or 0, tonumber(h[6]), now, rate, burst)
  local recent, window = window_left(h[10], now, tonumber(ARGV[6]), burst)
  -- Slots the admission loop holds back for sessions a store that lost its data forgot.
  local hold_back = tonumber(redis.call('HGET', room, 'hold_back')) or 0
  local walks_in = not held and n == 0 and tokens >= 1 and window >= 1
    and redis.call('ZCARD', active) + hold_back < max_active
  return walks_in, n, tokens, recent
end

-- Let in: held for claim-ttl until the visitor comes back with the cookie (whose first return
-- renews it to session-ttl): a client without a cookie jar does not pin a session's worth.
local function enter(walks_in, tokens, recent, newcomer)
  if walks_in then
    redis.call('HSET', room, 'tokens', tokens - 1, 'refilled', now, 'recent', window_note(recent, now, 1))
  else
    redis.call('HSET', room, 'tokens', tokens, 'refilled', now)
    redis.call('HINCRBY', room, 'would_queue', 1)
  end
  redis.call('ZADD', active, now + math.min(tonumber(ARGV[11]), tonumber(ARGV[5])), vid)
  redis.call('HINCRBY', room, 'admitted', 1)
  if newcomer then
    redis.call('HINCRBY', room, 'joined', 1)
  end
  return { 5, 0, 0, '0', 1 }
end

if ARGV[13] == 'passthrough' then
  local exp = tonumber(redis.call('ZSCORE', active, vid))
  if exp and exp > now then
    redis.call('ZADD', active, now + tonumber(ARGV[5]), vid)
    return { 0, 0, 0, '0', 0 }
  end
  local newcomer = redis.call('ZREM', waiting, vid) == 0
  if newcomer then
    local refused = limited()
    if refused then
      return refused
    end
  end
  local walks_in, _, tokens, recent = fast_path()
  return enter(walks_in, tokens, recent, newcomer)
end

-- In line (the common case: a status poll): refresh "last seen" and report the place, unless
-- silent for too long on the liveness clock. A visitor is never in both sets: admit moves them
-- in one step.
local score = redis.call('ZSCORE', waiting, vid)
if score then
  score = tonumber(score)
  if silent_secs(score, live) * 1000000 < tonumber(ARGV[7]) then
    local offset = decode(score)
    redis.call('ZADD', waiting, 'XX', offset * SLOTS + slot_of(live), vid)
    local rank = redis.call('ZRANK', waiting, vid)
    local n = redis.call('ZCARD', waiting)
    return { code, rank + 1, n, tostring(eta_rate(measured, rate)), 0, offset, tonumber(h[7]) or 0 }
  end
  redis.call('ZREM', waiting, vid)
  redis.call('HINCRBY', room, 'abandoned', 1)
end

-- Admitted already (turn came, or a session): claim it / keep it.
local exp = redis.call('ZSCORE', active, vid)
if exp then
  if tonumber(exp) > now then
    redis.call('ZADD', active, now + tonumber(ARGV[5]), vid)
    return { 0, 0, 0, '0', 0 }
  end
  redis.call('ZREM', active, vid)
end

-- A newcomer: counted against the client's limit first.
local refused = limited()
if refused then
  return refused
end
local walks_in, n, tokens, recent = fast_path()
if walks_in then
  return enter(true, tokens, recent, true)
end
redis.call('HSET', room, 'tokens', tokens, 'refilled', now)
if n >= tonumber(ARGV[4]) then
  return { 3, 0, n, '0', 0 }
end
local epoch = tonumber(h[7])
local last = tonumber(h[8])
if n == 0 or not epoch then
  -- An empty line starts a new epoch, which keeps offsets small.
  epoch = now
  last = -1
end
local offset = math.min(MAX_OFFSET, math.max(now - epoch, last + 1))
redis.call('ZADD', waiting, 'NX', offset * SLOTS + slot_of(live), vid)
redis.call('HSET', room, 'epoch', epoch, 'last_off', offset)
redis.call('HINCRBY', room, 'joined', 1)
return { code, n + 1, n + 1, tostring(eta_rate(measured, rate)), 1, offset, epoch }
