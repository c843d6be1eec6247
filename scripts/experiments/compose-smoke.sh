#!/usr/bin/env bash
# Compose smoke test: runs compose.yaml for real with podman-compose (PostgreSQL, keygate-1..3, nginx),
# the way docs/replicas.md says (PostgreSQL first, then the rest; the token from `podman exec`), and
# checks what several replicas promise: a key created through nginx on one replica works through
# nginx and on every replica; a key limited to 2 a minute gets keygate's 429 with Retry-After through
# nginx on the third request; deleted on replica 2, a key is refused by every replica and by nginx
# within 1 second (LISTEN/NOTIFY); nginx's forward-auth example allows it before, 403 after, 401
# without credentials.
#
# Usage:  scripts/experiments/compose-smoke.sh        (as root; run by hand, not in CI: container builds are heavy)
# On a machine that reaches only Debian's mirror it makes local stand-ins first: the base images of
# the Dockerfile and of the stand-ins (scripts/experiments/container-base-images.sh, when any is missing) and,
# from scripts/experiments/compose-standins/, images tagged docker.io/library/postgres:16 and
# docker.io/library/nginx:1.27, the names compose.yaml uses.
# SKIP_STANDINS=1 uses whatever images of those names exist (e.g. the real ones).
# Ports: free ones are picked and passed through KEYGATE_HTTP_PORT, KEYGATE_1_PORT..KEYGATE_3_PORT.
# Always ends with `podman-compose down -v` (containers, network, the pgdata volume) and removes its
# temporary files, also on failure. Every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-/tmp/ctr/containers.conf}
PROJECT=keygate-smoke-$$
export COMPOSE_PROJECT_NAME=$PROJECT
UP_WITHIN=90      # seconds for PostgreSQL, then for each keygate and nginx, to answer
REFUSED_WITHIN=1  # seconds within which a key deleted on one replica must be refused by every replica
WORK=$(mktemp -d)
chmod 700 "$WORK" # the token and the key's secret; removed on exit
PASSED=0
FAILED=0
UP=0

log() { printf 'compose-smoke: %s\n' "$*"; }
pass() { PASSED=$((PASSED + 1)); printf 'PASS %s\n' "$*"; }
failc() { FAILED=$((FAILED + 1)); printf 'FAIL %s\n' "$*"; }
die() { printf 'FAIL %s\n' "$*"; FAILED=$((FAILED + 1)); exit 1; }
check() { # check WANT GOT WHAT
  if [ "$1" = "$2" ]; then pass "$3 -> $2"; else failc "$3: expected $1, got $2: $(head -c 200 "$WORK/body" 2>/dev/null)"; fi
}
now_ms() { date +%s%3N; }
compose() { timeout 300 podman-compose -p "$PROJECT" -f compose.yaml "$@"; }

