#!/usr/bin/env python3
"""The Hansards pairs the alignment runs train on: every pair of 3 to 40 words
on both sides, shuffled with seed 1; the first 500 are written as
OUT/valid.{en,fr}, the next N as OUT/train.{en,fr}. So every N gives the same
validation pairs, and a smaller N's training pairs are the first of a larger's.

    scripts/hansards_pairs.py HANSARDS_DIR OUT N
"""
import gzip
import random
import sys

src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
read = lambda f: gzip.open(f"{src}/train.{f}.gz", "rt", encoding="utf-8").read().split("\n")
pairs = [(e.strip(), f.strip()) for e, f in zip(read("en"), read("fr"))
         if 3 <= len(e.split()) <= 40 and 3 <= len(f.split()) <= 40]
random.seed(1)
random.shuffle(pairs)
for name, part in (("valid", pairs[:500]), ("train", pairs[500:500 + n])):
    for k, lang in ((0, "en"), (1, "fr")):
        with open(f"{out}/{name}.{lang}", "w", encoding="utf-8") as f:
            f.write("".join(p[k] + "\n" for p in part))
