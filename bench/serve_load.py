#!/usr/bin/env python3
"""Load generator for `lockstep serve`: C concurrent streaming clients, each
sending `--requests` completions back to back; reports aggregate generated
tokens/s, time to first token and inter-token latency (p50/p99).

usage: bench/serve_load.py --url http://127.0.0.1:8080 --clients 1,4,8,16
           [--prompt-len 32] [--max-tokens 64] [--requests 2] [--json]
"""
import argparse
import json
import statistics
import threading
import time

import requests


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def one_client(url, idx, args, ttft, itl, tokens):
    for r in range(args.requests):
        prompt = [(idx * 131 + r * 17 + k * 7) % 1000 + 1 for k in range(args.prompt_len)]
        body = {"prompt": prompt, "max_tokens": args.max_tokens, "stream": True}
        t0 = time.perf_counter()
        last = None
        n = 0
        with requests.post(url + "/v1/completions", json=body, stream=True, timeout=600) as resp:
            resp.raise_for_status()
            for line in resp.iter_lines():
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
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
        tokens.append(n)


def run(url, clients, args):
    ttft, itl, tokens = [], [], []
    threads = [threading.Thread(target=one_client, args=(url, i, args, ttft, itl, tokens))
               for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"clients": clients, "requests": len(tokens), "generated_tokens": sum(tokens),
            "wall_s": round(wall, 3), "aggregate_tok_s": round(sum(tokens) / wall, 1),
            "ttft_p50_ms": round(pct(ttft, 50) * 1e3, 1), "ttft_p99_ms": round(pct(ttft, 99) * 1e3, 1),
            "itl_p50_ms": round(pct(itl, 50) * 1e3, 2), "itl_p99_ms": round(pct(itl, 99) * 1e3, 2)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--clients", default="1,4,8,16")
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--requests", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = [run(args.url, int(c), args) for c in args.clients.split(",")]
    if args.json:
        print(json.dumps(rows))
        return
    print("%7s %9s %10s %10s %10s %10s %10s" % ("clients", "tok/s", "ttft p50", "ttft p99",
                                                "itl p50", "itl p99", "requests"))
    for r in rows:
        print("%7d %9.1f %8.1fms %8.1fms %8.2fms %8.2fms %10d" % (
            r["clients"], r["aggregate_tok_s"], r["ttft_p50_ms"], r["ttft_p99_ms"],
            r["itl_p50_ms"], r["itl_p99_ms"], r["requests"]))


if __name__ == "__main__":
    main()
