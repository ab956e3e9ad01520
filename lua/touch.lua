-- touch: sliding expiry of an admitted session. Extends it by session-ttl; a session the store
-- no longer holds (expired, or Redis lost it) is taken back only while max-active allows. Never
-- for an admission that bought an order (a confirmed marker and no session) nor while an order
-- of it is pending; a pending consume past its deadline is given back first. Nor for a session
-- a pre-queue ended (end_sessions). The cap is the one in force: an operator's override, the
-- event's as the last admit saw it (`ev_max`), the configured.
-- Idempotent: a retry extends to the same deadline, give or take the time between the calls.
--
-- A visitor who holds a session is not also in line: a session taken here (a local admission
-- during an outage, re-registered; a session the store forgot) takes them out of it.
--
-- KEYS[1] active ZSET   KEYS[2] room HASH   KEYS[3] consumed marker STRING for this visitor
-- KEYS[4] waiting ZSET   KEYS[5] ended ZSET (end_sessions)   KEYS[6] used ZSET (note_used)
-- ARGV[1] visitor id   ARGV[2] session-ttl µs   ARGV[3] configured max-active   ARGV[4] clock (prelude `now_us`)
-- ARGV[5] marker lifetime ms   ARGV[6] tick µs   ARGV[7] claim-ttl µs (for a gap, see the prelude)
-- ARGV[8] the store generation the caller last saw ('' if none)   ARGV[9] µs: a session the
-- store does not hold is not taken back while its generation is another, or younger than this
-- ARGV[10] '1': a session the caller admitted on its own while the store was away (the `local`
-- policy), taken back past max-active too; '' otherwise
-- ARGV[11] the cookie's expiry (unix s, the store's clock as the proxy read it; 0 or absent: not
-- known): a session taken back runs until then at least, and a cookie expired by this clock
-- takes nothing back; a marker of an order of the admission is stretched to outlive it
-- ARGV[12] the marker margin ms (src/store/order.rs MARKER_MARGIN)
-- Reply: 1 when the session is held (now extended), 3 when the store did not hold it and took it
-- back, 0 when it is not renewed, 2 when a session the store does not hold is not taken back
-- only because a loss is young (ask again later)

local active, room, marker = KEYS[1], KEYS[2], KEYS[3]
local vid = ARGV[1]
local now = now_us(ARGV[4])
local live = read_live(room, now, tonumber(ARGV[6]))
forgive_gap(room, active, now, liveness_cap(tonumber(ARGV[6])), tonumber(ARGV[7]))
redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
local m = settled_marker(active, marker, vid, now, tonumber(ARGV[2]), tonumber(ARGV[5]), KEYS[5],
  live, KEYS[6])
local held = redis.call('ZSCORE', active, vid)
local expires_us = (tonumber(ARGV[11]) or 0) * 1000000
local used = not held and used_lately(KEYS[6], vid, live)
-- An order in flight whose marker ran out during an outage (pending_lately): as while pending.
local pending = not m and pending_lately(KEYS[6], vid, live) > 0
if used or pending or (m and (m.kind == 'p' or (m.kind == 'c' and not held))) then
  -- A cookie of a used (or ordering) admission that an instance gave a new life while the
  -- store was away (a renewal kept it running: src/proxy/visitor.rs keep_unrenewed) verifies
  -- until its own expiry: the marker outlives it by the margin, as it does every cookie the
  -- store knew of, or that copy orders again once the marker runs out (found by review r97b);
  -- so does the record that the admission was used, which outlasts the marker when the
  -- outage did (r98a).
  if expires_us > now then
    local want = math.ceil((expires_us - now) / 1000) + tonumber(ARGV[12])
    if m and redis.call('PTTL', marker) < want then
      redis.call('PEXPIRE', marker, want)
    end
    if not held and (used or (m and m.kind == 'c')) then
      note_used(KEYS[6], vid, live, want)
    end
  end
  return 0
end
-- The cap in force: an operator's, an event's (as the last admit saw it), the configured.
-- The store lost its data lately: an order of this admission may be in flight on an instance
-- that has not seen the loss yet; taken back now, the session would let a second order win
-- (found by re-review). As consume waits, so does the renewal.
if not held and expires_us > 0 and expires_us <= now then
  return 0
end
-- Not final: the caller asks again once the loss is older (found by review r92a: taken as a
-- refusal, a forgotten session counted as come back, and the line took its slot).
if not held and loss_too_recent(room, ARGV[8], tonumber(ARGV[9]) or 0, now) then
  return 2
end
local caps = redis.call('HMGET', room, 'max_active', 'ev_max')
local max_active = tonumber(caps[1]) or tonumber(caps[2]) or tonumber(ARGV[3])
-- A `local` admission (ARGV[10] = '1') is taken back past max-active: its visitor is in the
-- shop on their cookie whatever this says (src/store/mod.rs register_local).
local ended = not held and ended_either(KEYS[5], KEYS[6], vid, now, live)
if ended and expires_us > now then
  -- A copy of an ended session's cookie kept running while the store was away: the record
  -- outlives it by the margin, as the used record does a kept copy's (found by review r99b).
  note_used(KEYS[6], vid, live, math.ceil((expires_us - now) / 1000) + tonumber(ARGV[12]),
    'e' .. vid)
end
if held or (not ended
    and (ARGV[10] == '1' or redis.call('ZCARD', active) < max_active)) then
  -- Never shortened: every cookie of the admission was issued against the session's deadline,
  -- and a consumed marker is sized from it. A renewal under a lower session-ttl (a reload, or
  -- another instance's file) moved it below a cookie issued before, the marker of its order
  -- ran out first, and that cookie ordered again (found by review r89b: two orders of one
  -- admission).
  -- A session taken back runs as long as the cookie that vouched for it (found by review
  -- r92a: taken back at now + a session-ttl a reload had lowered, it ran out while the cookie
  -- ran on, and the line took its slot).
  local wanted = math.max(now + tonumber(ARGV[2]), held and 0 or expires_us)
  redis.call('ZADD', active, renewed_deadline(held, wanted), vid)
  redis.call('ZREM', KEYS[4], vid)
  return held and 1 or 3
end
return 0
