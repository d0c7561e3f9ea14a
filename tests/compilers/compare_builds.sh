#!/usr/bin/env bash
# compare_builds.sh SOURCE_DIR WORK_DIR MAIN_LOCKSTEP MAIN_PROBE SHARED_DIR
#
# The compiler matrix: builds the numeric core's digest_probe with gcc -O0,
# gcc -O3, clang -O0, clang -O2 and clang -O3 (a tree each under WORK_DIR),
# checks that no build holds an FMA instruction, and requires every probe to
# print exactly what the main build's `lockstep run --json` prints (the
# digests, tokens and per-step logits sha256) for every conformance and
# extension case and a synthetic model, with the scalar and the dispatched
# kernels. The main build's own probe is checked the same way first, so the
# probe and `lockstep run` are known to be one path.
# By default the two builds furthest from the main one (gcc -O2): gcc -O0
# (nothing optimised) and clang -O3 (another compiler at its highest level);
# MATRIX=full adds gcc -O3, clang -O0 and clang -O2, and MATRIX="gcc:-O3
# clang:-O0" names any set. Exit 77 (skipped) when clang++ is absent.
set -euo pipefail
src=$1 work=$2 main=$3 main_probe=$4 shared=$5
command -v clang++ >/dev/null || { echo "SKIPPED: clang++ is not installed"; exit 77; }
matrix=${MATRIX:-"gcc:-O0 clang:-O3"}
[ "$matrix" = full ] && matrix="gcc:-O0 gcc:-O3 clang:-O0 clang:-O2 clang:-O3"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$main" make-model "$tmp/syn" --seed 11 --hidden 48 --layers 3 --heads 6 --kv-heads 2 \
  --inter 96 --vocab 300 --bias --untied >/dev/null

# One case per line: MODEL_DIR|lockstep run arguments (spaces inside an
# argument as \x01).
cases=("$tmp/syn|--ids 3,1,4,1,5,9 --gen 10 --window 4 --evict 1:2@3")
for vectors in "$shared"/fixtures/conformance/{vectors,extension-vectors}.json; do
  [ -f "$vectors" ] || { echo "FAIL: $vectors is missing"; exit 1; }
  while IFS= read -r line; do cases+=("$line"); done < <(python3 - "$vectors" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
for c in doc["cases"]:
    model = os.path.join(os.path.dirname(sys.argv[1]), c["model"])
    print(model + "|" + " ".join(a.replace(" ", "\x01") for a in c["args"]))
PY
)
done

# The probe's arguments for a case, from the main build's --json output
# (its prompt ids, so the probe needs no tokenizer) and the case's flags.
probe_args() {  # JSON ARGS...
  python3 - "$@" <<'PY'
import json, sys
run = json.loads(sys.argv[1]); args = sys.argv[2:]
gen, window, evict = "16", "0", []
for i, a in enumerate(args):
    if a == "--gen": gen = args[i + 1]
    if a == "--window": window = args[i + 1]
    if a == "--evict": evict.append(args[i + 1])
print(" ".join([",".join(map(str, run["prompt_token_ids"])), gen, window] + evict))
PY
}

# The fields both print, as one canonical line.
digests() {
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({k: d[k] for k in
    ("cis2_ref","argmax_digest","generated_token_ids","steps")}, sort_keys=True))'
}

# Expected lines, from the main build: "MODEL ISA PROBE-ARGS<TAB>DIGESTS".
expected=()
for c in "${cases[@]}"; do
  model=${c%%|*}; read -r -a args <<<"${c#*|}"
  args=("${args[@]//$'\x01'/ }")
  for isa in scalar auto; do
    out=$("$main" run --model "$model" "${args[@]}" --isa "$isa" --json --single-run)
    read -r ids gen window evict <<<"$(probe_args "$out" "${args[@]}")"
    expected+=("$model|$ids|$gen|$window|$isa|${evict:-}"$'\t'"$(digests <<<"$out")")
  done
done

failed=0
check_probe() {  # NAME PROBE
  local name=$1 probe=$2 passed=0 e key got model ids gen window isa evict
  if objdump -d --no-show-raw-insn "$probe" | grep -qE '\sv?f(n)?m(add|sub)[0-9a-z]*\s'; then
    echo "FAIL: FMA instruction in the $name build"; failed=$((failed + 1)); return
  fi
  for e in "${expected[@]}"; do
    key=${e%%$'\t'*}
    IFS='|' read -r model ids gen window isa evict <<<"$key"
    # shellcheck disable=SC2086  # evict: zero or more FROM:COUNT@STEP words
    got=$("$probe" "$model" "$ids" "$gen" "$window" "$isa" $evict | digests) || got="(probe failed)"
    if [ "$got" = "${e#*$'\t'}" ]; then passed=$((passed + 1)); else
      failed=$((failed + 1))
      echo "DIFFER ($name, $isa): $model ids=$ids gen=$gen window=$window evict=$evict"
      echo "  main: ${e#*$'\t'}"; echo "  $name: $got"
    fi
  done
  echo "$name vs main build: $passed of ${#expected[@]} equal"
}

check_probe "main build's probe" "$main_probe"
for entry in $matrix; do
  cc=${entry%%:*} opt=${entry#*:}
  case $cc in gcc) cxx=g++ ;; clang) cxx=clang++ ;; *) echo "FAIL: unknown compiler $cc"; exit 1 ;; esac
  tree="$work/$cc$opt"
  CC=$cc CXX=$cxx cmake -S "$src" -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Matrix \
    -DCMAKE_CXX_FLAGS="$opt" -DCMAKE_C_FLAGS="$opt" -DLOCKSTEP_BUILD_BENCH=OFF \
    -DLOCKSTEP_WERROR=OFF >/dev/null
  start=$SECONDS
  cmake --build "$tree" --target digest_probe -j"$(nproc)" >/dev/null
  echo "$cc $opt: built in $((SECONDS - start)) s"
  check_probe "$cc $opt" "$(find "$tree" -name digest_probe -type f -perm -u+x | head -1)"
done
[ "$failed" -eq 0 ]
