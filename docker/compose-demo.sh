#!/usr/bin/env bash
# End-to-end container demo: builds the base and runtime images locally (no
# registry), brings up 3 workers + 1 long-running `lockstep serve`
# coordinator with docker-compose, waits for its health check, drives the
# published API with HTTP requests (greedy and seeded sampling, one after the
# other and concurrently) and checks every answer's receipt against a
# monolithic `lockstep run` of the same request (run in the same image).
#
#   docker/compose-demo.sh [--bin PATH] [--port P] [--timeout S] [--keep]
#
# Exit 0 only if every receipt is equal; 77 if docker/docker-compose is absent.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BIN_ARGS=()
PORT=${LOCKSTEP_PORT:-18080}
TIMEOUT=300
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN_ARGS=(--bin "$2"); shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "compose-demo: unknown argument: $1" >&2; exit 2 ;;
  esac
done
log() { echo "[compose-demo] $*"; }
fail() { echo "[compose-demo] FAIL: $*" >&2; exit 1; }

command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "[compose-demo] SKIPPED: no running docker engine"; exit 77; }
if command -v docker-compose >/dev/null; then DC=(docker-compose)
elif docker compose version >/dev/null 2>&1; then DC=(docker compose)
else echo "[compose-demo] SKIPPED: neither docker-compose nor 'docker compose'"; exit 77; fi

export LOCKSTEP_PORT=$PORT
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

log "docker-compose up -d (3 workers + serving coordinator on 127.0.0.1:$PORT)"
timeout "$TIMEOUT" "${DC[@]}" up -d --no-color >"$OUT/up.log" 2>&1 || { cat "$OUT/up.log" >&2; fail "compose up failed"; }
CID=$("${DC[@]}" ps -q coordinator)
[ -n "$CID" ] || fail "no coordinator container"
deadline=$((SECONDS + TIMEOUT))
while :; do
  health=$(docker inspect -f '{{.State.Health.Status}}' "$CID" 2>/dev/null || echo gone)
  [ "$health" = healthy ] && break
  [ "$health" = unhealthy ] || [ "$health" = gone ] && fail "coordinator is $health"
  [ "$SECONDS" -lt "$deadline" ] || fail "coordinator not healthy within ${TIMEOUT}s"
  sleep 2
done
log "coordinator healthy"

# The requests: [prompt ids, max_tokens, temperature, top_k, top_p, seed].
REQUESTS='[[[1,2,3,4,5],8,0,0,1,0],[[7,7,2,9],12,0.8,40,0.95,1234],[[3,1,4,1,5,9,2,6],6,1.2,0,0.9,99],[[11,12],10,0,0,1,0]]'
log "driving the API (one at a time, then all at once)"
python3 - "http://127.0.0.1:$PORT" "$REQUESTS" "$OUT" <<'PY' || fail "the API did not answer as expected"
import json, sys, threading, urllib.request
url, reqs, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
def post(r):
    body = {"prompt": r[0], "max_tokens": r[1], "temperature": r[2], "top_k": r[3],
            "top_p": r[4], "seed": r[5]}
    q = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                               {"Content-Type": "application/json"})
    with urllib.request.urlopen(q, timeout=120) as resp:
        return json.load(resp)
health = json.load(urllib.request.urlopen(url + "/healthz", timeout=10))
print("    healthz:", json.dumps({"plan": health["plan"], "workers": health["workers"]}))
serial = [post(r) for r in reqs]
together = [None] * len(reqs)
def go(i): together[i] = post(reqs[i])
ts = [threading.Thread(target=go, args=(i,)) for i in range(len(reqs))]
for t in ts: t.start()
for t in ts: t.join()
for i, (a, b) in enumerate(zip(serial, together)):
    if any(a["receipt"][k] != b["receipt"][k] for k in ("generated_token_ids", "cis2_ref")):
        sys.exit(f"request {i}: the concurrent answer differs from the serial one")
json.dump(serial, open(out + "/served.json", "w"))
PY

log "monolithic references in the same image"
python3 - "$REQUESTS" >"$OUT/ref-args" <<'PY'
import json, sys
for r in json.loads(sys.argv[1]):
    f = ["--ids", ",".join(map(str, r[0])), "--gen", str(r[1])]
    if r[2] > 0:
        f += ["--temperature", str(r[2]), "--top-k", str(r[3]), "--top-p", str(r[4]), "--seed", str(r[5])]
    print(" ".join(f))
PY
n=0
while read -r args; do
  # shellcheck disable=SC2086
  timeout "$TIMEOUT" "${DC[@]}" run --rm -T --entrypoint lockstep reference \
    run --model /models/demo $args --json </dev/null >"$OUT/mono.$n" 2>"$OUT/mono.err" \
    || { cat "$OUT/mono.err" >&2; fail "reference run $n failed"; }
  n=$((n + 1))
done <"$OUT/ref-args"

python3 - "$OUT" "$n" <<'PY' || fail "served receipts differ from the monolithic runs"
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
KEYS = ["prompt_token_ids", "generated_token_ids", "steps", "cis2_ref", "argmax_digest",
        "table_digest", "inv_freq_table_digest", "weights_sha256"]
def last_json(path):
    obj = None
    for line in open(path, encoding="utf-8", errors="replace"):
        i = line.find("{")
        if i < 0: continue
        try: obj = json.loads(line[i:])
        except ValueError: pass
    if obj is None: sys.exit(f"no JSON object in {path}:\n" + open(path).read()[-2000:])
    return obj
served = json.load(open(out + "/served.json"))
bad = 0
for i in range(n):
    mono, shard = last_json(f"{out}/mono.{i}"), served[i]["receipt"]
    diff = [k for k in KEYS if k not in mono or k not in shard or mono[k] != shard[k]]
    print(f"    request {i}: cis2_ref={shard.get('cis2_ref')} " +
          ("== monolithic" if not diff else f"DIFFERS in {diff}"))
    bad += bool(diff)
if n != len(served): sys.exit(f"{n} monolithic runs for {len(served)} requests")
sys.exit(1 if bad else 0)
PY
log "PASS: served by the coordinator over 3 worker containers == monolithic"
