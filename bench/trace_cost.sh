#!/usr/bin/env bash
# What --trace costs a monolithic decode: `lockstep run --single-run` with
# and without --trace, interleaved (the order alternates each round), N
# rounds; prints each decode_ms_per_token, the medians and the load.
# Usage: bench/trace_cost.sh LOCKSTEP MODEL_DIR [ROUNDS=9] [THREADS=1]
set -euo pipefail
L=$1; M=$2; N=${3:-9}; T=${4:-1}
off=(); on=()
for i in $(seq 1 "$N"); do
  order="off on"; [ $((i % 2)) -eq 0 ] && order="on off"
  for mode in $order; do
    flag=""; [ "$mode" = on ] && flag="--trace"
    ms=$("$L" run --model "$M" --ids 1,2,3,4 --gen 128 --single-run --threads "$T" $flag |
         awk '/decode_ms_per_token/ {print $3}')
    echo "$i $mode $ms"
    if [ "$mode" = on ]; then on+=("$ms"); else off+=("$ms"); fi
  done
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median off $(med "${off[@]}") on $(med "${on[@]}")"
uptime
