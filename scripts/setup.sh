#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of Lockstep from
# Debian's packages. Safe to re-run: apt-get skips what is already there.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev binutils
  libzmq3-dev cppzmq-dev
  capnproto libcapnp-dev
  libssl-dev
  libboost-dev libboost-system-dev
  libgtest-dev libgmock-dev
  libbenchmark-dev
  nlohmann-json3-dev
  libicu-dev
  libcli11-dev
  libspdlog-dev libfmt-dev
  iproute2 debootstrap python3 python3-requests python3-prometheus-client
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
# The ARM check (tests/arm) cross-builds for aarch64 and runs it under
# qemu-user: the cross toolchain and the :arm64 -dev packages. Skip with
# LOCKSTEP_NO_ARM64=1 (the check then reports itself skipped).
ARM64_PACKAGES=(
  crossbuild-essential-arm64 qemu-user
  libssl-dev:arm64 libicu-dev:arm64 libzmq3-dev:arm64 libcapnp-dev:arm64 cppzmq-dev:arm64
  libboost-dev:arm64 libboost-system-dev:arm64
)

if [ "${LOCKSTEP_NO_ARM64:-0}" != 1 ] && [ "$(dpkg --print-architecture)" = amd64 ]; then
  $SUDO dpkg --add-architecture arm64
  PACKAGES+=("${ARM64_PACKAGES[@]}")
fi

$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
