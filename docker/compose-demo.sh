#!/usr/bin/env bash
# End-to-end container demo: builds the base and runtime images locally (no
# registry), brings up 3 workers + 1 coordinator with docker-compose on a
# private network, and checks that the coordinator's digests equal a
# monolithic run of the same model and prompt (run in the same image).
#
#   docker/compose-demo.sh [--bin PATH] [--ids 1,2,3] [--gen N] [--timeout S] [--keep]
#
# Exit 0 only if every digest is equal; 77 if docker/docker-compose is absent.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BIN_ARGS=()
IDS=1,2,3,4,5
GEN=8
TIMEOUT=300
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN_ARGS=(--bin "$2"); shift 2 ;;
    --ids) IDS=$2; shift 2 ;;
    --gen) GEN=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "compose-demo: unknown argument: $1" >&2; exit 2 ;;
  esac
done
log() { echo "[compose-demo] $*"; }
fail() { echo "[compose-demo] FAIL: $*" >&2; exit 1; }

command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "[compose-demo] SKIPPED: no running docker engine"; exit 77; }
if command -v docker-compose >/dev/null; then DC=(docker-compose)
elif docker compose version >/dev/null 2>&1; then DC=(docker compose)
else echo "[compose-demo] SKIPPED: neither docker-compose nor 'docker compose'"; exit 77; fi

export LOCKSTEP_IDS=$IDS LOCKSTEP_GEN=$GEN
export LOCKSTEP_IMAGE=${LOCKSTEP_IMAGE:-lockstep/runtime:latest}
PROJECT="lockstep-demo-$$"
DC+=(-p "$PROJECT" -f "$ROOT/docker-compose.yml")
OUT=$(mktemp -d /tmp/lockstep-compose.XXXXXX)

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$rc" -ne 0 ]; then
    log "logs of the failed run:"
    timeout 60 "${DC[@]}" logs --no-color --tail 30 >&2 2>&1 || true
  fi
  timeout 120 "${DC[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
  [ "$KEEP" -eq 1 ] && log "kept $OUT" || rm -rf "$OUT"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building images"
"$ROOT/docker/build-runtime-image.sh" "${BIN_ARGS[@]}" --tag "$LOCKSTEP_IMAGE" || fail "image build failed"

log "docker-compose up (3 workers + coordinator), --ids $IDS --gen $GEN"
timeout "$TIMEOUT" "${DC[@]}" up --no-color --abort-on-container-exit --exit-code-from coordinator \
  >"$OUT/up.log" 2>&1
RC=$?
[ "$RC" -eq 124 ] && fail "compose run exceeded ${TIMEOUT}s"
# The coordinator's stdout (the JSON line) as compose logged it.
grep -E '^coordinator[-_0-9]* +\| ' "$OUT/up.log" | sed 's/^[^|]*| //' >"$OUT/coord.out"
[ "$RC" -eq 0 ] || { tail -n 40 "$OUT/up.log" >&2; fail "coordinator exited $RC"; }
log "coordinator: $(grep -c . "$OUT/coord.out") line(s) of output; workers: $(grep -cE '^worker[0-9].*listening' "$OUT/up.log") listening"

log "monolithic reference in the same image"
timeout "$TIMEOUT" "${DC[@]}" run --rm -T reference >"$OUT/mono.out" 2>"$OUT/mono.err" \
  || { cat "$OUT/mono.err" >&2; fail "reference run failed"; }

python3 - "$OUT/mono.out" "$OUT/coord.out" <<'PY' || fail "sharded digests differ from the monolithic run"
import json, sys
KEYS = ["prompt_token_ids", "generated_token_ids", "cis2_ref", "argmax_digest",
        "table_digest", "inv_freq_table_digest", "weights_sha256",
        "tokenizer_sha256", "config_sha256"]
def last_json(path):
    obj = None
    for line in open(path, encoding="utf-8", errors="replace"):
        i = line.find("{")
        if i < 0: continue
        try: obj = json.loads(line[i:])
        except ValueError: pass
    if obj is None: sys.exit(f"no JSON object in {path}:\n" + open(path).read()[-2000:])
    return obj
mono, shard = last_json(sys.argv[1]), last_json(sys.argv[2])
bad = [k for k in KEYS if k not in mono or k not in shard or mono[k] != shard[k]]
for k in KEYS:
    print(f"    {k:22} mono={mono.get(k)} sharded={shard.get(k)}" if k in bad
          else f"    {k:22} = {mono[k]}")
if "plan" in shard: print(f"    {'plan (sharded)':22} = {shard['plan']}")
sys.exit(1 if bad else 0)
PY
log "PASS: coordinator (3 containers) == monolithic"
