#!/usr/bin/env bash
# Prometheus smoke test: a real Prometheus scrapes a real keygate, and its HTTP API must show the
# target healthy (up == 1) and the request counter with the requests this script sent.
#
# Usage:  scripts/ci/prometheus-smoke.sh
#   PROMETHEUS=/usr/bin/prometheus   the binary (Debian's `prometheus` package is installed if missing)
#
# Everything runs on 127.0.0.1 on free ports, with Prometheus's configuration and data in a temporary
# directory. Both processes are started here and stopped by their PIDs on exit, also on failure;
# every wait is bounded, so the script ends by itself.
set -euo pipefail
cd "$(dirname "$0")/../.."

PROMETHEUS=${PROMETHEUS:-prometheus}
WAIT_SECONDS=30
missing=()
command -v "$PROMETHEUS" >/dev/null || { missing+=(prometheus); PROMETHEUS=prometheus; }
command -v curl >/dev/null || missing+=(curl)
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "prometheus-smoke: missing ${missing[*]}; apt-get install them as root" >&2; exit 1; }
  echo "prometheus-smoke: installing Debian's ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

WORK=$(mktemp -d)
KEYGATE_PID=""
PROMETHEUS_PID=""
stop() { # stop PID: SIGTERM, up to 10 s to exit, then SIGKILL
  local pid=$1 i
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local status=$?
  set +e
  if [ "$status" -ne 0 ]; then
    echo "---- keygate log (last 20 lines) ----" >&2; tail -n 20 "$WORK/keygate.log" >&2
    echo "---- prometheus log (last 20 lines) ----" >&2; tail -n 20 "$WORK/prometheus.log" >&2
  fi
  stop "$PROMETHEUS_PID"
  stop "$KEYGATE_PID"
  rm -rf "$WORK"
  [ "$status" -eq 0 ] && echo "== prometheus smoke: PASS ==" || echo "== prometheus smoke: FAILED (exit $status) ==" >&2
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail() { echo "prometheus-smoke: FAIL: $*" >&2; exit 1; }
say() { echo "prometheus-smoke: $*"; }

free_port() {
  bun -e 'const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }); console.log(s.port); s.stop(true);'
}
# query PROMQL -> prints the first result's value, or nothing (JSON read by bun: no jq needed)
query() {
  curl -sS --max-time 5 -G --data-urlencode "query=$1" "$PROM_URL/api/v1/query" 2>/dev/null \
    | bun -e 'const r = JSON.parse(await Bun.stdin.text()); const v = r?.data?.result?.[0]?.value?.[1]; if (v !== undefined) console.log(v);' \
    2>/dev/null || true
}

# ---- keygate, with the metrics listener, both on free ports ---------------------------------------
export JWT_SECRET="prometheus-smoke-secret-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
DATABASE_URL=:memory: HOST=127.0.0.1 PORT=0 METRICS_HOST=127.0.0.1 METRICS_PORT=0 PURGE_INTERVAL_SECONDS=1 \
  bun src/cli.ts serve >"$WORK/keygate.log" 2>&1 &
KEYGATE_PID=$!
for i in $(seq $((WAIT_SECONDS * 10))); do
  grep -q '"msg":"listening"' "$WORK/keygate.log" && break
  kill -0 "$KEYGATE_PID" 2>/dev/null || fail "keygate exited at start"
  sleep 0.1
done
line=$(grep '"msg":"listening"' "$WORK/keygate.log") || fail "keygate did not start within ${WAIT_SECONDS}s"
API=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' <<<"$line"); API=${API%/}
METRICS=$(sed -n 's/.*"metrics":"\([^"]*\)".*/\1/p' <<<"$line")
[ -n "$API" ] && [ -n "$METRICS" ] || fail "no API or metrics URL in the start-up line: $line"
say "keygate (pid $KEYGATE_PID): API $API, metrics $METRICS"

# Traffic Prometheus should see: 5 health checks, 2 unknown paths, 1 key created, verified and deleted.
for i in 1 2 3 4 5; do curl -sS -o /dev/null --max-time 5 "$API/health"; done
for i in 1 2; do curl -sS -o /dev/null --max-time 5 "$API/nope"; done
printf 'Authorization: Bearer %s\n' "$(bun src/cli.ts token --sub 7)" >"$WORK/bearer"
curl -sS --max-time 5 -H "@$WORK/bearer" -H 'Content-Type: application/json' \
  --data '{"name":"prometheus-smoke","level":1,"expiresIn":60}' "$API/apikeys/jwt" >"$WORK/created.json"
key=$(sed -n 's/.*"key":"\([^"]*\)".*/\1/p' "$WORK/created.json")
secret=$(sed -n 's/.*"secret":"\([^"]*\)".*/\1/p' "$WORK/created.json")
[[ "$key" == kg_* ]] || fail "the create did not return a key"
printf '{"key":"%s","secret":"%s"}' "$key" "$secret" >"$WORK/verify.json"
curl -sS -o /dev/null --max-time 5 -H 'Content-Type: application/json' --data "@$WORK/verify.json" "$API/apikeys/verify"
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -X DELETE -H "@$WORK/bearer" "$API/apikeys/$key/jwt")
[ "$code" = 204 ] || fail "the delete answered $code"

# ---- Prometheus, scraping it every second ---------------------------------------------------------
PROM_PORT=$(free_port)
PROM_URL="http://127.0.0.1:$PROM_PORT"
METRICS_TARGET=${METRICS#http://}; METRICS_TARGET=${METRICS_TARGET%%/*}
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: keygate
    metrics_path: /metrics
    static_configs:
      - targets: ['$METRICS_TARGET']
YAML
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$WORK/prometheus.log" 2>&1 &
PROMETHEUS_PID=$!
say "$("$PROMETHEUS" --version 2>&1 | head -n 1) (pid $PROMETHEUS_PID) on $PROM_URL, scraping $METRICS_TARGET"

deadline=$(($(date +%s) + WAIT_SECONDS))
until [ "$(query 'up{job="keygate"}')" = 1 ]; do
  kill -0 "$PROMETHEUS_PID" 2>/dev/null || fail "prometheus exited"
  [ "$(date +%s)" -lt "$deadline" ] || fail "up{job=\"keygate\"} did not become 1 within ${WAIT_SECONDS}s"
  sleep 0.5
done
say 'up{job="keygate"} = 1'
curl -sS --max-time 5 "$PROM_URL/api/v1/targets" >"$WORK/targets.json"
grep -q '"health":"up"' "$WORK/targets.json" || fail "the target is not healthy: $(head -c 500 "$WORK/targets.json")"
grep -q '"lastError":""' "$WORK/targets.json" || fail "the last scrape failed: $(head -c 500 "$WORK/targets.json")"
say "target health: up; last scrape error: none"

check() { # check PROMQL WANT
  local got
  got=$(query "$1")
  [ "$got" = "$2" ] || fail "$1 = '${got}', expected $2"
  say "$1 = $got"
}
check 'keygate_http_requests_total{job="keygate",method="GET",route="/health",status="200"}' 5
check 'keygate_http_requests_total{job="keygate",route="unmatched",status="404"}' 2
check 'keygate_keys_created_total{job="keygate"}' 1
check 'keygate_keys_deleted_total{job="keygate",reason="revoked"}' 1
check 'keygate_db_up{job="keygate"}' 1
check 'keygate_verifications_total{job="keygate",path="verify",scheme="key",code="VALID"}' 1
check 'sum(keygate_http_request_duration_seconds_count{job="keygate"})' 10
check 'count(keygate_build_info{job="keygate",engine="sqlite"})' 1
