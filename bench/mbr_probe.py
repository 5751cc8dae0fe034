#!/usr/bin/env python3
"""Minimum Bayes risk choice from a beam's n-best list against its first
choice: for every source line, the hypothesis with the highest expected
sentence BLEU against the other hypotheses of its list, each weighted by the
model's posterior renormalized over the list, softmax(score / T).

  bench/mbr_probe.py NBEST REFERENCE [NMT_TRANSLATE]

NBEST: nmt-translate --n-best output ('i ||| text ||| LogProb= x Length= n
LengthPenalty= p ||| score', best first), REFERENCE: the source's reference,
one line each. The posterior is taken from the length-normalized score and
from the raw log-probability, at temperatures 0.5, 1 and 2 and uniform.
Prints one line per choice with its corpus BLEU (NMT_TRANSLATE --evaluate,
default build/nmt-translate; the tokenized text is scored as it is, the tok
form's figure: sacreBLEU --tokenize none). Dies when a line of NBEST is not of that form or the scoring
fails."""
import collections
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from multi30k_distill import sentence_bleu  # noqa: E402  (the recipe's, add-one smoothed)


def read_nbest(path):
    """The n-best lists of PATH in input order: each hypothesis (tokens, log P, normalized score)."""
    lists = collections.defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                index, text, features, score = line.rstrip("\n").split(" ||| ")
                values = dict(zip(features.split()[::2], map(float, features.split()[1::2])))
                lists[int(index)].append((text.split(), values["LogProb="], float(score)))
            except (ValueError, KeyError):
                sys.exit(f"mbr_probe.py: {path}:{number}: not an nmt-translate --n-best line")
    return [lists[i] for i in range(len(lists))]


def mbr_choice(hyps, temperature, normalized):
    """The hypothesis of HYPS with the highest expected sentence BLEU under the posterior."""
    scores = [(h[2] if normalized else h[1]) / temperature for h in hyps]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights)
    gains = [sum(w / total * sentence_bleu(h[0], other[0]) for w, other in zip(weights, hyps)) for h in hyps]
    return hyps[max(range(len(hyps)), key=gains.__getitem__)][0]


def bleu(lines, reference, translate):
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/hyp", "w", encoding="utf-8") as f:
            f.writelines(" ".join(tokens) + "\n" for tokens in lines)
        if subprocess.run([translate, "--evaluate", "-i", f"{tmp}/hyp", "--reference", reference,
                           "--scores-json", f"{tmp}/scores"], capture_output=True).returncode != 0:
            sys.exit("mbr_probe.py: nmt-translate --evaluate failed")
        return json.load(open(f"{tmp}/scores"))["bleu_none"]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    lists, reference = read_nbest(sys.argv[1]), sys.argv[2]
    translate = sys.argv[3] if len(sys.argv) == 4 else "build/nmt-translate"
    print(f"first choice\t{bleu([l[0][0] for l in lists], reference, translate):.2f}")
    choices = [(f"{'normalized score' if n else 'log P'}, T {t}", t, n) for n in (True, False) for t in (0.5, 1.0, 2.0)]
    for kind, temperature, normalized in choices + [("uniform", math.inf, True)]:
        lines = [mbr_choice(l, temperature, normalized) for l in lists]
        print(f"MBR, {kind}\t{bleu(lines, reference, translate):.2f}")

if __name__ == "__main__":
    main()
