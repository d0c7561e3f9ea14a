#!/usr/bin/env bash
# A real multi-host Lockstep cluster on one machine, built from Linux network
# namespaces: one namespace per worker, one for the coordinator, all joined by
# a bridge that lives in its own "switch" namespace (nothing is added to the
# host's own network namespace). Every node has its own private address and
# reaches the others only over the bridge, so the runtime goes through real
# TCP between distinct network stacks, not loopback.
#
# The sharded decode's digests are compared with a monolithic `lockstep run
# --json` of the same model and prompt. Exit 0 only when every digest is equal.
#
#   scripts/netns-cluster.sh [options]
#     --bin PATH         lockstep binary (default: $LOCKSTEP_BIN, build*/cli/lockstep, PATH)
#     --workers N        worker namespaces (default 3)
#     --model DIR        existing model folder; default: a synthetic one is made
#     --make-model ARGS  shape args for `lockstep make-model` (default: a small 6-layer model)
#     --seed S           make-model seed (default 7)
#     --ids LIST | --prompt TEXT   prompt (default --ids 1,2,3,4,5)
#     --gen N            tokens to generate (default 8)
#     --plan auto|JSON   cluster plan (default auto), e.g. '[[0,2],[2,4],[4,6]]'
#     --port P           worker port (default 5555)
#     --timeout S        overall bound in seconds (default 60)
#     --heartbeat-ms N / --liveness N / --request-timeout-ms N   config knobs
#     --fault MODE       none | link-down | kill-worker   (default none)
#     --fault-worker I   which worker to break (0-based, default: the middle one)
#     --fault-after-bytes B  inject once the coordinator has received B bytes
#                        (step results flowing: the decode is under way; default 32768)
#     --fault-delay-ms N then wait N ms more (default 100)
#     --reference-seed S make the monolithic reference from another seed and
#                        expect the comparison to FAIL (proves the check bites)
#     --link-rate RATE   shape every link (both ends of every veth) to RATE with a
#                        tbf qdisc, e.g. 100mbit, 1gbit (default: unlimited)
#     --ship-logits      the coordinator gets every step's logits and chooses
#                        the tokens itself (the default: the last stage does)
#     --run-in-coordinator CMD  instead of the decode and its comparison, run
#                        `bash -c CMD` in the coordinator's namespace, with
#                        LOCKSTEP_BIN, LOCKSTEP_MODEL and LOCKSTEP_CLUSTER_CONFIG
#                        set; its exit code is the script's (benchmarks)
#     --keep             keep the work folder (config, logs) for inspection
#     --quiet            less chatter
#
# With --fault the expectation flips: the run passes only if the coordinator
# exits non-zero, within the timeout, with an error that names the broken
# worker (its tcp://ADDR:PORT address or ADDR:PORT).
#
# Exit codes: 0 pass, 1 fail, 2 usage, 77 skipped (not root, no netns, no
# iproute2 or python3); the reason is printed.
set -uo pipefail

SELF=$(basename "$0")
ROOT=$(cd "$(dirname "$0")/.." && pwd)

BIN=${LOCKSTEP_BIN:-}
WORKERS=3
MODEL=""
MAKE_ARGS="--layers 6 --hidden 64 --heads 4 --kv-heads 2 --inter 128 --vocab 512"
SEED=7
IDS="1,2,3,4,5"
PROMPT=""
GEN=8
PLAN=auto
PORT=5555
TIMEOUT=60
HEARTBEAT_MS=250
LIVENESS=8
REQUEST_TIMEOUT_MS=""
FAULT=none
FAULT_WORKER=""
FAULT_DELAY_MS=100
FAULT_AFTER_BYTES=32768
KEEP=0
REFERENCE_SEED=""
QUIET=0
LINK_RATE=unlimited
SHIP_LOGITS=0
RUN_IN_COORDINATOR=""

usage() { sed -n '2,47p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --make-model) MAKE_ARGS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --ids) IDS=$2; PROMPT=""; shift 2 ;;
    --prompt) PROMPT=$2; IDS=""; shift 2 ;;
    --gen) GEN=$2; shift 2 ;;
    --plan) PLAN=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --heartbeat-ms) HEARTBEAT_MS=$2; shift 2 ;;
    --liveness) LIVENESS=$2; shift 2 ;;
    --request-timeout-ms) REQUEST_TIMEOUT_MS=$2; shift 2 ;;
    --fault) FAULT=$2; shift 2 ;;
    --fault-worker) FAULT_WORKER=$2; shift 2 ;;
    --fault-delay-ms) FAULT_DELAY_MS=$2; shift 2 ;;
    --fault-after-bytes) FAULT_AFTER_BYTES=$2; shift 2 ;;
    --reference-seed) REFERENCE_SEED=$2; shift 2 ;;
    --link-rate) LINK_RATE=$2; shift 2 ;;
    --ship-logits) SHIP_LOGITS=1; shift ;;
    --run-in-coordinator) RUN_IN_COORDINATOR=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --quiet) QUIET=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$SELF: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

