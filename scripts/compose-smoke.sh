#!/usr/bin/env bash
# Runs compose.yaml for real with podman-compose on this machine (127.0.0.1 only) and checks:
# a key created on one replica works on every replica and through nginx (API and forward-auth),
# a delete on another replica is refused everywhere within 2 s. Stand-ins for the postgres and nginx
# images are built from Debian's packages (scripts/compose-standins/), under the names compose.yaml
# uses, because this machine reaches no image registry. Always takes the project down again.
# Usage: scripts/compose-smoke.sh   (root; run under `flock /tmp/keygate-load.lock`)
set -euo pipefail
cd "$(dirname "$0")/.."
PROJECT=keygate-smoke
export CONTAINERS_CONF=${CONTAINERS_CONF:-/tmp/ctr/containers.conf}
export BUILDAH_FORMAT=docker # keep the image's HEALTHCHECK

command -v podman-compose >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman-compose >/dev/null; }
if ! podman image exists docker.io/library/debian:bookworm-slim || ! podman image exists docker.io/library/debian:trixie-slim \
  || ! podman image exists docker.io/oven/bun:1.4.4; then
  bash ../shared/tools/local-images.sh >/dev/null
  bash scripts/container-base-images.sh >/dev/null
fi

pass=0 fail=0
check() { # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "PASS  $name"; pass=$((pass + 1)); else echo "FAIL  $name"; fail=$((fail + 1)); fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cleanup() { podman-compose -p "$PROJECT" down -v >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "building images ..."
podman build -q --pull=never -t docker.io/library/postgres:16 scripts/compose-standins/postgres >/dev/null
podman build -q --pull=never -t docker.io/library/nginx:1.27 scripts/compose-standins/nginx >/dev/null
podman build -q --pull=never -t keygate:compose . >/dev/null

KEYGATE_1_PORT=$(free_port) KEYGATE_2_PORT=$(free_port) KEYGATE_3_PORT=$(free_port) NGINX_PORT=$(free_port)
JWT_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')
export KEYGATE_1_PORT KEYGATE_2_PORT KEYGATE_3_PORT NGINX_PORT JWT_SECRET
R1=http://127.0.0.1:$KEYGATE_1_PORT R2=http://127.0.0.1:$KEYGATE_2_PORT R3=http://127.0.0.1:$KEYGATE_3_PORT
NG=http://127.0.0.1:$NGINX_PORT

started=$(date +%s)
podman-compose -p "$PROJECT" up -d >/dev/null 2>&1
for url in "$R1" "$R2" "$R3" "$NG"; do
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200 ]; do
    [ $(( $(date +%s) - started )) -lt 180 ] || { echo "FAIL  $url/health not 200 within 180 s"; podman-compose -p "$PROJECT" logs 2>&1 | tail -30; exit 1; }
    sleep 1
  done
done
echo "up and healthy in $(( $(date +%s) - started )) s: replicas $R1 $R2 $R3, nginx $NG"

TOKEN=$(podman exec "${PROJECT}_keygate-1_1" keygate token --sub 7)
created=$(curl -s -X POST "$R1/apikeys/jwt" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d '{"name":"compose","level":3,"expiresIn":3600}')
KEY=$(jq -r .apikey.key <<<"$created") SECRET=$(jq -r .apikey.secret <<<"$created")
check "create on replica 1: 201 with a key" test "${KEY:0:3}" = kg_

verify() { curl -s -X POST "$1/apikeys/verify" -H 'Content-Type: application/json' \
  -d "{\"key\":\"$KEY\",\"secret\":\"$SECRET\"}" | jq -r .code; }
for r in "$R1" "$R2" "$R3"; do check "verify on $r: VALID" test "$(verify "$r")" = VALID; done
ok=0; for _ in 1 2 3 4 5 6; do [ "$(verify "$NG")" = VALID ] && ok=$((ok + 1)); done
check "verify through nginx, 6 times round-robin: VALID every time" test "$ok" = 6
check "nginx /app/ with the key: the upstream sees user 7, level 3" \
  test "$(curl -s -u "$KEY:$SECRET" -H 'X-Keygate-User-Id: 1' "$NG/app/hello")" = "hello user 7 at level 3"
check "nginx /app/ without a credential: 401" test "$(curl -s -o /dev/null -w '%{http_code}' "$NG/app/hello")" = 401

check "delete on replica 2: 204" test "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$R2/apikeys/$KEY/jwt" -H "Authorization: Bearer $TOKEN")" = 204
refused_everywhere() {
  for r in "$R1" "$R2" "$R3" "$NG"; do [ "$(verify "$r")" = NOT_FOUND ] || return 1; done
  [ "$(curl -s -o /dev/null -w '%{http_code}' -u "$KEY:$SECRET" "$NG/app/hello")" = 403 ]
}
deadline=$(( $(date +%s%N) + 2000000000 )); refused=1
until refused_everywhere; do [ "$(date +%s%N)" -lt "$deadline" ] || { refused=0; break; }; sleep 0.05; done
check "after the delete, every replica and nginx (API and /app/) refuse the key within 2 s" test "$refused" = 1

echo "compose smoke: $pass passed, $fail failed"
[ "$fail" = 0 ]
