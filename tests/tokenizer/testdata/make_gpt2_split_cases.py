#!/usr/bin/env python3
"""Writes gpt2_split_cases.json: seeded random strings and how the
SmolLM2 pre-tokenizer (Digits(individual_digits) then the GPT-2 regex,
CIS-2 §3.1.4) splits them, computed with Python's `regex` module and
`unicodedata` -- an implementation independent of ours (ICU).

Run from this directory: python3 make_gpt2_split_cases.py
"""
import json
import random
import unicodedata

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

# Long-assigned characters only, so Unicode-version differences cannot show.
ALPHABET = list("aZeS'stdmlrv ") + [
    "  ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u3000", "\u2028",
    "\u2029", "\u200b", "\u2003", "\x1c", "\x1f", "\u180e", "\u00ad", "\u2060",
    "1", "\u0663", "\u00bd", "\u216b", "\u00b2", "\U0001d7d9", "\u65e5", "\u672c",
    "\u30fc", "\u0301", "\u093f", "\u0928", "\U0001f600", "\U0001f469\u200d\U0001f467",
    "!", "?", ".", "\u2014", "_", "\u2019", "\x00", "\x7f", "\ufeff", "\u01c5",
    "\u02b0", "\u3007", "\U00010348", "\u00e9",
]


def digits_split(text):
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
    return pieces


def split(text):
    words = []
    for piece in digits_split(text):
        pos = 0
        for m in PATTERN.finditer(piece):
            if m.start() > pos:
                words.append(piece[pos:m.start()])
            if m.end() > m.start():
                words.append(m.group())
            pos = m.end()
        if pos < len(piece):
            words.append(piece[pos:])
    return words


def main():
    rng = random.Random(20261129)
    cases = []
    for _ in range(800):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12)))
        cases.append({"text": text, "words": split(text)})
    about = ("GPT-2 pre-tokenizer splits (Digits(individual_digits) + GPT-2 regex) "
             "computed with Python regex/unicodedata by make_gpt2_split_cases.py")
    with open("gpt2_split_cases.json", "w", encoding="ascii") as f:
        f.write('{"about": %s,\n "cases": [\n' % json.dumps(about))
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
