#!/usr/bin/env python3
"""Right-to-left rescoring that keeps the search's log P_l2r (translate/rescorer.h)
against forced decoding of every hypothesis, as the rescorer did before: the time
of each, and whether any choice of the recipe's grid of weights and length
exponents (scripts/multi30k_rerank.py) picks another hypothesis.

  bench/rescore_reuse.py L2R_CKPT R2L_CKPT SOURCE [BEAM] [THREADS]

Runs build/nmt-translate once with --r2l-model (its n-best list carries each
hypothesis' L2R, R2L and Words features), then --score-pairs on every
hypothesis' text with the L2R model (what the rescorer computed before for all
of them), and prints: both times, the largest difference between the kept and
the forced log P_l2r, and per (w, a) the lines whose first choice differs.
Dies when a command fails."""
import os
import subprocess
import sys
import tempfile
import time


def run(cmd, **kw):
    t0 = time.time()
    subprocess.run(cmd, check=True, **kw)
    return time.time() - t0


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    l2r, r2l, source = sys.argv[1:4]
    beam = sys.argv[4] if len(sys.argv) > 4 else "10"
    threads = sys.argv[5] if len(sys.argv) > 5 else "2"
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "nmt-translate")
    tmp = tempfile.mkdtemp(prefix="rescore_reuse.")
    nbest, pairs, forced = (os.path.join(tmp, n) for n in ("nbest.txt", "pairs.tsv", "forced.txt"))
    common = ["--threads", threads, "--length-penalty", "1.4", "-b", beam]
    t_plain = run([tool, "-m", l2r, "--n-best", beam, "-i", source, "-o", os.path.join(tmp, "plain.txt")] + common,
                  stderr=subprocess.DEVNULL)
    t_rescore = run([tool, "-m", l2r, "--r2l-model", r2l, "--n-best", beam, "-i", source, "-o", nbest] + common,
                    stderr=subprocess.DEVNULL)
    sources = open(source, encoding="utf-8").read().split("\n")[:-1]
    rows = []  # (line, text, kept l2r, r2l, words)
    for line in open(nbest, encoding="utf-8"):
        index, text, features, _ = line.rstrip("\n").split(" ||| ")
        f = features.split()
        value = {f[i].rstrip("="): float(f[i + 1]) for i in range(len(f) - 1) if f[i].endswith("=")}
        rows.append((int(index), text, value["L2R"], value["R2L"], value["Words"]))
    with open(pairs, "w", encoding="utf-8") as g:
        for index, text, *_ in rows:
            g.write(f"{sources[index]}\t{text}\n")
    t_forced = run([tool, "-m", l2r, "--score-pairs", "--threads", threads, "-i", pairs, "-o", forced],
                   stderr=subprocess.DEVNULL)
    again = [float(x) for x in open(forced).read().split()]
    diffs = [abs(k - f) for (_, _, k, _, _), f in zip(rows, again)]
    print(f"lines {len(sources)}, hypotheses {len(rows)}, beam {beam}, threads {threads}")
    print(f"seconds: search alone {t_plain:.1f}; search and rescoring (kept log P_l2r) {t_rescore:.1f}; "
          f"forced decoding of every hypothesis by the l2r model {t_forced:.1f}")
    print(f"kept against forced log P_l2r: largest difference {max(diffs):.2e}, "
          f"hypotheses off by more than 1e-3: {sum(d > 1e-3 for d in diffs)}")
    by_line = {}
    for row, f in zip(rows, again):
        by_line.setdefault(row[0], []).append((row, f))
    for w in (0.0, 0.25, 0.5, 0.75):
        for a in (0.6, 1.0, 1.4):
            def best(entries, use_forced):
                def mix(e):
                    (_, _, kept, back, words), f = e
                    return ((1 - w) * (f if use_forced else kept) + w * back) / ((5 + words + 1) / 6) ** a
                return max(range(len(entries)), key=lambda i: (mix(entries[i]), -i))
            differ = sum(best(e, False) != best(e, True) for e in by_line.values())
            print(f"w {w} a {a}: lines whose choice differs {differ}")


if __name__ == "__main__":
    main()
