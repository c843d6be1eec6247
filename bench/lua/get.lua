-- A plain GET of the URL's path (the ceiling GET); only the shared report.
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "report.lua")