cleanup() {
  local status=$?
  set +e
  if [ "$UP" = 1 ]; then
    if [ "$FAILED" -gt 0 ] || [ "$status" -ne 0 ]; then
      for s in postgres keygate-1 keygate-2 keygate-3 nginx; do
        echo "---- last log lines of ${PROJECT}_${s}_1 ----"
        podman logs --tail 15 "${PROJECT}_${s}_1" 2>&1
      done
    fi
    # podman-compose 1.0.3's down -v leaves the anonymous volumes (the image's VOLUME /data) and the
    # network: note them first and remove them after.
    anon=$(podman ps -a --filter "name=^${PROJECT}_" --format '{{.Names}}' \
      | xargs -r podman inspect --format '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' 2>/dev/null)
    compose down -v -t 5 >"$WORK/down.log" 2>&1 || { echo "podman-compose down failed:"; tail -n 20 "$WORK/down.log"; }
    left=$(podman ps -a --filter "name=^${PROJECT}_" --format '{{.Names}}')
    [ -z "$left" ] || { echo "left behind, removing: $left"; podman rm -f $left >/dev/null 2>&1; }
    for v in $anon "${PROJECT}_pgdata"; do podman volume rm -f "$v" >/dev/null 2>&1; done
    podman network rm -f "${PROJECT}_default" >/dev/null 2>&1
  fi
  rm -rf "$WORK"
  [ "$status" -ne 0 ] && [ "$FAILED" = 0 ] && FAILED=1
  echo
  echo "== compose smoke: $PASSED passed, $FAILED failed; podman-compose down -v done =="
  [ "$FAILED" = 0 ] && [ "$status" = 0 ] && exit 0
  exit 1
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- 0. tools and images --------------------------------------------------------------------------
need=()
command -v podman-compose >/dev/null || need+=(podman-compose)
command -v curl >/dev/null || need+=(curl)
[ -x /usr/lib/podman/aardvark-dns ] || dpkg -s aardvark-dns >/dev/null 2>&1 || need+=(aardvark-dns)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
bases=(docker.io/library/debian:bookworm-slim $(awk 'toupper($1) == "FROM" { print $2 }' Dockerfile))
for base in "${bases[@]}"; do
  if ! command -v podman >/dev/null || ! podman image exists "$base" 2>/dev/null; then
    log "making the local base images (scripts/experiments/container-base-images.sh)"
    bash "$ROOT/scripts/experiments/container-base-images.sh" >"$WORK/base-images.log" 2>&1 \
      || { tail -n 30 "$WORK/base-images.log"; die "scripts/experiments/container-base-images.sh"; }
    break
  fi
done
# The Dockerfile's own FROM images must be here too (--pull=never): name any that is not.
for base in $(awk 'toupper($1) == "FROM" { print $2 }' Dockerfile); do
  podman image exists "$base" || die "base image $base (Dockerfile FROM) is not here; make a local stand-in for it"
done
log "$(podman-compose version 2>/dev/null | grep -i 'podman-compose' | head -n1 || true) $(podman --version)"

build() { # build TAG DIR [flags]
  local tag=$1 dir=$2 t0
  shift 2
  t0=$(now_ms)
  timeout 1800 podman build --pull=never "$@" -t "$tag" "$dir" >"$WORK/build.log" 2>&1 \
    || { tail -n 30 "$WORK/build.log"; die "podman build $tag"; }
  pass "built $tag in $(($(now_ms) - t0)) ms"
}
if [ "${SKIP_STANDINS:-0}" != 1 ]; then
  build docker.io/library/postgres:16 scripts/experiments/compose-standins/postgres
  build docker.io/library/nginx:1.27 scripts/experiments/compose-standins/nginx
fi
# --format docker keeps the Dockerfile's HEALTHCHECK; compose.yaml names the same check anyway.
build keygate:compose . --format docker

# ---- 1. up ----------------------------------------------------------------------------------------
free_port() { bun -e 'const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }); console.log(s.port); s.stop(true);'; }
export KEYGATE_HTTP_PORT=$(free_port) KEYGATE_1_PORT=$(free_port) KEYGATE_2_PORT=$(free_port) KEYGATE_3_PORT=$(free_port)
NGINX="http://127.0.0.1:$KEYGATE_HTTP_PORT"
REPLICA=("" "http://127.0.0.1:$KEYGATE_1_PORT" "http://127.0.0.1:$KEYGATE_2_PORT" "http://127.0.0.1:$KEYGATE_3_PORT")
# A secret made for this run (the compose.yaml default is a placeholder for local trials).
export JWT_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n')
export POSTGRES_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -d '/+=\n')

# podman-compose 1.0.3 starts in order but does not wait for `condition: service_healthy`, and
# without systemd podman runs no health timers: so PostgreSQL first, waiting on pg_isready here.
UP=1
t0=$(now_ms)
compose up -d --no-build postgres >"$WORK/up.log" 2>&1 || { tail -n 30 "$WORK/up.log"; die "podman-compose up postgres"; }
deadline=$(($(date +%s) + UP_WITHIN))
until timeout 10 podman exec "${PROJECT}_postgres_1" pg_isready -q -U keygate -d keygate 2>/dev/null; do
  [ "$(date +%s)" -lt "$deadline" ] || die "PostgreSQL not ready within ${UP_WITHIN}s"
  sleep 0.2
