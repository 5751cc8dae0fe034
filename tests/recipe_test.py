#!/usr/bin/env python3
"""RecipeTest: the Multi30k recipe (scripts/multi30k.py) end to end on a tiny
corpus made from data/demo, with tiny models of a few steps: two teachers,
distillation, a student and a right-to-left model, selection on val, test,
and the result file; then the reranked distillation pick in the same run
folder, which must reuse the teachers and keep the first pick's files apart;
then the bad settings that must fail before anything trains.

  tests/recipe_test.py SOURCE_DIR BUILD_DIR

Exits 0 when every check holds, 1 with the failed check's line otherwise. It
needs no ../shared and writes only under a temporary folder."""
import glob
import json
import os
import subprocess
import sys
import tempfile

TINY = ("--max-steps 24 --vocab-size 200 --emb-dim 16 --enc-hidden 16 --dec-hidden 16 --attn-dim 16 "
        "--valid-every 12 --max-epochs 2")


def check(ok, what):
    if not ok:
        sys.exit(f"recipe_test.py: failed: {what}")


def make_data(source, folder, lines):
    """FOLDER: a Multi30k-shaped tok-form en-de corpus, the first LINES of data/demo's splits."""
    os.makedirs(folder)
    for split, demo, n in (("train", "train", lines), ("val", "valid", 30), ("test_2016_flickr", "test", 30)):
        for lang, side in (("en", "src"), ("de", "tgt")):
            with open(f"{source}/data/demo/{demo}.{side}", encoding="utf-8") as f:
                head = [next(f) for _ in range(n)]
            with open(f"{folder}/{split}.lc.norm.tok.{lang}", "w", encoding="utf-8") as g:
                g.writelines(head)


def recipe(source, env, **extra):
    """Runs the recipe with ENV and EXTRA variables; its exit code and output."""
    p = subprocess.run([sys.executable, f"{source}/scripts/multi30k.py", env["DATA"], "en-de", "tok"],
                       env={**env, **extra}, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def result(results, pattern):
    files = glob.glob(f"{results}/{pattern}")
    check(len(files) == 1, f"one result file {pattern} in {results}, found {files}")
    return json.load(open(files[0]))


def first_pick(source, env, run, results):
    rc, out = recipe(source, env)
    check(rc == 0, f"the top pick's run exits 0 (got {rc}):\n{out[-3000:]}")
    r = result(results, "multi30k-en-de-tok-*.json")
    check(r["distillation"]["pick"] == "top" and r["distillation"]["pick_rerank"] is None,
          f"the result names the top pick: {r['distillation']}")
    folders = sorted(os.path.basename(t["folder"]) for t in r["training"])
    check(folders == ["model-1", "model-2", "r2l-1", "student-1"], f"the models trained: {folders}")
    check(r["rerank"] is not None and r["rerank"]["r2l_models"] == 1, f"the reranking: {r['rerank']}")
    check(r["selection_on_val"] and r["bleu_lc_tok"] is not None, "a selection table and a test score")
    return {name: open(f"{run}/{name}").read() for name in ("select/selection.tsv", "test.scores.json")}


def second_pick(source, env, run, results, kept):
    rc, out = recipe(source, env, NMT_DISTILL_PICK="reranked")
    check(rc == 0, f"the reranked pick's run exits 0 (got {rc}):\n{out[-3000:]}")
    for model in ("model-1", "model-2", "r2l-1"):
        check(f"{run}/{model}: trained earlier, kept" in out, f"{model} is reused, not trained again")
    r = result(results, "multi30k-en-de-tok-reranked-*.json")
    d = r["distillation"]
    check(d["pick"] == "reranked", f"the result names the reranked pick: {d}")
    folders = sorted(os.path.basename(t["folder"]) for t in r["training"])
    check(folders == ["model-1", "model-2", "r2l-1", "student-reranked-1"], f"the models: {folders}")
    if d["pick_rerank"]:  # reranking beat the teachers on val: the students learnt its translation
        with open(f"{run}/data/train.distilled-reranked.de") as f:
            check(sum(1 for _ in f) == 200, "the reranked translation has a line per training pair")
    else:
        check("the students learn the top pick" in out, "the fallback to the top pick is said")
    for name, text in kept.items():
        check(open(f"{run}/{name}").read() == text, f"the top pick's {name} is left as it was")
    for name in ("select/selection-reranked.tsv", "test-reranked.scores.json", "test-single-reranked.scores.json"):
        check(os.path.exists(f"{run}/{name}"), f"the reranked pick writes {name}")


def bad_settings(source, env, tmp):
    for extra, words in (({"NMT_DISTILL_PICK": "best"}, "NMT_DISTILL_PICK must be one of"),
                         ({"NMT_DISTILL_PICK": "reranked", "NMT_R2L": "0"}, "needs right-to-left models"),
                         ({"NMT_JOBS": "0"}, "NMT_JOBS must be at least 1")):
        run = f"{tmp}/bad"
        rc, out = recipe(source, {**env, "NMT_RUN": run}, **extra)
        check(rc == 1 and words in out, f"{extra} fails with '{words}' (got {rc}: {out[-500:]})")
        check(not os.path.exists(f"{run}/model-1"), f"{extra} fails before anything trains")


def main():
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="nmt-recipe-") as tmp:
        make_data(source, f"{tmp}/data", 200)
        run, results = f"{tmp}/run", f"{tmp}/results"
        env = {**os.environ, "DATA": f"{tmp}/data", "NMT_RUN": run, "NMT_BUILD_DIR": build,
               "NMT_RESULTS_DIR": results, "NMT_SEEDS": "2", "NMT_DISTILL": "1", "NMT_R2L": "1",
               "NMT_JOBS": "2", "NMT_THREADS": "1", "NMT_TRAIN_FLAGS": TINY}
        for name in ("NMT_DISTILL_PICK", "NMT_TRAIN_ONLY", "NMT_VAL_ONLY"):
            env.pop(name, None)
        bad_settings(source, env, tmp)
        kept = first_pick(source, env, run, results)
        second_pick(source, env, run, results, kept)
    print("recipe_test.py: every check holds")


if __name__ == "__main__":
    main()
