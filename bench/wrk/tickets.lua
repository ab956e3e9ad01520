-- wrk script: each request is a status poll of the next visitor of a file of cookies (one
-- `anteroom_vid=...; anteroom_q.ROOM=...` line per visitor, made by examples/edge_tickets).
--   wrk -s bench/wrk/tickets.lua URL -- FILE OFFSET
local cookies = {}
local n = 0
function init(args)
  for line in io.lines(args[1]) do cookies[#cookies + 1] = line end
  n = tonumber(args[2] or "0") or 0
end
function request()
  n = n + 1
  local c = cookies[(n % #cookies) + 1]
  return wrk.format("GET", nil, { ["Cookie"] = c, ["Accept"] = "application/json" })
end
