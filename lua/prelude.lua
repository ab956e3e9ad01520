-- prelude: helpers prepended to every anteroom script (see src/store/redis.rs).
--
-- Key layout of a room R (one hash tag, so every script touches one cluster slot):
--   {anteroom:R}:waiting   ZSET  member = visitor id (16 bytes), score = offset * SLOTS + slot
--                                offset: microseconds from the room's epoch at joining (Redis TIME,
--                                strictly increasing), slot: second (mod SLOTS) of the room's
--                                liveness clock at which the visitor was last seen polling
--   {anteroom:R}:active    ZSET  member = visitor id, score = expiry in microseconds (Redis TIME)
--   {anteroom:R}:room      HASH  runtime state, token bucket, rate meter, totals, sweep cursor,
--                                liveness clock ('live' µs, and 'live_at', the TIME of its last step),
--                                the key layout version ('layout', see LAYOUT), and 'forgave_at',
--                                the TIME at which a store pause last lengthened the
--                                claims it had cut short (forgive_gap); 'ab_hi' and
--                                'ab_hi_until', the longest abandon-after of the instances
--                                (abandon_after); 'tk_hi' and 'tk_hi_until', their longest
--                                tick (admit.lua); 'adm_at', the TIME of the last admit;
--                                'admits', the count of admit calls in this generation (a
--                                rollback shows as a count lower than one heard: admit.lua);
--                                per instance, 'step:<id>' (the number of
--                                its last admit step run) and 'given:<id>' (the turns that
--                                step gave, msgpack: see admit.lua), gone with the instance;
--                                after the store was away from an instance, 'lc_since' (the
--                                liveness clock then), 'told:<id>' per instance on `local`
--                                (the clock when it last had no session of its own to tell,
--                                0 while it has) and 'lc_wait' ('1' while nobody is let in
--                                until they have told: admit.lua)
--   {anteroom:R}:ended     ZSET  member = visitor id, score = deadline of a session a pre-queue
--                                ended (end_sessions), kept until its cookies have expired
--   {anteroom:R}:consumed:<visitor hex>  STRING  the last order of this admission (see
--                                read_marker in lua/markers.lua); lives session-ttl + a margin after the consume
--   {anteroom:R}:used      ZSET  member = visitor id (16 bytes), score = the liveness clock (µs)
--                                until which a cookie of the visitor's used admission may still
--                                verify, and the margin (note_used, lua/markers.lua): a consumed marker's
--                                confirmed state, on the clock that stands still while the
--                                store is away; and member 'e' .. visitor id, a session a
--                                pre-queue ended, until its cookies can have expired
--                                (end_sessions); and member 'p' .. visitor id, an order in
--                                flight, score the end of its grace on that clock (note_pending)
--   {anteroom:R}:ordered:<visitor hex>  STRING  '1': the visitor's order went through (or the
--                                origin ended their session) and no join of theirs was counted
--                                since; lives abandon-after + a margin (note_ordered), read and
--                                spent only by join-limit's count (join.lua)
--   {anteroom:R}:revoked   ZSET  member = visitor id (16 bytes) .. ' ' .. until (unix s), score =
--                                its number in the room's revocation log: the store's clock in µs,
--                                above the last (room hash 'revoke_seq');
--                                trimmed once until is past, the highest number trimmed in
--                                room hash 'revoke_trimmed' (finish.lua, src/store/finish.rs)
--   {anteroom:R}:events    HASH  event name -> JSON of its runtime definition (change_event.lua,
--                                src/event/schedule.rs); room hash 'ev_ver' counts the changes
--   {anteroom:R}:drawn:<event id>  ZSET  member = registration ticket (16 bytes), score = draw key:
--                                the draw's list (src/event/draw.rs), kept 30 days past the event
--
-- Slot 0 of a waiting score means "registered during a pre-queue, not seen since": such a
-- visitor is silent only from the opening (room hash 'open_live', the liveness clock when the
-- room was last found out of a pre-queue), so that a pre-queue may outlast abandon-after and the
-- slots' wrap. A real "last seen" never writes slot 0 (live_slot).
--
-- An event is known by its id, NAME@PREQUEUE_FROM: a name used again (an event cancelled and
-- added anew, a file's event moved) is another event, with its own seed, list and opening.
-- Events in force (room hash): 'in_pre' (the event whose pre-queue admit saw last), 'opened'
-- (the event seen open: a clock stepping back does not reopen its registration), 'opened_us'
-- (TIME then), 'released' (the event whose closing emptied the line), and the drawn range of the
-- line's current epoch: 'draw_ev', 'draw_base' (its first offset) and 'draw_epoch'; 'gap'
-- (DRAW_SPAN while there is one) is added to the time-based offsets of later arrivals so that
-- they come after every drawn place; 'out:<event id>', one per draw whose order came out (its
-- event opened or cancelled: admit.lua), by which nobody is placed again.
--
-- Keeping "last seen" inside the waiting score costs no memory per visitor: order comes from the
-- high part, so ZRANK is still the place in line, and a poll rewrites only the low part.

-- The key layout this version reads and writes, kept in the room hash ('layout'). An instance
-- that finds another one refuses every call on the room (an error naming both) instead of
-- reading scores, fields or markers it does not understand: a rolling upgrade across an
-- incompatible layout stops loudly rather than corrupting a live line. Bump it with any change
-- to the meaning of a key, a score or a hash field.
local LAYOUT = '2'

-- A script that reads several fields of the room hash may read them once (join.lua) and hand
-- the helpers below what they need; nil (an argument left out) makes a helper read its own.
-- A field the hash lacks is false, not nil.
local function check_layout(room, found)
  if found == nil then
    found = redis.call('HGET', room, 'layout')
  end
  if found and found ~= LAYOUT then
    error({ err = 'ANTEROOM_LAYOUT this room\'s keys are in layout ' .. found ..
      ' and this instance speaks layout ' .. LAYOUT .. ': run one version of anteroom on a ' ..
      'room at a time (finish or roll back the upgrade), or give the new version a fresh room' })
  end
end

local SLOTS = 4096
local MAX_OFFSET = 2 ^ 41 - 1   -- offset * SLOTS + slot stays below 2^53: exact in a double
-- Offsets kept for arrivals after the time-based ones reach their end (join.lua): 4 billion.
local SPARE_OFFSETS = 2 ^ 32

-- `clock` is the scripts' clock argument: µs added to Redis TIME (0 in production; tests move
-- time with it), or '@' and a fixed time in µs (tests whose time moves only by hand).
-- A caller may add ':' and a deadline in µs of this clock (admit and join do, see `late_call`).
local function now_us(clock)
  local c = string.match(clock, '^[^:]*')
  if string.sub(c, 1, 1) == '@' then
    return tonumber(string.sub(c, 2))
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(c)
end

