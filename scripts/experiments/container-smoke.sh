#!/usr/bin/env bash
# Container smoke test: build the image from ./Dockerfile, run it, and check what a deployment relies on:
# health, token minting inside the container, create/verify/delete over HTTP, a non-root PID 1, the image's
# HEALTHCHECK, a clean exit 0 on SIGTERM within the stop timeout, and keys surviving a new container on
# the same volume. Prints timings and how much the keygate layers add to the base image.
#
# Usage:  scripts/experiments/container-smoke.sh [--remove-image] [--no-build]
#   ENGINE=podman|docker   container engine (default podman)
#   IMAGE=keygate:smoke    tag to build and test
#   BUILD_ARGS="..."       extra build flags; with podman the default adds --pull=never (local base images)
#   BASE_IMAGE=...         the runtime base, to tell what keygate's layers add (default debian:trixie-slim)
# The build passes REVISION (git rev-parse HEAD), CREATED (now) and, when the checkout has an origin
# remote, SOURCE; the image's labels must carry them.
#   REMOVE_IMAGE=1         also remove the image at the end (same as --remove-image)
#
# Everything it creates (containers, the volume, with --remove-image the image) is removed on exit,
# also on failure. Ports are published on 127.0.0.1 only, on a free port the engine picks.
# Every wait is bounded, so the script always ends by itself.
set -euo pipefail

ENGINE=${ENGINE:-podman}
IMAGE=${IMAGE:-keygate:smoke}
REMOVE_IMAGE=${REMOVE_IMAGE:-0}
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --remove-image) REMOVE_IMAGE=1 ;;
    --no-build) BUILD=0 ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
if [ "$ENGINE" = podman ]; then
  # --format docker: the default OCI format silently drops HEALTHCHECK.
  BUILD_ARGS=${BUILD_ARGS:---format docker --pull=never}
else
  BUILD_ARGS=${BUILD_ARGS:-}
fi
BASE_IMAGE=${BASE_IMAGE:-docker.io/library/debian:trixie-slim}
STOP_TIMEOUT=10 # seconds the engine waits after SIGTERM before SIGKILL
HEALTHY_WITHIN=30 # seconds a fresh container may take to answer /health

cd "$(dirname "$0")/../.."
command -v "$ENGINE" >/dev/null || { echo "smoke: $ENGINE is not installed" >&2; exit 1; }
command -v curl >/dev/null || { echo "smoke: curl is not installed" >&2; exit 1; }

RUN_ID="ks$$-$(date +%s)"
VOLUME="keygate-smoke-$RUN_ID"
CONTAINERS=()
VOLUME_CREATED=0
WORK=$(mktemp -d)
chmod 700 "$WORK" # holds the transient token and key secret; removed on exit
SUMMARY=()

now_ms() { date +%s%3N; }
log() { printf 'smoke: %s\n' "$*"; }
note() { SUMMARY+=("$*"); log "$*"; }
fail() {
  printf 'smoke: FAIL: %s\n' "$*" >&2
  exit 1
}

cleanup() {
  local status=$?
  set +e
  for ctr in "${CONTAINERS[@]}"; do
    if [ "$status" -ne 0 ]; then
      echo "---- last log lines of $ctr ----" >&2
      "$ENGINE" logs --tail 30 "$ctr" >&2 2>&1
    fi
    "$ENGINE" rm -f -t 0 "$ctr" >/dev/null 2>&1 || "$ENGINE" rm -f "$ctr" >/dev/null 2>&1
  done
  [ "$VOLUME_CREATED" = 1 ] && "$ENGINE" volume rm -f "$VOLUME" >/dev/null 2>&1
  [ "$REMOVE_IMAGE" = 1 ] && "$ENGINE" rmi -f "$IMAGE" >/dev/null 2>&1
  rm -rf "$WORK"
  if [ "$status" -eq 0 ]; then
    echo
    echo "== container smoke: PASS ($ENGINE, $IMAGE) =="
    printf '  %s\n' "${SUMMARY[@]}"
  else
    echo "== container smoke: FAILED (exit $status); removed what it created ==" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# HTTP helpers. Credentials go to curl through header files in $WORK, never on its command line.
# status METHOD PATH [auth-header-file] [json-body] -> prints the status code, body in $WORK/body
http() {
  local method=$1 path=$2 auth=${3:-} body=${4:-}
  local args=(-sS -o "$WORK/body" -w '%{http_code}' --max-time 5 -X "$method")
  [ -n "$auth" ] && args+=(-H "@$auth")
  [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data "$body")
  curl "${args[@]}" "$BASE_URL$path" || true # on a connection error curl's -w prints 000
}
expect() { # expect WANT GOT WHAT
  [ "$2" = "$1" ] || fail "$3: expected HTTP $1, got $2: $(head -c 300 "$WORK/body" 2>/dev/null)"
  log "$3 -> $2"
}
json_field() { # json_field NAME < body : a top-level-or-nested string field, without jq
  sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"
}

# start_container NAME -> sets BASE_URL; waits until /health answers 200, prints ms to healthy
start_container() {
  local name=$1 t0 port deadline
  shift # the rest: extra run flags
  t0=$(now_ms)
  # --health-interval only matters where the engine runs health timers (docker; podman needs systemd).
  local health_args=()
  [ "$ENGINE" = docker ] && health_args=(--health-interval 2s)
  CONTAINERS+=("$name") # before run: a container that was created but failed to start is removed too
  eng run -d --name "$name" -p 127.0.0.1::3000 -v "$VOLUME:/data" \
    "${health_args[@]}" "$@" "$IMAGE" >/dev/null
  port=$("$ENGINE" port "$name" 3000/tcp | head -n1 | sed 's/.*://')
  [ -n "$port" ] || fail "no published port for $name"
  BASE_URL="http://127.0.0.1:$port"
  deadline=$(($(date +%s) + HEALTHY_WITHIN))
  while :; do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$BASE_URL/health" || true)" = 200 ]; then
      break
    fi
    [ "$("$ENGINE" inspect --format '{{.State.Running}}' "$name")" = true ] \
      || fail "$name exited before it answered /health"
    [ "$(date +%s)" -lt "$deadline" ] || fail "$name did not answer /health within ${HEALTHY_WITHIN}s"
    sleep 0.1
  done
  STARTED_MS=$(($(now_ms) - t0))
}

