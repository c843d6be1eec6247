-- Shared by every bench script: one JSON line for bench/run.ts when wrk is done, a file reader, and
-- the address of each thread.
function read_lines(path)
  local lines = {}
  for line in io.lines(path) do
    if line ~= "" then lines[#lines + 1] = line end
  end
  return lines
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"non2xx":%d,"socket_errors":%d,' ..
    '"p50_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max, latency.mean))
end

-- Two replicas (BENCH_SECOND_PORT set, wrk -t2): the second thread sends to the other replica's port,
-- and both threads rotate over the same lines, so each key's requests are spread over both replicas.
local threads = 0
function setup(thread)
  threads = threads + 1
  local port = os.getenv("BENCH_SECOND_PORT")
  if port and threads % 2 == 0 then thread.addr = wrk.lookup("127.0.0.1", port)[1] end
end
