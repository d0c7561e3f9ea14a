#!/usr/bin/env python3
"""A sharded decode over links that each add a one-way delay.

  bench/link_latency.py --lockstep build/cli/lockstep --model M \\
      [--workers 3] [--delay-ms 0,2,5] [--gen 32] [--runs 3]
      [--ids 1,2,3,4,5,6,7,8] [--temperature T --seed S] [--speculative]

Starts K `lockstep worker` processes on loopback TCP (CURVE keys made with
`lockstep keygen`) and, in front of each, a proxy that holds every chunk it
forwards, in both directions, for the delay before passing it on. The
cluster config names the proxies, so every link into worker k goes
through proxy k: the coordinator's, the previous stage's and the last
stage's relayed steps into the first. `lockstep coordinator --json` then
decodes (with --speculative: proposals checked as multi-row steps, one
trip through the links for several tokens), and the script prints its
per-token time against the delay.

A token through the coordinator crosses K + 1 links (coordinator, the
stages, back); relayed (docs/runtime.md, "Relayed steps"), K. So each ms
of one-way delay should add K ms a token, not K + 1. The proxy itself
costs ~0.1 ms a hop on a loaded 2-core VM, in the 0-delay row too.
"""
import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def pump(reader, writer, delay):
    """Copies reader -> writer, each chunk `delay` seconds after it came."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.ensure_future(send())
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            queue.put_nowait((loop.time() + delay, data))
    finally:
        queue.put_nowait((0, None))
        await sender


def run_proxies(pairs, delay, ready):
    """pairs: [(listen_port, target_port)]; serves until the process exits."""
    async def main():
        async def handle(reader, writer, target):
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
            for w in (writer, up_writer):  # as ZeroMQ's own sockets: no Nagle delay
                w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await asyncio.gather(pump(reader, up_writer, delay), pump(up_reader, writer, delay),
                                 return_exceptions=True)

        for listen, target in pairs:
            await asyncio.start_server(lambda r, w, t=target: handle(r, w, t), "127.0.0.1", listen)
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def decode(args, config):
    cmd = [args.lockstep, "coordinator", "--config", config, "--ids", args.ids, "--gen",
           str(args.gen), "--json"]
    if args.speculative:
        cmd.append("--speculative")
    if args.temperature > 0:
        cmd += ["--temperature", str(args.temperature), "--seed", str(args.seed)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit("coordinator failed: " + out.stderr)
    return json.loads(out.stdout)


def timing(report):
    """The decode's ms per token from `coordinator --json`, wherever it sits."""
    def find(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "decode_ms_per_token_sharded":
                    return v
                r = find(v)
                if r is not None:
                    return r
        return None
    ms = find(report)
    if ms is None:
        sys.exit("no decode_ms_per_token_sharded in the coordinator's report")
    return ms


def measure(args, delay_ms, tmp):
    keys = os.path.join(tmp, f"keys{delay_ms}")
    os.makedirs(keys, mode=0o700)
    for name in ["c"] + [f"w{i}" for i in range(args.workers)]:
        subprocess.run([args.lockstep, "keygen", os.path.join(keys, name)], check=True,
                       capture_output=True)
    workers, pairs = [], []
    for i in range(args.workers):
        port = free_port()
        workers.append(subprocess.Popen(
            [args.lockstep, "worker", "--listen", f"tcp://127.0.0.1:{port}", "--threads",
             str(args.threads), "--key", os.path.join(keys, f"w{i}"), "--allow",
             os.path.join(keys, "c.pub")], stderr=subprocess.DEVNULL))
        pairs.append((free_port(), port))
    ready = threading.Event()
    threading.Thread(target=run_proxies, args=(pairs, delay_ms / 1000.0, ready),
                     daemon=True).start()
    ready.wait()
    time.sleep(0.5)  # the workers bind
    config = os.path.join(tmp, f"cluster{delay_ms}.json")
    with open(config, "w") as f:
        json.dump({"model": args.model, "plan": "auto",
                   "workers": [f"tcp://127.0.0.1:{p}" for p, _ in pairs],
                   "key": os.path.join(keys, "c"),
                   "worker_keys": [os.path.join(keys, f"w{i}.pub") for i in range(args.workers)],
                   "request_timeout_ms": 60000}, f)
    try:
        runs = [decode(args, config) for _ in range(args.runs)]
    finally:
        for w in workers:
            w.terminate()
            w.wait()
    ms = [timing(r) for r in runs]
    digests = {r["cis2_ref"] for r in runs}
    return statistics.median(ms), min(ms), max(ms), digests


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lockstep", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--delay-ms", default="0,2,5")
    p.add_argument("--gen", type=int, default=32)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--ids", default="1,2,3,4,5,6,7,8", help="prompt token ids")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sample at this temperature (0: greedy)")
    p.add_argument("--seed", type=int, default=1, help="the sampler's seed")
    p.add_argument("--speculative", action="store_true",
                   help="decode with prompt-lookup speculation (the same digests)")
    args = p.parse_args()
    delays = [float(d) for d in args.delay_ms.split(",")]
    rows, digests = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for d in delays:
            med, lo, hi, ds = measure(args, d, tmp)
            digests |= ds
            rows.append((d, med, lo, hi))
    base = rows[0][1]
    print(f"{args.workers} workers of {args.threads} thread(s), --gen {args.gen}, "
          f"{'speculative, ' if args.speculative else ''}"
          f"{args.runs} runs per delay (median, min-max)")
    print("| one-way delay per link | ms/token | min-max | added per ms of delay |")
    print("|---|---|---|---|")
    for d, med, lo, hi in rows:
        per = f"{(med - base) / d:.2f}" if d > 0 else "-"
        print(f"| {d:g} ms | {med:.2f} | {lo:.2f}-{hi:.2f} | {per} |")
    print("every run's CIS2_REF equal: " + ("yes" if len(digests) == 1 else f"NO: {digests}"))


if __name__ == "__main__":
    main()
