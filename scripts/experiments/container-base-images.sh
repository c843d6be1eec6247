#!/usr/bin/env bash
# Local stand-ins for the base images keygate's Dockerfile and scripts/experiments/compose-standins/ name, on a
# machine that reaches only Debian's mirror and the npm registry. As root. First makes a container
# engine usable: rootful podman with runc (crun refuses hybrid cgroups) and debootstrap, installed
# from Debian when missing, and $W/containers.conf (default /tmp/ctr). Then makes:
#   docker.io/library/debian:bookworm-slim   debootstrap --variant=minbase bookworm (the host's CA
#                                            bundle baked in, so installs inside builds pass a TLS proxy)
#   docker.io/library/debian:trixie-slim     debootstrap --variant=minbase trixie
#   docker.io/oven/bun:1.4.4                 bookworm plus the host's bun binary, checked to be 1.4.4
#   gcr.io/distroless/cc-debian13            only what distroless/cc holds, copied from that trixie:
#                                            glibc, libgcc, libstdc++, CA certificates, tzdata,
#                                            /etc/passwd with root and nonroot (65532); no shell
# Usage:  sudo bash scripts/experiments/container-base-images.sh   then   export CONTAINERS_CONF=/tmp/ctr/containers.conf
# Real users pull the real images; these are for building and testing the Dockerfile here.
set -euo pipefail
W=${W:-/tmp/ctr}
mkdir -p "$W"
export DEBIAN_FRONTEND=noninteractive
command -v podman >/dev/null && command -v runc >/dev/null && command -v debootstrap >/dev/null \
  || { apt-get update -qq && apt-get install -y -qq podman runc debootstrap >/dev/null; }

# root lacks CAP_SYS_RESOURCE for podman's default rlimits here, and crun refuses hybrid cgroups.
if [ ! -s "$W/containers.conf" ]; then
  cat >"$W/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
fi
export CONTAINERS_CONF=${CONTAINERS_CONF:-$W/containers.conf}
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)

BOOKWORM=docker.io/library/debian:bookworm-slim
if ! podman image exists "$BOOKWORM"; then
  [ -x "$W/rootfs-bookworm/bin/sh" ] || debootstrap --variant=minbase bookworm "$W/rootfs-bookworm" "$mirror" >/dev/null
  mkdir -p "$W/rootfs-bookworm/usr/local/share/ca-certificates" "$W/rootfs-bookworm/etc/ssl/certs"
  cp /usr/local/share/ca-certificates/*.crt "$W/rootfs-bookworm/usr/local/share/ca-certificates/" 2>/dev/null || true
  cp /etc/ssl/certs/ca-certificates.crt "$W/rootfs-bookworm/etc/ssl/certs/ca-certificates.crt"
  tar -C "$W/rootfs-bookworm" -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["bash"]' - "$BOOKWORM" >/dev/null
fi

TRIXIE=docker.io/library/debian:trixie-slim
if ! podman image exists "$TRIXIE"; then
  [ -x "$W/rootfs-trixie/bin/sh" ] || debootstrap --variant=minbase trixie "$W/rootfs-trixie" "$mirror" >/dev/null
  # slim: Debian's -slim images drop documentation, man pages and most locales.
  rm -rf "$W/rootfs-trixie"/usr/share/{doc,man,info}/* "$W/rootfs-trixie"/var/lib/apt/lists/* \
    "$W/rootfs-trixie"/var/cache/apt/*.bin
  mkdir -p "$W/rootfs-trixie/usr/local/share/ca-certificates" "$W/rootfs-trixie/etc/ssl/certs"
  cp /usr/local/share/ca-certificates/*.crt "$W/rootfs-trixie/usr/local/share/ca-certificates/" 2>/dev/null || true
  cp /etc/ssl/certs/ca-certificates.crt "$W/rootfs-trixie/etc/ssl/certs/ca-certificates.crt"
  tar -C "$W/rootfs-trixie" -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$TRIXIE" >/dev/null
fi

BUN=docker.io/oven/bun:1.4.4
if ! podman image exists "$BUN"; then
  version=$(bun --version)
  [ "$version" = 1.4.4 ] || { echo "the host's bun is $version, not 1.4.4: install bun@1.4.4 first" >&2; exit 1; }
  mkdir -p "$W/bunbase"
  cp -L "$(command -v bun)" "$W/bunbase/bun"
  cat >"$W/bunbase/Dockerfile" <<'DF'
FROM docker.io/library/debian:bookworm-slim
COPY bun /usr/local/bin/bun
RUN ln -s /usr/local/bin/bun /usr/local/bin/bunx && mkdir -p /home/bun/app
WORKDIR /home/bun/app
CMD ["/usr/local/bin/bun"]
DF
  podman build --pull=never -q -t "$BUN" "$W/bunbase" >/dev/null
fi

DISTROLESS=gcr.io/distroless/cc-debian13
if ! podman image exists "$DISTROLESS"; then
  src="$W/rootfs-trixie" dst="$W/rootfs-distroless"
  rm -rf "$dst"
  mkdir -p "$dst"/{etc,tmp,home/nonroot,root,usr/bin,usr/sbin,usr/lib,usr/lib64,usr/share,etc/ssl/certs}
  chmod 1777 "$dst/tmp"
  chown 65532:65532 "$dst/home/nonroot"
  for link in bin sbin lib lib64; do cp -a "$src/$link" "$dst/$link"; done # merged /usr symlinks
  # glibc (libc6), libgcc-s1, libstdc++6: what distroless/cc holds beyond CA certificates and tzdata
  # (it also has libgomp1 and libssl, ~5 MB, which a minbase trixie lacks and keygate does not load).
  for package in libc6 libgcc-s1 libstdc++6; do
    chroot "$src" dpkg -L "$package" 2>/dev/null | while read -r path; do
      if [ -f "$src$path" ] || [ -L "$src$path" ]; then
        mkdir -p "$dst$(dirname "$path")"
        cp -a "$src$path" "$dst$path"
      fi
    done
  done
  cp -a "$src/usr/share/zoneinfo" "$dst/usr/share/zoneinfo"
  cp /etc/ssl/certs/ca-certificates.crt "$dst/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$dst/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$dst/etc/group"
  printf 'hosts: files dns\n' >"$dst/etc/nsswitch.conf"
  cp "$src/etc/os-release" "$dst/etc/os-release"
  tar -C "$dst" -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' - "$DISTROLESS" >/dev/null
fi
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}'
