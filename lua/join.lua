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
-- ARGV[8] clock (prelude `now_us`, with the caller's deadline: `late_call`)
-- ARGV[9] new joins allowed per client and window (0: no limit; -1: the caller's own count is
-- past it, so known visitors only: a newcomer is refused without being counted), and ':v' after
-- it when a queue ticket vouches for a place held lately: placed anew, the visitor is not
-- counted (the store lost the place, or the turn lapsed) unless KEYS[6] records an order of
-- theirs (they were let in and ordered: note_ordered) that no counted join has paid for: a
-- newcomer counted within the limit spends the record   ARGV[10] window µs
-- ARGV[11] claim-ttl µs (how long a fast-path entry holds its slot until the visitor is back)
-- ARGV[12] the store generation the caller's last admit saw ('' if none): another one (or none,
--          the room's data lost in an empty restart) means the caller's admission loop has not
--          yet noticed the loss and re-asserted the room's state, perhaps a held line; until
--          it has, this join lets nobody in at once (the newcomer queues, as paused)
-- ARGV[13] the queueing method: 'passthrough' (a dry run: everyone is let in, anyone in line
--          too, and counted in 'would_queue' where the line would have held them; only those
--          who would have walked in spend the bucket and the tick's window), else the line's
-- ARGV[14] the room's events near now (see parse_events in the prelude), '' for none
-- ARGV[15], ARGV[16], ... per event of ARGV[14], in order: this visitor's draw key and
--          registration ticket (16 bytes) in that event's draw, '' and '' where it does not draw
-- ARGV[15 + 2 * (number of events in ARGV[14])], after those: the version of the runtime event
--          changes the caller's events come from ('' unknown: not checked). Older than the
--          store's ('ev_ver'), they may lack an event an operator just added (or still have one
--          moved or cancelled): nothing is decided by them, as while instances disagree
--          (ev_mixed), and a newcomer is not placed at all (code 9): placed first come, first
--          served by an instance that had not yet read a pre-queue that had begun, arrivals went
--          ahead of every registrant (found by review). The caller reads the changes at its next
--          tick; the visitor's next poll places them. So is a newcomer to a drawn pre-queue
--          while live instances disagree on the events (ev_mixed): each would draw by its own
--          seed.
-- ARGV[16 + 2 * (number of events in ARGV[14])]: '1' when the caller has sessions it admitted on
--          its own (`local`) that the store has not been told of, or its admission loop's calls
--          failed since its last answer: nobody walks in at once (the newcomer queues), as while
--          the room waits to be told of such sessions ('lc_wait', admit.lua)
-- KEYS[5] ended ZSET (end_sessions in the prelude)   KEYS[6] the visitor's order record STRING (note_ordered)
-- KEYS[7] used ZSET (note_used in lua/markers.lua: who walks in leaves it)
-- KEYS[8], KEYS[9], ... per event of ARGV[14], in order: its draw's list (registrations ZSET)
--
-- Events: during a pre-queue nobody is let in and everyone in line is "registered" (slot 0: not
-- silent before the opening); a newcomer to a drawn pre-queue is placed at its draw key in the
-- line's drawn range (reserved the first time, after everyone already in line) and listed in the
-- draw. After the closing a newcomer is turned away (code 8). While an event runs its rate and
-- max-active are in force, between an operator's override and the autopilot.
--
-- Reply (parsed by src/store/redis/join_reply.rs):
--   { code, position, waiting, eta rate (string), joined now (1/0), offset, epoch, drawn (1/0),
--     full (1/0) }
--   (offset and epoch, the visitor's place for the queue ticket, with codes 1, 2 and 7 only;
--   drawn: the place is a draw's, not to be shown before the opening; full, a newcomer's only:
--   every slot of max-active was taken as they were placed, which the caller's figures from
--   the last tick may not show yet)
--   code 0 admitted (claimed), 1 waiting, 2 paused (queue_all), 3 full, 4 open (room switched
--   off), 5 entered (a newcomer admitted at once), 6 limited (too many new visitors from this
--   client; the eta field carries the milliseconds until the window ends), 7 registered (in
--   line during a pre-queue, or at a draw's place whose order is not out yet; position 0 when
--   drawn), 8 ended (the event closed: not added),
--   9 unplaced (a newcomer, not added: the caller's events are older than the store's; or a
--   session kept but not let in by such events, or in a pre-queue while instances disagree),
--   10 settling (a session whose order is in flight: no admission until it is settled)

local waiting, active, room = KEYS[1], KEYS[2], KEYS[3]
-- Every field of the room hash this script reads, read once (h_NAME): the hash is written below
-- only in fields read before (or not at all), so what this read saw stays what the script needs.
local h_layout, h_live, h_live_at, h_forgave_at, h_ab_hi, h_ab_hi_until, h_hold_back, h_enabled,
  h_queue_all, h_rate, h_max_active, h_tokens, h_refilled, h_epoch, h_last_off, h_m_rate,
  h_recent, h_gen, h_ap_on, h_ap_rate, h_opened, h_open_live, h_draw_ev, h_draw_base,
  h_draw_epoch, h_gap, h_in_pre, h_ev_mixed, h_ev_ver,
  h_mixed_draw, h_ev_wait, h_lc_wait = unpack(redis.call('HMGET', room,
  'layout', 'live', 'live_at', 'forgave_at', 'ab_hi', 'ab_hi_until', 'hold_back', 'enabled',
  'queue_all', 'rate', 'max_active', 'tokens', 'refilled', 'epoch', 'last_off', 'm_rate',
  'recent', 'gen', 'ap_on', 'ap_rate', 'opened', 'open_live', 'draw_ev', 'draw_base',
  'draw_epoch', 'gap', 'in_pre', 'ev_mixed', 'ev_ver', 'mixed_draw', 'ev_wait', 'lc_wait'))
-- The caller's events are older than the store's runtime changes (see ARGV[15 + 2n]).
local events = parse_events(ARGV[14])
local caller_ver = ARGV[15 + 2 * #events]
local untold_near = ARGV[16 + 2 * #events]
-- So are they while, after a stall, the store waits to hear each live instance again
-- (admit.lua, 'ev_wait'): one may have reloaded other events during it.
local stale_events = (caller_ver ~= nil and caller_ver ~= ''
  and tonumber(caller_ver) ~= (tonumber(h_ev_ver) or 0)) or h_ev_wait == '1'
-- Instances disagree on the room's events (admit.lua, 'ev_mixed'), or this caller's are stale:
-- no event step here either, and nobody walks in.
local mixed_events = h_ev_mixed == '1' or stale_events
check_layout(room, h_layout)
-- A join may be the first call to an empty room (before any admit): it records the layout it
-- writes in, as admit does, so that an instance of another layout refuses the room instead of
-- reading what this one wrote (found by review: only admit recorded it).
if not h_layout then
  redis.call('HSETNX', room, 'layout', LAYOUT)
end
local vid = ARGV[1]
local now = now_us(ARGV[8])
-- A call that runs after its caller's deadline (see the prelude) decides nothing by its events.
if late_call(ARGV[8], now) then
  stale_events, mixed_events = true, true
end
-- A gap before this call costs no claim its deadline (see the prelude).
forgive_gap(room, active, now, liveness_cap(tonumber(ARGV[6])), tonumber(ARGV[11]), h_live_at,
  h_forgave_at)
-- The liveness clock (see the prelude), stored only when its step must be.
local live, keep_live = liveness(h_live, h_live_at, now, liveness_cap(tonumber(ARGV[6])), false)
if keep_live then
  redis.call('HSET', room, 'live', live, 'live_at', now)
end
local lost = ARGV[12] ~= nil and ARGV[12] ~= '' and ARGV[12] ~= h_gen
if h_enabled == '0' and not lost then
  return { 4, 0, 0, '0', 0 }
end
-- The event in force, by this store's clock.
local ev, phase = event_now(events, now, h_opened)
local in_pre = phase == 'pre'
if in_pre and h_in_pre ~= ev.id and not mixed_events then
  -- A pre-queue no admit has seen yet: its registrations are silent only from its opening.
  redis.call('HSET', room, 'in_pre', ev.id, 'ended_for', ev.id)
  redis.call('HDEL', room, 'open_live')
  end_sessions(active, KEYS[5], now, KEYS[7], live)
end
if phase == 'open' and h_opened ~= ev.id and not mixed_events
    and redis.call('HGET', room, 'ended_for') ~= ev.id then
  -- An opening no call has recorded, after a pre-queue no call saw (Redis away for all of it):
  -- the sessions from before the event end now, as admit.lua ends them where it records the
  -- opening. Before (found by review), the first call to reach the room after such an outage
  -- could be an order on a session from before the pre-queue, and it went through.
  redis.call('HSET', room, 'ended_for', ev.id)
  end_sessions(active, KEYS[5], now, KEYS[7], live)
end
local open_live = (not in_pre) and tonumber(h_open_live) or nil
local ev_on = ev and phase ~= 'closed'
local held = h_queue_all == '1' or lost or in_pre or mixed_events
-- The rate in force: an override, the event's, the autopilot's while it runs (admit.lua), the
-- configured.
local rate = tonumber(h_rate) or (ev_on and ev.rate)
  or (h_ap_on == '1' and tonumber(h_ap_rate) and math.min(tonumber(h_ap_rate), tonumber(ARGV[2])))
  or tonumber(ARGV[2])
local max_active = tonumber(h_max_active) or (ev_on and ev.max) or tonumber(ARGV[3])
local measured = tonumber(h_m_rate) or 0
local code = (in_pre and 7) or (held and 2) or 1
local epoch = tonumber(h_epoch)

-- Whether an offset of this epoch is in the line's drawn range (a draw's place).
local function drawn(offset)
  local base = tonumber(h_draw_base)
  return base ~= nil and tonumber(h_draw_epoch) == epoch and offset >= base
    and offset < base + DRAW_SPAN
end

-- A newcomer counted against the client's limit: the reply that refuses them, or nil.
local function limited()
  local limit, vouched = string.match(ARGV[9], '^(-?%d+)(:?v?)$')
  limit = tonumber(limit)
  if vouched == ':v' then
    -- A place held lately, lost or lapsed: placed anew uncounted, unless the visitor ordered
    -- and no way back has been counted since (a record that lives as long as the ticket may
    -- vouch: note_ordered).
    if redis.call('EXISTS', KEYS[6]) == 0 then
      return nil
    end
  end
  if limit < 0 then
    -- Past the limit on the calling instance already: a newcomer is refused, uncounted.
    return { 6, 0, 0, '1000', 0 }
  end
  if limit > 0 then
    local joins = redis.call('INCR', KEYS[4])
    if joins == 1 then
      redis.call('PEXPIRE', KEYS[4], math.max(1, math.ceil(tonumber(ARGV[10]) / 1000)))
    end
    if joins > limit then
      return { 6, 0, 0, tostring(math.max(redis.call('PTTL', KEYS[4]), 1000)), 0 }
    end
    -- Counted: the visitor's way back after their last order is paid for, and a place they
    -- take now is no way back past the limit when its turn lapses (found by re-review: a
    -- record that stayed counted that lapsed place again, and one telling tickets from before
    -- the order by their age read two instances' clocks).
    redis.call('DEL', KEYS[6])
  end
  return nil
end

-- Whether a newcomer walks in now (the fast path), and the bucket and window it would spend.
local function fast_path()
  redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
  local n = redis.call('ZCARD', waiting)
  local burst = burst_of(rate, tonumber(ARGV[6]))
  local tokens = refill(tonumber(h_tokens) or 0, tonumber(h_refilled), now, rate, burst)
  local recent, window = window_left(h_recent, now, tonumber(ARGV[6]), burst)
  -- Slots the admission loop holds back for sessions a store that lost its data forgot.
  local hold_back = tonumber(h_hold_back) or 0
  local full = redis.call('ZCARD', active) + hold_back >= max_active
  local walks_in = not held and n == 0 and tokens >= 1 and window >= 1 and not full
    and h_lc_wait ~= '1' and untold_near ~= '1'
  return walks_in, n, tokens, recent, full
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
  redis.call('ZREM', KEYS[5], vid)
  redis.call('ZREM', KEYS[7], vid, 'e' .. vid, 'p' .. vid)
  redis.call('HINCRBY', room, 'admitted', 1)
  if newcomer then
    redis.call('HINCRBY', room, 'joined', 1)
  end
  return { 5, 0, 0, '0', newcomer and 1 or 0 }
end

-- A dry run lets everyone in, but not past a hold (the operator's pause, a store that lost its
-- data) nor through an event: those queue as in a line (found by review: a paused passthrough
-- room let everyone in, and one reloaded to passthrough in a pre-queue let its registrants in
-- before the opening).
-- An order of the visitor's session in flight (the used set's 'p' member, on the liveness
-- clock: lua/markers.lua note_pending): the visitor asks again once it is settled (code 10).
-- Renewed and answered admitted, the caller gave a new cookie of the session the order's
-- confirm then ended, and every order on it was refused as used until it ran out, a
-- session-ttl later, while its holder could not rejoin the line (found by review r102b: a poll
-- or a page just after an order's answer, before its confirm landed).
-- The session is kept at least as long as that record (and a step of the liveness clock past
-- it): not renewed here, it ran out first when the order's instance died, and the visitor's next
-- join placed them at the back of the line instead of giving the session back (re-review r104a).
local function order_in_flight(exp)
  local p = tonumber(redis.call('ZSCORE', KEYS[7], 'p' .. vid))
  if p == nil or p <= live then
    return false
  end
  local keep = now + (p - live) + liveness_cap(tonumber(ARGV[6]))
  if exp < keep then
    redis.call('ZADD', active, string.format('%.0f', keep), vid)
  end
  return true
end

if ARGV[13] == 'passthrough' and not held and not ev then
  local exp = tonumber(redis.call('ZSCORE', active, vid))
  if exp and exp > now and order_in_flight(exp) then
    return { 10, 0, redis.call('ZCARD', waiting), '0', 0 }
  end
  if exp and exp > now then
    redis.call('ZADD', active, renewed_deadline(exp, now + tonumber(ARGV[5])), vid)
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
-- in one step. During a pre-queue, seen means registered (slot 0): silent only from the opening.
local score = redis.call('ZSCORE', waiting, vid)
if score then
  score = tonumber(score)
  local swept_after = abandon_after(room, tonumber(ARGV[7]), now, nil, h_ab_hi, h_ab_hi_until)
  if mixed_events or silent_secs(score, live, open_live) * 1000000 < swept_after then
    local offset = decode(score)
    -- While instances disagree on the events, a registration (slot 0) stays one.
    local kept = mixed_events and score == offset * SLOTS
    redis.call('ZADD', waiting, 'XX', offset * SLOTS + ((in_pre or kept) and 0 or live_slot(live)),
      vid)
    local n = redis.call('ZCARD', waiting)
    local d = drawn(offset) and 1 or 0
    -- A draw's place is sealed until the store has recorded its order as out (admit.lua:
    -- its event seen open, or cancelled): a registration (code 7, no position) until then, by
    -- whatever events the caller has. Before (found by review), a caller whose own file had the
    -- opening behind it (a rolling reload that moved it) was told the place while the
    -- instances disagreed and the store had recorded nothing.
    if d == 1 and (in_pre or redis.call('HEXISTS', room, 'out:' .. h_draw_ev) == 0) then
      return { 7, 0, n, tostring(eta_rate(measured, rate)), 0, offset, epoch or 0, d }
    end
    local rank = redis.call('ZRANK', waiting, vid)
    return { code, rank + 1, n, tostring(eta_rate(measured, rate)), 0, offset, epoch or 0, d }
  end
  redis.call('ZREM', waiting, vid)
  redis.call('HINCRBY', room, 'abandoned', 1)
end

-- Admitted already (turn came, or a session): claim it / keep it. Not during a pre-queue,
-- which admits nobody: a session there (an order's given back) ends, and its holder registers.
-- While instances disagree on the events (ev_mixed) no pre-queue is stepped into, this one's
-- neither: the session is kept (found by re-review: it ended, and its holder went to the back).
local exp = redis.call('ZSCORE', active, vid)
if exp then
  if tonumber(exp) > now and (not in_pre or mixed_events) then
    if order_in_flight(tonumber(exp)) then
      return { 10, 0, redis.call('ZCARD', waiting), '0', 0 }
    end
    redis.call('ZADD', active, renewed_deadline(exp, now + tonumber(ARGV[5])), vid)
    -- Kept, but not let in (code 9: asked again once the caller has read the store's events)
    -- by events older than the store's, nor in a pre-queue by the caller's while instances
    -- disagree: the caller cannot tell whether a pre-queue has begun that ends the session,
    -- and an order it asked about went on to the shop on that answer (found by review r103b:
    -- an instance started while Redis was stopped, whose events lacked the operator's, let a
    -- session from before the pre-queue order ahead of every registrant when Redis came back).
    if stale_events or in_pre then
      return { 9, 0, redis.call('ZCARD', waiting), '0', 0 }
    end
    return { 0, 0, 0, '0', 0 }
  end
  redis.call('ZREM', active, vid)
end

-- A newcomer, to be placed by events the caller has not read yet: not placed (code 9).
if stale_events then
  return { 9, 0, redis.call('ZCARD', waiting), '0', 0 }
end
-- Live instances disagree on the room's events, whose digest holds the draw's secret: a
-- newcomer to a drawn pre-queue is not placed either. Each instance would place them by its
-- own seed, and the draw could never be checked (found by review: instances with two
-- secrets filled one list); they are placed once the instances agree. A drawn pre-queue by
-- any live instance's events counts ('mixed_draw', admit.lua), not only the caller's: one whose
-- file has no pre-queue yet (a rolling reload) placed them first come, first served, and they
-- were let in at the opening ahead of every registrant (found by review).
if mixed_events and ((in_pre and ev.draw) or (tonumber(h_mixed_draw) or 0) > live) then
  return { 9, 0, redis.call('ZCARD', waiting), '0', 0 }
end
-- A newcomer after the event's closing is turned away (and not counted against join-limit).
if phase == 'closed' then
  return { 8, 0, 0, '0', 0 }
end

-- A newcomer: counted against the client's limit first.
local refused = limited()
if refused then
  return refused
end
local walks_in, n, tokens, recent, full = fast_path()
full = full and 1 or 0
if walks_in then
  return enter(true, tokens, recent, true)
end
redis.call('HSET', room, 'tokens', tokens, 'refilled', now)
if n >= tonumber(ARGV[4]) then
  return { 3, 0, n, '0', 0 }
end
local last = tonumber(h_last_off)
local gap = tonumber(h_gap) or 0
if n == 0 or not epoch then
  -- An empty line starts a new epoch, which keeps offsets small (and ends any drawn range).
  epoch = now
  last = -1
  gap = 0
  h_draw_ev, h_draw_base, h_draw_epoch = nil, nil, nil
  redis.call('HDEL', room, 'draw_ev', 'draw_base', 'draw_epoch', 'gap')
end
local key = ev and in_pre and ev.draw and tonumber(ARGV[13 + 2 * ev.i])
if key and tonumber(h_draw_epoch) == epoch and h_draw_ev and h_draw_ev ~= ev.id then
  -- This epoch's line already holds another event's drawn range (a line kept since): its
  -- offsets have no room for a second one. Registrants queue first come, first served.
  key = nil
end
if key and redis.call('HEXISTS', room, 'out:' .. ev.id) == 1 then
  -- A draw whose order is out (admit.lua: its seed may be published): an event of its id come
  -- back places nobody by it.
  key = nil
end
if key and not (h_draw_ev == ev.id and tonumber(h_draw_epoch) == epoch)
    and last + 1 + DRAW_SPAN + DRAW_ROOM > MAX_OFFSET then
  -- A line too old for a drawn range and a day of later arrivals after it (12 days): the same.
  key = nil
end
local offset
if key then
  -- A registration in a draw: the place is the draw key within the line's drawn range, which the
  -- first registrant of this event in this epoch reserves after everyone already in line.
  local base = tonumber(h_draw_base)
  if h_draw_ev ~= ev.id or tonumber(h_draw_epoch) ~= epoch or not base then
    base = last + 1
    gap = DRAW_SPAN
    last = math.max(last, base + DRAW_SPAN - 1)
    redis.call('HSET', room, 'draw_ev', ev.id, 'draw_base', base, 'draw_epoch', epoch,
      'gap', gap)
    h_draw_ev, h_draw_base, h_draw_epoch = ev.id, base, epoch
  end
  offset = base + key
  local list = KEYS[7 + ev.i]
  redis.call('ZADD', list, 'NX', key, ARGV[14 + 2 * ev.i])
  local ends = ev.close or ev.open
  redis.call('PEXPIRE', list, math.max(1000, math.floor((ends - now) / 1000) + 30 * 86400000))
else
  -- The time since the epoch, up to MAX_OFFSET less SPARE_OFFSETS: a line that has not
  -- emptied for about 25 days (12 with a drawn range) goes on one offset per arrival, in
  -- order. Before, every later arrival got MAX_OFFSET, and their order came from "last seen"
  -- (found by review).
  offset = math.max(math.min(now - epoch + gap, MAX_OFFSET - SPARE_OFFSETS), last + 1)
  if offset > MAX_OFFSET then
    return { 3, 0, n, '0', 0 }
  end
  last = offset
end
redis.call('ZADD', waiting, 'NX', offset * SLOTS + (in_pre and 0 or live_slot(live)), vid)
redis.call('HSET', room, 'epoch', epoch, 'last_off', last)
redis.call('HINCRBY', room, 'joined', 1)
if key then
  return { code, 0, n + 1, tostring(eta_rate(measured, rate)), 1, offset, epoch, 1, full }
end
return { code, n + 1, n + 1, tostring(eta_rate(measured, rate)), 1, offset, epoch, 0, full }
