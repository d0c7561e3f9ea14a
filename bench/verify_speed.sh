#!/usr/bin/env bash
# What checking costs next to producing: `lockstep run --single-run`
# writes a greedy receipt of GEN tokens, then `lockstep verify` checks it
# (teacher forcing), both with THREADS threads, ROUNDS rounds (the order
# alternates each round). Prints each round's wall seconds and run's
# decode_ms_per_token, the medians, the median ratio run/verify and the
# load. Both wall times include loading and hashing the weights.
# Usage: bench/verify_speed.sh LOCKSTEP MODEL_DIR [ROUNDS=3] [THREADS=2] [GEN=256]
set -euo pipefail
L=$1; M=$2; N=${3:-3}; T=${4:-2}; G=${5:-256}
R=$(mktemp -d)
trap 'rm -rf "$R"' EXIT
ids=$(python3 -c "print(','.join(str((i * 7919 + 13) % 1000) for i in range(16)))")
now() { date +%s.%N; }
run_once() {
  local t0 t1 ms
  t0=$(now)
  ms=$("$L" run --model "$M" --ids "$ids" --gen "$G" --threads "$T" --single-run \
       --receipt "$R/r.json" | awk '/decode_ms_per_token/ {print $3}')
  t1=$(now)
  echo "$(echo "$t1 - $t0" | bc) $ms"
}
verify_once() {
  local t0 t1
  t0=$(now)
  "$L" verify "$R/r.json" --model "$M" --threads "$T" | grep -q '^VERIFIED$'
  t1=$(now)
  echo "$t1 - $t0" | bc
}
runs=(); verifies=(); ratios=()
for i in $(seq 1 "$N"); do
  if [ $((i % 2)) -eq 1 ]; then r=$(run_once); v=$(verify_once); else
    [ -f "$R/r.json" ] || run_once >/dev/null
    v=$(verify_once); r=$(run_once); fi
  rs=${r%% *}
  echo "round $i run_s $rs run_decode_ms_per_token ${r##* } verify_s $v ratio $(echo "scale=2; $rs / $v" | bc)"
  runs+=("$rs"); verifies+=("$v"); ratios+=("$(echo "scale=3; $rs / $v" | bc)")
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median run_s $(med "${runs[@]}") verify_s $(med "${verifies[@]}") run/verify $(med "${ratios[@]}")"
uptime
