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
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
