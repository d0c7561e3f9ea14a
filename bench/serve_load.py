#!/usr/bin/env python3
"""Load generator for `lockstep serve`: C concurrent streaming clients, each
sending `--requests` completions of a `--prompt-len`-token id prompt back
to back; reports aggregate generated tokens/s, time to first token (request
sent -> first streamed chunk) and inter-token latency (gap between chunks;
the server streams one chunk per step that yields a token), p50/p99, with
the 1-minute load average beside each row.

Against a running server:
  bench/serve_load.py --url http://127.0.0.1:8080 --clients 1,4,8,16
Or starting the servers itself (one monolithic, one per --workers value)
and printing a ready-to-paste markdown table, with `lockstep bench`'s
decode figure on the same model for comparison:
  bench/serve_load.py --lockstep build/cli/lockstep --model DIR \\
      --workers 0,3 --threads 2 --clients 1,4,8,16 --markdown
"""
import argparse
import http.client
import itertools
import json
import os
import subprocess
import threading
import time


REQUEST_NUMBER = itertools.count()


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def one_client(url, idx, args, ttft, itl, tokens):
    # http.client's readline returns each event as soon as it arrives
    # (requests' iter_lines waits for 512 bytes, i.e. several events).
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    for r in range(args.requests):
        # Every request of the whole run starts with its own token, so no
        # prompt shares a prefix with an earlier one (no prefix-cache hits).
        first = next(REQUEST_NUMBER)
        prompt = [(first * 131 + k * 7) % 49000 + 1 for k in range(args.prompt_len)]
        body = json.dumps({"prompt": prompt, "max_tokens": args.max_tokens, "stream": True})
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError("HTTP %d: %s" % (resp.status, resp.read()[:200]))
        last = None
        n = 0
        for line in iter(resp.readline, b""):
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            now = time.perf_counter()
            chunk = json.loads(line[6:])
            if "usage" in chunk:
                n = chunk["usage"]["completion_tokens"]
                continue
            if last is None:
                ttft.append(now - t0)
            else:
                itl.append(now - last)
            last = now
        conn.close()
        tokens.append(n)


def run(url, clients, args):
    ttft, itl, tokens = [], [], []
    threads = [threading.Thread(target=one_client, args=(url, i, args, ttft, itl, tokens))
               for i in range(clients)]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    load = max(load, os.getloadavg()[0])
    return {"clients": clients, "requests": len(tokens), "generated_tokens": sum(tokens),
            "wall_s": round(wall, 3), "aggregate_tok_s": round(sum(tokens) / wall, 1),
            "ttft_p50_ms": round(pct(ttft, 50) * 1e3, 1), "ttft_p99_ms": round(pct(ttft, 99) * 1e3, 1),
            "itl_p50_ms": round(pct(itl, 50) * 1e3, 2), "itl_p99_ms": round(pct(itl, 99) * 1e3, 2),
            "load_avg": round(load, 1)}


class Server:
    """`lockstep serve` on a free loopback port; workers 0 = in process."""

    def __init__(self, args, workers):
        cmd = [args.lockstep, "serve", "--model", args.model, "--listen", "127.0.0.1:0",
               "--threads", str(args.threads)] + args.serve_arg
        if workers:
            cmd += ["--workers", str(workers)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError("server did not start: %r" % line)
        self.url = "http://127.0.0.1:%s" % line.strip().rsplit(":", 1)[1]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def bench_decode(args):
    """`lockstep bench`'s single-session decode tok/s on the same model."""
    out = subprocess.run([args.lockstep, "bench", "--model", args.model, "--threads",
                          str(args.threads), "--gen", str(args.max_tokens), "--prompt-len",
                          str(args.prompt_len), "--repeats", "1", "--json"],
                         check=True, capture_output=True, text=True).stdout
    report = json.loads(out.strip().splitlines()[-1])
    return report, round(os.getloadavg()[0], 1)


def print_plain(rows):
    print("%8s %7s %9s %10s %10s %10s %10s %6s" % ("mode", "clients", "tok/s", "ttft p50",
                                                    "ttft p99", "itl p50", "itl p99", "load"))
    for r in rows:
        print("%8s %7d %9.1f %8.1fms %8.1fms %8.2fms %8.2fms %6.1f" % (
            r.get("mode", "-"), r["clients"], r["aggregate_tok_s"], r["ttft_p50_ms"],
            r["ttft_p99_ms"], r["itl_p50_ms"], r["itl_p99_ms"], r["load_avg"]))


def print_markdown(rows, bench):
    print("| serving | clients | aggregate tok/s | x 1 client | TTFT p50 | TTFT p99 "
          "| inter-token p50 | inter-token p99 | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    one = {}
    for r in rows:
        base = one.setdefault(r["mode"], r["aggregate_tok_s"])
        print("| %s | %d | %.1f | %.1fx | %.0f ms | %.0f ms | %.1f ms | %.1f ms | %.1f |" % (
            r["mode"], r["clients"], r["aggregate_tok_s"], r["aggregate_tok_s"] / base,
            r["ttft_p50_ms"], r["ttft_p99_ms"], r["itl_p50_ms"], r["itl_p99_ms"], r["load_avg"]))
    print()
    for r in rows:
        if r["clients"] == 1:
            print("- %s, 1 client: decode %.1f tok/s (1 / inter-token p50)" % (
                r["mode"], 1e3 / r["itl_p50_ms"]))
    if bench:
        report, load = bench
        print("- `lockstep bench`, same model and threads (load avg %.1f): decode %.1f tok/s, "
              "decode_cpu_share %.2f" % (load, report["decode_tok_s"],
                                         report.get("decode_cpu_share", float("nan"))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", help="a running server (else --lockstep and --model start them)")
    p.add_argument("--lockstep")
    p.add_argument("--model")
    p.add_argument("--workers", default="0", help="comma list; 0 = monolithic")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--serve-arg", action="append", default=[], help="extra serve flag")
    p.add_argument("--clients", default="1,4,8,16")
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--requests", type=int, default=2)
    p.add_argument("--json", action="store_true")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    rows, bench = [], None
    if args.url:
        for c in clients:
            rows.append(dict(run(args.url, c, args), mode="server"))
    else:
        if not (args.lockstep and args.model):
            p.error("give --url, or --lockstep and --model")
        bench = bench_decode(args)  # first, beside the 1-client rows
        for w in (int(x) for x in args.workers.split(",")):
            server = Server(args, w)
            try:
                run(server.url, 1, argparse.Namespace(**dict(vars(args), requests=1)))  # warm up
                mode = "%d workers" % w if w else "monolithic"
                for c in clients:
                    rows.append(dict(run(server.url, c, args), mode=mode))
            finally:
                server.stop()
    if args.json:
        print(json.dumps({"rows": rows, "bench": bench[0] if bench else None}))
    elif args.markdown:
        print_markdown(rows, bench)
    else:
        print_plain(rows)


if __name__ == "__main__":
    main()
