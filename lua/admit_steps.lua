-- admit's steps that stand apart from the line's moves: the autopilot, the measured rate, the
-- line sampled for the edge, the revocations read back. Loaded between the prelude and
-- admit.lua (src/store/redis.rs `lua!`); each reads only what it is given, KEYS and ARGV as
-- admit.lua documents them.

-- The autopilot (src/admission/autopilot.rs decides; here one rate is kept for everyone). It
-- runs when configured, not switched off at run time ('autopilot' = '0'), and no override pins
-- the rate (`pinned`: an operator's rate, or the event in force's). A proposal is taken only if
-- it was decided from the last step: of the instances that decided from one window, the first
-- to arrive wins and the others' are dropped. `gone`: the instances that left, whose windows
-- are forgotten. Returns the room's autopilot fields (HMGET order below, updated), whether the
-- caller's config has one, whether it runs, the live instances' windows together (requests,
-- errors, request-weighted p90 µs), and the rate it admits at while running (else nil).
local function autopilot_step(room, now, pinned, gone)
  local ap = redis.call('HMGET', room, 'autopilot', 'ap_rate', 'ap_at', 'ap_reason', 'ap_from',
    'ap_p90')
  local ap_conf = ARGV[13] == '1'
  local ap_running = ap_conf and ap[1] ~= '0' and not pinned
  local ap_health = { 0, 0, 0 }
  if #gone > 0 then
    redis.call('HDEL', KEYS[6], unpack(gone))
  end
  if ap_conf then
    redis.call('HSET', KEYS[6], ARGV[8], ARGV[15] .. ',' .. ARGV[16] .. ',' .. ARGV[17])
    local reports = redis.call('HGETALL', KEYS[6])
    local weighted = 0
    for i = 1, #reports, 2 do
      if redis.call('ZSCORE', KEYS[4], reports[i]) then
        local req, err, p90 = string.match(reports[i + 1], '^(%d+),(%d+),(%d+)$')
        if req then
          ap_health[1] = ap_health[1] + tonumber(req)
          ap_health[2] = ap_health[2] + tonumber(err)
          weighted = weighted + tonumber(p90) * tonumber(req)
        end
      end
    end
    if ap_health[1] > 0 then
      ap_health[3] = math.floor(weighted / ap_health[1])
    end
  end
  local rate = nil
  if ap_running then
    if not tonumber(ap[2]) then
      ap[2], ap[3], ap[4], ap[5], ap[6] = ARGV[14], string.format('%.0f', now), 'start', false, false
      redis.call('HSET', room, 'ap_rate', ap[2], 'ap_at', ap[3], 'ap_reason', 'start')
      redis.call('HDEL', room, 'ap_from', 'ap_p90')
    elseif ARGV[18] ~= '' and ARGV[20] == ap[3] then
      if tonumber(ARGV[18]) == tonumber(ap[2]) then
        -- A hold: the window was judged, the rate and the last change stay.
        ap[3], ap[6] = string.format('%.0f', now), ARGV[21]
        redis.call('HSET', room, 'ap_at', ap[3], 'ap_p90', ap[6])
      else
        ap[5], ap[2], ap[3], ap[4], ap[6] = ap[2], ARGV[18], string.format('%.0f', now),
          ARGV[19], ARGV[21]
        redis.call('HSET', room, 'ap_rate', ap[2], 'ap_at', ap[3], 'ap_reason', ap[4],
          'ap_from', ap[5], 'ap_p90', ap[6])
      end
    end
    -- Never above this caller's own ceiling (found by review: during a rolling reload that
    -- lowered admit-per-second, an instance admitted at the rate another's autopilot climbed to).
    rate = math.min(tonumber(ap[2]), tonumber(ARGV[1]))
  end
  return ap, ap_conf, ap_running, ap_health, rate
end