T0=$(date +%s)
log() { [ "$QUIET" -eq 1 ] || echo "[$SELF +$(( $(date +%s) - T0 ))s] $*"; }
fail() { echo "[$SELF] FAIL: $*" >&2; exit 1; }
skip() { echo "[$SELF] SKIPPED: $*"; exit 77; }

case "$FAULT" in none|link-down|kill-worker) ;; *) echo "$SELF: --fault must be none, link-down or kill-worker" >&2; exit 2 ;; esac
[[ "$WORKERS" =~ ^[1-9][0-9]?$ ]] || { echo "$SELF: --workers must be 1..99" >&2; exit 2; }
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || { echo "$SELF: --timeout must be a positive integer" >&2; exit 2; }
[ -z "$FAULT_WORKER" ] && FAULT_WORKER=$(( WORKERS / 2 ))
# RATE in bits per second (tc's units: bit, kbit, mbit, gbit; integers).
LINK_BPS=0
case "$LINK_RATE" in
  unlimited) ;;
  *[0-9]gbit) LINK_BPS=$(( ${LINK_RATE%gbit} * 1000000000 )) ;;
  *[0-9]mbit) LINK_BPS=$(( ${LINK_RATE%mbit} * 1000000 )) ;;
  *[0-9]kbit) LINK_BPS=$(( ${LINK_RATE%kbit} * 1000 )) ;;
  *[0-9]bit) LINK_BPS=${LINK_RATE%bit} ;;
  *) LINK_BPS=x ;;
esac
[[ "$LINK_BPS" =~ ^[0-9]+$ ]] && { [ "$LINK_RATE" = unlimited ] || [ "$LINK_BPS" -ge 8000 ]; } \
  || { echo "$SELF: --link-rate must be unlimited or N(bit|kbit|mbit|gbit), at least 8kbit" >&2; exit 2; }
[ "$FAULT_WORKER" -lt "$WORKERS" ] || { echo "$SELF: --fault-worker out of range" >&2; exit 2; }
if [ -z "$REQUEST_TIMEOUT_MS" ]; then
  # Faults must surface well inside the overall bound.
  if [ "$FAULT" = none ]; then REQUEST_TIMEOUT_MS=30000; else REQUEST_TIMEOUT_MS=10000; fi
fi

# ---------------------------------------------------------------- preflight
if [ -z "$BIN" ]; then
  for c in "$ROOT"/build-mh/cli/lockstep "$ROOT"/build/cli/lockstep "$ROOT"/build*/cli/lockstep; do
    [ -x "$c" ] && { BIN=$c; break; }
  done
  [ -z "$BIN" ] && BIN=$(command -v lockstep || true)
fi
[ -n "$BIN" ] && [ -x "$BIN" ] || fail "no lockstep binary (build it, or pass --bin)"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces (running as uid $(id -u))"
command -v ip >/dev/null || skip "the ip command (iproute2) is not installed"
command -v python3 >/dev/null || skip "python3 is needed to compare the JSON digests"
ip netns list >/dev/null 2>&1 || skip "'ip netns' is unavailable here"
if [ "$LINK_RATE" != unlimited ]; then
  command -v tc >/dev/null || skip "--link-rate needs tc (iproute2)"
fi
# (`lockstep X --help` prints the top-level help even for an unknown X, so
# look for the subcommands in the list.)
BIN_HELP=$("$BIN" --help 2>&1 || true)
for sub in worker coordinator; do
  grep -qE "^[[:space:]]+$sub([[:space:]]|\$)" <<<"$BIN_HELP" \
    || fail "$BIN has no '$sub' subcommand"
done

# ---------------------------------------------------------------- naming
# Unique per run: several runs (ctest -j) may coexist.
TAG=$(printf 'lsmh%x%04x' $$ $((RANDOM)))
NS_SW="$TAG-sw"
NS_CO="$TAG-co"
NS_W=()
for ((i = 0; i < WORKERS; i++)); do NS_W+=("$TAG-w$i"); done

