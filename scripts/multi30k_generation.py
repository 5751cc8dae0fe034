"""Generations of students in the Multi30k recipe (scripts/multi30k.py,
NMT_GENERATIONS): the system that the selection on val chose after the
students of one generation (their ensemble with the teachers, reranked where
the reranking held) translates the training source, and the students of the
next generation learn from that translation where the first learnt from the
teachers' ensemble. Each generation's students join the selection, and the
best system on val, of any generation, is the recipe's."""
import os

from multi30k_cache import fresh, nonempty
from multi30k_distill import PREFIX, diverse_data, learners
from multi30k_rerank import RerankRun, choose_rerank, rerank, rerank_suffix


def die(message):
    raise SystemExit(f"multi30k.py: {message}")


def system_targets(r, best, rerank_run, g):
    """train.system-gG-1[TAG].TGT: the training source translated by BEST, the
    system selected after generation G - 1 (its models, beam and length
    penalty; its beam rescored as RERANK_RUN's chosen Rerank says, where one
    was kept), on all the cores. A .made file beside it says how it was made;
    a file made otherwise (another system or reranking), or older than a model
    or the source, is made again, unless a student of generation G learnt (or
    began to learn) from it: then this dies, naming the student to delete.
    Returns the file's name in the data folder. Dies as the translation does."""
    chosen = rerank_run.chosen if rerank_run else None
    name = f"train.system-g{g - 1}{r.base_tag}.{r.tgt}"
    out = r.path(name)
    rescorers = [f"{d}/best.ckpt" for d in (chosen.r2l + chosen.channel if chosen else [])]
    made = (f"system {best['name']}: {' '.join(best['models'])}, beam {best['beam']}, length penalty {best['lp']}"
            + (f", reranked: w {chosen.w}, c {chosen.c}, a {chosen.a}, by {' '.join(rescorers)}" if chosen else ""))
    source = r.path(f"train.{r.src}")
    if nonempty(out) and fresh(out, out + ".made", made, [source] + list(best["models"]) + rescorers):
        return name
    learnt = learners(r, generation_prefix(r, g))
    if learnt:
        die(f"{learnt[0]} learnt from a {name} made otherwise than now ({made}); "
            f"delete the {generation_prefix(r, g)}-* folders to train them on the new one")
    print(f"generation {g}: {best['name']} (val {best['score']}) translates train.{r.src} with beam "
          f"{best['beam']}, length penalty {best['lp']}" + (", reranked" if chosen else ""), flush=True)
    log = f"{r.run}/distill-g{g}{r.base_tag}.log"
    if chosen:
        rerank(r, best, chosen, source, out + ".part", log, alone=True)
    else:
        r.nmt_translate(best["models"], ["-b", str(best["beam"]), "--length-penalty", str(best["lp"]),
                                         "-i", source, "-o", out + ".part"], log, alone=True)
    with open(out + ".made.part", "w") as f:
        f.write(made + "\n")
    os.replace(out + ".part", out)
    os.replace(out + ".made.part", out + ".made")
    return name


def generation_prefix(r, g):
    """The folders' prefix of generation G's students: student[-PICK][-NAME]-gG."""
    return f"{r.run}/{PREFIX[r.pick]}{'-' + r.student_name if r.student_name else ''}-g{g}"


def generation(r, g, best, models, info, first_seed, k, r2l_models, channel_models):
    """Generation G (>= 2) of the recipe R's K students, after the selection
    chose BEST (a dict: name, models, beam, lp, score; reranked as
    INFO["rerank"] says) from MODELS (folders: the teachers and every
    student so far). BEST translates the training source (system_targets()),
    and K students (generation_prefix()-1..K, seeds FIRST_SEED + 1..) train
    on it as the pick's students trained on the teachers' translation (the
    diverse picks: it takes the place of the ensemble's first choice among
    their copies). They are scored alone (the best of them tuned, and
    R.single replaced when it beats it), and two ensembles are tuned: of MODELS
    and them, and of every student. The better on val, reranked by
    R2L_MODELS and CHANNEL_MODELS where choose_rerank() keeps a reranking,
    replaces BEST (and INFO["rerank"]) when it scores higher there. Appends
    the generation to INFO["generations"]. Returns BEST and MODELS with the
    new students. Dies as the training and translations do."""
    name = system_targets(r, best, info["rerank"], g)
    source, target = f"train.{r.src}", name
    if r.pick in ("diverse", "bidiverse"):
        seeds, lp = info["distill"][0], info["distill"][2]
        teachers = r.members(models[:seeds])
        channels = channel_models if r.pick == "bidiverse" else []
        source, target = diverse_data(r, teachers, lp, name, channels, f"g{g}{r.base_tag}")
    students = [f"{generation_prefix(r, g)}-{i}" for i in range(1, k + 1)]
    r.train_models([(first_seed + i, folder, target, f"val.{r.tgt}", r.shared_spm(), source, r.student_extra)
                    for i, folder in enumerate(students, 1)])
    teacher = {"name": best["name"], "beam": int(best["beam"]), "length_penalty": float(best["lp"]),
               "val_bleu": float(best["score"]),
               "rerank": ({"weight": info["rerank"].chosen.w, "channel_weight": info["rerank"].chosen.c,
                           "length_exponent": info["rerank"].chosen.a}
                          if info["rerank"] and info["rerank"].chosen else None)}
    info["generations"].append({"generation": g, "teacher": teacher, "targets": target,
                                "students": [os.path.basename(d) for d in students]})

    # The single model: the best new student at beam 5, tuned, against the one selected so far.
    before, r.single = r.single, {"name": "", "models": [], "score": -1.0}
    r.score_models(students)
    tuned, _ = r.tune(r.single["name"], r.single["models"])
    r.single.update(tuned)
    if r.single["score"] <= before["score"]:
        r.single = before
    models = models + students
    every_student = [d for d in models if os.path.basename(d).startswith("student")]
    candidates = []
    for label, folders in ((f"ensemble-{len(models)}{r.tag}", models),
                           (f"students-{len(every_student)}{r.tag}", every_student)):
        members = r.members(folders)
        r.ensemble_b5(label, members)
        tuned, _ = r.tune(label, members)
        candidates.append({"name": label, "models": members, **tuned})
    candidate = max(candidates, key=lambda c: c["score"])
    rerank_run = None
    if r2l_models or channel_models:
        chosen, held_out = choose_rerank(r, candidate, r2l_models, channel_models)
        rerank_run = RerankRun(len(r2l_models), len(channel_models), chosen, candidate["score"], held_out)
        if chosen:
            candidate.update(name=candidate["name"] + rerank_suffix(chosen), score=chosen.score)
    print(f"generation {g}: {candidate['name']} scores {candidate['score']} on val against "
          f"{best['name']}'s {best['score']}", flush=True)
    if candidate["score"] > best["score"]:
        best, info["rerank"] = candidate, rerank_run
    return best, models
