#!/usr/bin/env bash
# Forward-auth through real proxies: nginx (auth_request) and Caddy (forward_auth) in front of a tiny
# upstream, each asking keygate's /forward-auth, with the configurations docs/reverse-proxies.md shows
# (examples/proxies/nginx.conf and examples/proxies/Caddyfile, placeholders substituted).
#
# Usage:  scripts/ci/proxy-smoke.sh
#   KEYGATE_BINARY=path   the keygate executable (default dist/keygate, built when missing)
#
# Installs nginx, Caddy, curl, jq and sqlite3 from Debian when missing (as root; their services are
# not started).
# Everything listens on 127.0.0.1 on free ports; keygate's data and all configs live in a temp dir.
# Prints PASS/FAIL per check and a summary, exits non-zero on any failure. Every wait is bounded;
# on exit (success or failure) it stops keygate, the fixtures, nginx and Caddy by their PIDs and
# removes the temp dir.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
JWT_SECRET_VALUE='proxy-smoke-secret-at-least-32-bytes-long'
READY_WITHIN=15 # seconds any one process may take to start answering

WORK=$(mktemp -d)
chmod 711 "$WORK" # nginx workers (nobody) may traverse to their temp paths, not list
mkdir -m 700 "$WORK/secrets" "$WORK/data"
PIDS=()
NAMES=()
POLICY_ADDED=0
PASSED=0
FAILED=0

log() { printf 'proxy-smoke: %s\n' "$*"; }
fail() {
  printf 'FAIL  setup: %s\n' "$*"
  exit 1
}

cleanup() {
  local status=$? i
  set +e
  [ "$POLICY_ADDED" = 1 ] && rm -f /usr/sbin/policy-rc.d
  for i in "${!PIDS[@]}"; do [ -n "${PIDS[$i]}" ] && kill -TERM "${PIDS[$i]}" 2>/dev/null; done
  for i in "${!PIDS[@]}"; do
    [ -n "${PIDS[$i]}" ] || continue
    for _ in $(seq 50); do kill -0 "${PIDS[$i]}" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "${PIDS[$i]}" 2>/dev/null; then
      log "${NAMES[$i]} (pid ${PIDS[$i]}) ignored SIGTERM for 5 s; killing it"
      kill -KILL "${PIDS[$i]}" 2>/dev/null
    fi
    wait "${PIDS[$i]}" 2>/dev/null
  done
  if [ "$status" -ne 0 ]; then
    for f in keygate.err nginx/error.log caddy.log fixtures.err; do
      [ -s "$WORK/$f" ] && { echo "---- last lines of $f ----"; tail -n 15 "$WORK/$f"; }
    done
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# started NAME PID: remember a process this script started, to stop exactly it on the way out.
started() {
  NAMES+=("$1")
  PIDS+=("$2")
}

# wait_http NAME PID URL: until URL answers with any HTTP status, while PID lives, at most READY_WITHIN s.
wait_http() {
  local name=$1 pid=$2 url=$3 deadline=$(($(date +%s) + READY_WITHIN))
  until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true)" != 000 ]; do
    kill -0 "$pid" 2>/dev/null || fail "$name exited before it answered"
    [ "$(date +%s)" -lt "$deadline" ] || fail "$name did not answer within ${READY_WITHIN}s"
    sleep 0.05
  done
}

# ---- 1. nginx and Caddy ---------------------------------------------------------------------------
missing=()
for command in nginx caddy curl jq sqlite3; do command -v "$command" >/dev/null || missing+=("$command"); done
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "${missing[*]} missing: apt-get install ${missing[*]}, or run this as root"
  # Debian's maintainer scripts start the nginx and Caddy services (port 80) through invoke-rc.d
  # unless policy-rc.d says no: put one in place for the install when the machine has none.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    POLICY_ADDED=1
  fi
  log "installing ${missing[*]} from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ "$POLICY_ADDED" = 1 ]; then
    rm -f /usr/sbin/policy-rc.d
    POLICY_ADDED=0
  fi
fi
for command in nginx caddy curl jq sqlite3; do
  command -v "$command" >/dev/null || fail "$command is not on PATH (after apt-get install, if it ran)"
