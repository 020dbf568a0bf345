#!/usr/bin/env bash
# Make the container engines usable on a fresh Debian 12 machine, as root (idempotent: a second
# run changes nothing and takes seconds). Called by .ci/run before the tests.
#
# 1. docker.io, runc, debootstrap and podman from Debian's archive (no other registry is
#    reachable on the CI machines);
# 2. dockerd started in the background with --bridge=none when `docker info` fails, then
#    waited for (builds use --network host to fetch packages and --network none to compile);
# 3. the local Debian base image archwheel/debian:bookworm (debootstrap --variant=minbase +
#    docker import), exactly what `archwheel base-image` makes, unless it exists already.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[setup-engine] %s\n' "$*"; }

CACHE="${ARCHWHEEL_CACHE:-$PWD/.cache}"
SUITE="${ARCHWHEEL_BASE_SUITE:-bookworm}"
# Empty: debootstrap's own default mirror; a company mirror via ARCHWHEEL_DEBIAN_MIRROR.
MIRROR="${ARCHWHEEL_DEBIAN_MIRROR:-}"
TAG="archwheel/debian:$SUITE"
mkdir -p "$CACHE"

need=()
for pkg in docker.io runc debootstrap podman tar; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd --bridge=none (log: $CACHE/dockerd.log)"
  (setsid dockerd --bridge=none >"$CACHE/dockerd.log" 2>&1 &)
  for _ in $(seq 1 120); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    log "dockerd did not answer within 120 s; its log ends with:"
    tail -n 20 "$CACHE/dockerd.log" >&2 || true
    exit 1
  fi
fi
log "docker $(docker version --format '{{.Server.Version}}') answers"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG exists: $(docker image inspect --format '{{.Id}}' "$TAG")"
else
  log "making $TAG with debootstrap (about a minute)"
  rootfs=$(mktemp -d "${TMPDIR:-/tmp}/archwheel-rootfs-XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase "$SUITE" "$rootfs/rootfs" ${MIRROR:+"$MIRROR"} >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
  rm -f "$rootfs"/rootfs/var/cache/apt/archives/*.deb "$rootfs"/rootfs/var/lib/apt/lists/* 2>/dev/null || true
  # The same image `archwheel base-image` makes (src/archwheel/wheelbuild/images/baseimage.py).
  tar --numeric-owner --sort=name -C "$rootfs/rootfs" -c . | docker import \
    --change "LABEL org.archwheel.base=debootstrap-$SUITE" \
    --change "ENV LANG=C.UTF-8" \
    --change 'CMD ["/bin/bash"]' - "$TAG" >/dev/null
  log "$TAG made: $(docker image inspect --format '{{.Id}}' "$TAG")"
fi
