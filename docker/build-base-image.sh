#!/usr/bin/env bash
# Builds a minimal Debian bookworm base image without any image registry:
# debootstrap (minbase) into a temporary folder, then `docker import`.
# Cached: does nothing when the tag already exists (use --force to rebuild).
#
#   docker/build-base-image.sh [--tag lockstep/bookworm-base:latest] [--mirror URL] [--force]
#
# The mirror defaults to the first deb.debian.org-style URI in the host's apt
# sources, so the image pulls packages from the same place the host does.
set -euo pipefail

TAG=${LOCKSTEP_BASE_TAG:-lockstep/bookworm-base:latest}
SUITE=bookworm
MIRROR=""
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --mirror) MIRROR=$2; shift 2 ;;
    --force) FORCE=1; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "build-base-image: unknown argument: $1" >&2; exit 2 ;;
  esac
done

die() { echo "build-base-image: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker is not installed"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"

if [ "$FORCE" -eq 0 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "build-base-image: $TAG already exists (cached); --force rebuilds it"
  exit 0
fi

if [ -z "$MIRROR" ]; then
  # deb822 (.sources) "URIs:" lines first, then one-line "deb URL suite" entries.
  MIRROR=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list 2>/dev/null \
             | awk '{print $2}' | grep -v security | head -n1 || true)
  if [ -z "$MIRROR" ]; then
    MIRROR=$(grep -hsE '^deb[[:space:]]+https?://[^ ]*/debian/?[[:space:]]+bookworm[[:space:]]' \
               /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
             | awk '{print $2}' | head -n1 || true)
  fi
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi

ROOTFS=$(mktemp -d /var/tmp/lockstep-rootfs.XXXXXX)
cleanup() { rm -rf --one-file-system "$ROOTFS"; }
trap cleanup EXIT

echo "build-base-image: debootstrap --variant=minbase $SUITE from $MIRROR"
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$ROOTFS" "$MIRROR" \
  > "$ROOTFS.log" 2>&1 || { tail -n 30 "$ROOTFS.log" >&2; rm -f "$ROOTFS.log"; die "debootstrap failed"; }
rm -f "$ROOTFS.log"

# Keep the image small and deterministic-ish: drop apt lists and caches.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin \
       "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/tmp/*
# The same sources as bootstrapped, so `apt-get install` works in derived images.
printf 'deb %s %s main\ndeb %s %s-updates main\n' "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" \
  > "$ROOTFS/etc/apt/sources.list"

echo "build-base-image: importing as $TAG"
tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  - "$TAG" >/dev/null
docker image inspect "$TAG" --format 'build-base-image: {{.RepoTags}} {{.Size}} bytes'
