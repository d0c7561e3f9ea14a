#!/bin/bash
# generators.sh CMAKE SOURCE_DIR WORK_DIR LAUNCHER GENERATOR...
# Configures SOURCE_DIR afresh with each GENERATOR (tests and benchmarks
# off) and builds lockstep_base, whose build runs a layering check (the
# stamp a fresh build directory does not yet have a folder for). Exit 0
# only if every generator configures and builds.
set -u
cmake_bin=$1 src=$2 work=$3 launcher=$4
shift 4
status=0
for gen in "$@"; do
  dir="$work/$(tr ' ' '_' <<<"$gen")"
  rm -rf "$dir"
  if ! out=$("$cmake_bin" -S "$src" -B "$dir" -G "$gen" -DLOCKSTEP_BUILD_TESTS=OFF \
               -DLOCKSTEP_BUILD_BENCH=OFF ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} 2>&1); then
    echo "FAIL: configuring with \"$gen\":"; echo "$out"; status=1; continue
  fi
  if ! out=$("$cmake_bin" --build "$dir" --target lockstep_base 2>&1); then
    echo "FAIL: building lockstep_base with \"$gen\":"; echo "$out"; status=1; continue
  fi
  echo "ok: \"$gen\" configures and builds lockstep_base"
  rm -rf "$dir"
done
exit $status
