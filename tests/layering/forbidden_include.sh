#!/bin/bash
# forbidden_include.sh CMAKE SOURCE_DIR FOLDER BAD_INCLUDE
# Copies SOURCE_DIR/FOLDER, checks it passes cmake/layering.cmake, adds a
# source including BAD_INCLUDE and checks the same check now fails naming
# that file. Exit 0 only if both hold.
set -u
cmake_bin=$1 src=$2 folder=$3 bad=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/copy"
cp "$src/$folder"/*.h "$src/$folder"/*.cc "$tmp/copy/" 2>/dev/null
check() {
  "$cmake_bin" -DFOLDER="$folder" -DDIR="$tmp/copy" -P "$src/cmake/layering.cmake" 2>&1
}
if ! out=$(check); then
  echo "FAIL: the unmodified $folder/ does not pass the layering check:"; echo "$out"; exit 1
fi
printf '#include "%s"\n' "$bad" > "$tmp/copy/forbidden_include.cc"
if out=$(check); then
  echo "FAIL: $folder/ including $bad passed the layering check"; exit 1
fi
if ! grep -q "forbidden_include.cc: $folder/ must not include" <<<"$out"; then
  echo "FAIL: the check failed without naming the offending file:"; echo "$out"; exit 1
fi
echo "ok: $folder/ including $bad fails the build:"; echo "$out"
