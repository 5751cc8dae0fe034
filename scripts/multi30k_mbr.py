"""Minimum Bayes-risk selection in the Multi30k recipe (scripts/multi30k.py,
NMT_MBR=1): after the selection and reranking, the system picks each
translation from its beam by expected utility (nmt-translate --mbr, the
evidence the scores that ordered the beam: the search's, or the reranking's
mix). The utility (sentence BLEU or chrF) and temperature are tried on val;
the best replaces the system's plain pick only where it beats it there and
the choice holds on held-out lines, as the reranking's must
(multi30k_rerank.held_out_gain())."""
import collections
import concurrent.futures

from multi30k_cache import cached, record, translator
from multi30k_rerank import held_out_gain, system_args

# The utilities and temperatures tried (nmt-translate --mbr, --mbr-temperature).
SETTINGS = [(u, t) for u in ("chrf", "bleu") for t in ("0.25", "0.5", "1")]

# What mbr_stage() decided: the (utility, temperature) kept (None: the plain
# pick stays), the plain system's val score, and the held-out gain.
MbrRun = collections.namedtuple("MbrRun", "chosen plain_score held_out")


def mbr_args(setting):
    """nmt-translate's arguments for SETTING, a (utility, temperature) pair (None: none)."""
    return ["--mbr", setting[0], "--mbr-temperature", setting[1]] if setting else []


def mbr_stage(r, best, chosen):
    """Translates val with system BEST (a dict: name, models, beam, lp,
    weights where it has them, score), reranked as CHOSEN says (a
    multi30k_rerank.Rerank; None: not), plainly and under each of SETTINGS,
    NMT_JOBS at a time, into select/mbr-val[TAG]-NAME-plain and
    ...-NAME-UTILITY-tT (each reused when made by the same command and
    nmt-translate, and nothing is newer), and logs each. Where the best
    setting scores above the plain pick and held_out_gain() is above 0,
    BEST becomes that system: name + "+mbr", its score, and "mbr" the
    setting (which rerank() and the test translation then add). Returns the
    MbrRun. Dies as the translations do."""
    args = system_args(best, chosen)
    source, ref = r.path(f"val.{r.src}"), r.path(f"val.{r.tgt}")
    prefix = f"{r.sel}/mbr-val{r.out_tag}-{best['name']}"
    inputs = [source, ref] + list(best["models"]) + [a for a in args if a.endswith(".ckpt")]
    items = [(f"{prefix}-plain", None)] + [(f"{prefix}-{u}-t{t}", (u, t)) for u, t in SETTINGS]

    def score(item):  # the val score of one setting, reused as the selection's translations are
        out, setting = item
        more = args + mbr_args(setting)
        made = f"{' '.join(best['models'])} | {' '.join(more)} | nmt-translate {translator(r.bin)}"
        reused = cached(out, made, inputs, r.key)
        if reused is not None:
            return reused
        r.nmt_translate(best["models"], [*more, "-i", source, "-o", out + ".out", "--reference", ref,
                                         "--scores-json", out + ".json"], out + ".log")
        return record(out, made, r.key)

    with concurrent.futures.ThreadPoolExecutor(r.jobs) as pool:
        scores = list(pool.map(score, items))
    plain = scores[0]
    top, kept = plain, None
    for (_, setting), s in zip(items[1:], scores[1:]):
        r.logged(f"{best['name']}+mbr-{setting[0]}-t{setting[1]}", best["beam"], best["lp"], s)
        if s > top:
            top, kept = s, setting
    held_out = held_out_gain(r, ref, f"{items[0][0]}.out", [f"{out}.out" for out, _ in items[1:]])
    verdict = "kept" if kept and held_out > 0 else "not kept"
    print(f"minimum Bayes risk on {best['name']}: best on val {top} against {plain}"
          + (f" ({kept[0]}, temperature {kept[1]})" if kept else "")
          + f"; held out (two halves of val, each choosing for the other) {held_out:+.2f}: {verdict}", flush=True)
    run = MbrRun(kept if held_out > 0 else None, plain, held_out)
    if run.chosen:
        best.update(name=best["name"] + "+mbr", score=top, mbr=list(run.chosen))
    return run


def result_info(run):
    """The result file's "mbr" of MbrRun RUN (None: off): the utility and
    temperature kept (None: the plain pick stayed), the plain pick's val
    score and the held-out gain."""
    if run is None:
        return None
    utility, temperature = run.chosen or (None, None)
    return {"utility": utility, "temperature": float(temperature) if temperature else None,
            "val_bleu_without": float(run.plain_score), "val_held_out_gain": round(run.held_out, 4)}
