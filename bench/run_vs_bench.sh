#!/usr/bin/env bash
# Per-token decode time of `lockstep run` against `lockstep bench` on the same
# model, threads and kernels, in one invocation. Both time the same code
# (runtime::DecodeOnStage: RunDecode on a LocalBackend, single-token Feeds
# timed by runtime::TimedBackend), so the ratio should be ~1.
#
# `lockstep run` decodes twice by default (the §12.4 check) and times run 1
# only; its wall time per token is therefore reported over 2 x GEN decode
# steps (plus its prefills, load and hashing, which are not subtracted), and
# a `--single-run` run is measured too.
#
# usage: bench/run_vs_bench.sh [--model DIR] [--gen N] [--threads T]
#            [--isa X] [--repeat R] [--lockstep PATH]
#   --model: default a fresh SmolLM2-135M-shaped synthetic model (seed 1)
#   --repeat: alternate run and bench R times (default 3); the verdict is the
#             median of the R paired ratios (each pair ran back to back, so
#             it saw about the same machine load), medians are shown too
set -euo pipefail

SELF=$(basename "$0")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOCKSTEP="$ROOT/build/cli/lockstep"
MODEL=""
GEN=64
THREADS=1
ISA=auto
REPEAT=3
PROMPT_LEN=4

while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --gen) GEN=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --isa) ISA=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --lockstep) LOCKSTEP=$2; shift 2 ;;
    *) echo "$SELF: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$LOCKSTEP" ]] || { echo "$SELF: no lockstep binary at $LOCKSTEP (build it first)" >&2; exit 2; }
[[ "$GEN" =~ ^[0-9]+$ && "$GEN" -ge 2 ]] || { echo "$SELF: --gen must be >= 2" >&2; exit 2; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [[ -z "$MODEL" ]]; then
  MODEL="$TMP/model"
  "$LOCKSTEP" make-model "$MODEL" --seed 1 --shape smollm2-135m >/dev/null
fi

# bench's decode prompt (cli/bench_command.cc Prompt(len, 0, vocab)).
VOCAB=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$MODEL/config.json")
IDS=$(python3 -c "import sys; n,v=int(sys.argv[1]),int(sys.argv[2]); print(','.join(str((i*7919+13)%v) for i in range(n)))" "$PROMPT_LEN" "$VOCAB")

now() { python3 -c 'import time; print(time.monotonic())'; }
run_ms() {  # args: extra run flags; prints "<timed ms/token> <wall s>"
  local t0 t1 out
  t0=$(now)
  out=$("$LOCKSTEP" run --model "$MODEL" --ids "$IDS" --gen "$GEN" --threads "$THREADS" --isa "$ISA" "$@")
  t1=$(now)
  local ms
  ms=$(sed -n 's/^decode_ms_per_token *= *\([0-9.]*\) (monolithic)$/\1/p' <<<"$out")
  [[ -n "$ms" ]] || { echo "$SELF: lockstep run printed no decode_ms_per_token" >&2; exit 1; }
  echo "$ms $(python3 -c "print($t1 - $t0)")"
}
bench_ms() {
  "$LOCKSTEP" bench --model "$MODEL" --gen "$GEN" --decode-prompt-len "$PROMPT_LEN" \
      --threads "$THREADS" --isa "$ISA" --prompt-len 16 --repeats 1 --json |
    python3 -c "import json,sys; print(1000.0 / json.loads(sys.stdin.read().strip().splitlines()[-1])['decode_tok_s'])"
}

RUN=() WALL=() SINGLE=() SWALL=() BENCH=()
for ((r = 0; r < REPEAT; ++r)); do
  read -r ms wall < <(run_ms)
  RUN+=("$ms") WALL+=("$wall")
  read -r ms wall < <(run_ms --single-run)
  SINGLE+=("$ms") SWALL+=("$wall")
  BENCH+=("$(bench_ms)")
done

python3 - "$GEN" "$THREADS" "$ISA" "$MODEL" "${RUN[*]}" "${WALL[*]}" "${SINGLE[*]}" "${SWALL[*]}" "${BENCH[*]}" <<'EOF'
import os, statistics, sys
gen, threads, isa, model = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
run, wall, single, swall, bench = ([float(x) for x in a.split()] for a in sys.argv[5:10])
med = statistics.median
r, b, s = med(run), med(bench), med(single)
print(f"model {model}  gen {gen}  threads {threads}  isa {isa}  repeats {len(run)}  "
      f"loadavg {os.getloadavg()[0]:.2f}")
print(f"lockstep run   (§12.4 double run, run 1 timed) : {r:8.3f} ms/token   runs {run}")
print(f"lockstep run   --single-run                    : {s:8.3f} ms/token   runs {single}")
print(f"lockstep bench                                 : {b:8.3f} ms/token   runs {[round(x, 3) for x in bench]}")
print(f"run wall / (2 x gen) decode steps (incl. load) : {med(wall) * 1000 / (2 * gen):8.3f} ms/token")
print(f"run --single-run wall / gen (incl. load)       : {med(swall) * 1000 / gen:8.3f} ms/token")
pairs = [x / y for x, y in zip(run, bench)]
ratio = med(pairs)
print(f"paired ratios run / bench: {[round(x, 3) for x in pairs]}")
print(f"ratio run / bench = {ratio:.3f} (median of pairs; of medians {r / b:.3f})  "
      f"({'within' if abs(ratio - 1) <= 0.05 else 'NOT within'} 5%)  loadavg now {os.getloadavg()[0]:.2f}")
sys.exit(0 if abs(ratio - 1) <= 0.05 else 1)
EOF
