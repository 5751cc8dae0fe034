"""Minimum Bayes-risk selection in the Multi30k recipe (scripts/multi30k.py,
NMT_MBR=1): after the selection and reranking, the system picks each
translation from its beam by expected utility (nmt-translate --mbr, the
evidence the scores that ordered the beam: the search's, or the reranking's
mix). Sentence chrF is the utility; its temperature and the search's length
penalty are tried on val (chrF's pick runs longer than the search's, and
gained on val only where the search ran short: docs/quality.md). The best
replaces the system's plain pick only where it beats it there and the
choice holds on held-out lines, as the reranking's must
(multi30k_rerank.held_out_gain())."""
import collections
import concurrent.futures

from multi30k_cache import cached, record, translator
from multi30k_rerank import held_out_gain, system_args

# The settings tried: the utility and temperature (nmt-translate --mbr,
# --mbr-temperature) and the search's length penalty.
SETTINGS = [("chrf", t, lp) for t in ("0.25", "0.5") for lp in ("0.6", "1.0", "1.4")]

# What mbr_stage() decided: the (utility, temperature, length penalty) kept
# (None: the plain pick stays), the plain system's val score, and the held-out gain.
MbrRun = collections.namedtuple("MbrRun", "chosen plain_score held_out")


def mbr_stage(r, best, chosen):
    """Translates val with system BEST (a dict: name, models, beam, lp,
    weights where it has them, score), reranked as CHOSEN says (a
    multi30k_rerank.Rerank; None: not), plainly and under each of SETTINGS,
    NMT_JOBS at a time, into select/mbr-val[TAG]-NAME-plain and
    ...-NAME-UTILITY-tT-lpLP (each reused when made by the same command and
    nmt-translate, and nothing is newer), and logs each. Where the best
    setting scores above the plain pick and held_out_gain() is above 0,
    BEST becomes that system: name + "+mbr", its score, the setting's length
    penalty, and "mbr" its utility and temperature (which system_args() then
    adds). Returns the MbrRun. Dies as the translations do."""
    source, ref = r.path(f"val.{r.src}"), r.path(f"val.{r.tgt}")
    prefix = f"{r.sel}/mbr-val{r.out_tag}-{best['name']}"
    inputs = [source, ref] + list(best["models"]) + [a for a in system_args(best, chosen) if a.endswith(".ckpt")]
    items = [(f"{prefix}-plain", None)] + [(f"{prefix}-{u}-t{t}-lp{lp}", (u, t, lp)) for u, t, lp in SETTINGS]

    def score(item):  # the val score of one setting, reused as the selection's translations are
        out, setting = item
        args = system_args(dict(best, lp=setting[2], mbr=setting[:2]) if setting else best, chosen)
        made = f"{' '.join(best['models'])} | {' '.join(args)} | nmt-translate {translator(r.bin)}"
        reused = cached(out, made, inputs, r.key)
        if reused is not None:
            return reused
        r.nmt_translate(best["models"], [*args, "-i", source, "-o", out + ".out", "--reference", ref,
                                         "--scores-json", out + ".json"], out + ".log")
        return record(out, made, r.key)

    with concurrent.futures.ThreadPoolExecutor(r.jobs) as pool:
        scores = list(pool.map(score, items))
    plain = scores[0]
    top, kept = plain, None
    for (_, setting), s in zip(items[1:], scores[1:]):
        r.logged(f"{best['name']}+mbr-{setting[0]}-t{setting[1]}", (chosen.beam if chosen else None) or best["beam"],
                 setting[2], s)
        if s > top:
            top, kept = s, setting
    held_out = held_out_gain(r, ref, f"{items[0][0]}.out", [f"{out}.out" for out, _ in items[1:]])
    verdict = "kept" if kept and held_out > 0 else "not kept"
    print(f"minimum Bayes risk on {best['name']}: best on val {top} against {plain}"
          + (f" ({kept[0]}, temperature {kept[1]}, length penalty {kept[2]})" if kept else "")
          + f"; held out (two halves of val, each choosing for the other) {held_out:+.2f}: {verdict}", flush=True)
    run = MbrRun(kept if held_out > 0 else None, plain, held_out)
    if run.chosen:
        best.update(name=best["name"] + "+mbr", score=top, lp=run.chosen[2], mbr=list(run.chosen[:2]))
    return run


def result_info(run):
    """The result file's "mbr" of MbrRun RUN (None: off): the utility,
    temperature and length penalty kept (None: the plain pick stayed), the
    plain pick's val score and the held-out gain."""
    if run is None:
        return None
    utility, temperature, lp = run.chosen or (None, None, None)
    return {"utility": utility, "temperature": float(temperature) if temperature else None,
            "length_penalty": float(lp) if lp else None,
            "val_bleu_without": float(run.plain_score), "val_held_out_gain": round(run.held_out, 4)}
