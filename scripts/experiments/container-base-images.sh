#!/usr/bin/env bash
# Local stand-ins for the base images the Dockerfile names, on a machine that reaches only Debian's
# mirror and the npm registry (the sibling of shared/tools/local-images.sh, which must run first: it
# installs podman and makes the bookworm and oven/bun:1.4 stand-ins). As root. Makes:
#   docker.io/library/debian:trixie-slim     debootstrap --variant=minbase trixie
#   docker.io/oven/bun:1.4.4                 the oven/bun:1.4 stand-in, checked to hold Bun 1.4.4
#   gcr.io/distroless/cc-debian13            only what distroless/cc holds, copied from that trixie:
#                                            glibc, libgcc, libstdc++, CA certificates, tzdata,
#                                            /etc/passwd with root and nonroot (65532); no shell
# Usage:  sudo bash scripts/experiments/container-base-images.sh   (with CONTAINERS_CONF=/tmp/ctr/containers.conf)
# Real users pull the real images; these are for building and testing the Dockerfile here.
set -euo pipefail
W=${W:-/tmp/ctr}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$W/containers.conf}
command -v podman >/dev/null && command -v debootstrap >/dev/null \
  || { echo "run shared/tools/local-images.sh first (it installs podman and debootstrap)" >&2; exit 1; }
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)

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
  version=$(podman run --rm docker.io/oven/bun:1.4 bun --version)
  [ "$version" = 1.4.4 ] || { echo "the oven/bun:1.4 stand-in holds Bun $version, not 1.4.4" >&2; exit 1; }
  podman tag docker.io/oven/bun:1.4 "$BUN"
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