# A /24 inside 10.213.0.0/16 that the host itself does not use. The namespaces
# are isolated from the host, so this only keeps `ip` output unambiguous.
host_nets=$(ip -4 -o addr show 2>/dev/null; ip -4 route show table all 2>/dev/null)
SUBNET=""
for _ in $(seq 1 50); do
  cand="10.213.$(( (RANDOM % 250) + 1 ))"
  if ! grep -q "$cand\." <<<"$host_nets" && ! grep -q "10\.213\.0\.0/16" <<<"$host_nets"; then
    SUBNET=$cand; break
  fi
done
[ -n "$SUBNET" ] || fail "could not find a free 10.213.x.0/24 subnet"
CO_ADDR="$SUBNET.2"
W_ADDR=()
for ((i = 0; i < WORKERS; i++)); do W_ADDR+=("$SUBNET.$((10 + i))"); done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/$TAG.XXXXXX")
PIDS=()
COORD_PID=""
CREATED_NS=()

# ---------------------------------------------------------------- cleanup
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # Our own processes first (by pid), then anything still inside our namespaces.
  for p in $COORD_PID "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    local alive=0
    for p in $COORD_PID "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.2
  done
  for p in $COORD_PID "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for ns in "${CREATED_NS[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  done
  wait 2>/dev/null
  for ns in "${CREATED_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if [ "$KEEP" -eq 1 ]; then
    echo "[$SELF] kept $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "[$SELF] interrupted" >&2; exit 130' INT TERM

START=$(date +%s)
remaining() { local r=$(( TIMEOUT - ($(date +%s) - START) )); [ "$r" -lt 1 ] && r=1; echo "$r"; }
ensure_time() { [ $(( $(date +%s) - START )) -lt "$TIMEOUT" ] || fail "overall timeout of ${TIMEOUT}s exceeded while $1"; }

# ---------------------------------------------------------------- topology
# Few `ip` processes (batch mode): cheap even on a loaded machine.
log "namespaces $TAG-{sw,co,w0..w$((WORKERS - 1))}, subnet $SUBNET.0/24"
for ns in "$NS_SW" "$NS_CO" "${NS_W[@]}"; do
  ip netns add "$ns" || fail "ip netns add $ns failed"
  CREATED_NS+=("$ns")
done
# Each veth is created directly with one end in the switch namespace and the
# other (eth0) in the node's namespace: the host namespace never holds either.
{
  echo "link add vco netns $NS_SW type veth peer name eth0 netns $NS_CO"
  for ((i = 0; i < WORKERS; i++)); do
    echo "link add vw$i netns $NS_SW type veth peer name eth0 netns ${NS_W[$i]}"
  done
} | ip -batch - || fail "cannot create the veth pairs"
ip -n "$NS_SW" link add br0 type bridge || fail "cannot create a bridge (no bridge support in this kernel?)"
{
  echo "link set lo up"
  echo "link set br0 up"
  echo "link set vco master br0 up"
  for ((i = 0; i < WORKERS; i++)); do echo "link set vw$i master br0 up"; done
} | ip -n "$NS_SW" -batch - || fail "cannot set up the bridge"
node_up() {
  printf 'link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\n' "$2" \
    | ip -n "$1" -batch - || fail "cannot configure $1"
}
node_up "$NS_CO" "$CO_ADDR"
for ((i = 0; i < WORKERS; i++)); do node_up "${NS_W[$i]}" "${W_ADDR[$i]}"; done

# Bandwidth: a token bucket (tbf; netem is not available everywhere) on
# both ends of every veth, so each node's link is RATE in each direction.
# The bucket holds 1 ms of traffic (at least 16 KiB); up to 100 ms queue.
if [ "$LINK_RATE" != unlimited ]; then
  BURST=$(( LINK_BPS / 8 / 1000 ))
  [ "$BURST" -lt 16384 ] && BURST=16384
  TBF="root tbf rate $LINK_RATE burst $BURST latency 100ms"
  {
    echo "qdisc add dev vco $TBF"
    for ((i = 0; i < WORKERS; i++)); do echo "qdisc add dev vw$i $TBF"; done
  } | tc -n "$NS_SW" -batch - || fail "cannot shape the switch ports with tbf (rate $LINK_RATE)"
  for ns in "$NS_CO" "${NS_W[@]}"; do
    tc -n "$ns" qdisc add dev eth0 $TBF || fail "cannot shape eth0 in $ns with tbf (rate $LINK_RATE)"
  done
  log "every link shaped to $LINK_RATE (tbf, burst $BURST bytes)"
fi

# ---------------------------------------------------------------- model
if [ -z "$MODEL" ]; then
  MODEL="$WORK/model"
  # shellcheck disable=SC2086
  "$BIN" make-model "$MODEL" --seed "$SEED" $MAKE_ARGS >"$WORK/make-model.log" 2>&1 \
    || { cat "$WORK/make-model.log" >&2; fail "make-model failed"; }
fi
MODEL=$(cd "$MODEL" && pwd)

PROMPT_ARGS=()
if [ -n "$IDS" ]; then PROMPT_ARGS=(--ids "$IDS"); else PROMPT_ARGS=(--prompt "$PROMPT"); fi

# ---------------------------------------------------------------- monolithic
# The reference (not needed when a fault is injected: nothing is compared).
if [ "$FAULT" = none ] && [ -z "$RUN_IN_COORDINATOR" ]; then
  log "monolithic reference: lockstep run --json ${PROMPT_ARGS[*]} --gen $GEN"
  REF_MODEL=$MODEL
  if [ -n "$REFERENCE_SEED" ]; then
    REF_MODEL="$WORK/reference-model"
    # shellcheck disable=SC2086
    "$BIN" make-model "$REF_MODEL" --seed "$REFERENCE_SEED" $MAKE_ARGS >>"$WORK/make-model.log" 2>&1 \
      || { cat "$WORK/make-model.log" >&2; fail "make-model (reference) failed"; }
    log "reference model made from seed $REFERENCE_SEED: the comparison must fail"
  fi
  timeout "$(remaining)" "$BIN" run --model "$REF_MODEL" "${PROMPT_ARGS[@]}" --gen "$GEN" --json \
    >"$WORK/mono.json" 2>"$WORK/mono.err" \
    || { cat "$WORK/mono.err" >&2; fail "monolithic run failed"; }
fi

# ---------------------------------------------------------------- keys
# One key per node (CURVE): workers accept only the coordinator's public
# key; the coordinator pins each worker's.
mkdir -m 700 "$WORK/keys"
for name in coordinator $(seq -f 'w%g' 0 $((WORKERS - 1))); do
  "$BIN" keygen "$WORK/keys/$name" >/dev/null || fail "keygen $name failed"
done

# ---------------------------------------------------------------- workers
for ((i = 0; i < WORKERS; i++)); do
  ip netns exec "${NS_W[$i]}" "$BIN" worker --listen "tcp://${W_ADDR[$i]}:$PORT" \
    --key "$WORK/keys/w$i" --allow "$WORK/keys/coordinator.pub" \
    >"$WORK/worker$i.log" 2>&1 &
  PIDS+=($!)
  disown "$!"  # no job notices when a fault test kills it
done

# Wait for every worker to listen on its own address (bounded).
for ((i = 0; i < WORKERS; i++)); do
  ok=0
  while [ $(( $(date +%s) - START )) -lt "$TIMEOUT" ]; do
    kill -0 "${PIDS[$i]}" 2>/dev/null || { cat "$WORK/worker$i.log" >&2; fail "worker $i (${W_ADDR[$i]}:$PORT) exited at start-up"; }
    if ip netns exec "${NS_W[$i]}" ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; then ok=1; break; fi
    sleep 0.1
  done
  [ $ok -eq 1 ] || fail "worker $i never listened on ${W_ADDR[$i]}:$PORT"
done
log "workers listening: $(for a in "${W_ADDR[@]}"; do printf 'tcp://%s:%s ' "$a" "$PORT"; done)"

# Cross-namespace reachability (when ping exists), so a broken topology fails clearly.
if command -v ping >/dev/null; then
  for a in "${W_ADDR[@]}"; do
    ip netns exec "$NS_CO" ping -c1 -W2 "$a" >/dev/null 2>&1 || fail "coordinator namespace cannot reach $a"
  done
fi

# ---------------------------------------------------------------- config
WORKER_URLS=$(for a in "${W_ADDR[@]}"; do printf '"tcp://%s:%s",' "$a" "$PORT"; done)
WORKER_URLS="[${WORKER_URLS%,}]"
WORKER_KEYS=$(for ((i = 0; i < WORKERS; i++)); do printf '"%s",' "$WORK/keys/w$i.pub"; done)
WORKER_KEYS="[${WORKER_KEYS%,}]"
if [ "$PLAN" = auto ]; then PLAN_JSON='"auto"'; else PLAN_JSON=$PLAN; fi
cat >"$WORK/cluster.json" <<EOF
{
  "model": "$MODEL",
  "workers": $WORKER_URLS,
  "plan": $PLAN_JSON,
  "heartbeat_ms": $HEARTBEAT_MS,
  "liveness": $LIVENESS,
  "request_timeout_ms": $REQUEST_TIMEOUT_MS,
  "key": "$WORK/keys/coordinator",
  "worker_keys": $WORKER_KEYS,
  "ship_logits": $([ "$SHIP_LOGITS" -eq 1 ] && echo true || echo false)
}
EOF
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/cluster.json" \
  || fail "generated config is not valid JSON: $(cat "$WORK/cluster.json")"

# ---------------------------------------------------------------- custom command
if [ -n "$RUN_IN_COORDINATOR" ]; then
  ensure_time "starting the command"
  log "in $NS_CO ($CO_ADDR), links $LINK_RATE: $RUN_IN_COORDINATOR"
  ip netns exec "$NS_CO" env LOCKSTEP_BIN="$BIN" LOCKSTEP_MODEL="$MODEL" \
    LOCKSTEP_CLUSTER_CONFIG="$WORK/cluster.json" \
    timeout -k 2 "$(remaining)" bash -c "$RUN_IN_COORDINATOR" &
  COORD_PID=$!
  wait "$COORD_PID"
  CMD_RC=$?
  COORD_PID=""
  [ "$CMD_RC" -eq 0 ] || fail "the command exited $CMD_RC"
  exit 0
fi

# ---------------------------------------------------------------- coordinator
ensure_time "starting the coordinator"
log "coordinator in $NS_CO ($CO_ADDR): --gen $GEN, plan $PLAN"
ip netns exec "$NS_CO" timeout -k 2 "$(remaining)" \
  "$BIN" coordinator --config "$WORK/cluster.json" "${PROMPT_ARGS[@]}" --gen "$GEN" --json \
  >"$WORK/coord.json" 2>"$WORK/coord.err" &
COORD_PID=$!

if [ "$FAULT" != none ]; then
  VICTIM=${NS_W[$FAULT_WORKER]}
  VICTIM_ADDR="${W_ADDR[$FAULT_WORKER]}:$PORT"
  # The decode is under way once the coordinator has received a good amount
  # of data (a step result of about 250 bytes per token, or with
  # --ship-logits 4 bytes per vocab entry), well beyond what the handshake
  # and heartbeats carry.
  coord_rx() {
    ip netns exec "$NS_CO" ss -Htin state established 2>/dev/null \
      | grep -o 'bytes_received:[0-9]*' | awk -F: '{s += $2} END {print s + 0}'
  }
  rx=0
  while [ $(( $(date +%s) - START )) -lt "$TIMEOUT" ]; do
    kill -0 "$COORD_PID" 2>/dev/null || break
    rx=$(coord_rx)
    [ "$rx" -ge "$FAULT_AFTER_BYTES" ] && break
    sleep 0.05
  done
  if [ "$rx" -lt "$FAULT_AFTER_BYTES" ]; then
    cat "$WORK/coord.err" >&2
    fail "the decode never got going before the fault (coordinator received $rx bytes)"
  fi
  sleep "$(awk -v ms="$FAULT_DELAY_MS" 'BEGIN{printf "%.3f", ms/1000}')"
  kill -0 "$COORD_PID" 2>/dev/null \
    || fail "the decode finished before the fault could be injected (raise --gen)"
  log "decode under way: coordinator has received $rx bytes"
  case "$FAULT" in
    link-down)
      log "fault: link of worker $FAULT_WORKER ($VICTIM_ADDR) set down"
      ip -n "$NS_SW" link set "vw$FAULT_WORKER" down
      ip -n "$VICTIM" link set eth0 down ;;
    kill-worker)
      log "fault: worker $FAULT_WORKER ($VICTIM_ADDR) killed (SIGKILL)"
      kill -KILL "${PIDS[$FAULT_WORKER]}" 2>/dev/null ;;
  esac
  T_FAULT=$(date +%s.%N)
