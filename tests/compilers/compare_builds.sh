#!/usr/bin/env bash
# compare_builds.sh SOURCE_DIR OTHER_BUILD_DIR MAIN_LOCKSTEP SHARED_DIR
# Builds lockstep with clang++ -O0 (CMake Debug) into OTHER_BUILD_DIR, checks
# it has no FMA instruction, and requires its --json output to equal the main
# build's for every conformance case and a synthetic model, with the scalar
# and the dispatched kernels. Exit 77 (skipped) when clang++ is absent.
set -euo pipefail
src=$1 other=$2 main=$3 shared=$4
command -v clang++ >/dev/null || { echo "SKIPPED: clang++ is not installed"; exit 77; }

CC=clang CXX=clang++ cmake -S "$src" -B "$other" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DLOCKSTEP_BUILD_TESTS=OFF -DLOCKSTEP_BUILD_BENCH=OFF >/dev/null
cmake --build "$other" --target lockstep -j"$(nproc)" >/dev/null
alt="$other/cli/lockstep"

if objdump -d --no-show-raw-insn "$alt" | grep -qE '\sv?f(n)?m(add|sub)[0-9a-z]*\s'; then
  echo "FAIL: FMA instruction in the clang -O0 binary"; exit 1
fi

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$main" make-model "$work/syn" --seed 11 --hidden 48 --layers 3 --heads 6 --kv-heads 2 \
  --inter 96 --vocab 300 --bias --untied >/dev/null

cases=("$work/syn|--ids 3,1,4,1,5,9 --gen 10 --window 4 --evict 1:2@3")
vectors="$shared/fixtures/conformance/vectors.json"
if [ -f "$vectors" ]; then
  while IFS= read -r line; do cases+=("$line"); done < <(python3 - "$vectors" "$shared" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for c in doc["cases"]:
    print(f'{sys.argv[2]}/fixtures/conformance/{c["model"]}|' + " ".join(
        a if " " not in a else a.replace(" ", "\x01") for a in c["args"]))
PY
)
fi

passed=0 failed=0
for c in "${cases[@]}"; do
  model=${c%%|*}; read -r -a args <<<"${c#*|}"
  args=("${args[@]//$'\x01'/ }")
  for isa in scalar auto; do
    a=$("$main" run --model "$model" "${args[@]}" --isa "$isa" --json)
    b=$("$alt" run --model "$model" "${args[@]}" --isa "$isa" --json)
    if [ "$a" = "$b" ]; then passed=$((passed + 1)); else
      failed=$((failed + 1)); echo "DIFFER ($isa): $model ${args[*]}"; echo " gcc:   $a"; echo " clang: $b"
    fi
  done
done
echo "clang -O0 vs main build: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
