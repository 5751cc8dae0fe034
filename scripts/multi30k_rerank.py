"""Right-to-left reranking in the Multi30k recipe (scripts/multi30k.py):
models trained on the targets with each line's words reversed rescore the
selected system's beam (nmt-translate --r2l-model), with the weight and
length exponent that do best on val."""
import concurrent.futures
import itertools
import json
import os
import subprocess

from multi30k_cache import cached, fresh, newer, record, translator


def die(message):
    raise SystemExit(f"multi30k.py: {message}")


def reverse_words(path, out):
    """OUT: PATH with each line's words reversed (kept when newer than PATH)."""
    if newer(out, path):
        return
    with open(path, encoding="utf-8") as f, open(out + ".part", "w", encoding="utf-8") as g:
        for line in f:
            g.write(" ".join(reversed(line.split())) + "\n")
    os.replace(out + ".part", out)


def r2l_specs(r, first_seed, k, distilled):
    """The K right-to-left models' folders and training specs (Recipe.train_models())
    on the (distilled) targets with each line's words reversed (written now);
    the first trains its SentencePiece models, the others share them."""
    target = f"train.distilled.{r.tgt}" if distilled else f"train.{r.tgt}"
    for name in (target, f"val.{r.tgt}"):
        reverse_words(r.path(name), r.path(name + ".r2l"))
    folders = [f"{r.run}/r2l-{i}" for i in range(1, k + 1)]
    return folders, [(first_seed + i, folder, target + ".r2l", f"val.{r.tgt}.r2l",
                      r.shared_spm("r2l-1") if i > 1 else ()) for i, folder in enumerate(folders, 1)]


def train_r2l(r, first_seed, k, distilled):
    """Trains (or keeps) r2l_specs()'s models; returns their folders."""
    folders, specs = r2l_specs(r, first_seed, k, distilled)
    r.train_models(specs)
    return folders


def rerank(r, best, r2l_models, w, a, source, out, log):
    """OUT: the selected system's translation of SOURCE, its beam rescored by
    the R2L_MODELS folders' models under weight W and length exponent A
    (nmt-translate --r2l-model)."""
    r2l = [arg for d in r2l_models for arg in ("--r2l-model", f"{d}/best.ckpt")]
    r.nmt_translate(best["models"], ["-b", str(best["beam"]), "--length-penalty", best["lp"], *r2l,
                                     "--r2l-weight", str(w), "--r2l-length-exponent", str(a),
                                     "-i", source, "-o", out], log)


def evaluate(r, hyp, ref, scores, log_path=None):
    """The score of HYP against REF (nmt-translate --evaluate, its scores in
    SCORES, its log in LOG_PATH or beside SCORES)."""
    with open(log_path or scores[:-len(".json")] + ".log", "w") as log:
        cmd = [f"{r.bin}/nmt-translate", "--evaluate", "-i", hyp, "--reference", ref, "--scores-json", scores]
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=log).returncode != 0:
            die(f"nmt-translate --evaluate failed (see {log.name})")
    return json.load(open(scores))[r.key]


def choose_rerank(r, best, r2l_models):
    """(w, a, score) of the reranking of system BEST (its name, models, beam,
    length penalty and val score) that beats its plain output on val, or None.
    One run rescores the system's whole beam on val into the n-best list
    select/rerank-val[-PICK]-NAME.nbest (the pick's tag: two picks may select
    the same system), whose features hold each hypothesis' two
    log-probabilities and words; each setting's choice from it is
    select/rerank-val[-PICK]-NAME-wW-aA.out, as nmt-translate --r2l-weight W
    --r2l-length-exponent A would choose (to the features' six places). Each
    is reused when made with the same models, settings and nmt-translate, and
    nothing is newer. Dies as the translation and scoring do."""
    prefix = f"{r.sel}/rerank-val{r.tag}-{best['name']}"
    settings = list(itertools.product((0.0, 0.25, 0.5, 0.75), (0.6, 1.0, 1.4)))
    r2l = [f"{d}/best.ckpt" for d in r2l_models]
    inputs = [r.path(f"val.{r.src}"), r.path(f"val.{r.tgt}")] + list(best["models"]) + r2l
    made = (f"{' '.join(best['models'])} beam {best['beam']} length penalty {best['lp']} | r2l "
            f"{' '.join(r2l)} | nmt-translate {translator(r.bin)}")
    nbest = prefix + ".nbest"
    if not fresh(nbest, nbest + ".models", made, inputs):
        beam = str(best["beam"])
        r.nmt_translate(best["models"], ["-b", beam, "--n-best", beam, "--length-penalty", best["lp"],
                                         *[a for m in r2l for a in ("--r2l-model", m)], "-i", inputs[0],
                                         "-o", nbest], prefix + ".nbest.log")
        with open(nbest + ".models", "w") as f:
            f.write(made + "\n")
    lists = read_rescored(nbest)

    def score(setting):  # reused as Recipe.translate() reuses a translation
        out, made_so = f"{prefix}-w{setting[0]}-a{setting[1]}", f"{made} | w {setting[0]} a {setting[1]}"
        reused = cached(out, made_so, inputs + [nbest], r.key)
        if reused is not None:
            return reused
        with open(out + ".out.part", "w", encoding="utf-8") as f:
            f.writelines(max(hyps, key=lambda h: mix(h, *setting))[0] + "\n" for hyps in lists)
        os.replace(out + ".out.part", out + ".out")
        evaluate(r, out + ".out", inputs[1], out + ".json")
        return record(out, made_so, r.key)

    with concurrent.futures.ThreadPoolExecutor(r.jobs) as pool:  # NMT_JOBS at a time
        scores = list(pool.map(score, settings))
    chosen, top = None, best["score"]
    for (w, a), s in zip(settings, scores):
        r.logged(f"{best['name']}+r2l-w{w}-a{a}", best["beam"], best["lp"], s)
        if s > top:
            chosen, top = (w, a, s), s
    return chosen


def read_rescored(path):
    """The n-best lists of nmt-translate --r2l-model --n-best (Moses' form, its
    features with L2R=, R2L= and Words=), one per input line in order: each
    (text, log P_l2r, log P_r2l, words) in the file's order. Dies on an entry
    without them."""
    lists = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            index, text, features = line.rstrip("\n").split(" ||| ")[:3]
            values = dict(zip(features.split()[::2], features.split()[1::2]))
            if not {"L2R=", "R2L=", "Words="} <= values.keys():
                die(f"{path}:{number}: no L2R=, R2L= and Words= features (not a rescored n-best list: "
                    "an nmt-translate older than the recipe? scripts/build.sh)")
            while len(lists) <= int(index):
                lists.append([])
            lists[int(index)].append((text, float(values["L2R="]), float(values["R2L="]), int(values["Words="])))
    return lists


def mix(hyp, w, a):
    """The reranking score of HYP (text, log P_l2r, log P_r2l, words) under
    weight W and length exponent A, as nmt-translate --r2l-model mixes them."""
    return ((1 - w) * hyp[1] + w * hyp[2]) / ((5 + hyp[3] + 1) / 6) ** a
