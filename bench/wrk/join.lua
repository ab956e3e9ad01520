-- wrk script: every request is a new visitor (a fresh `anteroom_vid`), so each one joins the line.
--   wrk -s bench/wrk/join.lua URL -- PREFIX     (PREFIX: 8 hex digits, different per run)
local prefix = "00000000"
local n = 0
function init(args)
  if args[1] then prefix = args[1] end
end
function request()
  n = n + 1
  return wrk.format("GET", nil, { ["Cookie"] = string.format("anteroom_vid=%s%024x", prefix, n) })
end
