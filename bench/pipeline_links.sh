#!/usr/bin/env bash
# Sessions in flight over rate-limited links: the netns cluster (3 worker
# namespaces by default) at each link rate, with pipeline_bench run in the
# coordinator's namespace. Prints, per rate, the monolithic figure of the
# same invocation, then per number of concurrent sessions S: per-token
# latency, aggregate tokens/s, ratios to monolithic and to S = 1, and the
# bytes between coordinator and workers per token. Fails unless every
# concurrent session's digests equal its solo run. Needs root (netns).
#
#   bench/pipeline_links.sh [--build DIR] [--model DIR] [--rates "unlimited 1gbit 100mbit"]
#                           [--sessions 1,3,6] [--gen 32] [--repeats 2] [--workers 3]
#                           [--ship-logits]
#
# Default model: SmolLM2-135M's shape with seeded weights (made once into
# a temporary folder). docs/performance.md has a table and what bounds it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
MODEL=""
RATES="unlimited 1gbit 100mbit"
SESSIONS=1,3,6
GEN=32
REPEATS=2
WORKERS=3
SHIP=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --sessions) SESSIONS=$2; shift 2 ;;
    --gen) GEN=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --ship-logits) SHIP=(--ship-logits); shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pipeline_links.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=$BUILD/cli/lockstep
BENCH=$BUILD/bench/pipeline/pipeline_bench
for f in "$BIN" "$BENCH"; do
  [ -x "$f" ] || { echo "pipeline_links.sh: $f is missing (cmake --build $BUILD --target lockstep pipeline_bench)" >&2; exit 2; }
done
TMP=""
if [ -z "$MODEL" ]; then
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/pipeline-links.XXXXXX")
  trap 'rm -rf "$TMP"' EXIT
  MODEL=$TMP/model
  "$BIN" make-model "$MODEL" --seed 1 --shape smollm2-135m >/dev/null
fi
echo "model $MODEL, $WORKERS worker namespaces, sessions $SESSIONS, gen $GEN, $(nproc) cores${SHIP:+, ship-logits}"
for rate in $RATES; do
  bash "$ROOT/scripts/netns-cluster.sh" --bin "$BIN" --workers "$WORKERS" --model "$MODEL" \
    --link-rate "$rate" "${SHIP[@]}" --timeout 900 --quiet --run-in-coordinator \
    "'$BENCH' --config \"\$LOCKSTEP_CLUSTER_CONFIG\" --label $rate --sessions $SESSIONS --gen $GEN --repeats $REPEATS"
done
