#!/usr/bin/env bash
# The main job: build, make the default model, and run a 3-worker sharded
# decode on this host that must equal the monolithic run digest for digest.
#
# The default model has SmolLM2-135M's exact shape with seeded synthetic
# weights. When ../shared/fixtures/smollm2-135m/ is present, its real
# config.json and tokenizer.json are used, so only weights_sha256 differs
# from the real artifact. With the real weights (scripts/fetch-smollm2.sh)
# pass MODEL=DIR to run them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
WORKERS=${WORKERS:-3}
GEN=${GEN:-16}
PROMPT=${PROMPT:-Once upon a time}

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target lockstep
LOCKSTEP="$BUILD/cli/lockstep"

MODEL=${MODEL:-models/default}
if [ ! -f "$MODEL/model.safetensors" ]; then
  FIXTURES=../shared/fixtures/smollm2-135m
  if [ -f "$FIXTURES/config.json" ] && [ -f "$FIXTURES/tokenizer.json" ]; then
    "$LOCKSTEP" make-model "$MODEL" --seed 1 \
      --config "$FIXTURES/config.json" --tokenizer "$FIXTURES/tokenizer.json"
  else
    "$LOCKSTEP" make-model "$MODEL" --seed 1 --shape smollm2-135m
  fi
fi

"$LOCKSTEP" selftest
exec "$LOCKSTEP" run --model "$MODEL" --prompt "$PROMPT" --gen "$GEN" \
  --workers "$WORKERS" --compare-monolithic