-- Whether this call runs after the deadline its caller gave with the clock ('CLOCK:DEADLINE'):
-- the caller gave up on it long ago, and what it carries may be out of date. A call sent while
-- Redis was paused runs when Redis resumes; one whose caller had reloaded its events since
-- recorded an opening the new file had moved later (found by review). A late call decides
-- nothing by the caller's events (no event step, nobody admitted or placed by them).
local function late_call(clock, now)
  local d = tonumber(string.match(clock, ':(%d+)$'))
  return d ~= nil and now > d
end

-- An operator's change kept in a room's history LIST (newest first, `keep` entries): JSON
-- {"id","at_ms","by","client","changes"}, parsed by src/store/history.rs. A retried call
-- finds its id among the newest and records nothing more.
local function record_change(list, id, by, client, keep, all)
  -- A field set to the value it had is no change: recording it would let any operate token
  -- push the real changes out of the kept history with no-ops.
  local changes = {}
  for _, c in ipairs(all) do
    if c.from ~= c.to then
      changes[#changes + 1] = c
    end
  end
  if #changes == 0 then return end
  local needle = '"id":' .. cjson.encode(id)
  for _, e in ipairs(redis.call('LRANGE', list, 0, 9)) do
    if string.find(e, needle, 1, true) then return end
  end
  local t = redis.call('TIME')
  local at_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('LPUSH', list, cjson.encode({ id = id, at_ms = at_ms, by = by, client = client,
    changes = changes }))
  redis.call('LTRIM', list, 0, keep - 1)
end

local function slot_of(us)
  return math.floor(us / 1000000) % SLOTS
end

-- The slot a visitor seen at `live` is stamped with: never 0, which marks a registration.
local function live_slot(live)
  local s = slot_of(live)
  if s == 0 then
    return 1
  end
  return s
end

local function decode(score)
  local offset = math.floor(score / SLOTS)
  return offset, score - offset * SLOTS
end

-- The liveness clock (src/store/liveness.rs has the same rule and its reasons). Silence is
-- measured on it, not on TIME: it advances only when a call reaches the room (every admit, and
-- a join whose step is capped), by at most `cap` per step, so an outage, a paused Redis or a
-- stalled process adds (almost) nothing; a step back of TIME adds nothing and moves the base.
local function liveness_cap(tick_us)
  return math.max(1000000, 4 * tick_us)
end

-- The clock's value at `now`, and whether the caller must store it (HSET live, live_at = now).
-- `always` (admit) stores every step; a join only a capped one, the first, or a step back, so
-- that a status poll writes nothing to the room hash in normal operation.
local function liveness(live, live_at, now, cap, always)
  live, live_at = tonumber(live), tonumber(live_at)
  if not live or not live_at then
    return now, true
  end
  if now < live_at then
    return live, true
  end
  if now - live_at >= cap then
    return live + cap, true
  end
  return live + (now - live_at), always
end

-- A gap (src/store/liveness.rs `forgiven` has the same rule and its reasons): time past the
-- liveness cap in which no call reached the room (an outage, a paused Redis, every instance
-- stopped) does not count against an admission's deadline either. Deadlines from the gap's start
-- to claim-ttl after it — a claim nobody could collect, a session near its end — move on by
-- the gap, once ('forgave_at'). Called before any expired entry is removed. `live_at` and
-- `forgave_at` as read from the room hash (see check_layout), or nil.
local function forgive_gap(room, active, now, cap, claim_us, live_at, forgave_at)
  if live_at == nil then
    live_at, forgave_at = unpack(redis.call('HMGET', room, 'live_at', 'forgave_at'))
  end
  local base = math.max(tonumber(live_at) or now, tonumber(forgave_at) or 0)
  if now - base <= cap then
    return
  end
  local shift = now - base - cap
  local hit = redis.call('ZRANGEBYSCORE', active, string.format('(%.0f', base),
    string.format('%.0f', base + claim_us), 'WITHSCORES')
  for i = 1, #hit, 2 do
    redis.call('ZADD', active, 'XX', string.format('%.0f', tonumber(hit[i + 1]) + shift), hit[i])
  end
  -- How long a random draw's claims may still be collected moves on with them (admit.lua's
  -- 'rand_until'; found by re-review: past a gap the claims lived on and the instances on fifo
  -- answered their visitors from the line's copy again).
  local rand_until = tonumber(redis.call('HGET', room, 'rand_until'))
  if rand_until and rand_until > base then
    redis.call('HSET', room, 'rand_until', string.format('%.0f', rand_until + shift))
  end
  redis.call('HSET', room, 'forgave_at', string.format('%.0f', now))
end

-- The longest of a value the instances run the room with lately, in fields `f_hi` and
-- `f_until` of the room hash: each admit (`keep` = its heartbeat lifetime) reports its value
-- (`mine`); the longest is kept while an instance keeps reporting it and given up `keep` after
-- the last report, so a shorter value takes effect once no instance runs the longer one. A
-- caller that only reads passes no `keep`. `hi` and `until_us`: the fields as read, or nil.
local function longest_lately(room, f_hi, f_until, mine, now, keep, hi, until_us)
  if hi == nil then
    hi, until_us = unpack(redis.call('HMGET', room, f_hi, f_until))
  end
  hi, until_us = tonumber(hi), tonumber(until_us) or 0
  local held = hi and now <= until_us
  if keep and (not held or mine >= hi) then
    redis.call('HSET', room, f_hi, string.format('%.0f', mine), f_until,
      string.format('%.0f', now + keep))
    return mine
  end
  if held then
    return math.max(mine, hi)
  end
  return mine
end

-- The abandon-after the line is swept by: the longest an instance runs the room with lately.
-- An instance refreshes the liveness of the visitors who poll it by its own abandon-after
-- (src/line: every quarter of it); instances that run the room differently (a SIGHUP that
-- reached some of them first) must not sweep by a shorter one, or visitors who kept polling
-- are dropped (found by review: 20 s on two instances, 100 s on the third). Joins only read
-- it. `hi` and `until_us`: 'ab_hi' and 'ab_hi_until' as read (see check_layout), or nil.
local function abandon_after(room, mine, now, keep, hi, until_us)
  return longest_lately(room, 'ab_hi', 'ab_hi_until', mine, now, keep, hi, until_us)
end

-- How long past abandon-after an order's record (note_ordered) lives: the proxies' clocks, by
-- which a queue ticket's last poll is read, may be behind the store's.
local ORDERED_MARGIN_MS = 60000

-- Records that the visitor's order went through (settle's confirm) or the origin ended their
-- session (finish), for join-limit: a queue ticket kept from before vouches for a place held
-- lately for abandon-after after the visitor's last poll, and with it a newcomer is placed
-- uncounted (join.lua's `limited`) unless this record is there; the first newcomer join of the
-- visitor counted after it spends it (one order, one counted way back: a place taken after it
-- whose turn lapses is placed again uncounted, as any lapsed turn). It lives abandon-after —
-- the longest the instances run the room with lately, read only — and the margin from now,
-- never less than it had. Apart from the consumed marker (found by review: the marker lives
-- session-ttl and a minute, and past it a kept ticket rejoined uncounted; a marker living
-- abandon-after instead refused, after Redis came back from an older snapshot, the order of
-- the same visitor let in again). Not at the consume: an order the shop fails is given back,
-- and its visitor has ordered nothing (re-review). `mine_us`: the caller's abandon-after.
local function note_ordered(key, room, mine_us, now)
  local life = math.ceil(abandon_after(room, tonumber(mine_us) or 0, now) / 1000) + ORDERED_MARGIN_MS
  redis.call('SET', key, '1', 'PX', math.max(life, redis.call('PTTL', key)))
end

-- A slot up to this many seconds ahead of the clock counts as "seen now": a join reads the
-- clock a step ahead of what it stored, and TIME may step back before the next admit stores.
local AHEAD_SLOTS = 64

-- Whole seconds of the liveness clock the visitor behind this score has surely been silent:
-- slots crossed since their last poll, less one, for the poll may have come at the end of its
-- slot (found by review: counting the slots crossed swept a visitor who polled every 9.3 s
-- with abandon-after 10 s). For a registration (slot 0), since the opening (`open_live`, nil
-- during a pre-queue: nobody registered is silent before the opening).
local function silent_secs(score, live, open_live)
  local _, slot = decode(score)
  if slot == 0 then
    if not open_live then
      return 0
    end
    return math.max(0, math.floor((live - open_live) / 1000000))
  end
  local d = (slot_of(live) - slot) % SLOTS
  if d > SLOTS - AHEAD_SLOTS then
    return 0
  end
  return math.max(0, d - 1)
end

local function burst_of(rate, tick_us)
  return math.max(1, math.ceil(rate * tick_us / 1000000 - 1e-9))
end

local function refill(tokens, refilled, now, rate, burst)
  if not refilled then
    return burst
  end
  local elapsed = (now - refilled) / 1000000
  if elapsed < 0 then
    elapsed = 0
  end
  return math.min(burst, tokens + rate * elapsed)
end

-- Admissions of the last tick, kept in the room hash ('recent') as "µs:count µs:count ...".
-- Every admission checks them, so that no window of one tick lets in more than `burst`, even
-- when admit calls come close together (a late tick and the next, or several instances).
-- Returns the entries still inside the window and how many more may be let in now. An entry
-- stamped after `now` (TIME stepped back) counts as made now: it leaves the window a tick
-- later instead of holding admission until the clock catches up.
local function window_left(recent, now, tick_us, burst)
  local kept, used = {}, 0
  for t, n in string.gmatch(recent or '', '(%d+):(%d+)') do
    t, n = math.min(tonumber(t), now), tonumber(n)
    if now - t < tick_us then
      kept[#kept + 1] = string.format('%.0f:%d', t, n)
      used = used + n
    end
  end
  return kept, math.max(0, burst - used)
end

local function window_note(kept, now, n)
  if n > 0 then
    kept[#kept + 1] = string.format('%.0f:%d', now, n)
  end
  return table.concat(kept, ' ')
end

-- The rate an ETA should assume: the measured one once there is one, never above the rate in force.
local function eta_rate(measured, rate)
  if measured >= 0.05 then
    return math.min(measured, rate)
  end
  return rate
end

-- A pre-queue ends the sessions admitted before it (found by review: a session admitted while
-- the room was quiet, kept warm through the pre-queue, ordered before the opening and ahead of
-- every registrant). Where a script first finds the room in a new pre-queue, the sessions move
-- from active to the room's 'ended' set (member visitor id, score the session's deadline),
-- which lives until the last of their cookies can have expired (deadline + the marker margin,
-- MARKER_MARGIN in src/store/order.rs). While a visitor is in it, a cookie without a session
-- is no proof of one (consume's vouch, touch's renewal), and an order of the ended session
-- that is kept alive or given back does not bring the session back. Only those visitors: one
-- admitted after the opening without a store session (the local policy) still vouches. Being
-- admitted again (admit, the fast path) takes a visitor out of it. Room hash 'ended_for' names
-- the event whose start ended them: an opening seen without its pre-queue (no call reached the
-- room for its length) ends them then. The set's life and scores run on Redis's clock, outage
-- or not; each ended session is also kept in the 'used' set (member 'e' .. visitor id, score
-- the liveness clock until its cookies can have expired: ended_lately in lua/markers.lua), which
-- stands still while no call reaches the room, so that a copy of its cookie an instance kept
-- running through an outage longer than the session is not taken back in the pre-queue (found
-- beside re-review r98a). `used` and `live` (the liveness clock now): nil for none.
local ENDED_MARGIN_US = 60000000

-- How long after the store last answered it an instance still keeps an admission running on its
-- own (src/room/local.rs KEEP_AT_MOST): the used and ended records outlast their cookies by it,
-- for an instance cut off alone keeps a copy of one alive that long while the others keep the
-- liveness clock running (found by review r99a).
local KEPT_AT_MOST_US = 3600000000

local function end_sessions(active, ended, now, used, live)
  if redis.call('EXISTS', active) == 0 then
    return
  end
  if used then
    local all = redis.call('ZRANGE', active, 0, -1, 'WITHSCORES')
    for i = 1, #all, 2 do
      local want = live + math.max(0, tonumber(all[i + 1]) - now) + ENDED_MARGIN_US
        + KEPT_AT_MOST_US
      local had = tonumber(redis.call('ZSCORE', used, 'e' .. all[i]))
      if not had or had < want then
        redis.call('ZADD', used, string.format('%.0f', want), 'e' .. all[i])
      end
    end
  end
  if used then
    redis.call('ZREMRANGEBYSCORE', used, '-inf', string.format('%.0f', live))
  end
  redis.call('ZUNIONSTORE', ended, 2, ended, active, 'AGGREGATE', 'MAX')
  redis.call('DEL', active)
  local last = redis.call('ZRANGE', ended, -1, -1, 'WITHSCORES')
  local life_us = math.max(tonumber(last[2]), now) - now + ENDED_MARGIN_US
  redis.call('PEXPIRE', ended, math.max(1, math.ceil(life_us / 1000)))
end

-- Whether `vid`'s session was ended by a pre-queue and a cookie of it may still be valid.
local function session_ended(ended, vid, now)
  local s = tonumber(redis.call('ZSCORE', ended, vid))
  return s ~= nil and s + ENDED_MARGIN_US > now
end

-- A held session's deadline renewed to `wanted`, never below what it was (`held`: its score, or
-- nil/false for none): every cookie of the admission was issued against it (touch.lua).
local function renewed_deadline(held, wanted)
  return math.max(tonumber(held) or 0, wanted)
end

-- The revocation log (finish.lua writes it, admit.lua reads it; src/store/finish.rs). At most
-- this many entries go back in one admit reply (finish::MAX_PER_TICK).
local MAX_REVOKED = 1000
-- Seconds past an entry's until before it is trimmed (finish::TRIM_MARGIN).
local REVOKED_MARGIN_S = 60

-- Drops entries from the oldest while their cookies have expired (bounded per call; a newer
-- entry that expired earlier goes when it reaches the front: nothing reads past its until).
-- The highest number trimmed is kept in the room hash (`revoke_trimmed`): a caller whose last
-- entry is gone and not trimmed reads the log from the start (finish::read_from).
local function trim_revoked(key, room, now)
  local now_s = math.floor(now / 1000000)
  for _ = 1, 64 do
    local e = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #e == 0 then
      return
    end
    local ends = tonumber(string.sub(e[1], 18))
    if ends and ends + REVOKED_MARGIN_S >= now_s then
      return
    end
    redis.call('ZREM', key, e[1])
    local n = tonumber(e[2]) or 0
    if n > (tonumber(redis.call('HGET', room, 'revoke_trimmed')) or 0) then
      redis.call('HSET', room, 'revoke_trimmed', string.format('%.0f', n))
    end
  end
end

-- Events (src/event/mod.rs has the same rule). The caller passes the room's events near now, one
-- line each, sorted by pre-queue: "name pre open close draw after rate max" (µs; '-' for none).
local function parse_events(text)
  local list = {}
  for name, pre, open, close, draw, after, rate, max in string.gmatch(text or '',
      '(%S+) (%d+) (%d+) (%S+) (%d) (%S+) (%S+) (%S+)\n') do
    list[#list + 1] = { name = name, id = name .. '@' .. pre, pre = tonumber(pre), open = tonumber(open),
      close = tonumber(close), draw = draw == '1', release = after == 'release',
      rate = tonumber(rate), max = tonumber(max), i = #list + 1 }
  end
  return list
end

-- The event in force at `now` and its phase ('pre', 'open' or 'closed'), or nil: the latest whose
-- pre-queue has begun, or the one the store saw open (`opened`, an id) if it is later (TIME
-- stepped back).
local function event_now(list, now, opened)
  local at = nil
  for i, e in ipairs(list) do
    if e.pre <= now or e.id == opened then
      at = i
    end
  end
  if not at then
    return nil, nil
  end
  local e = list[at]
  if e.close and now >= e.close then
    return e, 'closed'
  end
  if e.id == opened or now >= e.open then
    return e, 'open'
  end
  return e, 'pre'
end

-- The width of a drawn range of offsets: every draw key (src/event/draw.rs KEY_BITS) fits. One
-- range fits an epoch's offsets (below MAX_OFFSET), with DRAW_ROOM left after it for later
-- arrivals (µs: a day); a line older than that, or holding another draw, queues registrants
-- first come, first served (join.lua).
local DRAW_SPAN = 2 ^ 40
local DRAW_ROOM = 86400 * 1000000
