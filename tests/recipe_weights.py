"""NMT_ENSEMBLE_WEIGHTS=1 in the Multi30k recipe (scripts/multi30k_weights.py),
on the run folder that tests/recipe_test.py's runs leave, through the recipe
itself. Exits through check() when a check fails."""
import glob
import json
import os

from recipe_util import check, recipe, result


def forced(path, score):
    """Sets PATH's (a scores .json) bleu_none to SCORE; returns its text before."""
    kept = open(path).read()
    with open(path, "w") as f:
        json.dump({**json.loads(kept), "bleu_none": score}, f)
    return kept


def weighted_ensemble(source, env, run, results):
    """With the ensemble of every model best on val (its score forced), each
    member is tried left out and at twice the others' weight, in a selection
    log of its own, and none is kept when none beats it. With one setting
    forced best on val and on both halves of it, that weighting is the
    system: the reranking's n-best list and the test translation are made
    with its weights, which the result file records."""
    students = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(f"{run}/student-*/trained"))
    k = 2 + len(students)
    name, sel = f"ensemble-{k}-all", f"{run}/select"
    restore = {f"{sel}/{name}-b5.json": forced(f"{sel}/{name}-b5.json", 99.0)}
    try:
        rc, out = recipe(source, env, NMT_ENSEMBLE="all", NMT_ENSEMBLE_WEIGHTS="1", NMT_VAL_ONLY="1")
        check(rc == 0, f"the weighted run exits 0 (got {rc}):\n{out[-3000:]}")
        check(": training" not in out, "no model trains")
        rows = [line.split("\t")[0] for line in open(f"{sel}/selection-all-weighted.tsv")][1:]
        for i in range(1, k + 1):
            check(f"{name}-drop{i}" in rows and f"{name}-up{i}" in rows, f"member {i} left out and weighed: {rows}")
        check(f"ensemble weights of {name}: best on val 99.0 against 99.0; held out" in out and "not kept" in out,
              f"no weighting beats the forced ensemble:\n{out[-3000:]}")
        up1 = open(f"{sel}/{name}-up1-b5.log").read()
        check("an ensemble of " + str(k) + " weighted 2 " + " ".join(["1"] * (k - 1)) in up1,
              f"-up1 translates with member 1 at weight 2:\n{up1[-2000:]}")
        drop1 = open(f"{sel}/{name}-drop1-b5.log").read()
        check(f"an ensemble of {k - 1} (" in drop1 or f"an ensemble of {k - 1})" in drop1,
              f"-drop1 translates without member 1:\n{drop1[-2000:]}")
        # up1 best on val and on each half of it: kept, and the system from then on.
        up1_out = f"{sel}/{name}-up1-b5.out"
        for path in (f"{sel}/{name}-up1-b5.json", f"{up1_out}.0.json", f"{up1_out}.1.json"):
            restore[path] = forced(path, 100.0)
        rc, out = recipe(source, env, NMT_ENSEMBLE="all", NMT_ENSEMBLE_WEIGHTS="1")
        check(rc == 0, f"the weighted run with a kept weighting exits 0 (got {rc}):\n{out[-3000:]}")
        check("kept" in out and "not kept" not in out.split(f"ensemble weights of {name}")[1].splitlines()[0],
              f"-up1 is kept:\n{out[-3000:]}")
        weights = [2] + [1] * (k - 1)
        res = result(results, "multi30k-en-de-tok-all-weighted-*.json")
        check(res["selected"]["models"].startswith(f"{name}-up1") and res["selected"]["weights"] == weights,
              f"the weighted ensemble is the system: {res['selected']}")
        check(res["ensemble_weights"]["chosen"] == "up1" and res["ensemble_weights"]["weights"] == weights
              and res["ensemble_weights"]["val_bleu_without"] == 99.0,
              f"the result records the weighting: {res['ensemble_weights']}")
        wanted = "weighted 2 " + " ".join(["1"] * (k - 1))
        nbest_log = open(f"{sel}/rerank-val-{name}-up1.nbest.log").read()
        check(wanted in nbest_log, f"the reranking's n-best list is the weighted system's:\n{nbest_log[-2000:]}")
        tests = "".join(open(p).read() for p in glob.glob(f"{run}/test-all-weighted*.log"))
        check(wanted in tests, f"the test translation is the weighted system's:\n{tests[-2000:]}")
    finally:
        for path, text in restore.items():
            with open(path, "w") as f:
                f.write(text)
