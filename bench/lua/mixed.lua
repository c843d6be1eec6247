-- A mixed load, in every 100 requests: 90 verifies ({"key","secret"} bodies), 9 forward-auth checks
-- (Basic values of the same keys), and one write, in turn a create, an update (a new name) and a
-- delete by the key's owner. Line i of the update and delete files belongs to the user whose bearer
-- is line ((i - 1) % users) + 1; past the end of the delete list the keys are gone (404, non-2xx).
-- Args: <verify-bodies-file> <basic-file> <bearer-file> <keys-to-update-file> <keys-to-delete-file>
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "report.lua")

local verifies, checks, bearers, updates, deletes = {}, {}, nil, nil, nil
local n, writes, next_update, next_delete = 0, 0, 0, 0
local create_body = '{"name":"bench","level":1,"expiresIn":86400}'

function init(args)
  for _, body in ipairs(read_lines(args[1])) do
    verifies[#verifies + 1] = wrk.format("POST", "/apikeys/verify", { ["Content-Type"] = "application/json" }, body)
  end
  for _, authorization in ipairs(read_lines(args[2])) do
    checks[#checks + 1] = wrk.format("GET", "/forward-auth", { ["Authorization"] = authorization })
  end
  bearers = read_lines(args[3])
  updates = read_lines(args[4])
  deletes = read_lines(args[5])
end

local function owner(index)
  return bearers[(index - 1) % #bearers + 1]
end

function request()
  n = n + 1
  local slot = n % 100
  if slot < 90 then return verifies[n % #verifies + 1] end
  if slot < 99 then return checks[n % #checks + 1] end
  writes = writes + 1
  local kind = writes % 3
  if kind == 1 then
    return wrk.format("POST", "/apikeys/jwt",
      { ["Authorization"] = bearers[writes % #bearers + 1], ["Content-Type"] = "application/json" }, create_body)
  elseif kind == 2 then
    next_update = next_update % #updates + 1
    return wrk.format("PATCH", "/apikeys/" .. updates[next_update] .. "/jwt",
      { ["Authorization"] = owner(next_update), ["Content-Type"] = "application/json" },
      '{"name":"renamed ' .. writes .. '"}')
  end
  next_delete = next_delete % #deletes + 1
  return wrk.format("DELETE", "/apikeys/" .. deletes[next_delete] .. "/jwt", { ["Authorization"] = owner(next_delete) })
end
