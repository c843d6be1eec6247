-- DELETE a different pre-created key with each request: line i of the keys file belongs to the user
-- whose Authorization value is line ((i - 1) % users) + 1 of the authorization file.
-- Args: <suffix: jwt|key> <keys-file> <authorization-lines-file>
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "report.lua")

local suffix, keys, authorizations, next_index = nil, nil, nil, 0

function init(args)
  suffix = args[1]
  keys = read_lines(args[2])
  authorizations = read_lines(args[3])
end

function request()
  -- Past the end of the list the keys are gone: the requests answer 404 and count as non-2xx.
  next_index = next_index % #keys + 1
  local authorization = authorizations[(next_index - 1) % #authorizations + 1]
  return wrk.format("DELETE", "/apikeys/" .. keys[next_index] .. "/" .. suffix,
    { ["Authorization"] = authorization })
end