done
log "$(nginx -v 2>&1), caddy $(caddy version | cut -d' ' -f1)"

# ---- 2. keygate and the fixtures ------------------------------------------------------------------
if [ -n "${KEYGATE_BINARY:-}" ]; then
  BINARY=$KEYGATE_BINARY
else
  BINARY=$ROOT/dist/keygate
  [ -x "$BINARY" ] || { log "building dist/keygate"; bun run build >/dev/null; }
fi
[ -x "$BINARY" ] || fail "$BINARY is not an executable"

# Route rules (docs/permissions.md): reading documents needs documents.read, changing them
# documents.write, /public/ needs nothing; every other path any valid credential.
cat >"$WORK/rules.json" <<'RULES'
[
  { "path": "/public/*", "allow": "anyone" },
  { "methods": ["GET", "HEAD"], "path": "/documents/*", "permissions": "documents.read" },
  { "methods": ["POST", "PUT", "PATCH", "DELETE"], "path": "/documents/*", "permissions": "documents.write" }
]
RULES
HOST=127.0.0.1 PORT=0 DATABASE_URL="$WORK/data/keygate.db" JWT_SECRET=$JWT_SECRET_VALUE LOG_LEVEL=info \
  PURGE_INTERVAL_SECONDS=3600 FORWARD_AUTH_RULES_FILE="$WORK/rules.json" \
  "$BINARY" serve >"$WORK/keygate.out" 2>"$WORK/keygate.err" &
started keygate $!
deadline=$(($(date +%s) + READY_WITHIN))
while :; do
  KEYGATE=$(head -n1 "$WORK/keygate.out" | jq -r 'select(.msg == "listening") | .url' 2>/dev/null || true)
  [ -n "$KEYGATE" ] && break
  kill -0 "${PIDS[0]}" 2>/dev/null || fail "keygate exited: $(cat "$WORK/keygate.err")"
  [ "$(date +%s)" -lt "$deadline" ] || fail "keygate printed no start-up line within ${READY_WITHIN}s"
  sleep 0.05
done
KEYGATE=${KEYGATE%/}
KEYGATE_PORT=${KEYGATE##*:}

MARKER="body-marker-$RANDOM$RANDOM"
bun "$ROOT/scripts/ci/support/proxy-fixtures.ts" "$KEYGATE_PORT" "$WORK/fixtures.json" "$MARKER" \
  2>"$WORK/fixtures.err" &
started fixtures $!
deadline=$(($(date +%s) + READY_WITHIN))
until [ -s "$WORK/fixtures.json" ]; do
  kill -0 "$!" 2>/dev/null || fail "the fixtures exited: $(cat "$WORK/fixtures.err")"
  [ "$(date +%s)" -lt "$deadline" ] || fail "the fixtures did not start within ${READY_WITHIN}s"
  sleep 0.05
done
UPSTREAM=127.0.0.1:$(jq -r .upstream "$WORK/fixtures.json")
TAP=127.0.0.1:$(jq -r .tap "$WORK/fixtures.json") # keygate, through the wire tap
NGINX=127.0.0.1:$(jq -r '.free[0]' "$WORK/fixtures.json")
CADDY=127.0.0.1:$(jq -r '.free[1]' "$WORK/fixtures.json")
log "keygate $KEYGATE (via tap $TAP), upstream $UPSTREAM, nginx $NGINX, caddy $CADDY"

# ---- 3. nginx and Caddy with the documented configurations ---------------------------------------
mkdir -p "$WORK/nginx"
sed -e "s/@LISTEN@/$NGINX/g" -e "s/@KEYGATE@/$TAP/g" -e "s/@APP@/$UPSTREAM/g" \
  examples/proxies/nginx.conf >"$WORK/nginx/keygate.conf"
cat >"$WORK/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/client_body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    include $WORK/nginx/keygate.conf;
}
EOF
nginx -t -q -e "$WORK/nginx/error.log" -p "$WORK/nginx/" -c "$WORK/nginx/nginx.conf" \
  || fail "nginx rejects the configuration: $(tail -n 5 "$WORK/nginx/error.log")"
