"""Member weights for the Multi30k recipe's selected ensemble
(scripts/multi30k.py, NMT_ENSEMBLE_WEIGHTS=1): an equal-weight ensemble of
many models can score below a subset of them, so before the reranking each
member of the selected ensemble is tried left out, and weighed twice the
others (nmt-translate --ensemble-weights), at the system's beam and length
penalty on val. The best of these replaces the system only where it beats it
on val and the choice holds on held-out lines, as the reranking's does
(multi30k_rerank.held_out_gain())."""
import collections

from multi30k_rerank import held_out_gain
from multi30k_select import translation_name

# What weigh_stage() decided: the setting kept (its name suffix, models,
# weights and val score; None: the equal-weight system stays), the plain
# system's val score and the held-out gain of choosing among the settings.
WeightsRun = collections.namedtuple("WeightsRun", "chosen plain_score held_out")


def settings(best):
    """The weightings tried for system BEST (its models): for each member i
    (from 1, in BEST's order), "-dropI" (the others, equal) and "-upI" (i at
    weight 2, the others 1). Each is (suffix, models, weights or None)."""
    models = list(best["models"])
    out = []
    for i in range(len(models)):
        out.append((f"-drop{i + 1}", models[:i] + models[i + 1:], None))
        out.append((f"-up{i + 1}", models, [2 if j == i else 1 for j in range(len(models))]))
    return out


def weigh_stage(r, best):
    """Tries settings() of the selected system BEST (a dict: name, models,
    beam, lp, score) on val, NMT_JOBS at a time (each translation reused as
    the selection's are), logs each, and where the best of them scores above
    BEST and held_out_gain() is above 0, updates BEST in place to it (name +
    its suffix, models, weights, score). Returns the WeightsRun, or None where
    BEST has fewer than 3 models (nothing to weigh). Dies as the translations
    do."""
    if len(best["models"]) < 3:
        print(f"ensemble weights: {best['name']} is not an ensemble of 3 or more models; nothing to weigh", flush=True)
        return None
    beam, lp = best["beam"], str(best["lp"])
    tried = settings(best)
    names = [translation_name(best["name"] + suffix, beam, lp) for suffix, _, _ in tried]
    scores = r.translate_many([(name, beam, lp, models, weights)
                               for name, (_, models, weights) in zip(names, tried)])
    chosen, top = None, best["score"]
    for (suffix, models, weights), score in zip(tried, scores):
        r.logged(best["name"] + suffix, beam, lp, score)
        if score > top:
            chosen, top = (suffix, models, weights, score), score
    plain = r.output(best)
    held_out = held_out_gain(r, r.path(f"val.{r.tgt}"), plain, [f"{r.sel}/{name}.out" for name in names])
    verdict = "kept" if chosen and held_out > 0 else "not kept"
    print(f"ensemble weights of {best['name']}: best on val {top} against {best['score']}"
          + (f" ({best['name']}{chosen[0]})" if chosen else "")
          + f"; held out (two halves of val, each choosing for the other) {held_out:+.2f}: {verdict}", flush=True)
    run = WeightsRun(chosen if held_out > 0 else None, best["score"], held_out)
    if run.chosen:
        suffix, models, weights, score = run.chosen
        best.update(name=best["name"] + suffix, models=models, score=score)
        if weights:
            best["weights"] = weights
    return run


def result_info(run):
    """The result file's "ensemble_weights" of WeightsRun RUN (None: off, or
    nothing to weigh): the setting kept ("drop2", "up1"; None: none), its
    models and weights (None: equal), the plain system's val score and the
    held-out gain."""
    if run is None:
        return None
    suffix, models, weights, _ = run.chosen or (None, None, None, None)
    return {"chosen": suffix.lstrip("-") if suffix else None, "models": list(models) if models else None,
            "weights": weights, "val_bleu_without": float(run.plain_score),
            "val_held_out_gain": round(run.held_out, 4)}