done
pass "postgres: pg_isready after $(($(now_ms) - t0)) ms"
compose up -d --no-build >>"$WORK/up.log" 2>&1 || { tail -n 30 "$WORK/up.log"; die "podman-compose up"; }

status_of() { curl -s -o "$WORK/body" -w '%{http_code}' --max-time 5 "$@" || true; }
wait_200() { # wait_200 NAME URL
  local deadline=$(($(date +%s) + UP_WITHIN))
  until [ "$(status_of "$2")" = 200 ]; do
    [ "$(date +%s)" -lt "$deadline" ] || die "$1: $2 did not answer 200 within ${UP_WITHIN}s"
    sleep 0.2
  done
  pass "$1: GET $2 -> 200 ($(($(now_ms) - t0)) ms after up)"
}
for i in 1 2 3; do wait_200 "keygate-$i" "${REPLICA[$i]}/health"; done
wait_200 nginx "$NGINX/nginx-health"
wait_200 "nginx -> keygate" "$NGINX/health"
for s in postgres keygate-1 keygate-2 keygate-3 nginx; do
  rc=0
  out=$(timeout 30 podman healthcheck run "${PROJECT}_${s}_1" 2>&1) || rc=$?
  out=$(grep -v -e systemd <<<"$out" | tr '\n' ' ' || true)
  if [ "$rc" = 0 ]; then pass "$s: compose health check (podman healthcheck run) -> healthy"; else failc "$s: health check exit $rc ${out}"; fi
done

# ---- 2. a key made through nginx on one replica ---------------------------------------------------
# The token is minted as docs/replicas.md says: `podman exec <project>_keygate-1_1 keygate token`.
timeout 30 podman exec "${PROJECT}_keygate-1_1" keygate token --sub 7 --level 5 >"$WORK/token" 2>"$WORK/token.err" \
  || { cat "$WORK/token.err"; die "keygate token inside keygate-1"; }
printf 'Authorization: Bearer %s\n' "$(cat "$WORK/token")" >"$WORK/bearer"
code=$(status_of -X POST -H "@$WORK/bearer" -H 'Content-Type: application/json' \
  --data '{"name":"compose-smoke","level":3,"expiresIn":3600}' "$NGINX/apikeys/jwt")
check 201 "$code" "create a key through nginx (POST /apikeys/jwt)"
# Which replica made it: nginx logs the upstream's address, podman knows each replica's.
creator_addr=$(podman logs "${PROJECT}_nginx_1" 2>/dev/null | grep '"POST /apikeys/jwt" 201' | tail -n1 \
  | sed -n 's/.*upstream=\([0-9.]*\):3000.*/\1/p')
