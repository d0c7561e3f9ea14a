#!/usr/bin/env bash
# CTest entry: run-netns-test.sh LOCKSTEP_BIN NETNS_CLUSTER_SCRIPT [script args...]
# Exit 77 (SKIPPED) with a reason when the machine cannot host the test.
set -uo pipefail
BIN=$1; SCRIPT=$2; shift 2
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: multihost test needs root for network namespaces (uid $(id -u))"
  exit 77
fi
if ! command -v ip >/dev/null 2>&1; then
  echo "SKIPPED: iproute2 ('ip') is not installed"
  exit 77
fi
probe="lsmh-probe-$$-$RANDOM"
if ! ip netns add "$probe" 2>/dev/null; then
  echo "SKIPPED: 'ip netns add' is not permitted here (no CAP_SYS_ADMIN or no netns support)"
  exit 77
fi
ip netns del "$probe" 2>/dev/null
exec bash "$SCRIPT" --bin "$BIN" "$@"
