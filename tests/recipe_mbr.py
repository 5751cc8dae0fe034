"""NMT_MBR=1 in the Multi30k recipe (scripts/multi30k_mbr.py), on the Recipe
and run folder that tests/recipe_test.py's runs leave. Exits through check()
when a check fails."""
import json

from recipe_util import check


def forced(path, score):
    """Sets PATH's (a scores .json) bleu_none to SCORE."""
    with open(path) as f:
        scores = json.load(f)
    with open(path, "w") as f:
        json.dump({**scores, "bleu_none": score}, f)


def mbr_choice(r, run):
    """Every temperature and length penalty is tried on val beside the plain pick,
    which is the system's own translation (reranked where it reranks); none
    is kept that does not beat it. With one setting forced best on val and
    on both halves of it, the system is named +mbr, carries the setting, and
    translates as that setting did; the result file's entry records it."""
    from multi30k_mbr import SETTINGS, mbr_stage, result_info
    from multi30k_rerank import Rerank, rerank
    from multi30k_select import translation_name
    models, r2l = [f"{run}/model-1/best.ckpt"], [f"{run}/r2l-1"]
    best = {"name": "model-1-mbr", "models": models, "beam": 4, "lp": "1.0"}
    best["score"] = r.translate(translation_name("model-1-mbr", 4, "1.0"), 4, "1.0", models)
    saved = r.out_tag, r.log_rows
    r.out_tag, r.log_rows = "-mbrtest", []  # a selection log of its own
    try:
        mbr_stage(r, dict(best), None)
        check(len(r.log_rows) == len(SETTINGS) == 6, f"each temperature and length penalty is logged: {r.log_rows}")
        prefix = f"{r.sel}/mbr-val-mbrtest-model-1-mbr"
        plain = open(f"{prefix}-plain.out").read()
        check(plain == open(f"{r.sel}/{translation_name('model-1-mbr', 4, '1.0')}.out").read(),
              "the plain pick is the system's own val translation")
        restore = {p: open(p).read() for p in (f"{prefix}-plain.json", f"{prefix}-plain.out.0.json",
                                               f"{prefix}-plain.out.1.json")}
        for path in restore:
            forced(path, 100.0)
        unbeaten = dict(best)
        run_ = mbr_stage(r, unbeaten, None)
        check(run_.chosen is None and unbeaten == best and run_.plain_score == 100.0,
              f"no setting beats a plain pick of 100: {run_}, {unbeaten}")
        for path, text in restore.items():
            with open(path, "w") as f:
                f.write(text)
        outs = {s: open(f"{prefix}-{s[0]}-t{s[1]}-lp{s[2]}.out").read() for s in SETTINGS}
        check(any(text != plain for text in outs.values()), "some setting picks otherwise than the search")
        setting = next(s for s, text in outs.items() if text != plain)
        out = f"{prefix}-{setting[0]}-t{setting[1]}-lp{setting[2]}"
        for path in (f"{out}.json", f"{out}.out.0.json", f"{out}.out.1.json"):
            forced(path, 100.0)
        kept = dict(best)
        run_ = mbr_stage(r, kept, None)
        check(run_.chosen == setting and kept["name"] == "model-1-mbr+mbr" and kept["mbr"] == list(setting[:2])
              and kept["lp"] == setting[2] and kept["score"] == 100.0, f"{setting} is kept: {run_}, {kept}")
        info = result_info(run_)
        check(info["utility"] == setting[0] and info["temperature"] == float(setting[1])
              and info["length_penalty"] == float(setting[2]) and info["val_bleu_without"] == best["score"],
              f"the result records the setting: {info}")
        rerank(r, kept, None, r.path("val.en"), f"{run}/mbr-system.out", f"{run}/mbr-system.log")
        check(open(f"{run}/mbr-system.out").read() == outs[setting], "the kept system translates as its setting did")
        # Over a reranked system the plain pick is the reranked translation.
        chosen = Rerank(0.5, 0.0, 1.0, 0.0, r2l, [])
        reranked = dict(best, name="model-1-mbr+r2l")
        rerank(r, reranked, chosen, r.path("val.en"), f"{run}/mbr-reranked.out", f"{run}/mbr-reranked.log")
        mbr_stage(r, reranked, chosen)
        check(open(f"{r.sel}/mbr-val-mbrtest-model-1-mbr+r2l-plain.out").read() ==
              open(f"{run}/mbr-reranked.out").read(), "over a reranked system the plain pick is the reranked one")
        log = open(f"{r.sel}/mbr-val-mbrtest-model-1-mbr+r2l-chrf-t0.5-lp1.0.log").read()
        check("rescoring the beam's 4 hypotheses" in log, f"each setting picks from the reranked beam:\n{log[-1500:]}")
    finally:
        r.out_tag, r.log_rows = saved