fi

wait "$COORD_PID" 2>/dev/null
COORD_RC=$?
COORD_PID=""
ELAPSED=$(( $(date +%s) - START ))

if [ "$FAULT" != none ]; then
  T_END=$(date +%s.%N)
  DETECT=$(awk -v a="$T_FAULT" -v b="$T_END" 'BEGIN{printf "%.2f", b-a}')
  [ "$COORD_RC" -ne 124 ] && [ "$COORD_RC" -ne 137 ] \
    || { cat "$WORK/coord.err" >&2; fail "coordinator did not exit within the ${TIMEOUT}s bound after the fault (rc $COORD_RC)"; }
  [ "$COORD_RC" -ne 0 ] || fail "coordinator exited 0 although worker $FAULT_WORKER ($VICTIM_ADDR) was broken mid-decode"
  if ! grep -qF -e "$VICTIM_ADDR" "$WORK/coord.err"; then
    echo "---- coordinator stderr ----" >&2; cat "$WORK/coord.err" >&2
    fail "coordinator error does not name the broken worker $VICTIM_ADDR"
  fi
  # Daemons never exit because a peer failed: the other workers must still run.
  for ((i = 0; i < WORKERS; i++)); do
    [ "$i" -eq "$FAULT_WORKER" ] && continue
    kill -0 "${PIDS[$i]}" 2>/dev/null || { cat "$WORK/worker$i.log" >&2; fail "worker $i (${W_ADDR[$i]}:$PORT) exited after worker $FAULT_WORKER's failure"; }
  done
  log "coordinator exited $COORD_RC ${DETECT}s after the fault, naming the worker:"
  grep -F -e "$VICTIM_ADDR" "$WORK/coord.err" | head -n 3 | sed 's/^/    /'
  echo "[$SELF] PASS: fault '$FAULT' on worker $FAULT_WORKER detected (exit $COORD_RC, ${DETECT}s, ${ELAPSED}s total)"
  exit 0