# stop_container NAME -> SIGTERM via the engine's stop; checks exit 0 within STOP_TIMEOUT
stop_container() {
  local name=$1 t0 code
  t0=$(now_ms)
  timeout $((STOP_TIMEOUT + 20)) "$ENGINE" stop -t "$STOP_TIMEOUT" "$name" >/dev/null 2>"$WORK/stderr" \
    || { cat "$WORK/stderr" >&2; fail "$ENGINE stop $name failed"; }
  STOPPED_MS=$(($(now_ms) - t0))
  code=$("$ENGINE" inspect --format '{{.State.ExitCode}}' "$name")
  [ "$code" = 0 ] || fail "$name exited with code $code after SIGTERM (137 means it was killed)"
  [ "$STOPPED_MS" -lt $((STOP_TIMEOUT * 1000)) ] \
    || fail "$name took ${STOPPED_MS} ms to stop; the limit is ${STOP_TIMEOUT}s"
  "$ENGINE" logs "$name" 2>&1 | grep -q '"stopped"' || fail "$name did not log that it stopped cleanly"
}

# Podman without systemd logs an error about health-check timers on run/stop/rm; drop just that noise.
eng() {
  local rc=0
  "$ENGINE" "$@" 2>"$WORK/stderr" || rc=$?
  grep -v -e 'systemd connection' -e '/run/systemd/private' "$WORK/stderr" >&2 || true
  return "$rc"
}

# An idle HTTP/1.1 keep-alive connection, as a load balancer holds: SIGTERM must not wait for it.
open_idle_connection() {
  local line
  exec {IDLE_FD}<>"/dev/tcp/127.0.0.1/${BASE_URL##*:}"
  printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n' >&"$IDLE_FD"
  IFS= read -r -t 5 -u "$IDLE_FD" line || fail "no answer on the keep-alive connection"
  [[ "$line" == "HTTP/1.1 200"* ]] || fail "keep-alive request answered: $line"
}

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1000000 }'; }

# ---- 1. build -------------------------------------------------------------------------------------
if [ "$BUILD" = 1 ]; then
  log "building $IMAGE with $ENGINE build $BUILD_ARGS"
  t0=$(now_ms)
  # shellcheck disable=SC2086 # BUILD_ARGS is a list of flags
  REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  label_args=(--build-arg "REVISION=$REVISION" --build-arg "CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
  source_url=$(git remote get-url origin 2>/dev/null || true)
  [ -n "$source_url" ] && label_args+=(--build-arg "SOURCE=$source_url")
  timeout 1800 "$ENGINE" build $BUILD_ARGS "${label_args[@]}" -t "$IMAGE" . >"$WORK/build.log" 2>&1 \
    || { tail -n 40 "$WORK/build.log" >&2; fail "image build failed"; }
  note "build: $(($(now_ms) - t0)) ms"
else
  "$ENGINE" image inspect "$IMAGE" >/dev/null 2>&1 || fail "--no-build, but there is no image $IMAGE"
fi

# ---- 2. image metadata ----------------------------------------------------------------------------
size=$("$ENGINE" image inspect --format '{{.Size}}' "$IMAGE")
if base_size=$("$ENGINE" image inspect --format '{{.Size}}' "$BASE_IMAGE" 2>/dev/null); then
  note "image size: $(mb "$size") total; base $BASE_IMAGE $(mb "$base_size"); keygate layers add $(mb $((size - base_size)))"
else
  note "image size: $(mb "$size") (base $BASE_IMAGE not present locally, so no difference computed)"
fi
healthcheck=$("$ENGINE" image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE" 2>/dev/null || true)
case "$healthcheck" in
  *keygate*healthcheck*) log "image HEALTHCHECK: $healthcheck" ;;
  *) fail "the image has no HEALTHCHECK running keygate healthcheck (got: ${healthcheck:-nothing}); podman needs --format docker" ;;
