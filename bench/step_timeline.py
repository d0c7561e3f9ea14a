#!/usr/bin/env python3
"""Where a pipeline step's time goes, from LOCKSTEP_STEP_TIMELINE marks.

  LOCKSTEP_STEP_TIMELINE=/tmp/tl lockstep run --model M --workers 3 ...
  bench/step_timeline.py /tmp/tl [--skip-first N]

Reads every /tmp/tl.<pid> (base/step_timeline.h; one clock for all the
processes of a host), joins the marks of each (session, step) and prints
the median of each segment of a step, in the order a step passes them, over
the steps that have every mark (the first N steps of each session, the
prompt, are skipped; default 1).

A relayed step (the last stage sent it to the first itself, docs/runtime.md
"Relayed steps") starts with that hop instead of the coordinator's; its
StepResult still goes to the coordinator, off the token's path, and its
total is the time from its relay to the next one (a token's cycle).
"""
import glob
import statistics
import sys
from collections import defaultdict

(C_REQUEST, C_SEND, C_RECEIVE, C_RESOLVED, W_RECEIVE, W_ADMITTED, COMPUTE_START,
 COMPUTE_END, W_SEND, W_SENT, W_RELAY) = range(11)
OFF_PATH = " (off the token's path)"


def load(prefix):
    marks = defaultdict(dict)  # (session, step) -> {(event, stage): ns}
    for path in glob.glob(prefix + ".*"):
        with open(path) as f:
            for line in f:
                event, stage, session, step, ns = map(int, line.split())
                key = (event, stage if event >= W_RECEIVE else 0)
                marks[(session, step)].setdefault(key, ns)
    return marks


def segments(m, stages, following):
    """[(name, ns)] for one step, or None if a mark is missing. following:
    the next step's marks (a relayed step's total runs to its relay)."""
    out = []
    def seg(name, a, b, mb=None):
        mb = m if mb is None else mb
        if a not in m or b not in mb:
            raise KeyError(name)
        out.append((name, mb[b] - m[a]))
    last = stages - 1
    relayed = (W_RELAY, last) in m
    try:
        if relayed:
            seg(f"hop stage {last} -> stage 0 (relayed)", (W_RELAY, last), (W_RECEIVE, 0))
        else:
            seg("coordinator: session -> I/O thread", (C_REQUEST, 0), (C_SEND, 0))
            seg("hop coordinator -> stage 0", (C_SEND, 0), (W_RECEIVE, 0))
        for k in range(stages):
            seg(f"stage {k}: parse, verify, admit", (W_RECEIVE, k), (W_ADMITTED, k))
            seg(f"stage {k}: I/O -> compute thread", (W_ADMITTED, k), (COMPUTE_START, k))
            seg(f"stage {k}: compute + marshal", (COMPUTE_START, k), (COMPUTE_END, k))
            if k + 1 < stages:
                seg(f"stage {k}: compute -> I/O thread", (COMPUTE_END, k), (W_SEND, k))
                seg(f"hop stage {k} -> stage {k + 1}", (W_SEND, k), (W_RECEIVE, k + 1))
        if relayed and following is not None and (W_RELAY, last) in following:
            seg(f"stage {last}: compute -> relay sent", (COMPUTE_START, last), (W_RELAY, last),
                following)
            out[-1] = (out[-1][0], out[-1][1] - dict(out)[f"stage {last}: compute + marshal"])
            seg(f"hop stage {last} -> coordinator" + OFF_PATH, (W_SEND, last), (C_RECEIVE, 0))
            seg("coordinator: parse, I/O -> session thread" + OFF_PATH, (C_RECEIVE, 0),
                (C_RESOLVED, 0))
            seg("total (relay to relay)", (W_RELAY, last), (W_RELAY, last), following)
        elif relayed:
            raise KeyError("the last relayed step")
        else:
            seg(f"stage {last}: compute -> I/O thread", (COMPUTE_END, last), (W_SEND, last))
            seg(f"hop stage {last} -> coordinator", (W_SEND, last), (C_RECEIVE, 0))
            seg("coordinator: parse, I/O -> session thread", (C_RECEIVE, 0), (C_RESOLVED, 0))
            seg("total", (C_REQUEST, 0), (C_RESOLVED, 0))
    except KeyError:
        return None
    return out


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    prefix = args[0]
    skip = int(args[args.index("--skip-first") + 1]) if "--skip-first" in args else 1
    marks = load(prefix)
    stages = 1 + max((k[1] for m in marks.values() for k in m if k[0] >= W_RECEIVE), default=0)
    rows = defaultdict(list)
    order = []
    for (session, step), m in sorted(marks.items()):
        if step < skip:
            continue
        segs = segments(m, stages, marks.get((session, step + 1)))
        if segs is None:
            continue
        for name, ns in segs:
            if name not in rows:
                order.append(name)
            rows[name].append(ns / 1e3)
    if not order:
        sys.exit("no step has every mark")
    n = len(rows[order[0]])
    print(f"{n} steps, {stages} stages; microseconds: median, p10, p90")
    overhead = 0.0
    for name in order:
        v = sorted(rows[name])
        med = statistics.median(v)
        if "compute + marshal" not in name and not name.startswith("total") and \
                not name.endswith(OFF_PATH):
            overhead += med
        print(f"{name:45s} {med:9.1f} {v[len(v) // 10]:9.1f} {v[(9 * len(v)) // 10]:9.1f}")
    print(f"{'sum of the medians outside compute':45s} {overhead:9.1f}")


if __name__ == "__main__":
    main()