fi

[ "$COORD_RC" -ne 124 ] && [ "$COORD_RC" -ne 137 ] \
  || { cat "$WORK/coord.err" >&2; fail "coordinator timed out (${TIMEOUT}s)"; }
if [ "$COORD_RC" -ne 0 ]; then
  echo "---- coordinator stderr ----" >&2; cat "$WORK/coord.err" >&2
  for ((i = 0; i < WORKERS; i++)); do echo "---- worker $i ----" >&2; tail -n 20 "$WORK/worker$i.log" >&2; done
  fail "coordinator exited $COORD_RC"
fi

# ---------------------------------------------------------------- compare
python3 - "$WORK/mono.json" "$WORK/coord.json" "$QUIET" "${REFERENCE_SEED:+expected}" <<'PY'
import json, sys
KEYS = ["prompt_token_ids", "generated_token_ids", "cis2_ref", "argmax_digest",
        "table_digest", "inv_freq_table_digest", "weights_sha256",
        "tokenizer_sha256", "config_sha256"]
def last_json(path):
    # The JSON object is the last line that parses (tolerates log lines before it).
    obj = None
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.strip()
        if line.startswith("{"):
            try: obj = json.loads(line)
            except ValueError: pass
    if obj is None:
        sys.exit(f"FAIL: no JSON object in {path}:\n" + open(path).read()[:2000])
    return obj
