#!/usr/bin/env bash
# Builds everything (Release, -ffp-contract=off) and runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
# LOCKSTEP_FAULT_INJECTION adds the test-only fault worker and its tests
# (the shipped lockstep is the same either way).
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_FAULT_INJECTION=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" --timeout 900
