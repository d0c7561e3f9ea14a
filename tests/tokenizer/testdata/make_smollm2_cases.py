#!/usr/bin/env python3
"""Writes smollm2_cases.json: seeded random texts and their ids under the
SmolLM2 tokenizer.json, computed by this independent, deliberately simple
implementation of CIS-2 §3.1: special tokens cut first, Digits +
GPT-2 regex via Python's `regex`, byte map, then GPT-2's classic BPE loop
(merge every occurrence of the lowest-ranked pair, left to right). Byte
symbols missing from the vocab are dropped, as the tokenizers crate does.

Run from this directory: python3 make_smollm2_cases.py SHARED_DIR
"""
import json
import random
import sys
import unicodedata

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_map():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def words(text):
    pieces, current = [], ""
    for ch in text:
        if unicodedata.category(ch).startswith("N"):
            if current:
                pieces.append(current)
                current = ""
            pieces.append(ch)
        else:
            current += ch
    if current:
        pieces.append(current)
    for piece in pieces:
        for m in PATTERN.finditer(piece):
            yield m.group()


class Bpe:
    def __init__(self, doc):
        self.vocab = doc["model"]["vocab"]
        self.ranks = {}
        for i, m in enumerate(doc["model"]["merges"]):
            pair = tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
            self.ranks[pair] = i
        self.specials = sorted((t["content"] for t in doc["added_tokens"]), key=len, reverse=True)
        self.bytes = byte_map()

    def word_ids(self, word):
        symbols = [self.bytes[b] for b in word.encode("utf-8")]
        symbols = [s for s in symbols if s in self.vocab]
        while len(symbols) > 1:
            pairs = {(a, b) for a, b in zip(symbols, symbols[1:])}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        return [self.vocab[s] for s in symbols]

    def encode(self, text):
        ids, pos, plain = [], 0, ""
        while pos < len(text):
            hit = next((s for s in self.specials if text.startswith(s, pos)), None)
            if hit is None:
                plain += text[pos]
                pos += 1
                continue
            ids += self.encode_plain(plain)
            plain = ""
            ids.append(self.vocab[hit])
            pos += len(hit)
        return ids + self.encode_plain(plain)

    def encode_plain(self, text):
        return [i for w in words(text) for i in self.word_ids(w)]


PARTS = ["the", " the", " cat", " sat", " on", " mat", "Once", " upon", " a", " time", ",", ".",
         "!", "?", " ", "  ", "\n", "\n\n", "\t", "42", " 7", "don't", " I'm", " we'll", "'s",
         "caf\u00e9", " na\u00efve", "\u65e5\u672c\u8a9e", " \u043f\u0440\u0438\u0432\u0435\u0442",
         "\U0001f600", " \u0928\u092e\u0938\u094d\u0924\u0947", "<|endoftext|>", "<|im_start|>",
         "<|im_end|>", "(x)", "x**2", "==", "\u2014", "\u00a0", "\x04", "\u00bd", "e\u0301",
         " tokenization", " antidisestablishmentarianism", "ALLCAPS", "CamelCase", "snake_case"]


def main():
    shared = sys.argv[1]
    with open(shared + "/fixtures/smollm2-135m/tokenizer.json", encoding="utf-8") as f:
        bpe = Bpe(json.load(f))
    rng = random.Random(31337)
    cases = []
    for _ in range(400):
        text = "".join(rng.choice(PARTS) for _ in range(rng.randint(0, 10)))
        cases.append({"text": text, "ids": bpe.encode(text)})
    about = ("SmolLM2 ids computed by make_smollm2_cases.py (Python regex + classic GPT-2 BPE), "
             "an implementation independent of engine/tokenizer")
    with open("smollm2_cases.json", "w", encoding="ascii") as f:
        f.write('{"about": %s,\n "cases": [\n' % json.dumps(about))
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