nginx -e "$WORK/nginx/error.log" -p "$WORK/nginx/" -c "$WORK/nginx/nginx.conf" &
started nginx $!
wait_http nginx "$!" "http://$NGINX/"

mkdir -p "$WORK/caddy-home"
# The documented file with its own global options (admin off) plus auto_https off (no certificate
# store is touched), and, the site being loopback only, its bind line uncommented.
sed -e "s|@SITE@|http://$CADDY|g" -e "s/@KEYGATE@/$TAP/g" -e "s/@APP@/$UPSTREAM/g" \
  -e 's/^\tadmin off$/\tadmin off\n\tauto_https off/' -e 's/^\t# bind 127\.0\.0\.1$/\tbind 127.0.0.1/' \
  examples/proxies/Caddyfile >"$WORK/Caddyfile"
grep -q $'^\tadmin off$' "$WORK/Caddyfile" || fail "examples/proxies/Caddyfile no longer turns the admin API off"
grep -q $'^\tbind 127.0.0.1$' "$WORK/Caddyfile" || fail "examples/proxies/Caddyfile has no '# bind 127.0.0.1' line to uncomment"
HOME=$WORK/caddy-home XDG_DATA_HOME=$WORK/caddy-home XDG_CONFIG_HOME=$WORK/caddy-home \
  caddy run --config "$WORK/Caddyfile" --adapter caddyfile >"$WORK/caddy.log" 2>&1 &
started caddy $!
wait_http caddy "$!" "http://$CADDY/"

# ---- 4. credentials -------------------------------------------------------------------------------
# Credentials go to curl through header files in $WORK/secrets, never on a command line.
S=$WORK/secrets
token() { JWT_SECRET=$JWT_SECRET_VALUE "$BINARY" token "$@"; }
printf 'Authorization: Bearer %s\n' "$(token --sub 7 --level 8 --ttl 600)" >"$S/owner"
code=$(curl -sS -o "$S/created.json" -w '%{http_code}' --max-time 5 -H "@$S/owner" \
  -H 'Content-Type: application/json' --data '{"name":"proxy-smoke","level":3,"expiresIn":3600}' \
  "$KEYGATE/apikeys/jwt" || true)
[ "$code" = 201 ] || fail "creating the level-3 key answered $code: $(head -c 300 "$S/created.json")"
KEY=$(jq -r .apikey.key "$S/created.json")
KEY_EXPIRES=$(jq -r .apikey.expiresAt "$S/created.json")
jq -r .apikey.secret "$S/created.json" >"$S/secret"
printf 'Authorization: Basic %s\n' "$(printf '%s:%s' "$KEY" "$(cat "$S/secret")" | base64 -w0)" >"$S/basic"
printf 'X-API-Key: %s\nX-API-Secret: %s\n' "$KEY" "$(cat "$S/secret")" >"$S/xapi"
printf 'Authorization: Basic %s\n' "$(printf '%s:%s' "$KEY" wrong-secret | base64 -w0)" >"$S/wrong"
# limited_key FILE SETTINGS: a level-3 key of user 7 with SETTINGS (JSON members) into header file FILE.
limited_key() {
  local body answered
  body=$(jq -cn --argjson settings "{$2}" '{name: "proxy-smoke-limited", level: 3, expiresIn: 3600} + $settings')
  answered=$(curl -sS -o "$S/limited.json" -w '%{http_code}' --max-time 5 -H "@$S/owner" \
    -H 'Content-Type: application/json' --data "$body" "$KEYGATE/apikeys/jwt" || true)
  [ "$answered" = 201 ] || fail "creating a key with $2 answered $answered: $(head -c 300 "$S/limited.json")"
  printf 'Authorization: Basic %s\n' \
    "$(jq -j '.apikey | "\(.key):\(.secret)"' "$S/limited.json" | base64 -w0)" >"$S/$1"
  jq -r .apikey.secret "$S/limited.json" >>"$S/limited-secrets"
  rm "$S/limited.json"
}
limited_key reader '"permissions": ["documents.read"]'
# One of each per proxy: limits and credits are counted per key.
for proxy in nginx caddy; do
  limited_key "$proxy-ratelimited" '"ratelimit": {"limit": 2, "duration": 60}'
  limited_key "$proxy-credits" '"credits": {"remaining": 1}'
  limited_key "$proxy-refilled" '"credits": {"remaining": 1, "refill": {"amount": 1, "interval": 3600}}'
  limited_key "$proxy-paying" '"credits": {"remaining": 100}'