creator=""
for i in 1 2 3; do
  addr=$(podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${PROJECT}_keygate-${i}_1")
  [ "$addr" = "$creator_addr" ] && creator=$i
done
[ -n "$creator" ] && pass "nginx sent the create to keygate-$creator ($creator_addr)" \
  || failc "no replica has the address nginx logged for the create (${creator_addr:-none})"
key=$(sed -n 's/.*"key":"\([^"]*\)".*/\1/p' "$WORK/body")
sed -n 's/.*"secret":"\([^"]*\)".*/\1/p' "$WORK/body" >"$WORK/secret"
[[ "$key" == kg_* ]] && [ -s "$WORK/secret" ] || die "no key and secret in the create response"
printf 'Authorization: Basic %s\n' "$(printf '%s:%s' "$key" "$(cat "$WORK/secret")" | base64 | tr -d '\n')" >"$WORK/basic"
printf '{"key":"%s","secret":"%s"}' "$key" "$(cat "$WORK/secret")" >"$WORK/verify.json"

verify_code() { # verify_code BASE -> VALID / NOT_FOUND / ...
  status_of -X POST -H 'Content-Type: application/json' --data "@$WORK/verify.json" "$1/apikeys/verify" >/dev/null
  sed -n 's/.*"code":"\([A-Z_]*\)".*/\1/p' "$WORK/body"
}
# Through nginx six times (round-robin: twice on each replica), then on each replica's own port.
ok=0
for n in 1 2 3 4 5 6; do [ "$(verify_code "$NGINX")" = VALID ] && ok=$((ok + 1)); done
check 6 "$ok" "verify through nginx, 6 times: VALID"
for i in 1 2 3; do
  other=""; [ "$i" != "$creator" ] && other=", not the replica that made it"
  check VALID "$(verify_code "${REPLICA[$i]}")" "verify on keygate-$i$other"
  check 200 "$(status_of -H "@$WORK/basic" "${REPLICA[$i]}/forward-auth")" "forward-auth on keygate-$i with the key"
done
upstreams=$(podman logs "${PROJECT}_nginx_1" 2>/dev/null | grep '/apikeys/verify' | sed -n 's/.*upstream=\([^ ]*\).*/\1/p' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
n_up=$(podman logs "${PROJECT}_nginx_1" 2>/dev/null | grep '/apikeys/verify' | sed -n 's/.*upstream=\([^ ]*\).*/\1/p' | sort -u | wc -l)
check 3 "$n_up" "nginx spread the verifies over 3 replicas (requests per replica:${upstreams% ;})"

# The forward-auth example through nginx.
code=$(status_of -H "@$WORK/basic" "$NGINX/app/hello")
check 200 "$code" "nginx /app/ with the key (auth_request allows)"
grep -q '"userId":"7","level":"3","auth":"key"' "$WORK/body" \
  && pass "the example app received X-Keygate-User-Id 7, level 3, auth key" \
  || failc "the example app got: $(head -c 200 "$WORK/body")"
code=$(status_of -H "@$WORK/bearer" "$NGINX/app/hello")
check 200 "$code" "nginx /app/ with the token"
grep -q '"userId":"7","level":"5","auth":"jwt"' "$WORK/body" \
  && pass "the example app received X-Keygate-User-Id 7, level 5, auth jwt" \
  || failc "the example app got: $(head -c 200 "$WORK/body")"
code=$(status_of -D "$WORK/headers" -H 'X-Keygate-User-Id: 1' "$NGINX/app/hello")
check 401 "$code" "nginx /app/ without credentials (a forged X-Keygate-User-Id)"
www=$(grep -i '^WWW-Authenticate:' "$WORK/headers" | tr -d '\r' || true)
if [[ "$www" == *Bearer* && "$www" == *Basic* ]]; then pass "nginx passes keygate's 401 with $www"; else failc "401 through nginx without WWW-Authenticate naming Bearer and Basic (got: ${www:-none})"; fi

# ---- 3. a rate-limited key: its 429 reaches the client through nginx ------------------------------
# A key limited to 2 verifications a minute, created on keygate-3. nginx balances the /app/ requests'
# forward-auth subrequests round-robin, so they do not all reach one replica: the limit is counted in
# PostgreSQL, shared by all, and the third request is refused with keygate's 429 and Retry-After.
code=$(status_of -X POST -H "@$WORK/bearer" -H 'Content-Type: application/json' \
  --data '{"name":"compose-smoke-limited","level":1,"expiresIn":3600,"ratelimit":{"limit":2,"duration":60}}' \
  "${REPLICA[3]}/apikeys/jwt")
check 201 "$code" "create a key limited to 2 a minute on keygate-3"
limited_key=$(sed -n 's/.*"key":"\([^"]*\)".*/\1/p' "$WORK/body")
limited_secret=$(sed -n 's/.*"secret":"\([^"]*\)".*/\1/p' "$WORK/body")
printf '%s\n' "$limited_secret" >"$WORK/limited_secret"
[[ "$limited_key" == kg_* ]] && [ -n "$limited_secret" ] || die "no key and secret in the create response"
printf 'Authorization: Basic %s\n' "$(printf '%s:%s' "$limited_key" "$limited_secret" | base64 | tr -d '\n')" >"$WORK/limited"
header_of() { tr -d '\r' <"$WORK/headers" | sed -n "s/^$1: *//Ip" | head -n1; }
for n in 1 2; do
  code=$(status_of -D "$WORK/headers" -H "@$WORK/limited" "$NGINX/app/hello")
  check 200 "$code" "nginx /app/ with the limited key, request $n of 2 (RateLimit: $(header_of RateLimit))"
done
code=$(status_of -D "$WORK/headers" -H "@$WORK/limited" "$NGINX/app/hello")
check 429 "$code" "nginx /app/ with the limited key, request 3: keygate's 429"
retry=$(header_of Retry-After)
kcode=$(header_of X-Keygate-Code)
if [[ "$retry" =~ ^[0-9]+$ ]] && [ "$retry" -ge 1 ] && [ "$retry" -le 60 ] && [ "$kcode" = RATE_LIMITED ] \
  && grep -q '"result":"error"' "$WORK/body"; then
  pass "the 429 carries Retry-After $retry, X-Keygate-Code $kcode and an error body"
else
  failc "the 429 carries Retry-After '$retry', X-Keygate-Code '$kcode', body $(head -c 200 "$WORK/body")"
fi
check 200 "$(status_of -H "@$WORK/basic" "$NGINX/app/hello")" "another key is not limited by it"

# ---- 4. delete on replica 2; refused everywhere within REFUSED_WITHIN -------------------------------
# The checks above put the key in every replica's key cache (KEY_CACHE_SECONDS, 10 by default), so a
# refusal within 1 s here is the LISTEN/NOTIFY eviction at work, not a cache that never held it.
code=$(status_of -X DELETE -H "@$WORK/bearer" "${REPLICA[2]}/apikeys/$key/jwt")
check 204 "$code" "delete the key on keygate-2"
t_del=$(now_ms)
limit=$((t_del + REFUSED_WITHIN * 1000))
refused_by() { # refused_by NAME BASE: waits (bounded) until verify says NOT_FOUND and forward-auth 403
  local name=$1 base=$2 v f
  while :; do
    v=$(verify_code "$base")
    f=$(status_of -H "@$WORK/basic" "$base/forward-auth")
    if [ "$v" = NOT_FOUND ] && [ "$f" = 403 ]; then
      pass "$name refuses the deleted key (verify NOT_FOUND, forward-auth 403) $(($(now_ms) - t_del)) ms after the 204"
      return
    fi
    if [ "$(now_ms)" -gt "$limit" ]; then
      failc "$name still accepts the deleted key ${REFUSED_WITHIN}s after the delete (verify $v, forward-auth $f)"
      return
    fi
    sleep 0.05
  done
}
for i in 1 2 3; do refused_by "keygate-$i" "${REPLICA[$i]}"; done
ok=0
for n in 1 2 3 4 5 6; do [ "$(verify_code "$NGINX")" = NOT_FOUND ] && ok=$((ok + 1)); done
check 6 "$ok" "verify through nginx, 6 times: NOT_FOUND"
check 403 "$(status_of -H "@$WORK/basic" "$NGINX/app/hello")" "nginx /app/ with the deleted key"
check 404 "$(status_of -X DELETE -H "@$WORK/bearer" "${REPLICA[3]}/apikeys/$key/jwt")" "delete it again on keygate-3"

# ---- 5. nothing secret in any log -----------------------------------------------------------------
for s in keygate-1 keygate-2 keygate-3 nginx; do
  podman logs "${PROJECT}_${s}_1" >"$WORK/logs" 2>&1 || true
  if grep -qF -f "$WORK/secret" "$WORK/logs" || grep -qF -f "$WORK/limited_secret" "$WORK/logs" \
    || grep -qF -f "$WORK/token" "$WORK/logs"; then
    failc "$s: a key's secret or the token is in the log"
  else
    pass "$s: no key's secret and no token in the log"
  fi
done
[ "$FAILED" = 0 ]
