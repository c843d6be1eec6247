-- GET a path, rotating over Authorization values (one per line): the forward-auth case.
-- Args: <path> <authorization-lines-file>
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "report.lua")

local requests, count, next_index = {}, 0, 0

function init(args)
  for _, authorization in ipairs(read_lines(args[2])) do
    count = count + 1
    requests[count] = wrk.format("GET", args[1], { ["Authorization"] = authorization })
  end
end

function request()
  next_index = next_index % count + 1
  return requests[next_index]
end
