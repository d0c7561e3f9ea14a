#!/usr/bin/env bash
# Speculative decoding against plain decoding: `lockstep run --single-run`
# with and without --speculative, GEN tokens, THREADS threads, ROUNDS
# rounds (the order alternates), on two workloads:
#   repetitive      greedy from a prompt that alternates two ids (REPEAT,
#                   default 33445,31134: a pair the smollm2-135m shape made
#                   with --seed 1 keeps repeating after it);
#   non-repetitive  sampled at temperature 1 (seed 5) from a scrambled
#                   prompt: nothing the proposer can guess.
# Prints decode_ms_per_token (1000 / tok/s over the decode steps after the
# prompt's), the proposals kept, the median speedup (plain / speculative
# ms per token) and the load. Both runs must print the same cis2_ref.
# WORKERS > 0: both sharded over that many loopback workers (each with
# THREADS threads): plain decoding relays its steps, speculative decoding
# checks its proposals as multi-row steps on the workers.
# DRAFT: speculative runs take --draft-model DRAFT; the draft's proposing
# time (draft_model_ms, between the steps) is added per decode step.
# Usage: bench/speculative_speed.sh LOCKSTEP MODEL_DIR [ROUNDS=3] [THREADS=2] [GEN=128] [REPEAT=33445,31134] [WORKERS=0] [DRAFT]
set -euo pipefail
L=$1; M=$2; N=${3:-3}; T=${4:-2}; G=${5:-128}; REP=${6:-33445,31134}; W=${7:-0}; D=${8:-}
repeat_ids=$(python3 -c "print(','.join(['$REP'] * 8))")
scrambled=$(python3 -c "print(','.join(str((i * 7919 + 13) % 1000) for i in range(16)))")
one() {  # workload flag -> "ms cis2 note"
  local args=("$L" run --model "$M" --gen "$G" --threads "$T" --single-run --workers "$W")
  if [ "$1" = repetitive ]; then args+=(--ids "$repeat_ids"); else
    args+=(--ids "$scrambled" --temperature 1 --seed 5); fi
  if [ "$2" = spec ]; then
    args+=(--speculative)
    if [ -n "$D" ]; then args+=(--draft-model "$D"); fi
  fi
  "${args[@]}" | awk -v g="$G" '/^decode_ms_per_token/ {ms=$3} /^CIS2_REF/ {c=$2}
                      /^draft_model_ms/ {d=$3}
                      /^speculative/ {sub(/^speculative +=  */, ""); n=$0}
                      END {if (d != "") ms += d / (g - 1); print ms, c, n}'
}
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for w in repetitive non-repetitive; do
  ratios=()
  for i in $(seq 1 "$N"); do
    if [ $((i % 2)) -eq 1 ]; then p=$(one "$w" plain); s=$(one "$w" spec); else
      s=$(one "$w" spec); p=$(one "$w" plain); fi
    read -r pm pc _ <<<"$p"; read -r sm sc sn <<<"$s"
    [ "$pc" = "$sc" ] || { echo "cis2_ref differs: $pc vs $sc" >&2; exit 1; }
    ratios+=("$(echo "scale=3; $pm / $sm" | bc)")
    echo "$w round $i plain_ms $pm speculative_ms $sm ($sn)"
  done
  echo "$w median speedup $(med "${ratios[@]}")"
done
uptime
