#!/usr/bin/env python3
"""Where a pipeline step's time goes, from LOCKSTEP_STEP_TIMELINE marks.

  LOCKSTEP_STEP_TIMELINE=/tmp/tl lockstep run --model M --workers 3 ...
  bench/step_timeline.py /tmp/tl [--skip-first N]

Reads every /tmp/tl.<pid> (base/step_timeline.h; one clock for all the
processes of a host), joins the marks of each (session, step) and prints
the median of each segment of a step, in the order a step passes them, over
the steps that have every mark (the first N steps of each session, the
prompt, are skipped; default 1).
"""
import glob
import statistics
import sys
from collections import defaultdict

(C_REQUEST, C_SEND, C_RECEIVE, C_RESOLVED, W_RECEIVE, W_ADMITTED, COMPUTE_START,
 COMPUTE_END, W_SEND, W_SENT) = range(10)


def load(prefix):
    marks = defaultdict(dict)  # (session, step) -> {(event, stage): ns}
    for path in glob.glob(prefix + ".*"):
        with open(path) as f:
            for line in f:
                event, stage, session, step, ns = map(int, line.split())
                key = (event, stage if event >= W_RECEIVE else 0)
                marks[(session, step)].setdefault(key, ns)
    return marks


def segments(m, stages):
    """[(name, ns)] for one step, or None if a mark is missing."""
    out = []
    def seg(name, a, b):
        if a not in m or b not in m:
            raise KeyError(name)
        out.append((name, m[b] - m[a]))
    try:
        seg("coordinator: session -> I/O thread", (C_REQUEST, 0), (C_SEND, 0))
        seg("hop coordinator -> stage 0", (C_SEND, 0), (W_RECEIVE, 0))
        for k in range(stages):
            seg(f"stage {k}: parse, verify, admit", (W_RECEIVE, k), (W_ADMITTED, k))
            seg(f"stage {k}: I/O -> compute thread", (W_ADMITTED, k), (COMPUTE_START, k))
            seg(f"stage {k}: compute + marshal", (COMPUTE_START, k), (COMPUTE_END, k))
            seg(f"stage {k}: compute -> I/O thread", (COMPUTE_END, k), (W_SEND, k))
            if k + 1 < stages:
                seg(f"hop stage {k} -> stage {k + 1}", (W_SEND, k), (W_RECEIVE, k + 1))
        seg(f"hop stage {stages - 1} -> coordinator", (W_SEND, stages - 1), (C_RECEIVE, 0))
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
        segs = segments(m, stages)
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
        if "compute + marshal" not in name and name != "total":
            overhead += med
        print(f"{name:45s} {med:9.1f} {v[len(v) // 10]:9.1f} {v[(9 * len(v)) // 10]:9.1f}")
    print(f"{'sum of the medians outside compute':45s} {overhead:9.1f}")


if __name__ == "__main__":
    main()
