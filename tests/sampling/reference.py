#!/usr/bin/env python3
"""An independent transcription of docs/sampling.md (and CIS-2 §6.2's
pinned exp), in plain Python with every f32 operation rounded through
struct. It generates seeded random cases, asks the C++ probe (argv[1])
which token ChooseToken picks, and fails on the first disagreement.

Python does a binary f32 operation in double and rounds once; for +, -, *
and / of f32 operands that equals the correctly rounded f32 result. The
cases avoid subnormals, where FTZ/DAZ would differ from Python.
"""
import math
import random
import struct
import subprocess
import sys

MASK64 = (1 << 64) - 1


def f32(x):
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def to_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


EXP_LOG2E, EXP_C1, EXP_C2 = from_bits(0x3FB8AA3B), from_bits(0x3F318000), from_bits(0xB95E8083)
EXP_P = [from_bits(b) for b in (0x39506967, 0x3AB743CE, 0x3C088908, 0x3D2AA9C1, 0x3E2AAAAA,
                                 0x3F000000)]


def ldexp_exact(x, k):
    if x == 0.0:
        return x
    bits = to_bits(x)
    new_exp = ((bits >> 23) & 0xFF) + k
    if new_exp <= 0:
        return 0.0
    if new_exp >= 0xFF:
        return -math.inf if bits >> 31 else math.inf
    return from_bits((bits & ~(0xFF << 23) & 0xFFFFFFFF) | (new_exp << 23))


def exp_pinned(x):
    if math.isnan(x):
        return x
    if x > 88.0:
        return math.inf
    if x < -88.0:
        return 0.0
    t = f32(x * EXP_LOG2E)
    z0 = f32(t + 0.5)
    k = float(math.floor(z0))
    r = f32(f32(x - f32(k * EXP_C1)) - f32(k * EXP_C2))
    r2 = f32(r * r)
    poly = EXP_P[0]
    for c in EXP_P[1:]:
        poly = f32(f32(poly * r) + c)
    result = f32(f32(f32(poly * r2) + r) + 1.0)
    return ldexp_exact(result, int(k))


def splitmix_uniform(seed, step):
    """Output number step+1 of SplitMix64 seeded with `seed`, top 24 bits / 2^24."""
    state = seed
    for _ in range(step + 1):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z = z ^ (z >> 31)
    return (z >> 40) / 16777216.0


def choose(logits, temperature, top_k, top_p, seed, step):
    if temperature == 0.0:
        best = 0
        for i, v in enumerate(logits):
            if v > logits[best]:
                best = i
        return best
    z = [f32(v / temperature) for v in logits]
    m = max(z)  # the cases hold no NaN, so the float order is the bit order
    e = [exp_pinned(f32(v - m)) for v in z]
    cands = sorted((i for i in range(len(z)) if e[i] > 0.0), key=lambda i: (-z[i], i))
    if top_k > 0:
        cands = cands[:top_k]
    if top_p < 1.0:
        s = 0.0
        for i in cands:
            s = f32(s + e[i])
        threshold = f32(top_p * s)
        run = 0.0
        for j, i in enumerate(cands):
            run = f32(run + e[i])
            if run >= threshold:
                cands = cands[: j + 1]
                break
    total = 0.0
    for i in cands:
        total = f32(total + e[i])
    target = f32(splitmix_uniform(seed, step) * total)
    run = 0.0
    for i in cands:
        run = f32(run + e[i])
        if run > target:
            return i
    return cands[-1]


def make_case(rng):
    n = rng.choice([1, 2, 3, 5, 17, 64, 300])
    kind = rng.random()
    if kind < 0.2:  # many ties
        logits = [f32(rng.choice([-1.0, 0.0, 0.5, 2.0])) for _ in range(n)]
    elif kind < 0.3:  # a wide range, some far below the max
        logits = [f32(rng.uniform(-200.0, 30.0)) for _ in range(n)]
    else:
        logits = [f32(rng.gauss(0.0, 3.0)) for _ in range(n)]
    temperature = rng.choice([0.0, f32(0.001), f32(0.3), f32(0.7), 1.0, f32(1.5), 100.0])
    top_k = rng.choice([0, 0, 1, 2, 5, 40])
    top_p = rng.choice([1.0, 1.0, f32(0.9), f32(0.5), f32(0.05)])
    seed = rng.choice([0, 1, 42, rng.getrandbits(64)])
    step = rng.choice([0, 1, 7, rng.randrange(0, 5000)])
    return logits, temperature, top_k, top_p, seed, step


def main():
    probe = sys.argv[1]
    rng = random.Random(20260930)
    cases = [make_case(rng) for _ in range(3000)]
    # Vocabulary-sized cases: the candidate sort must order tens of
    # thousands of keys, many tied, spread over signs and exponents.
    for n in (4096, 49152, 49152, 65536):
        pool = [f32(rng.gauss(0.0, 4.0)) for _ in range(97)] + [0.0, -0.0]
        logits = [rng.choice(pool) if rng.random() < 0.5 else f32(rng.uniform(-90.0, 20.0))
                  for _ in range(n)]
        for t, k, p in ((f32(0.8), 0, 1.0), (f32(0.7), 0, f32(0.9)), (1.0, 40, 1.0)):
            cases.append((logits, t, k, p, rng.getrandbits(64), rng.randrange(0, 5000)))
    lines = []
    for logits, t, k, p, seed, step in cases:
        lines.append(" ".join([str(seed), str(step), "%08x" % to_bits(t), str(k), "%08x" % to_bits(p),
                               str(len(logits))] + ["%08x" % to_bits(v) for v in logits]))
    out = subprocess.run([probe], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.split()
    assert len(out) == len(cases), "probe answered %d of %d cases" % (len(out), len(cases))
    sampled = 0
    for idx, (case, got) in enumerate(zip(cases, out)):
        want = choose(*case)
        if int(got) != want:
            logits, t, k, p, seed, step = case
            print("case %d: C++ chose %s, the reference %d (t=%r top_k=%d top_p=%r seed=%d step=%d n=%d)"
                  % (idx, got, want, t, k, p, seed, step, len(logits)))
            return 1
        sampled += case[1] != 0.0
    # The test must have exercised the non-greedy path with varied answers.
    assert sampled > 2000, sampled
    print("%d cases agree (%d sampled)" % (len(cases), sampled))
    return 0


if __name__ == "__main__":
    sys.exit(main())
