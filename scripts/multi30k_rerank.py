"""Right-to-left reranking in the Multi30k recipe (scripts/multi30k.py):
models trained on the targets with each line's words reversed score the
selected system's n-best list, and the mix of both directions' scores that
does best on val picks each sentence's translation."""
import itertools
import json
import os
import subprocess


def die(message):
    raise SystemExit(f"multi30k.py: {message}")


def reverse_words(path, out):
    if os.path.exists(out) and os.path.getsize(out) > 0:
        return
    with open(path, encoding="utf-8") as f, open(out + ".part", "w", encoding="utf-8") as g:
        for line in f:
            g.write(" ".join(reversed(line.split())) + "\n")
    os.replace(out + ".part", out)


def train_r2l(r, first_seed, k, distilled):
    """K right-to-left models on the (distilled) targets with each line's words
    reversed; the first trains its SentencePiece models, the others share them."""
    target = f"train.distilled.{r.tgt}" if distilled else f"train.{r.tgt}"
    for name in (target, f"val.{r.tgt}"):
        reverse_words(r.path(name), r.path(name + ".r2l"))
    folders = [f"{r.run}/r2l-{i}" for i in range(1, k + 1)]
    for i, folder in enumerate(folders, 1):
        spm = r.shared_spm("r2l-1") if i > 1 else ()
        r.train_model(first_seed + i, folder, target + ".r2l", f"val.{r.tgt}.r2l", spm)
    return folders


def nbest_scores(r, best, r2l_models, prefix, source):
    """The selected system's n-best list of SOURCE (PREFIX.nbest) and each
    hypothesis's log-probability under it (PREFIX.l2r) and the r2l models (PREFIX.r2l)."""
    r.nmt_translate(best["models"], ["-b", str(best["beam"]), "--n-best", str(best["beam"]),
                                     "--length-penalty", best["lp"], "-i", source, "-o", prefix + ".nbest"],
                    prefix + ".nbest.log")
    sources = open(source, encoding="utf-8").read().split("\n")
    with open(prefix + ".nbest", encoding="utf-8") as f, open(prefix + ".pairs", "w", encoding="utf-8") as p, \
            open(prefix + ".pairs.r2l", "w", encoding="utf-8") as q:
        for line in f:
            i, hyp = line.rstrip("\n").split(" ||| ")[:2]
            p.write(f"{sources[int(i)]}\t{hyp}\n")
            q.write(f"{sources[int(i)]}\t{' '.join(reversed(hyp.split()))}\n")
    r.nmt_translate(best["models"], ["--score-pairs", "-i", prefix + ".pairs", "-o", prefix + ".l2r"],
                    prefix + ".l2r.log")
    r.nmt_translate([f"{d}/best.ckpt" for d in r2l_models],
                    ["--score-pairs", "-i", prefix + ".pairs.r2l", "-o", prefix + ".r2l"], prefix + ".r2l.log")


def rerank(prefix, w, a, out):
    """Each sentence's best hypothesis of PREFIX's n-best list under weight W and length exponent A."""
    best = {}
    with open(prefix + ".nbest", encoding="utf-8") as n, open(prefix + ".l2r") as p, open(prefix + ".r2l") as q:
        for line, lp, rp in zip(n, p, q):
            i, hyp = line.rstrip("\n").split(" ||| ")[:2]
            score = ((1 - w) * float(lp) + w * float(rp)) / ((5 + len(hyp.split()) + 1) / 6) ** a
            if int(i) not in best or score > best[int(i)][0]:
                best[int(i)] = (score, hyp)
    with open(out + ".part", "w", encoding="utf-8") as f:
        for i in range(max(best) + 1):
            f.write(best[i][1] + "\n")
    os.replace(out + ".part", out)


def evaluate(r, hyp, ref, scores, log_path=None):
    """The score of HYP against REF (nmt-translate --evaluate, its scores in
    SCORES, its log in LOG_PATH or beside SCORES)."""
    with open(log_path or scores[:-len(".json")] + ".log", "w") as log:
        cmd = [f"{r.bin}/nmt-translate", "--evaluate", "-i", hyp, "--reference", ref, "--scores-json", scores]
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=log).returncode != 0:
            die(f"nmt-translate --evaluate failed (see {log.name})")
    return json.load(open(scores))[r.key]


def choose_rerank(r, best, r2l_models):
    """(w, a, score) of the reranking that beats the plain output on val, or None."""
    prefix = f"{r.sel}/rerank-val"
    nbest_scores(r, best, r2l_models, prefix, r.path(f"val.{r.src}"))
    chosen, top = None, best["score"]
    for w, a in itertools.product((0.0, 0.25, 0.5, 0.75), (0.6, 1.0, 1.4)):
        out = f"{prefix}-w{w}-a{a}"
        rerank(prefix, w, a, out + ".out")
        score = r.logged(f"{best['name']}+r2l-w{w}-a{a}", best["beam"], best["lp"],
                         evaluate(r, out + ".out", r.path(f"val.{r.tgt}"), out + ".json"))
        if score > top:
            chosen, top = (w, a, score), score
    return chosen
