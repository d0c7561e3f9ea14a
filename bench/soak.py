#!/usr/bin/env python3
"""Soak of `lockstep serve`: twice as many clients as the server has
sessions (--max-sessions) send completions back to back for --minutes.
Every answer must be a 200 whose tokens equal the solo `lockstep run` of
the same request, or a 429 with Retry-After (the client waits that long and
sends again); anything else (another status, a wrong answer, a connection
error) is a failure. Reports the counts, latency percentiles of the 200s
and the server's resident memory once warm and at the end, sampled every
10 s, as one JSON object (and a line of text on stderr).

  bench/soak.py --lockstep build/cli/lockstep --model DIR --minutes 10 \\
      --max-sessions 8 [--workers 3] [--threads 2] [--shared-prefix 8]

Sharded (--workers K) with --max-sessions 64 and --shared-prefix: the
prefix cache's sessions on the workers and the live ones together reach
the workers' own session limit; every refusal must still be a 429.

Exit status 1 when any request failed. tests/server/server_test.py
(SoakTest) runs a bounded form of the same soak on every test run.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def solo(args, body):
    out = subprocess.run([args.lockstep, "run", "--model", args.model, "--ids",
                          ",".join(map(str, body["prompt"])), "--gen", str(body["max_tokens"]),
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["generated_token_ids"]


def bodies(n, shared_prefix=0):
    """n distinct requests; with shared_prefix, the first that many prompt
    tokens are common to all (so the server's prefix cache holds and hits)."""
    head = [(k * 37) % 400 + 1 for k in range(shared_prefix)]
    return [{"prompt": head + [(i * 131 + k * 7) % 400 + 1 for k in range(4 + i % 13)],
             "max_tokens": 8 + (i * 5) % 25} for i in range(n)]


def rss_kib(pid):
    """Resident memory of process `pid` (VmRSS), KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Server:
    def __init__(self, args):
        cmd = [args.lockstep, "serve", "--model", args.model, "--listen", "127.0.0.1:0",
               "--threads", str(args.threads), "--max-sessions", str(args.max_sessions)]
        if args.workers:
            cmd += ["--workers", str(args.workers)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError("server did not start: %r" % line)
        self.url = "http://127.0.0.1:%s/v1/completions" % line.strip().rsplit(":", 1)[1]

    def rss_kib(self):
        return rss_kib(self.proc.pid)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))] if s else float("nan")


def soak(url, rss_kib, work, want, clients, seconds, sample_s=10):
    """`clients` threads posting work[i] (round robin) to `url` for
    `seconds`: the counts, failures and latencies, and rss_kib() sampled
    every `sample_s` seconds from the start to the end."""
    stop = time.time() + seconds
    lock = threading.Lock()
    out = {"ok": 0, "busy": 0, "failures": [], "latency": []}

    def client(c):
        i = c
        while time.time() < stop:
            i = (i + 1) % len(work)
            t0 = time.perf_counter()
            try:
                status, headers, raw = post(url, work[i])
                good = status == 200 and json.loads(raw)["receipt"]["generated_token_ids"] == want[i]
                busy = status == 429 and headers.get("Retry-After") is not None
                what = None if good or busy else "%d %s" % (status, raw[:200])
            except Exception as e:  # a failure to count, not to stop on
                good = busy = False
                what = repr(e)
            with lock:
                out["ok"] += good
                out["busy"] += busy
                if good:
                    out["latency"].append(time.perf_counter() - t0)
                if what:
                    out["failures"].append(what)
            if busy:
                time.sleep(float(headers.get("Retry-After", "1")))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    rss = []
    while any(t.is_alive() for t in threads):
        rss.append(rss_kib())
        time.sleep(min(sample_s, max(0.1, stop - time.time())))
    for t in threads:
        t.join()
    rss.append(rss_kib())
    return out, rss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lockstep", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--max-sessions", type=int, default=8)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--distinct", type=int, default=24, help="distinct requests (each run solo once)")
    p.add_argument("--shared-prefix", type=int, default=0,
                   help="prompt tokens every request shares (the prefix cache's load)")
    args = p.parse_args()
    work = bodies(args.distinct, args.shared_prefix)
    want = [solo(args, b) for b in work]
    server = Server(args)
    try:
        load0 = os.getloadavg()[0]
        out, rss = soak(server.url, server.rss_kib, work, want, 2 * args.max_sessions,
                        args.minutes * 60)
        load1 = os.getloadavg()[0]
    finally:
        server.stop()
    warm = rss[min(len(rss) - 1, max(1, len(rss) // 6))]  # after the first sixth
    report = {
        "minutes": args.minutes, "clients": 2 * args.max_sessions, "max_sessions": args.max_sessions,
        "workers": args.workers, "threads": args.threads, "shared_prefix": args.shared_prefix,
        "ok": out["ok"], "429": out["busy"],
        "failures": len(out["failures"]), "first_failures": out["failures"][:5],
        "latency_p50_ms": round(pct(out["latency"], 50) * 1e3, 1),
        "latency_p99_ms": round(pct(out["latency"], 99) * 1e3, 1),
        "rss_first_kib": rss[0], "rss_warm_kib": warm, "rss_end_kib": rss[-1], "rss_max_kib": max(rss),
        "load_avg": [round(load0, 1), round(load1, 1)],
    }
    print(json.dumps(report))
    print("%d ok, %d 429, %d failures; RSS warm %d KiB -> end %d KiB (max %d)" % (
        out["ok"], out["busy"], len(out["failures"]), warm, rss[-1], max(rss)), file=sys.stderr)
    sys.exit(1 if out["failures"] else 0)


if __name__ == "__main__":
    main()
