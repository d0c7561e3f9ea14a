#!/usr/bin/env bash
# Builds the Lockstep runtime image from a host-built `lockstep` binary plus
# the shared libraries it links (found with ldd), on top of the local base
# image. Builds the base image first if it is missing. No registry needed.
#
#   docker/build-runtime-image.sh [--bin PATH] [--tag lockstep/runtime:latest]
#                                 [--base lockstep/bookworm-base:latest]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCKSTEP_BIN:-}
TAG=${LOCKSTEP_RUNTIME_TAG:-lockstep/runtime:latest}
BASE=${LOCKSTEP_BASE_TAG:-lockstep/bookworm-base:latest}
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "build-runtime-image: unknown argument: $1" >&2; exit 2 ;;
  esac
done
die() { echo "build-runtime-image: $*" >&2; exit 1; }

if [ -z "$BIN" ]; then
  for c in "$ROOT"/build-mh/cli/lockstep "$ROOT"/build/cli/lockstep; do
    [ -x "$c" ] && { BIN=$c; break; }
  done
fi
[ -n "$BIN" ] && [ -x "$BIN" ] || die "no lockstep binary: build it (cmake --build BUILD --target lockstep) or pass --bin"

LOCKSTEP_BASE_TAG=$BASE "$ROOT/docker/build-base-image.sh" --tag "$BASE"

CTX=$(mktemp -d /var/tmp/lockstep-ctx.XXXXXX)
trap 'rm -rf "$CTX"' EXIT
mkdir -p "$CTX/bin" "$CTX/lib"
cp "$BIN" "$CTX/bin/lockstep"
cp "$ROOT/docker/Dockerfile" "$CTX/Dockerfile"

# Every resolved dependency except the glibc core, which the base image
# (the same Debian release as the build host) already provides.
ldd "$BIN" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*) continue ;;
  esac
  cp -L "$lib" "$CTX/lib/"
done
if ldd "$BIN" | grep -q 'not found'; then die "unresolved libraries: $(ldd "$BIN" | grep 'not found')"; fi
echo "build-runtime-image: $(ls "$CTX/lib" | wc -l) libraries staged: $(ls "$CTX/lib" | tr '\n' ' ')"

# The classic builder resolves FROM against local images only when present,
# so nothing is pulled.
DOCKER_BUILDKIT=0 docker build -q --build-arg BASE_IMAGE="$BASE" -t "$TAG" "$CTX" >"$CTX/build.log" 2>&1 \
  || { grep -v -i -e deprecated -e buildkit -e '^ *$' "$CTX/build.log" >&2; die "docker build failed"; }
docker image inspect "$TAG" --format 'build-runtime-image: {{.RepoTags}} {{.Size}} bytes'
