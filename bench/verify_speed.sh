#!/usr/bin/env bash
# What checking costs next to producing: `lockstep run --single-run`
# writes a greedy receipt of GEN tokens, then `lockstep verify` checks it
# (teacher forcing), both with THREADS threads, ROUNDS rounds (the order
# alternates each round). Prints each round's wall seconds and run's
# decode_ms_per_token, verify's recompute_s (its recomputation alone, the
# weights loaded), the medians, the median ratios run/verify (wall) and
# run decode / verify recompute (GEN x decode_ms_per_token over recompute_s:
# the engine's share, without the weight load both pay) and the load.
# WORKERS > 0: both sharded over that many loopback workers (each with
# THREADS threads): the run relays its decode steps, verify sends its rows
# as multi-row steps (docs/wire_protocol.md, "Multi-row steps").
# Usage: bench/verify_speed.sh LOCKSTEP MODEL_DIR [ROUNDS=3] [THREADS=2] [GEN=256] [WORKERS=0]
set -euo pipefail
L=$1; M=$2; N=${3:-3}; T=${4:-2}; G=${5:-256}; W=${6:-0}
R=$(mktemp -d)
trap 'rm -rf "$R"' EXIT
ids=$(python3 -c "print(','.join(str((i * 7919 + 13) % 1000) for i in range(16)))")
now() { date +%s.%N; }
run_once() {
  local t0 t1 ms
  t0=$(now)
  ms=$("$L" run --model "$M" --ids "$ids" --gen "$G" --threads "$T" --single-run \
       --workers "$W" --receipt "$R/r.json" | awk '/decode_ms_per_token/ {print $3}')
  t1=$(now)
  echo "$(echo "$t1 - $t0" | bc) $ms"
}
verify_once() {
  local t0 t1 out
  t0=$(now)
  out=$("$L" verify "$R/r.json" --model "$M" --threads "$T" --workers "$W")
  t1=$(now)
  grep -q '^VERIFIED$' <<<"$out"
  echo "$(echo "$t1 - $t0" | bc) $(awk '/^recompute_s/ {print $3}' <<<"$out")"
}
runs=(); verifies=(); ratios=(); engine=()
for i in $(seq 1 "$N"); do
  if [ $((i % 2)) -eq 1 ]; then r=$(run_once); v=$(verify_once); else
    [ -f "$R/r.json" ] || run_once >/dev/null
    v=$(verify_once); r=$(run_once); fi
  rs=${r%% *}; ms=${r##* }; vs=${v%% *}; rc=${v##* }
  e=$(echo "scale=3; $G * $ms / 1000 / $rc" | bc)
  echo "round $i run_s $rs run_decode_ms_per_token $ms verify_s $vs recompute_s $rc wall_ratio $(echo "scale=2; $rs / $vs" | bc) engine_ratio $e"
  runs+=("$rs"); verifies+=("$vs"); ratios+=("$(echo "scale=3; $rs / $vs" | bc)"); engine+=("$e")
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median run_s $(med "${runs[@]}") verify_s $(med "${verifies[@]}") wall run/verify $(med "${ratios[@]}") engine run/verify $(med "${engine[@]}")"
uptime
