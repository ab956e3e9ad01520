-- admit: one tick of the admission loop. Expires sessions by score, steps the liveness clock,
-- sweeps a slice of the line for visitors silent longer than abandon-after on that clock,
-- refills the token bucket (burst = one tick's worth) and moves that many visitors from the
-- front of the line to active, in one atomic step: there is no moment at which a visitor is in
-- neither set. Every instance calls this each tick; the bucket lives here, so together they
-- admit at the configured rate, not N times it. A retried call is harmless: the bucket was
-- drained by the first, so the retry admits only what the time since then earned, and the
-- liveness clock steps from its last step, not from the first call.
--
-- Each call is also this instance's heartbeat: the live instances are counted so that, if
-- Redis goes away, each instance knows its share of the rate for the `local` policy.
--
-- Store generation: an id kept in the room hash ('gen'), made here when there is none (a new
-- room, or a Redis that lost its data). An instance that knew another one learns that the
-- room's runtime state was lost; until it has re-asserted it (and knows the new generation),
-- its admit calls admit nobody, and a generation made by such a call holds the line. hold_back keeps slots of max-active free for sessions the store
-- forgot that are not yet re-registered (here, and in join's fast path until the next tick).
--
-- KEYS[1] waiting ZSET   KEYS[2] active ZSET   KEYS[3] room HASH   KEYS[4] instances ZSET
-- KEYS[5] configs HASH (instance id -> the digest of its room configuration)
-- KEYS[6] health HASH (instance id -> "requests,errors,p90 µs" of its last window, autopilot)
-- KEYS[7] revoked ZSET (the revocation log, see finish.lua)
-- ARGV[1] configured rate/s   ARGV[2] configured max-active   ARGV[3] claim-ttl µs
-- ARGV[4] tick µs   ARGV[5] abandon-after µs   ARGV[6] clock (prelude `now_us`, with the caller's
--          deadline: `late_call`)   ARGV[7] sweep slice size
-- ARGV[8] instance id   ARGV[9] heartbeat lifetime µs
-- ARGV[10] the generation the caller knew, or ''   ARGV[11] hold-back (slots kept free)
-- ARGV[12] the digest of the caller's room configuration, or ''; with the digest of its events
--          after a space (src/room.rs events_digest)
-- ARGV[13] the room has an autopilot in the caller's config: '1' or ''
-- ARGV[14] the autopilot's start rate   ARGV[15..17] the caller's window: requests, errors,
--          p90 µs   ARGV[18] a proposed rate or ''   ARGV[19] its reason
-- ARGV[20] the step it was decided from ('ap_at' as the caller last saw it)
-- ARGV[21] the p90 µs of the window it judged
-- ARGV[22] the last revocation number the caller saw, or '' to read no revocations
-- ARGV[23] the queueing method: 'reject' (nobody let in), 'fifo' (the front of the line) or
--          'random' (any visitor in it,
--          each with the same chance)
-- ARGV[24] the room's events near now (see parse_events in the prelude), '' for none
-- ARGV[25] the version of the runtime event changes the caller's events come from, or ''
-- ARGV[26] this call's step number (0: not numbered)   ARGV[27] the number of the last call
--          whose answer the caller received (0: none yet)
-- ARGV[28] the room's count of admit calls ('admits') in the last answer the caller received
--          in the generation it knows (0: none)
-- ARGV[29] the commitments of the caller's drawn events in ARGV[24]: 'ID HEX16\n' each (the first
--          16 hex digits of sha256(seed); src/admission/events.rs commitments)
-- ARGV[30] the slots the caller holds back should this call find the store lost its data: the
--          sessions its last tick counted and its walk-ins since (src/room/recovery.rs)
-- ARGV[31] the sessions the caller admitted on its own (`local`) while the store was away and
--          has not told it of yet (0: none)
-- ARGV[32] '1': a call of the caller's admission loop failed since its last answered admit (the
--          store was away from it, and may have been from others that admitted on their own)
-- ARGV[33] the live instances the caller's last answered admit counted
-- ARGV[34] the longest heartbeat life (µs) the store last told the caller an instance runs the
--          room with ('hb_hi' in the reply, kept past a loss: admit_outage.lua), or ''
-- ARGV[35..] liveness batch: triples (visitor id, epoch, offset) of visitors polled through the
--            caller's queue tickets since its last call; each one still in line at that place
--            is marked seen now (its score's low part), as a join would
-- KEYS[8] ended ZSET (end_sessions in the prelude; who is admitted leaves it)
-- KEYS[9] used ZSET (note_used in lua/markers.lua; who is admitted leaves it)
-- KEYS[10], KEYS[11], ... per event of ARGV[24], in order: its draw's list (registrations ZSET)
--
-- Events: in a pre-queue nobody is admitted and registrations (slot 0) are not silent; the first
-- call out of a pre-queue records the liveness clock ('open_live': registrations are silent from
-- then) and, for the event that opened, 'opened'. While an event runs its rate and max-active are
-- in force between an override and the autopilot (which does not steer meanwhile). At the closing
-- of an event with after-close = release the line is emptied, once.
-- Reply (parsed by src/store/redis/admit_reply.rs):
--        { admitted, abandoned, expired, waiting, active, measured rate (string),
--          enabled, queue_all, rate override or '', max-active override or '', live instances,
--          generation, generation made by this call (1/0),
--          autopilot: 0 (none in the caller's config), 1 (paused) or 2 (running), rate or '', last step at (µs) or '', its reason or '',
--          the rate before it or '', the p90 µs it judged or '', the live instances' windows
--          together: requests, errors, p90 µs (request-weighted), the store's clock (µs), and
--          the run-time switch ('1', '0' or ''),
--          the event in force or '', its phase ('pre', 'open', 'closed') or '', its draw's
--          registrations, when it opened (µs) or '', the version of the runtime events ('ev_ver'),
--          a random draw let someone in within claim-ttl and two ticks (1/0),
--          the longest tick an instance runs the room with lately (µs),
--          the draw whose places the line holds (its event's id) or '', its order out (1/0),
--          the line's epoch it holds them in (0 without), the room's count of admit calls,
--          when an operator last changed its state ('st_at', µs; 0: never),
--          the live instances disagree on the room's events (1, 'ev_mixed') plus 2 when the caller's
--          draw commitment is not the one the event's pre-queue began with ('draw_commit'), plus
--          4 while nobody is let in until instances on `local` have told ('lc_wait'),
--          the slots held back ('hold_back': the caller's, its hold-if-lost, or another's kept),
--          the longest heartbeat life an instance runs the room with lately (µs, 'hb_hi'),
--          line epoch, count of the numbers that follow (2 per point),
--          rank1, offset1, rank2, offset2, ...   (the line sampled: src/store/line.rs)
--          the last revocation number handed back, count of the numbers that follow (2 per
--          revocation), id1, until1 (unix s), ...   (src/store/finish.rs)
--          id1, waited1 µs, id2, waited2 µs, ... }

local waiting, active, room = KEYS[1], KEYS[2], KEYS[3]
check_layout(room)
redis.call('HSETNX', room, 'layout', LAYOUT)
local now = now_us(ARGV[6])
-- The longest abandon-after is kept for its own length after the last report of it, not only
-- the heartbeat's: a visitor noted last under it may be that long from their next note (found
-- by review: an instance restarted with a lower value swept the whole line once the old
-- process had been quiet for its heartbeat's five seconds; a reload keeps it in the process).
local abandon_us = abandon_after(room, tonumber(ARGV[5]), now,
  math.max(tonumber(ARGV[9]), tonumber(ARGV[5])))
-- The longest tick an instance runs the room with lately: after a data loss, the wait before a
-- cookie alone vouches for an order must let the slowest instance see the loss (see consume).
local tick_hi = longest_lately(room, 'tk_hi', 'tk_hi_until', tonumber(ARGV[4]), now,
  tonumber(ARGV[9]))
local h = redis.call('HMGET', room, 'enabled', 'queue_all', 'rate', 'max_active',
  'tokens', 'refilled', 'epoch', 'm_rate', 'm_at', 'm_count', 'admitted', 'sweep', 'recent')
local rate = tonumber(h[3]) or tonumber(ARGV[1])
local max_active = tonumber(h[4]) or tonumber(ARGV[2])
local epoch = tonumber(h[7]) or now
-- A gap before this call costs no claim its deadline (see the prelude), before the liveness
-- clock steps over it.
forgive_gap(room, active, now, liveness_cap(tonumber(ARGV[4])), tonumber(ARGV[3]))
-- The liveness clock (see the prelude): every admit steps it, by at most the cap.
local clock = redis.call('HMGET', room, 'live', 'live_at', 'adm_at')
-- No admit reached the room for longer than the clock's cap: the store was away or paused. By
-- the last admit's own time ('adm_at'): a join steps the clock too, and one run first after a
-- pause hid it (found by re-review).
local stalled = tonumber(clock[3]) ~= nil
  and now - tonumber(clock[3]) > liveness_cap(tonumber(ARGV[4]))
local live = liveness(clock[1], clock[2], now, liveness_cap(tonumber(ARGV[4])), true)
redis.call('HSET', room, 'live', live, 'live_at', now, 'adm_at', now)
-- A call that runs after its caller's deadline (see the prelude): nothing it carries is the
-- caller's word now (no event step, no digest or heartbeat of its events recorded).
local late = late_call(ARGV[6], now)
-- After a stall, the live instances' files as the store knows them may be from before it: one
-- reloaded during the pause has not said so yet (found by review: the instance not reloaded
-- stepped first after a pause and recorded an opening the other's file had moved later). No
-- event step, nobody admitted and no newcomer placed until each live instance has made a call
-- of its own since ('fresh:<id>', on the liveness clock; an instance of a version before this
-- writes none and is not waited for).
if stalled then
  redis.call('HSET', room, 'stall_live', live)
end
if not late then
  redis.call('HSET', room, 'fresh:' .. ARGV[8], live)
end
-- After the store was away from an instance (admit_outage.lua).
local untold, hb_hi = note_outage(room, now, live, late)

-- The event in force, by this store's clock, and what follows from its phase.
local events = parse_events(ARGV[24])
local es = redis.call('HMGET', room, 'in_pre', 'open_live', 'opened', 'opened_us', 'released',
  'draw_ev', 'draw_base', 'draw_epoch', 'gap', 'ev_ver', 'ev_max', 'ev_mixed', 'ev_wait',
  'lc_wait')
local ev, phase = event_now(events, now, es[3])
local in_pre = phase == 'pre'
local open_live = tonumber(es[2])
-- The caller's events are older than the store's runtime changes (one changed a moment ago:
-- an opening postponed): this call makes no irreversible step by them (an opening recorded,
-- a line released) and admits nobody; the caller reads the changes and the next tick decides.
local stale_events = ARGV[25] ~= '' and tonumber(ARGV[25]) ~= (tonumber(es[10]) or 0)
-- Such a caller's events say nothing of the room's either: its digest is not counted against
-- the others' (recorded without it, below), nor does it set or clear 'ev_mixed'. Counted, the
-- file-only events of an instance that had not yet read the runtime changes (its first tick
-- after a start, or one whose reads of them fail) held every order and newcomer on every
-- instance (found by re-review r108a: for good, through an instance that could not read them).
local stale_version = stale_events
-- Live instances that run this room with other events (a rolling change of the file, a SIGHUP
-- that reached some of them): the store cannot tell whose events are the room's, so while they
-- disagree no event step is taken (a pre-queue entered or left, an opening recorded, a line
-- released, sessions ended) and nobody is admitted, as for stale events; join holds newcomers
-- by 'ev_mixed'. Before (found by review), each instance stepped by its own events: one still
-- without a new event ended its pre-queue and admitted the registrants, one with the old
-- opening recorded it for good. An instance of a version before this says nothing of its
-- events and is not counted.
local mine_ev = string.match(ARGV[12], ' (%S+)$')
local cfgs = redis.call('HGETALL', KEYS[5])
-- Both holds are for events: a caller whose file has none near now is not held by them (found
-- by review: after a restart of every instance, newcomers to a room without events were not
-- placed for the old processes' heartbeat life, then placed in the order they polled again).
local unheard_stall = unheard_since_stall(room, cfgs, live)
unheard_stall = (unheard_stall and #events > 0) or after_loss(room, live, #events > 0)
flag(room, 'ev_wait', unheard_stall, es[13] == '1')
local untold_hold = untold_since_cut(room, cfgs, live, untold > 0)
flag(room, 'lc_wait', untold_hold, es[14] == '1')
local mixed_events = events_disagree(cfgs, mine_ev, live)
-- The draw's commitment is the one its pre-queue began with: the store keeps it ('draw_commit',
-- the event's id and the first 16 hex digits), and an instance whose `[draw] secret` gives
-- another (a restart or a deploy with another secret once the instances that began it are
-- gone) is held as instances that disagree are: it places nobody in the draw, which it would
-- place by another seed than the one published, and the room says so (found by review r84b: a
-- restart with another secret silently committed to another seed). At the opening and after,
-- the places are fixed: nothing is held, the reply still tells.
local commits = {}
for id, c in string.gmatch(ARGV[29] or '', '(%S+) (%x+)\n') do
  commits[id] = c
end
local recommitted = false
if ev and ev.draw and commits[ev.id] and not late then
  local kept_id, kept = string.match(redis.call('HGET', room, 'draw_commit') or '', '^(%S+) (%x+)$')
  if kept_id == ev.id then
    recommitted = kept ~= commits[ev.id]
  elseif in_pre then
    redis.call('HSET', room, 'draw_commit', ev.id .. ' ' .. commits[ev.id])
  end
end
mixed_events = mixed_events or (recommitted and in_pre)
if not late and not stale_version then
  flag(room, 'ev_mixed', mixed_events, es[12] == '1')
end
-- An instance whose events make this a drawn pre-queue says so for its heartbeat's lifetime:
-- while instances disagree, join places no newcomer then, whatever the caller's own events (an
-- instance not reloaded yet would place them first come, first served, ahead of the draw).
-- Said at every such step, so that it stands before the disagreement is seen. On the liveness
-- clock, as the heartbeats: on TIME it ran out during a pause of Redis while the heartbeats did
-- not, and the instance without the draw placed newcomers first come, first served until the
-- drawn one stepped again (found on reading the diff).
if in_pre and ev.draw and not late then
  redis.call('HSET', room, 'mixed_draw', string.format('%.0f', live + tonumber(ARGV[9])))
end
local hold_events = mixed_events or late or unheard_stall
stale_events = stale_events or hold_events
-- Not by stale events either: a pre-queue entered ends every session, which no later tick
-- gives back, and one cancelled or moved later a moment before it began was entered by an
-- instance that had not yet read the change (found by review r105a: every admitted session
-- ended, and the next tick gave their slots to the line); nor left (its registrations made
-- silent) by events that lack one just added.
if in_pre then
  if es[1] ~= ev.id and not stale_events then
    redis.call('HSET', room, 'in_pre', ev.id, 'ended_for', ev.id)
    redis.call('HDEL', room, 'open_live')
    end_sessions(active, KEYS[8], now, KEYS[9], live)
  end
  open_live = nil
else
  if (es[1] or not open_live) and not stale_events then
    -- Out of a pre-queue (or the room's first call): registrations are silent from now on.
    open_live = live
    redis.call('HSET', room, 'open_live', live)
    redis.call('HDEL', room, 'in_pre')
  end
  if ev and es[3] ~= ev.id and not stale_events then
    -- The event's opening, seen: its registration stays closed whatever the clock does next.
    es[3], es[4] = ev.id, string.format('%.0f', now)
    redis.call('HSET', room, 'opened', ev.id, 'opened_us', es[4])
    if phase == 'open' and redis.call('HGET', room, 'ended_for') ~= ev.id then
      -- No call reached the room during this event's pre-queue (Redis paused or every
      -- instance stopped for its length): its start is seen now (found by review).
      redis.call('HSET', room, 'ended_for', ev.id)
      end_sessions(active, KEYS[8], now, KEYS[9], live)
    end
  end
end
local ev_on = ev and phase ~= 'closed'
if ev_on and ev.rate and not h[3] then
  rate = ev.rate
end
if ev_on and ev.max and not h[4] then
  max_active = ev.max
end
-- The event's cap in force, kept for touch.lua (whose callers carry no events): a session the
-- store lost is re-registered only while the cap in force allows, the event's included (found
-- by review: renewals filled the room to its configured cap during an event's lower one).
local ev_max = (ev_on and ev.max) and string.format('%d', ev.max) or false
if ev_max ~= (es[11] or false) then
  if ev_max then
    redis.call('HSET', room, 'ev_max', ev_max)
  else
    redis.call('HDEL', room, 'ev_max')
  end
end

local gen = redis.call('HGET', room, 'gen')
-- The room's data went back in time (a Redis restarted from an older snapshot, a replica
-- promoted without the last writes): the store's record of this caller's last step is older
-- than a step whose answer the caller received, which wrote it. The generation came back with
-- the old data and proves nothing: a new one is made, as for data lost whole, so that every
-- instance re-asserts the room's state (found by review: an operator's pause undone by a
-- restart from an RDB went unseen, and the sale opened). Only by a caller that knew this
-- generation: the others see the new one and re-assert, instead of making one each.
-- The room's own count of admit calls tells it too, whoever made them: an instance started
-- after the snapshot has no step of its own in it (found by review: after a rolling restart
-- of every instance, a restore from an RDB taken before it undid a pause unseen).
local step_no, heard_no = tonumber(ARGV[26]) or 0, tonumber(ARGV[27]) or 0
local step_field, given_field = 'step:' .. ARGV[8], 'given:' .. ARGV[8]
local admits = tonumber(redis.call('HGET', room, 'admits')) or 0
if gen and step_no > 0 and ARGV[10] == gen then
  local last = tonumber(redis.call('HGET', room, step_field))
  if (last and last < heard_no) or admits < (tonumber(ARGV[28]) or 0) then
    gen = nil
  end
end
admits = admits + 1
local new_gen = 0
if not gen then
  gen = string.format('%.0f-%s', now, ARGV[8])
  redis.call('HSET', room, 'gen', gen)
  new_gen = 1
  if ARGV[10] ~= '' then
    -- The caller knew another generation: the store lost the room's data, including a held
    -- line. Hold it until the caller has re-asserted the room's state (which sets queue_all
    -- either way), so that no newcomer walks in on the empty store's defaults meanwhile. The
    -- hold is the loss's, not an operator's: what it covers is kept ('loss_hold', '' when
    -- nothing), and a re-assertion that finds the store's state as new as its own puts that
    -- back (room_state.lua; found by review: after a Sentinel switchover the replica kept the
    -- operator's release, the re-assertion of that same release was not applied, and the
    -- line stayed held for good).
    redis.call('HSET', room, 'queue_all', '1')
    redis.call('HSETNX', room, 'loss_hold', h[2] or '')
    h[2] = '1'
  end
end
local stale = ARGV[10] ~= '' and ARGV[10] ~= gen
-- The slots held back, kept for join's fast path too. Each instance's hold-back counts what it
-- saw (the walk-ins through it since its last tick, the visitors who came back through it):
-- the largest an instance told within its heartbeat's life is kept, and the instance that told
-- it lowers it as its window runs down (found by review r83a: the instances' writes took turns,
-- one that had seen no walk-in wrote 0 over another's 3 at every other tick, and newcomers went
-- past max-active). This call holds back the kept one, its own or larger (found by re-review
-- r84a: the tick of an instance holding back less let the line in past it).
local hold_back = tonumber(ARGV[11]) or 0
-- The call that finds the store lost its data holds back what the caller would after it
-- (ARGV[30]): the caller re-asserts the room's state at once, which ends the hold on the line,
-- and until its next tick join's fast path let newcomers into the forgotten sessions' slots
-- (found on re-review r89c: a newcomer walked in between the re-assertion and the tick).
if stale then
  hold_back = math.max(hold_back, tonumber(ARGV[30]) or 0)
end
local hb = redis.call('HMGET', room, 'hold_back', 'hb_by', 'hb_until')
if hold_back >= (tonumber(hb[1]) or 0) or hb[2] == ARGV[8]
    or now >= (tonumber(hb[3]) or 0) then
  redis.call('HSET', room, 'hold_back', hold_back, 'hb_by', ARGV[8],
    'hb_until', string.format('%.0f', now + tonumber(ARGV[9])))
else
  hold_back = tonumber(hb[1])
end

-- The admissions of 'vids' still held and running out within claim-ttl of now hold until then
-- (never shortened, never revived); a random draw's claims may be collected as long (see
-- 'rand_until' below).
local function keep_claims(vids)
  local keep = now + tonumber(ARGV[3])
  local kept = false
  for _, vid in ipairs(vids) do
    local held = tonumber(redis.call('ZSCORE', active, vid))
    if held and held > now and held < keep then
      redis.call('ZADD', active, 'XX', string.format('%.0f', keep), vid)
      kept = true
    end
  end
  local rand_until = tonumber(redis.call('HGET', room, 'rand_until'))
  if kept and rand_until and rand_until < keep then
    redis.call('HSET', room, 'rand_until', string.format('%.0f', keep))
  end
end

-- Steps whose answer the caller never received (late past its timeout, or lost on the way):
-- such a step still ran and may have given turns the caller does not know of, so its polls
-- cannot tell those visitors. While the last step the store ran for this instance is one the
-- caller has not heard, this step gives no turn, and the turns that step gave ('given:<id>')
-- keep their claim from now, never shortened, until the caller hears an answer (and its
-- snapshot shows them out of the line). Before (found by re-review), a Redis on which only
-- the admit's answers were late gave turns step after step that ran out uncollected.
local unheard = false
if step_no > 0 then
  local last = tonumber(redis.call('HGET', room, step_field))
  unheard = last ~= nil and last > heard_no
  if unheard then
    local given = redis.call('HGET', room, given_field)
    if given then
      keep_claims(cmsgpack.unpack(given))
    end
  end
end

local expired = redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
-- Heartbeats are stamped on the liveness clock, not TIME: a pause of Redis (or of every
-- instance) is no silence of an instance, or the first step after a pause longer than a
-- heartbeat's life found every other instance gone, judged the events agreed by its own alone
-- and stepped them: an opening another instance had moved later was recorded (found by
-- re-review).
redis.call('ZADD', KEYS[4], live, ARGV[8])
local gone = sweep_gone(room, cfgs, live)
if ARGV[12] ~= '' and not late then
  -- With the events digest (a caller of this version), its lifetime too.
  -- A caller whose events are older than the store's records none (see stale_version).
  local said = ARGV[12]
  if stale_version and mine_ev then
    said = string.match(ARGV[12], '^(%S*)') .. ' '
  end
  redis.call('HSET', KEYS[5], ARGV[8], mine_ev and (said .. ' ' .. ARGV[9]) or said)
end
local instances = redis.call('ZCARD', KEYS[4])

-- The autopilot (admit_steps.lua).
local ap, ap_conf, ap_running, ap_health, ap_rate =
  autopilot_step(room, now, h[3] or (ev_on and ev.rate), gone)
if ap_rate then
  rate = ap_rate
end
redis.call('HSET', room, 'ap_conf', ap_conf and '1' or '0', 'ap_on', ap_running and '1' or '0')

-- The liveness batch, before the sweep: a visitor seen lately is not swept for an old slot.
-- Only a visitor found at the ticket's place is touched (ZSCORE, then ZADD XX): a ticket of an
-- earlier place (the visitor left the line and joined again) moves nobody forward.
local line_epoch = tonumber(h[7])
local seen_slot = in_pre and 0 or live_slot(live)
-- While instances disagree on the events, a registration (slot 0) stays one (re-review: an
-- instance without the pre-queue made it an ordinary slot, then swept it).
-- A visitor not in line whose turn came keeps its claim from now: it polled and the store did
-- not hear it (a store that answers the admission steps but not the polls; found by review:
-- such visitors lost their turn after claim-ttl).
local turns = {}
for i = 35, #ARGV - 2, 3 do
  local offset = tonumber(ARGV[i + 2])
  local score = redis.call('ZSCORE', waiting, ARGV[i])
  if score == false then
    turns[#turns + 1] = ARGV[i]
  elseif tonumber(ARGV[i + 1]) == line_epoch and decode(tonumber(score)) == offset
    and not (mixed_events and tonumber(score) == offset * SLOTS) then
    redis.call('ZADD', waiting, 'XX', offset * SLOTS + seen_slot, ARGV[i])
  end
end
keep_claims(turns)

local function silent(score)
  return silent_secs(score, live, open_live) * 1000000 >= abandon_us
end

-- At the closing of an event that releases its line: the line is emptied, once.
if phase == 'closed' and ev.release and es[5] ~= ev.id and not stale_events then
  redis.call('UNLINK', waiting)
  redis.call('HDEL', room, 'epoch', 'last_off', 'sweep', 'sample_at', 'sample_epoch', 'sample', 'sample_total',
    'draw_ev', 'draw_base', 'draw_epoch', 'gap')
  redis.call('HSET', room, 'released', ev.id)
  h[7], h[12], line_epoch = nil, nil, nil
end

-- The draw whose places the line holds (its event's id), and whether its order is out: the
-- store saw its event open, or the caller's events (current, agreed by the live instances) no
-- longer hold it: the event was cancelled, its registrants in line by their drawn places. From
-- then its seed may be published and nobody is placed by it again (join.lua), also should an
-- event of the same id come back. Before (found by review), a draw cancelled after its
-- pre-queue began let its registrants in by a draw nobody could check.
local line_draw = tonumber(es[8]) == tonumber(h[7]) and es[6] or nil
local draw_out = line_draw ~= nil and redis.call('HEXISTS', room, 'out:' .. line_draw) == 1
if line_draw and not draw_out and not stale_events then
  local held = false
  for _, e in ipairs(events) do
    held = held or e.id == line_draw
  end
  if es[3] == line_draw or not held then
    draw_out = true
    -- One field per draw (found by re-review: one field for the last draw forgot an older
    -- one, and an event of its id brought back by the file placed registrants by a published
    -- seed again).
    redis.call('HSET', room, 'out:' .. line_draw, 1)
  end
end

-- The wait of a visitor admitted from `offset`: since joining, or, for a draw's place, since the
-- opening (a registration's offset is its draw key, not a time).
local draw_base = tonumber(es[8]) == tonumber(h[7]) and tonumber(es[7]) or nil
local gap = tonumber(es[9]) or 0
local function waited(offset)
  if draw_base and offset >= draw_base then
    if offset < draw_base + DRAW_SPAN then
      return math.max(0, now - (tonumber(es[4]) or now))
    end
    return math.max(0, now - (epoch + offset - gap))
  end
  return math.max(0, now - (epoch + offset))
end

-- Sweep one slice of the line, resuming where the last tick stopped (none while instances
-- disagree on the events: whose pre-queue decides who is silent is not known).
local abandoned = 0
local slice = tonumber(ARGV[7])
local cursor = tonumber(h[12]) or 0
local batch = mixed_events and {}
  or redis.call('ZRANGE', waiting, cursor, cursor + slice - 1, 'WITHSCORES')
for i = 1, #batch, 2 do
  if silent(tonumber(batch[i + 1])) then
    redis.call('ZREM', waiting, batch[i])
    abandoned = abandoned + 1
  end
end
if #batch < 2 * slice then
  cursor = 0
else
  cursor = cursor + slice - abandoned
end

local burst = burst_of(rate, tonumber(ARGV[4]))
local tokens = refill(tonumber(h[5]) or 0, tonumber(h[6]), now, rate, burst)
local recent, window = window_left(h[13], now, tonumber(ARGV[4]), burst)
local out = {}
local admitted = 0
-- While a draw's places are in the line, it is let in from its front up to the last of them, in
-- the draw's order, whatever the caller's method: `random` would draw from the whole line again,
-- drawn and latecomers alike (found by review r92d: a reload to random, or one instance on
-- random beside one on fifo, let newcomers in among the drawn registrants, and the published
-- draw still verified). The members up to the draw's last place while any is in line (0: none),
-- and past them the room's method holds again, within a batch too (re-review r93b: the batch
-- that let the last drawn in took the first newcomers by their order).
local function drawn_ahead()
  if ARGV[23] ~= 'random' or not draw_base then
    return 0
  end
  local hi = '(' .. string.format('%.17g', (draw_base + DRAW_SPAN) * SLOTS)
  if redis.call('ZCOUNT', waiting, string.format('%.17g', draw_base * SLOTS), hi) == 0 then
    return 0
  end
  return redis.call('ZCOUNT', waiting, '-inf', hi)
end
local by_random = false
if h[1] ~= '0' and h[2] ~= '1' and not stale and not in_pre and not stale_events
  and ARGV[23] ~= 'reject' and not unheard and not untold_hold then
  local room_left = max_active - redis.call('ZCARD', active) - hold_back
  local want = math.min(math.floor(tokens), room_left, window)
  local until_us = now + tonumber(ARGV[3])
  local ended_any = redis.call('EXISTS', KEYS[8]) == 1
  local used_any = redis.call('EXISTS', KEYS[9]) == 1
  while admitted < want do
    local head
    local ahead = drawn_ahead()
    if ARGV[23] == 'random' and ahead == 0 then
      by_random = true
      head = redis.call('ZRANDMEMBER', waiting, want - admitted, 'WITHSCORES')
    else
      local n = want - admitted
      if ahead > 0 then
        n = math.min(n, ahead)
      end
      head = redis.call('ZRANGE', waiting, 0, n - 1, 'WITHSCORES')
    end
    if #head == 0 then
      break
    end
    for i = 1, #head, 2 do
      local vid, score = head[i], tonumber(head[i + 1])
      redis.call('ZREM', waiting, vid)
      if silent(score) then
        abandoned = abandoned + 1
      else
        redis.call('ZADD', active, until_us, vid)
        if ended_any then
          redis.call('ZREM', KEYS[8], vid)
        end
        if used_any then
          redis.call('ZREM', KEYS[9], vid, 'e' .. vid, 'p' .. vid)
        end
        admitted = admitted + 1
        out[#out + 1] = vid
        out[#out + 1] = waited(decode(score))
      end
    end
  end
  tokens = tokens - admitted
end

if step_no > 0 then
  redis.call('HSET', room, step_field, step_no)
  if not unheard then
    if admitted > 0 then
      local ids = {}
      for i = 1, #out, 2 do
        ids[#ids + 1] = out[i]
      end
      redis.call('HSET', room, given_field, cmsgpack.pack(ids))
    else
      redis.call('HDEL', room, given_field)
    end
  end
end

local total = (tonumber(h[11]) or 0) + admitted
local n = redis.call('ZCARD', waiting)

-- Measured admission rate (admit_steps.lua).
local m_rate, m_at, m_count = measured_rate(h, now, total, n, admitted,
  (n == 0 and admitted == 0) or h[1] == '0' or h[2] == '1' or stale or in_pre, stalled, active,
  max_active)

redis.call('HSET', room, 'admits', admits, 'tokens', tokens, 'refilled', now, 'admitted', total, 'sweep', cursor,
  'm_rate', m_rate, 'm_at', m_at, 'm_count', m_count, 'recent', window_note(recent, now, admitted))
if abandoned > 0 then
  redis.call('HINCRBY', room, 'abandoned', abandoned)
end

-- The line sampled for the instances' edge answers (admit_steps.lua).
local points = sample_line(room, waiting, n, burst, line_epoch, now, tonumber(ARGV[4]), total)

-- A random draw let someone in lately, whatever the caller's method: until their claims have
-- run out the line's order says nothing of who was let in, and instances ask the store rather
-- than answer from their copy of the line (found by review: an instance still on fifo beside
-- one on random, or just switched from random, told a drawn visitor to wait on, and the turn
-- was lost).
-- 'rand_until': until when the last draw's claims may be collected, by the drawing instance's
-- claim-ttl (not the caller's), moved on by a gap as the claims are (forgive_gap).
local rand_until = tonumber(redis.call('HGET', room, 'rand_until'))
if by_random and admitted > 0 then
  rand_until = math.max(rand_until or 0, now + tonumber(ARGV[3]) + 2 * tonumber(ARGV[4]))
  redis.call('HSET', room, 'rand_until', string.format('%.0f', rand_until))
end
local random_recent = rand_until ~= nil and now < rand_until
local reply = { admitted, abandoned, expired, n, redis.call('ZCARD', active), tostring(m_rate),
  h[1] == '0' and 0 or 1, h[2] == '1' and 1 or 0, h[3] or '', h[4] or '', instances,
  gen, new_gen,
  (not ap_conf) and 0 or (ap_running and 2 or 1), ap[2] or '', ap[3] or '', ap[4] or '', ap[5] or '', ap[6] or '',
  ap_health[1], ap_health[2], ap_health[3], string.format('%.0f', now), ap[1] or '',
  ev and ev.id or '', phase or '',
  (ev and ev.draw) and redis.call('ZCARD', KEYS[9 + ev.i]) or 0,
  (ev and es[3] == ev.id) and es[4] or '', tonumber(es[10]) or 0,
  random_recent and 1 or 0, string.format('%.0f', tick_hi), line_draw or '', draw_out and 1 or 0,
  line_draw and tonumber(h[7]) or 0, admits,
  tonumber(redis.call('HGET', room, 'st_at')) or 0, (mixed_events and 1 or 0) + (recommitted and 2 or 0)
    + (untold_hold and 4 or 0),
  hold_back, string.format('%.0f', hb_hi), #points > 0 and line_epoch or 0, #points }
for i = 1, #points do
  reply[#reply + 1] = points[i]
end
-- The revocations numbered after the caller's last (admit_steps.lua).
local revoked_last, revoked = revocations_after(KEYS[7], room, now, ARGV[22], stale)
reply[#reply + 1] = revoked_last
reply[#reply + 1] = #revoked
for i = 1, #revoked do
  reply[#reply + 1] = revoked[i]
end
for i = 1, #out do
  reply[#reply + 1] = out[i]
end
return reply