-- Measured admission rate: smoothed over about ten seconds, counted only while people wait
-- and the room admits. A tick that finds nobody waiting (or the line held) starts the window
-- again (`idle`), so that the time before a line formed never counts: a sale's first sample
-- would otherwise measure part of a second's admissions over the whole second, and the ETAs
-- built on it stay low for ten seconds. A step back of TIME measures from now on, as if no
-- time had passed. So does a call after the store was away (`stalled`): time in which no
-- instance could admit anyone is not time the line stood still (found by review: after a
-- 20 s pause the rate read a fifth of what it was, and waits were told 4-5 times too long).
-- `h`: admit's HMGET of the room (8: m_rate, 9: m_at, 10: m_count); `total`: admitted ever,
-- this call's `admitted` included; `n`: the line's length. Returns m_rate, m_at, m_count.
local function measured_rate(h, now, total, n, admitted, idle, stalled, active, max_active)
  local m_rate, m_at, m_count = tonumber(h[8]) or 0, tonumber(h[9]), tonumber(h[10]) or total
  if m_at and m_at > now then
    m_at = now
  end
  if not m_at or idle or stalled then
    m_at, m_count = now, total
    -- An empty line forgets its rate: the next line's ETAs assume the rate in force until its
    -- own first sample (found by review: an earlier, slower line's rate lingered for the
    -- next one, and its first visitors were told waits several times too long). A held line
    -- is the same line, and keeps it; so does a full shop, whose measured rate is how fast
    -- its sessions end, what the next line moves at (found by re-review: forgotten, a full
    -- shop's next visitors were told nobody leaves).
    if n == 0 and admitted == 0 and redis.call('ZCARD', active) < max_active then
      m_rate = 0
    end
  elseif now - m_at >= 1000000 then
    if n > 0 then
      local dt = (now - m_at) / 1000000
      local sample = (total - m_count) / dt
      if m_rate == 0 then
        m_rate = sample
      else
        m_rate = m_rate + (1 - math.exp(-dt / 10)) * (sample - m_rate)
      end
    end
    m_at, m_count = now, total
  end
  return m_rate, m_at, m_count
end

-- The line sampled for the instances' edge answers (src/store/line.rs has the same ranks): the
-- offset at each of the first 64 ranks (EXACT_HEAD), then every burst-th rank, then every 1 %,
-- and the last. One sample serves every instance calling within half a tick of it (kept in
-- the room hash, 'sample'): its cost is per tick, not per tick and instance. A caller that
-- reuses it moves its ranks down by the visitors admitted since it was taken (`total`, the
-- room's admitted count, against 'sample_total'), who left from the front of the line:
-- unmoved, the sample was a batch behind the line before it aged (found by review: positions
-- told through the second instance were 4-5 above ZRANK right after a tick, with 2-3 allowed).
-- Visitors abandoned meanwhile show in the next sample, half a tick to a tick later; so does
-- all of it after more than the exact head (64) were admitted since: a fresh sample then.
-- Returns the flat list rank1, offset1, rank2, offset2, ...
local function sample_line(room, waiting, n, burst, line_epoch, now, tick_us, total)
  local cached = redis.call('HMGET', room, 'sample_at', 'sample_epoch', 'sample', 'sample_total')
  local sample_at = tonumber(cached[1])
  local moved = total - (tonumber(cached[4]) or -1)
  if sample_at and cached[3] and now >= sample_at and now - sample_at < tick_us / 2
      and tonumber(cached[2]) == (line_epoch or 0) and moved >= 0 and moved < 64 then
    local kept = cmsgpack.unpack(cached[3])
    if moved == 0 then
      return kept
    end
    local points = {}
    for i = 1, #kept, 2 do
      if kept[i] >= moved then
        points[#points + 1] = kept[i] - moved
        points[#points + 1] = kept[i + 1]
      end
    end
    return points
  end
  local points = {}
  local r = 0
  while r < n and #points < 2 * 4096 do
    local e = redis.call('ZRANGE', waiting, r, r, 'WITHSCORES')
    if #e == 0 then
      break
    end
    points[#points + 1] = r
    points[#points + 1] = decode(tonumber(e[2]))
    if r >= n - 1 then
      break
    end
    if r < 64 then
      r = r + 1
    else
      r = math.min(n - 1, r + math.max(burst, math.floor(r / 100), 1))
    end
  end
  redis.call('HSET', room, 'sample_at', now, 'sample_epoch', line_epoch or 0,
    'sample', cmsgpack.pack(points), 'sample_total', total)
  return points
end

-- The revocations (`log`: the revoked ZSET, see finish.lua) numbered after the caller's last,
-- `after_arg` (ARGV[22]; '' reads none): all of them when its number is not of this log (the
-- log numbers lower than that, or the caller knew another generation, `stale` — the log was
-- lost and numbers again), oldest first, at most MAX_REVOKED. Returns the last number handed
-- back and the flat list id1, until1 (unix s), ...
local function revocations_after(log, room, now, after_arg, stale)
  local revoked = {}
  local revoked_last = 0
  if after_arg == '' then
    return revoked_last, revoked
  end
  trim_revoked(log, room, now)
  local after = tonumber(after_arg) or 0
  local seq = tonumber(redis.call('HGET', room, 'revoke_seq')) or 0
  local trimmed = tonumber(redis.call('HGET', room, 'revoke_trimmed')) or 0
  local after_txt = string.format('%.0f', after)
  local present = after == 0 or
    #redis.call('ZRANGEBYSCORE', log, after_txt, after_txt, 'LIMIT', 0, 1) > 0
  -- As finish::read_from: from the start when the caller's number is not of this log.
  if after > seq or stale or (after > trimmed and not present) then
    after = 0
  end
  revoked_last = after
  local es = redis.call('ZRANGEBYSCORE', log, '(' .. string.format('%.0f', after), '+inf',
    'WITHSCORES', 'LIMIT', 0, MAX_REVOKED)
  for i = 1, #es, 2 do
    revoked[#revoked + 1] = string.sub(es[i], 1, 16)
    revoked[#revoked + 1] = tonumber(string.sub(es[i], 18))
    revoked_last = tonumber(es[i + 1])
  end
  return revoked_last, revoked
end