done
TOKEN=$(token --sub 42 --level 6 --ttl 900)
printf '%s\n' "$TOKEN" >"$S/token"
printf 'Authorization: Bearer %s\n' "$TOKEN" >"$S/bearer"
printf 'Authorization: Bearer %s\n' "${TOKEN%?}x" >"$S/bad-bearer" # last signature character changed
TOKEN_EXP=$(jq -rn --arg t "$TOKEN" '$t | split(".")[1] | gsub("-"; "+") | gsub("_"; "/") | @base64d | fromjson | .exp')
TOKEN_EXPIRES=$(date -u -d "@$TOKEN_EXP" +%Y-%m-%dT%H:%M:%S.000Z)

# ---- 5. the checks --------------------------------------------------------------------------------
# A header of the answer the client got (the last value when repeated), or <absent>.
client_header() {
  local value
  value=$(grep -i "^$1:" "$WORK/resp.h" | tail -n1 | cut -d: -f2- | sed 's/^ *//' | tr -d '\r')
  [ -n "$value" ] && echo "$value" || echo '<absent>'
}
# How many times the client's answer carries header NAME.
client_header_count() { grep -ci "^$1:" "$WORK/resp.h" || true; }
expect_client_header() {
  local got
  got=$(client_header "$1")
  [ "$got" = "$2" ] || { echo "the client got $1: $got, expected $2"; return 1; }
}
# The client got keygate's error shape with X-Keygate-Code CODE, and no second copy of any header.
expect_refusal() {
  expect_client_header x-keygate-code "$1" || return 1
  jq -e '.result == "error" and (.error | type == "string" and length > 0) and (keys | length == 2)' \
    "$WORK/resp" >/dev/null || { echo "the client got the body $(head -c 200 "$WORK/resp")"; return 1; }
  local name
  for name in retry-after ratelimit ratelimit-policy x-keygate-code; do
    [ "$(client_header_count "$name")" -le 1 ] || { echo "the client got $name twice"; return 1; }
  done
}

# send BASE TAG METHOD PATH [curl args...]: STATUS, the body in $WORK/resp, headers in $WORK/resp.h.
# The tag (X-Smoke-Check) lets the upstream count what reached it per check.
send() {
  local base=$1 tag=$2 method=$3 path=$4
  shift 4
  STATUS=$(curl -sS -o "$WORK/resp" -D "$WORK/resp.h" -w '%{http_code}' --max-time 5 -X "$method" \
    -H "X-Smoke-Check: $tag" "$@" "http://$base$path" || true)
}
seen() { curl -sS --max-time 5 "http://$UPSTREAM/__fixtures/seen"; }
reached() { seen | jq -r --arg t "$1" '.upstream[$t] // 0'; }
header() { jq -r --arg h "$1" '.headers[$h] // "<absent>"' "$WORK/resp"; }
expect_status() { [ "$STATUS" = "$1" ] || { echo "HTTP $STATUS, expected $1: $(head -c 200 "$WORK/resp")"; return 1; }; }
expect_header() {
  local got
  got=$(header "$1")
  [ "$got" = "$2" ] || { echo "upstream saw $1: $got, expected $2"; return 1; }
}
expect_unreached() {
  local n
  n=$(reached "$1")
  [ "$n" = 0 ] || { echo "the upstream received it ($n times)"; return 1; }
}
# The caller's credentials are for keygate only: the upstream must never receive them. (The
# upstream reports each of these headers as <present> when it got one, whatever its value.)
expect_no_credentials() {
  expect_header authorization '<absent>' && expect_header x-api-key '<absent>' \
    && expect_header x-api-secret '<absent>'
}
expect_identity() { # USER LEVEL AUTH KEY EXPIRES, as the upstream saw them, and no credentials
  expect_header x-keygate-user-id "$1" && expect_header x-keygate-level "$2" \
    && expect_header x-keygate-auth "$3" && expect_header x-keygate-key "$4" \
    && expect_header x-keygate-expires-at "$5" && expect_no_credentials
}

