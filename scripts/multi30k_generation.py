"""Generations of students in the Multi30k recipe (scripts/multi30k.py,
NMT_GENERATIONS): the system that the selection on val chose after the
students of one generation (a model or an ensemble, reranked where the
reranking held) translates the training source, and the students of the
next generation learn from that translation where the first learnt from the
teachers' ensemble (and, with the diverse picks, from each student's own
translation where the first learnt from each teacher's). Each generation's
students join the selection, and the best system on val, of any
generation, is the recipe's."""
import os
import shutil

from multi30k_cache import fresh, nonempty
from multi30k_distill import diverse_data, made_once
from multi30k_rerank import rerank, rerank_system
from multi30k_select import weight_args, weights_key


def generation_name(r, g):
    """The folder name's stem of generation G's students: student[-PICK][-NAME][-all][-chK]-gG,
    the tag of the outputs of generation G - 1's selection, so that the runs of
    other picks, names or rerankers in one run folder keep theirs apart."""
    return f"student{r.base_tag}-g{g}"


def system_targets(r, best, rerank_run, g):
    """train.system[TAG]-gP.TGT, P = G - 1: the training source translated by
    BEST, the system selected after generation P (its models, beam and length
    penalty; its beam rescored as RERANK_RUN's chosen Rerank says, where one
    was kept), on all the cores. Made once, and again when made otherwise (another
    system or reranking) or older than a model or the source, unless a
    student of generation G learnt from it (multi30k_distill.made_once()); a
    copy of an earlier generation's file made as now (the selection kept
    that system as the teacher) where there is one.
    Returns the file's name in the data folder. Dies as the translation does."""
    chosen = rerank_run.chosen if rerank_run else None
    name = f"train.system{r.base_tag}-g{g - 1}.{r.tgt}"
    rescorers = [f"{d}/best.ckpt" for d in (chosen.r2l + chosen.channel if chosen else [])]
    made = (f"system {best['name']}: {' '.join(best['models'])}{weights_key(best.get('weights'))}, "
            f"beam {best['beam']}, length penalty {best['lp']}"
            + (f", reranked: w {chosen.w}, c {chosen.c}, a {chosen.a}, by {' '.join(rescorers)}" if chosen else "")
            + (f", at beam {chosen.beam}" if chosen and chosen.beam else ""))
    source = r.path(f"train.{r.src}")
    inputs = [source] + list(best["models"]) + rescorers
    # An earlier generation's teacher that was this system (the selection kept it): its translation, copied.
    earlier = [r.path(f"train.system{r.base_tag}-g{p}.{r.tgt}") for p in range(1, g - 1)]
    same = [e for e in earlier if nonempty(e) and fresh(e, e + ".made", made, inputs)]

    def make(part):
        if same:
            print(f"generation {g}: {best['name']}'s translation, made for an earlier generation, is copied from "
                  f"{os.path.basename(same[-1])}", flush=True)
            shutil.rmtree(part + ".pieces", ignore_errors=True)  # a translation stopped part way
            shutil.copyfile(same[-1], part)
            return
        print(f"generation {g}: {best['name']} (val {best['score']}) translates train.{r.src} with beam "
              f"{best['beam']}, length penalty {best['lp']}" + (", reranked" if chosen else ""), flush=True)
        log = f"{r.run}/distill{r.base_tag}-g{g}.log"
        if chosen:
            rerank(r, best, chosen, source, part, log, alone=True)
        else:
            r.nmt_translate(best["models"], [*weight_args(best.get("weights")), "-b", str(best["beam"]),
                                             "--length-penalty", str(best["lp"]),
                                             "-i", source, "-o", part], log, alone=True)
    made_once(r, name, made, inputs, generation_name(r, g), make)
    return name


def generation(r, g, best, models, previous, info, first_seed, r2l_models, channel_models):
    """Generation G (>= 2) of the recipe R's students, as many as PREVIOUS
    (the folders of generation G - 1's), after the selection chose BEST (a
    dict: name, models, beam, lp, score; reranked as INFO["rerank"] says)
    from MODELS (folders: the teachers and every student so far). BEST
    translates the training source (system_targets()), and the students
    (generation_name()-1..K, seeds FIRST_SEED + 1..) train on it as the
    top pick's students trained on the teachers' translation. The diverse
    picks' copies of the pairs are generation G - 1's: BEST's translation in
    place of the ensemble's first choice, and each student of PREVIOUS's own
    (beam 5, the teachers' length penalty) in place of each teacher's; the
    backward copies stay.
    The candidates: the best of them alone (tuned; R.single when it beats
    that), and two ensembles, of MODELS and them and of every student. The
    best on val, reranked by R2L_MODELS and CHANNEL_MODELS where
    rerank_system() keeps a reranking, replaces BEST (and INFO["rerank"])
    when it scores higher there. Appends the generation to
    INFO["generations"]. Returns BEST, MODELS with the new students, and the
    new students. Dies as the training and translations do."""
    name = system_targets(r, best, info["rerank"], g)
    source, target = f"train.{r.src}", name
    if r.pick in ("diverse", "bidiverse"):
        channels = channel_models if r.pick == "bidiverse" else []
        source, target = diverse_data(r, r.members(previous), info["distill"][2], name, channels,
                                      f"g{g}{r.base_tag}", [f"train.{os.path.basename(d)}.{r.tgt}" for d in previous])
    students = [f"{r.run}/{generation_name(r, g)}-{i}" for i in range(1, len(previous) + 1)]
    r.train_models([(first_seed + i, folder, target, f"val.{r.tgt}", r.shared_spm(), source, r.student_extra)
                    for i, folder in enumerate(students, 1)])
    chosen = info["rerank"].chosen if info["rerank"] else None
    teacher = {"name": best["name"], "beam": int(best["beam"]), "length_penalty": float(best["lp"]),
               "val_bleu": float(best["score"]),
               "rerank": {"weight": chosen.w, "channel_weight": chosen.c, "length_exponent": chosen.a,
                          "beam": int(chosen.beam or best["beam"])}
               if chosen else None}
    info["generations"].append({"generation": g, "teacher": teacher, "source": source, "targets": target,
                                "students": [os.path.basename(d) for d in students]})

    # The best new student at beam 5, tuned, is a candidate, and the single model where it beats it.
    before, r.single = r.single, {"name": "", "models": [], "score": -1.0}
    r.score_models(students)
    tuned, _ = r.tune(r.single["name"], r.single["models"])
    r.single.update(tuned)
    candidates = [dict(r.single)]
    if r.single["score"] <= before["score"]:
        r.single = before
    # With NMT_ENSEMBLE=all, a student of an earlier run of this command is in MODELS already.
    models = models + [d for d in students if d not in models]
    every_student = [d for d in models if os.path.basename(d).startswith("student")]
    tag = f"{r.ensemble_tag}-g{g}"
    candidates += [r.tuned_ensemble(f"ensemble-{len(models)}{tag}", models),
                   r.tuned_ensemble(f"students-{len(every_student)}{tag}", every_student)]
    candidate = max(candidates, key=lambda c: c["score"])
    rerank_run = rerank_system(r, candidate, r2l_models, channel_models) if r2l_models or channel_models else None
    print(f"generation {g}: {candidate['name']} scores {candidate['score']} on val against "
          f"{best['name']}'s {best['score']}", flush=True)
    if candidate["score"] > best["score"]:
        best, info["rerank"] = candidate, rerank_run
    return best, models, students
