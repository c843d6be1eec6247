-- POST a create body, rotating over Authorization values (one per line: "Bearer …" or "Basic …").
-- Used for create via JWT, create via key, the 403 case (wrong secrets) and the ceiling POST.
-- Args: <path> <authorization-lines-file>
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "report.lua")

local requests, count, next_index = {}, 0, 0
local body = '{"name":"bench","level":1,"expiresIn":86400}'

function init(args)
  for _, authorization in ipairs(read_lines(args[2])) do
    count = count + 1
    requests[count] = wrk.format("POST", args[1],
      { ["Authorization"] = authorization, ["Content-Type"] = "application/json" }, body)
  end
end

function request()
  next_index = next_index % count + 1
  return requests[next_index]
end