check() { # check PROXY NAME FUNCTION
  local proxy=$1 name=$2 why
  if why=$("$3" "$proxy" "$proxy: $name" 2>&1); then
    printf 'PASS  %-6s %s\n' "$proxy" "$name"
    PASSED=$((PASSED + 1))
  else
    printf 'FAIL  %-6s %s: %s\n' "$proxy" "$name" "$why"
    FAILED=$((FAILED + 1))
  fi
}
base_of() { if [ "$1" = nginx ]; then echo "$NGINX"; else echo "$CADDY"; fi; }

basic_key() {
  send "$(base_of "$1")" "$2" GET '/app/hello?x=1' -H "@$S/basic"
  expect_status 200 && expect_identity 7 3 key "$KEY" "$KEY_EXPIRES" || return 1
  [ "$(jq -r .path "$WORK/resp")" = '/app/hello?x=1' ] || { echo "upstream path: $(jq -r .path "$WORK/resp")"; return 1; }
}
xapi_key() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/xapi"
  expect_status 200 && expect_identity 7 3 key "$KEY" "$KEY_EXPIRES"
}
bearer_token() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/bearer"
  expect_status 200 && expect_identity 42 6 jwt '<absent>' "$TOKEN_EXPIRES"
}
no_credential() {
  send "$(base_of "$1")" "$2" GET /app/hello
  expect_status 401 && expect_unreached "$2" || return 1
  local challenge
  challenge=$(grep -i '^www-authenticate:' "$WORK/resp.h" | tr -d '\r' || true)
  [[ "$challenge" == *Bearer* && "$challenge" == *Basic* ]] \
    || { echo "WWW-Authenticate: ${challenge:-<absent>}"; return 1; }
}
wrong_secret() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/wrong"
  expect_status 403 && expect_unreached "$2"
}
bad_token() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/bad-bearer"
  expect_status 403 && expect_unreached "$2"
}
level_too_low() {
  send "$(base_of "$1")" "$2" GET /admin/report -H "@$S/basic"
  expect_status 403 && expect_unreached "$2"
}
level_enough() {
  send "$(base_of "$1")" "$2" GET /admin/report -H "@$S/bearer"
  expect_status 200 && expect_identity 42 6 jwt '<absent>' "$TOKEN_EXPIRES"
}
client_min_level() {
  send "$(base_of "$1")" "$2" GET '/admin/report?minLevel=0' -H "@$S/basic"
  expect_status 403 && expect_unreached "$2"
}
all_credentials() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/basic" -H "@$S/xapi"
  expect_status 200 && expect_identity 7 3 key "$KEY" "$KEY_EXPIRES"
}
spoof_with_key() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/basic" -H 'X-Keygate-User-Id: 1' \
    -H 'X-Keygate-Level: 8' -H 'X-Keygate-Auth: jwt' -H 'X_Keygate_User_Id: 1'
  expect_status 200 && expect_identity 7 3 key "$KEY" "$KEY_EXPIRES" \
    && expect_header x_keygate_user_id '<absent>'
}
spoof_with_token() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/bearer" -H 'X-Keygate-User-Id: 1' \
    -H 'X-Keygate-Key: kg_spoofedspoofedspoofed1' -H 'X-Keygate-Expires-At: 2099-01-01T00:00:00.000Z'
  expect_status 200 && expect_identity 42 6 jwt '<absent>' "$TOKEN_EXPIRES"
}
spoof_without_credential() {
  send "$(base_of "$1")" "$2" GET /app/hello -H 'X-Keygate-User-Id: 1' -H 'X-Keygate-Level: 8' \
    -H 'X-Keygate-Auth: key'
  expect_status 401 && expect_unreached "$2"
}
post_body() {
  local before after payload
  before=$(seen | jq .tap.requests)
  payload=$(jq -cn --arg m "$MARKER" '{marker: $m, padding: ("x" * 2000)}')
  send "$(base_of "$1")" "$2" POST /app/upload -H "@$S/basic" -H 'Content-Type: application/json' \
    --data "$payload"
  expect_status 200 && expect_identity 7 3 key "$KEY" "$KEY_EXPIRES" || return 1
  [ "$(jq -r .method "$WORK/resp")" = POST ] || { echo "upstream saw $(jq -r .method "$WORK/resp")"; return 1; }
  [ "$(jq -r .body "$WORK/resp")" = "$payload" ] || { echo "the upstream got another body"; return 1; }
  after=$(seen | jq .tap.requests)
  [ "$after" -gt "$before" ] || { echo "keygate was not asked"; return 1; }
  [ "$(seen | jq .tap.markerSeen)" = false ] || { echo "the body reached keygate"; return 1; }
}