esac
user=$("$ENGINE" image inspect --format '{{.Config.User}}' "$IMAGE")
version_label=$("$ENGINE" image inspect --format '{{index .Config.Labels "org.opencontainers.image.version"}}' "$IMAGE")
case "$version_label" in "" | "<no value>") fail "no org.opencontainers.image.version label" ;; esac
label() { "$ENGINE" image inspect --format "{{index .Config.Labels \"org.opencontainers.image.$1\"}}" "$IMAGE"; }
if [ "$BUILD" = 1 ]; then
  [ "$(label revision)" = "$REVISION" ] || fail "revision label is '$(label revision)', built from $REVISION"
  [[ "$(label created)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T ]] || fail "created label is '$(label created)'"
  image_version=$(eng run --rm "$IMAGE" --version)
  [[ "$image_version" == *"(commit $REVISION,"* ]] || fail "keygate --version in the image says: $image_version"
  note "keygate --version in the image: $image_version"
fi
note "labels: version $version_label, revision $(label revision), created $(label created), source '$(label source)'"
log "image user $user, version label $version_label"

# ---- 3. first container ---------------------------------------------------------------------------
"$ENGINE" volume create "$VOLUME" >/dev/null
VOLUME_CREATED=1
CTR1="keygate-smoke-$RUN_ID-a"
start_container "$CTR1"
note "start -> healthy: $STARTED_MS ms (fresh volume: migrations + jwt-secret created)"
log "serving on $BASE_URL"

# keygate runs as PID 1 and not as root.
uid=$("$ENGINE" exec "$CTR1" id -u)
[ "$uid" != 0 ] || fail "$ENGINE exec id -u says root"
pid1=$("$ENGINE" exec "$CTR1" cat /proc/1/status)
pid1_name=$(sed -n 's/^Name:[[:space:]]*//p' <<<"$pid1")
pid1_uid=$(sed -n 's/^Uid:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$pid1")
[ "$pid1_name" = keygate ] || fail "PID 1 is $pid1_name, not keygate (SIGTERM would not reach it)"
[ "$pid1_uid" != 0 ] || fail "PID 1 runs as root"
if [ "$ENGINE" = podman ]; then
  top=$("$ENGINE" top "$CTR1" user huser pid comm | tail -n +2 | tr -s ' ')
  log "podman top: $top"
fi
note "non-root: exec id -u = $uid; PID 1 = $pid1_name with uid $pid1_uid"
perms=$("$ENGINE" exec "$CTR1" stat -c '%n %a %u:%g' /data /data/jwt-secret /data/keygate.db)
grep -q '^/data/jwt-secret 600 ' <<<"$perms" || fail "jwt-secret is not mode 0600: $perms"
log "volume: $(tr '\n' ';' <<<"$perms")"

# Mint a token inside the container (it reads /data/jwt-secret, as the server does).
"$ENGINE" exec "$CTR1" keygate token --sub 1 >"$WORK/token"
[ -s "$WORK/token" ] || fail "keygate token printed nothing"
printf 'Authorization: Bearer %s\n' "$(cat "$WORK/token")" >"$WORK/bearer"

code=$(http POST /apikeys/jwt "$WORK/bearer" '{"name":"smoke-temp","level":1,"expiresIn":3600}')
expect 201 "$code" "POST /apikeys/jwt (temporary key)"
temp_key=$(json_field key <"$WORK/body")
[[ "$temp_key" == kg_* ]] || fail "no key in the create response"
code=$(http DELETE "/apikeys/$temp_key/jwt" "$WORK/bearer")
expect 204 "$code" "DELETE /apikeys/<temporary>/jwt"
code=$(http DELETE "/apikeys/$temp_key/jwt" "$WORK/bearer")
expect 404 "$code" "DELETE it again"

code=$(http POST /apikeys/jwt "$WORK/bearer" '{"name":"smoke-kept","level":1,"expiresIn":3600}')
expect 201 "$code" "POST /apikeys/jwt (key kept across containers)"
kept_key=$(json_field key <"$WORK/body")
json_field secret <"$WORK/body" >"$WORK/secret"
if [[ "$kept_key" != kg_* ]] || [ ! -s "$WORK/secret" ]; then fail "no key/secret in the create response"; fi
printf 'Authorization: Basic %s\n' \
  "$(printf '%s:%s' "$kept_key" "$(cat "$WORK/secret")" | base64 | tr -d '\n')" >"$WORK/basic"
printf '{"key":"%s","secret":"%s"}' "$kept_key" "$(cat "$WORK/secret")" >"$WORK/verify.json"
verify_code() { # verify_code -> the verify answer's code (VALID, NOT_FOUND, ...), or "HTTP <status>"
  local code
  code=$(http POST /apikeys/verify "" "@$WORK/verify.json")
  if [ "$code" = 200 ]; then json_field code <"$WORK/body"; else echo "HTTP $code"; fi
}
[ "$(verify_code)" = VALID ] || fail "verify of the new key: $(head -c 300 "$WORK/body")"
log "verify of the new key -> VALID"

# The image's HEALTHCHECK, run by hand (podman runs health timers only with systemd).
if [ "$ENGINE" = podman ]; then
  hc_rc=0
  hc_out=$("$ENGINE" healthcheck run "$CTR1" 2>&1) || hc_rc=$?
  hc_out=$(grep -v systemd <<<"$hc_out" | tr '\n' ' ' | sed 's/ *$//' || true)
  [ "$hc_rc" = 0 ] || fail "podman healthcheck run exited $hc_rc: $hc_out"
  status=$("$ENGINE" inspect --format '{{.State.Health.Status}}' "$CTR1" 2>/dev/null \
    || "$ENGINE" inspect --format '{{.State.Healthcheck.Status}}' "$CTR1")
  [ "$status" = healthy ] || fail "health status after podman healthcheck run is '$status'"
  note "healthcheck: podman healthcheck run -> exit 0${hc_out:+ ($hc_out)}; inspect says $status"
else
  deadline=$(($(date +%s) + 30))
  until [ "$("$ENGINE" inspect --format '{{.State.Health.Status}}' "$CTR1")" = healthy ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "docker never reported the container healthy"
    sleep 1
  done
  note "healthcheck: docker reports healthy"
fi
"$ENGINE" exec "$CTR1" keygate healthcheck || fail "keygate healthcheck inside the container failed"

# Nothing secret in the logs.
"$ENGINE" logs "$CTR1" >"$WORK/logs" 2>&1
if grep -qF -f "$WORK/secret" "$WORK/logs" || grep -qF -f "$WORK/token" "$WORK/logs"; then
  fail "a key secret or the token appears in the container logs"
fi

# SIGTERM: drain, close the database, exit 0 well inside the stop timeout, even with an idle
# keep-alive connection open.
open_idle_connection
stop_container "$CTR1"
exec {IDLE_FD}>&-
note "SIGTERM -> exit: $STOPPED_MS ms, exit code 0 (limit ${STOP_TIMEOUT}s; an idle keep-alive connection was open)"

# ---- 4. a new container on the same volume --------------------------------------------------------
# Hardened this time: read-only root filesystem, no capabilities, no privilege escalation.
CTR2="keygate-smoke-$RUN_ID-b"
start_container "$CTR2" --read-only --cap-drop=ALL --security-opt no-new-privileges
note "start -> healthy: $STARTED_MS ms (second container: same volume, --read-only, --cap-drop=ALL)"
# The old token still verifies: the jwt-secret file survived. An unknown key is 404 (403 = bad token).
code=$(http DELETE /apikeys/kg_000000000000000000000000/jwt "$WORK/bearer")
expect 404 "$code" "old token on the new container (unknown key)"
# The kept key verifies, authenticates with its secret and deletes itself: the data survived.
[ "$(verify_code)" = VALID ] || fail "verify of the kept key on the new container: $(head -c 300 "$WORK/body")"
log "verify of the kept key on the new container -> VALID"
code=$(http DELETE "/apikeys/$kept_key/key" "$WORK/basic")
expect 204 "$code" "DELETE /apikeys/<kept>/key with key:secret on the new container"
code=$(http DELETE "/apikeys/$kept_key/key" "$WORK/basic")
expect 403 "$code" "the deleted key no longer authenticates"
[ "$(verify_code)" = NOT_FOUND ] || fail "verify of the deleted key: $(head -c 300 "$WORK/body")"
log "verify of the deleted key -> NOT_FOUND"
note "persistence: key created in container a authenticated in container b (204); token still valid"
stop_container "$CTR2"
note "SIGTERM -> exit (second container): $STOPPED_MS ms, exit code 0"
