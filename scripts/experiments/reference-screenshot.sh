#!/usr/bin/env bash
# Screenshot of the API reference page (/openapi) as served by the compiled binary, taken by a headless
# Chromium that can reach nothing but 127.0.0.1: the page must render from what keygate itself serves.
# Also checks the rendered DOM (the operations are listed) and that Chromium logged no blocked
# resource and no Content-Security-Policy violation.
#
# Usage:  scripts/experiments/reference-screenshot.sh [OUT.png]      (default: reference.png in the current directory)
#   KEYGATE_BIN=path   a compiled keygate to use (default: build one into a temporary directory)
#   CHROMIUM=chromium  the browser (Debian's `chromium` package is installed if missing, as root)
#
# keygate and Chromium are started here and stopped by their PIDs; all waits are bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=$(realpath -m "${1:-reference.png}")
CHROMIUM=${CHROMIUM:-chromium}
if ! command -v "$CHROMIUM" >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "reference-screenshot: chromium is missing; apt-get install chromium as root" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

WORK=$(mktemp -d)
KEYGATE_PID=""
cleanup() {
  local status=$?
  set +e
  if [ -n "$KEYGATE_PID" ]; then kill -TERM "$KEYGATE_PID" 2>/dev/null; wait "$KEYGATE_PID" 2>/dev/null; fi
  [ "$status" -ne 0 ] && { echo "---- keygate log ----" >&2; tail -n 20 "$WORK/keygate.log" >&2; }
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
fail() { echo "reference-screenshot: FAIL: $*" >&2; exit 1; }
say() { echo "reference-screenshot: $*"; }

BIN=${KEYGATE_BIN:-}
if [ -z "$BIN" ]; then
  BIN="$WORK/keygate"
  bun scripts/ci/build.ts "$BIN" >/dev/null
fi
BIN=$(realpath "$BIN")

# From an empty directory: nothing beside the binary (no node_modules) can supply the page's files.
mkdir "$WORK/run"
(cd "$WORK/run" && exec env -i PATH="$PATH" DATABASE_URL=:memory: HOST=127.0.0.1 PORT=0 \
  JWT_SECRET=reference-screenshot-secret-0123456789abcdef "$BIN" serve) >"$WORK/keygate.log" 2>&1 &
KEYGATE_PID=$!
for _ in $(seq 100); do
  grep -q '"msg":"listening"' "$WORK/keygate.log" && break
  kill -0 "$KEYGATE_PID" 2>/dev/null || fail "keygate exited at start"
  sleep 0.1
done
URL=$(sed -n 's/.*"msg":"listening".*"url":"\([^"]*\)".*/\1/p' "$WORK/keygate.log")
[ -n "$URL" ] || fail "keygate did not start within 10 s"
PAGE="${URL%/}/openapi"
case "$PAGE" in http://127.0.0.1:*) ;; *) fail "refusing a page that is not on 127.0.0.1: $PAGE" ;; esac
say "keygate (pid $KEYGATE_PID) serves $PAGE"

# Every host name resolves to nothing and no proxy is used: only the loopback address is reachable.
chromium_flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --no-proxy-server --host-resolver-rules='MAP * ~NOTFOUND, EXCLUDE 127.0.0.1'
  --window-size=1280,1400 --hide-scrollbars --virtual-time-budget=15000
  --enable-logging=stderr --v=0)
run_chromium() { # run_chromium ACTION... : a fresh profile each time; bounded by timeout
  local profile
  profile=$(mktemp -d "$WORK/profile.XXXX")
  timeout 60 "$CHROMIUM" "${chromium_flags[@]}" --user-data-dir="$profile" "$@" "$PAGE"
}
run_chromium --dump-dom >"$WORK/dom.html" 2>"$WORK/chromium-dom.log" || fail "chromium --dump-dom failed"
run_chromium --screenshot="$OUT" >/dev/null 2>"$WORK/chromium-shot.log" || fail "chromium --screenshot failed"
[ -s "$OUT" ] || fail "no screenshot written"

for summary in 'Create an API key (jwt)' 'Delete an API key (key)' '/health'; do
  grep -qF "$summary" "$WORK/dom.html" || fail "the rendered page does not show \"$summary\""
done
if grep -h -i -E 'Content Security Policy|Refused to|ERR_NAME_NOT_RESOLVED|ERR_CONNECTION_REFUSED|net::ERR' \
  "$WORK/chromium-dom.log" "$WORK/chromium-shot.log" >"$WORK/blocked.log"; then
  cat "$WORK/blocked.log" >&2
  fail "Chromium reported blocked resources or CSP violations (above)"
fi
say "rendered: the DOM lists the operations; no CSP violation, nothing fetched beyond 127.0.0.1"
say "screenshot: $OUT ($(stat -c %s "$OUT") bytes)"