# A key limited to 2 verifications per 60 s: two pass with the rate-limit headers, the third is a 429.
rate_limited() {
  local base i
  base=$(base_of "$1")
  for i in 1 0; do
    send "$base" "$2 (allowed)" GET /app/hello -H "@$S/$1-ratelimited"
    expect_status 200 && expect_header x-keygate-user-id 7 && expect_no_credentials \
      && expect_header ratelimit '<absent>' || return 1
    expect_client_header ratelimit-policy '"default";q=2;w=60' || return 1
    [[ "$(client_header ratelimit)" =~ ^\"default\"\;r=$i\;t=([0-9]+)$ ]] \
      || { echo "the client got RateLimit: $(client_header ratelimit) (expected r=$i)"; return 1; }
  done
  send "$base" "$2" GET /app/hello -H "@$S/$1-ratelimited"
  expect_status 429 && expect_unreached "$2" && expect_refusal RATE_LIMITED || return 1
  local retry
  retry=$(client_header retry-after)
  [[ "$retry" =~ ^[0-9]+$ ]] && [ "$retry" -ge 1 ] && [ "$retry" -le 60 ] \
    || { echo "the client got Retry-After: $retry"; return 1; }
  expect_client_header ratelimit-policy '"default";q=2;w=60' || return 1
  [[ "$(client_header ratelimit)" =~ ^\"default\"\;r=0\;t=[0-9]+$ ]] \
    || { echo "the client got RateLimit: $(client_header ratelimit)"; return 1; }
  [ "$(reached "$2 (allowed)")" = 2 ] || { echo "the upstream saw $(reached "$2 (allowed)") of the 2 allowed"; return 1; }
}
# A key with 1 credit and no refill: one passes, then a 429 without Retry-After (waiting will not help).
credits_used_up() {
  local base
  base=$(base_of "$1")
  send "$base" "$2 (allowed)" GET /app/hello -H "@$S/$1-credits"
  expect_status 200 && expect_client_header ratelimit '<absent>' || return 1
  send "$base" "$2" GET /app/hello -H "@$S/$1-credits"
  expect_status 429 && expect_unreached "$2" && expect_refusal USAGE_EXCEEDED \
    && expect_client_header retry-after '<absent>' && expect_client_header ratelimit '<absent>'
}
# A key with 1 credit refilled hourly: the 429 says when the refill comes.
credits_refill() {
  local base retry
  base=$(base_of "$1")
  send "$base" "$2 (allowed)" GET /app/hello -H "@$S/$1-refilled"
  expect_status 200 || return 1
  send "$base" "$2" GET /app/hello -H "@$S/$1-refilled"
  expect_status 429 && expect_unreached "$2" && expect_refusal USAGE_EXCEEDED || return 1
  retry=$(client_header retry-after)
  [[ "$retry" =~ ^[0-9]+$ ]] && [ "$retry" -ge 3500 ] && [ "$retry" -le 3600 ] \
    || { echo "the client got Retry-After: $retry, expected the hour's refill"; return 1; }
}
# While another process holds SQLite's write lock, taking a credit waits (2 s) and keygate answers
# 503 with Retry-After: the client gets that 503, not a 500, and the upstream nothing.
database_unavailable() {
  local base holder deadline
  base=$(base_of "$1")
  rm -f "$WORK/lock.in" "$WORK/lock.out"
  mkfifo "$WORK/lock.in"
  sqlite3 "$WORK/data/keygate.db" <"$WORK/lock.in" >"$WORK/lock.out" 2>&1 &
  holder=$! # runs inside check's subshell: stopped and reaped here, on every path
  exec 7>"$WORK/lock.in"
  printf "BEGIN IMMEDIATE;\nSELECT 'locked';\n" >&7
  deadline=$(($(date +%s) + READY_WITHIN))
  until grep -qx locked "$WORK/lock.out"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      exec 7>&-
      kill "$holder" 2>/dev/null
      wait "$holder" 2>/dev/null
      echo "sqlite3 took no write lock: $(cat "$WORK/lock.out")"
      return 1
    fi
    sleep 0.05
  done
  send "$base" "$2" GET /app/hello -H "@$S/$1-paying"
  printf 'COMMIT;\n' >&7
  exec 7>&-
  wait "$holder" || true
  expect_status 503 && expect_unreached "$2" || return 1
  [ "$(jq -r .result "$WORK/resp")" = error ] || { echo "the client got $(head -c 200 "$WORK/resp")"; return 1; }
  [[ "$(client_header retry-after)" =~ ^[0-9]+$ ]] || { echo "the client got Retry-After: $(client_header retry-after)"; return 1; }
  # The lock is gone: the same key passes again.
  send "$base" "$2 (after)" GET /app/hello -H "@$S/$1-paying"
  expect_status 200
}
# Route rules: a key holding documents.read reads a document, and the upstream learns what it holds.
rule_allows() {
  send "$(base_of "$1")" "$2" GET /documents/7 -H "@$S/reader"
  expect_status 200 && expect_header x-keygate-user-id 7 && expect_header x-keygate-permissions documents.read \
    && expect_no_credentials
}
# The same key may not delete it: the rule for DELETE asks documents.write. (nginx answers a 403 of
# auth_request with its own page; Caddy passes keygate's on, code and all.)
rule_refuses() {
  send "$(base_of "$1")" "$2" DELETE /documents/7 -H "@$S/reader"
  expect_status 403 && expect_unreached "$2" || return 1
  [ "$1" = nginx ] || expect_refusal INSUFFICIENT_PERMISSIONS
}
# A rule that allows anyone: no credential needed, and no identity reaches the upstream.
rule_anyone() {
  send "$(base_of "$1")" "$2" GET /public/logo.png
  expect_status 200 && expect_header x-keygate-user-id '<absent>'
}
# A dot segment does not lead into the public rule: /public/%2e%2e/documents/7 is /documents/7.
rule_dot_segments() {
  send "$(base_of "$1")" "$2" GET /public/%2e%2e/documents/7 --path-as-is
  expect_status 401 && expect_unreached "$2"
}
# No rule matches /app/hello: any valid credential, and no permissions header for a key without any.
rule_default() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/basic"
  expect_status 200 && expect_header x-keygate-permissions '<absent>'
}

# Without a limit the client gets no rate-limit headers, not even copies of its own.
unlimited_headers() {
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/basic" -H 'RateLimit: "default";r=999;t=0' \
    -H 'RateLimit-Policy: "default";q=999;w=1'
  expect_status 200 && expect_client_header ratelimit '<absent>' \
    && expect_client_header ratelimit-policy '<absent>' && expect_client_header retry-after '<absent>'
}

for proxy in nginx caddy; do
  check "$proxy" "valid key (Basic) reaches the upstream as keygate's user 7, level 3, without Authorization" basic_key
  check "$proxy" "valid key (X-API-Key/X-API-Secret) reaches the upstream as user 7, level 3, without them" xapi_key
  check "$proxy" "valid token reaches the upstream as user 42, level 6, no X-Keygate-Key, no Authorization" bearer_token
  check "$proxy" "no credential: 401 naming Bearer and Basic, upstream not reached" no_credential
  check "$proxy" "wrong secret: 403, upstream not reached" wrong_secret
  check "$proxy" "bad token signature: 403, upstream not reached" bad_token
  check "$proxy" "/admin/ (minLevel=5) with a level-3 key: 403, upstream not reached" level_too_low
  check "$proxy" "/admin/ (minLevel=5) with a level-6 token: 200" level_enough
  check "$proxy" "/admin/?minLevel=0 from the client does not lower the bar: 403" client_min_level
  check "$proxy" "Basic and X-API-Key/X-API-Secret at once: the upstream gets none of the three" all_credentials
  check "$proxy" "key + client's X-Keygate-User-Id: 1 (and X_Keygate_User_Id): upstream sees 7 only" spoof_with_key
  check "$proxy" "token + client's X-Keygate-Key/User-Id: upstream sees keygate's values, no key" spoof_with_token
  check "$proxy" "no credential + client's X-Keygate-User-Id: 1: 401, upstream not reached" spoof_without_credential
  check "$proxy" "POST body reaches the upstream; keygate was asked and never received it" post_body
  check "$proxy" "key without a limit (client sends RateLimit of its own): no RateLimit, RateLimit-Policy, Retry-After back" unlimited_headers
  check "$proxy" "ratelimit 2/60: 2 pass with RateLimit r=1, r=0; the 3rd is 429 RATE_LIMITED, Retry-After 1..60, upstream not reached" rate_limited
  check "$proxy" "credits 1: 1 passes; the 2nd is 429 USAGE_EXCEEDED without Retry-After, upstream not reached" credits_used_up
  check "$proxy" "credits 1, hourly refill: the 2nd is 429 USAGE_EXCEEDED with Retry-After until the refill" credits_refill
  check "$proxy" "database write-locked: keygate's 503 with Retry-After reaches the client, upstream not reached" database_unavailable
  check "$proxy" "route rule: GET /documents/7 with a documents.read key passes, X-Keygate-Permissions reaches the upstream" rule_allows
  check "$proxy" "route rule: DELETE /documents/7 with the same key is 403 INSUFFICIENT_PERMISSIONS, upstream not reached" rule_refuses
  check "$proxy" "route rule: GET /public/logo.png without a credential passes (allow anyone)" rule_anyone
  check "$proxy" "route rule: /public/%2e%2e/documents/7 without a credential is 401, not public" rule_dot_segments
  check "$proxy" "no rule matches /app/hello: any valid credential passes, no X-Keygate-Permissions" rule_default
done

# keygate's own log of all this holds no secret and no token. SIGTERM first: it writes what it has
# buffered and exits 0.
kill -TERM "${PIDS[0]}"
keygate_exit=0
for _ in $(seq 100); do kill -0 "${PIDS[0]}" 2>/dev/null || break; sleep 0.05; done
if kill -0 "${PIDS[0]}" 2>/dev/null; then
  keygate_exit='nothing: still running 5 s after SIGTERM'
else
  wait "${PIDS[0]}" || keygate_exit=$?
  PIDS[0]='' # reaped: the cleanup must not signal whatever reuses the number
fi
if [ "$keygate_exit" != 0 ]; then
  printf 'FAIL  keygate exited %s on SIGTERM\n' "$keygate_exit"
  FAILED=$((FAILED + 1))
elif grep -qF -f "$S/secret" "$WORK/keygate.out" || grep -qF -f "$S/token" "$WORK/keygate.out" \
  || grep -qF -f "$S/limited-secrets" "$WORK/keygate.out"; then
  printf 'FAIL  keygate log holds a secret or a token\n'
  FAILED=$((FAILED + 1))
else
  printf 'PASS  keygate log holds no secret and no token (%s lines)\n' "$(wc -l <"$WORK/keygate.out")"
  PASSED=$((PASSED + 1))
fi

# With keygate gone, both proxies fail closed: nothing reaches the application.
keygate_down() {
  local want
  want=$([ "$1" = nginx ] && echo 500 || echo 502)
  send "$(base_of "$1")" "$2" GET /app/hello -H "@$S/basic"
  expect_status "$want" && expect_unreached "$2"
}
check nginx "keygate stopped: 500, upstream not reached (fails closed)" keygate_down
check caddy "keygate stopped: 502, upstream not reached (fails closed)" keygate_down

echo "proxy smoke: $PASSED passed, $FAILED failed ($(nginx -v 2>&1 | cut -d/ -f2), caddy $(caddy version | cut -d' ' -f1))"
[ "$FAILED" = 0 ]
