-- POST a JSON body per request, rotating over the lines of a file (one JSON body a line), with no
-- credentials: the verify cases ({"key","secret"} or {"token"}).
-- Args: <path> <bodies-file>
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "report.lua")

local requests, count, next_index = {}, 0, 0

function init(args)
  for _, body in ipairs(read_lines(args[2])) do
    count = count + 1
    requests[count] = wrk.format("POST", args[1], { ["Content-Type"] = "application/json" }, body)
  end
end

function request()
  next_index = next_index % count + 1
  return requests[next_index]
end