mono, shard = last_json(sys.argv[1]), last_json(sys.argv[2])
bad = []
for k in KEYS:
    if k not in mono:
        bad.append(f"monolithic output lacks {k}")
    elif k not in shard:
        bad.append(f"sharded output lacks {k}")
    elif mono[k] != shard[k]:
        bad.append(f"{k}: monolithic {mono[k]} != sharded {shard[k]}")
if bad:
    tag = "expected difference: " if sys.argv[4] == "expected" else "FAIL: "
    print("\n".join(tag + b for b in bad), file=sys.stderr)
    sys.exit(1)
if sys.argv[3] != "1":
    for k in KEYS:
        v = mono[k]
        print(f"    {k:22} = {v}")
    if "plan" in shard: print(f"    {'plan (sharded)':22} = {shard['plan']}")
PY
CMP_RC=$?
if [ -n "$REFERENCE_SEED" ]; then
  [ "$CMP_RC" -eq 1 ] || fail "the comparison did not notice a reference from another model (rc $CMP_RC)"
  echo "[$SELF] PASS: a reference from seed $REFERENCE_SEED is reported as different (${ELAPSED}s)"
  exit 0
fi
[ "$CMP_RC" -eq 0 ] || fail "sharded digests differ from the monolithic run"
echo "[$SELF] PASS: sharded == monolithic over $WORKERS worker namespaces, links $LINK_RATE (${ELAPSED}s)"
exit 0
