#!/usr/bin/env python3
"""Reference for Llama-3 rope_scaling (EXTENSIONS.md E1), written apart from
the C++ code: a transcription of Hugging Face's _compute_llama3_parameters
in binary64 Python floats (IEEE double, round to nearest, no fused ops),
rounded once to binary32 by struct.

stdin:  line 1: factor low_freq_factor high_freq_factor original_max_position_embeddings
        line 2: the unscaled inv_freq table, f32 bit patterns in hex
stdout: line 1: the scaled table, f32 bit patterns in hex
        line 2: the band of each entry: L (low frequency, divided), M (smoothed), H (kept)
"""
import math
import struct
import sys


def f32_from_bits(h):
    return struct.unpack("<f", struct.pack("<I", int(h, 16)))[0]


def bits_of_f32(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def main():
    lines = sys.stdin.read().split("\n")
    factor, low, high, old = (float(v) for v in lines[0].split())
    inv_freq = [f32_from_bits(h) for h in lines[1].split()]
    low_freq_wavelen = old / low
    high_freq_wavelen = old / high
    out, bands = [], []
    for f in inv_freq:
        wavelen = 2 * math.pi / f
        llama = f / factor if wavelen > low_freq_wavelen else f
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = (not wavelen < high_freq_wavelen) and (not wavelen > low_freq_wavelen)
        out.append(bits_of_f32(smoothed if medium else llama))
        bands.append("M" if medium else ("L" if wavelen > low_freq_wavelen else "H"))
    print(" ".join(out))
    print("".join(bands))


if __name__ == "__main__":
    main()
