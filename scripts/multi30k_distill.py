"""Sequence-level knowledge distillation in the Multi30k recipe
(scripts/multi30k.py, Kim & Rush 2016): the teachers' ensemble translates the
training source once, keeping its 5 best of each line, and the students learn
from the first of them (top), from the one nearest the training target
(closest: seq-inter), or from the training targets, the first of them and each
teacher's own first choice side by side (diverse: Nguyen et al. 2020's data
diversification, forward side; bidiverse: both sides, with the channel models'
translations of the training targets as more sources), or from the teachers'
beam reranked by the right-to-left models (reranked)."""
import collections
import concurrent.futures
import glob
import math
import os
import re

from multi30k_cache import fresh, newer, nonempty
from multi30k_rerank import choose_rerank, rerank, train_channel, train_r2l
from multi30k_select import translation_name


def die(message):
    raise SystemExit(f"multi30k.py: {message}")


def student_specs(r, teachers_dirs, seeds, k, r2l, info):
    """Distillation: the teachers' ensemble translates the training source once
    (beam 5, its best length penalty at beam 5 on val, the 5 best of each kept).
    Returns the K students' folders and their training specs for
    Recipe.train_models(): they train on the pick of NMT_DISTILL_PICK among the 5
    (diverse: on diverse_data()'s pairs; bidiverse: on those and the channel
    models' backward ones, the channel models trained first; reranked: on reranked_targets(), which
    trains the R2L right-to-left models first, and when no reranking wins on
    val the students are the top pick's own, student-K, trained only once)."""
    teachers, lp, pick = r.members(teachers_dirs), "1.0", r.pick  # the pick checked by Recipe
    if seeds > 1:
        r.ensemble_b5(f"teachers-{seeds}", teachers)
        _, lp = r.tune(f"teachers-{seeds}", teachers)
    top = f"train.distilled.{r.tgt}"
    target = f"train.distilled-closest.{r.tgt}" if pick == "closest" else top
    nbest = r.path(f"train.distilled.nbest.{r.tgt}")
    teachers_nbest(r, teachers_dirs, teachers, lp, nbest)
    # The top pick is written whichever the students learn from: the right-to-left models learn from it.
    for name, how in ((top, "top"), (target, pick if pick == "closest" else "top")):
        if not newer(r.path(name), nbest):
            pick_targets(nbest, r.path(f"train.{r.tgt}"), r.path(name), how)
    source, reranking, prefix = f"train.{r.src}", None, PREFIX[pick]
    named = f"-{r.student_name}" if r.student_name else ""
    if pick in ("diverse", "bidiverse"):
        # bidiverse: the channel models (seeded as NMT_CHANNEL seeds them, after the r2l models) first
        channels = train_channel(r, seeds + k + r2l, r.channel) if pick == "bidiverse" else []
        source, target = diverse_data(r, teachers, lp, top, channels)
    if pick == "reranked":
        target, reranking = reranked_targets(r, teachers, seeds, lp, seeds + k, r2l)
        if reranking is None:  # the top pick's students, same seeds and targets: trained once
            prefix = PREFIX["top"]
    students = [f"{r.run}/{prefix}{named}-{i}" for i in range(1, k + 1)]
    info["distill"] = (seeds, 5, lp, k, pick, reranking)
    # NMT_WORD_KD: the students learn the teachers' distribution too, from the checkpoints that translated
    extra = r.student_extra + (["--kd-teachers", *teachers, "--kd-weight", r.word_kd] if r.word_kd else [])
    return students, [(seeds + i, folder, target, f"val.{r.tgt}", r.shared_spm(), source, extra)
                      for i, folder in enumerate(students, 1)]


def learners(r, *prefixes):
    """The run's PREFIX-* model folders that finished or began training (a
    `trained` or `last.ckpt` file), sorted."""
    return sorted({os.path.dirname(p) for prefix in prefixes for marker in ("trained", "last.ckpt")
                   for p in glob.glob(f"{r.run}/{prefix}-*/{marker}")})


def teachers_nbest(r, teachers_dirs, teachers, lp, nbest):
    """NBEST: the TEACHERS' 5 best of each training source (beam 5, length
    penalty LP), with NBEST.made saying how it was made. Kept while newer than
    the source and every checkpoint in TEACHERS_DIRS (the choices on val of
    checkpoints and length penalty may shift with the kernels a rebuild brings;
    the models are what the students learn from); made again otherwise, and
    every file made from it then follows. Dies when a model learnt from the
    old one (a student or right-to-left model that finished or began: it
    would not be these teachers' student), naming it, or when the translation
    fails."""
    source = r.path(f"train.{r.src}")
    checkpoints = [p for d in teachers_dirs for p in glob.glob(f"{d}/*.ckpt")]
    if newer(nbest, source, *checkpoints):
        return
    learnt = learners(r, "student", "r2l")
    if nonempty(nbest) and learnt:
        die(f"{learnt[0]} learnt from the teachers' translation {nbest}, and a teacher is newer; "
            "delete the student-* and r2l-* folders to train them on a new one")
    made = f"teachers {' '.join(teachers)}, beam 5, 5 best, length penalty {lp}"
    print(f"distilling: the {len(teachers)} teacher(s) translate train.{r.src} with beam 5, "
          f"length penalty {lp}, 5 best", flush=True)
    r.nmt_translate(teachers, ["-b", "5", "--n-best", "5", "--length-penalty", lp, "-i", source, "-o", nbest],
                    f"{r.run}/distill.log", alone=True)
    with open(nbest + ".made", "w") as f:
        f.write(made + "\n")


def student_settings(base, distill):
    """NMT_STUDENT_NAME and NMT_STUDENT_FLAGS, checked: the students' name ("":
    none), their own flags, and their nmt-train flags (BASE, NMT_TRAIN_FLAGS's,
    with their own in place of the same options). Dies on a name other than
    lowercase letters and digits, flags without a name (the students would
    share the plain students' folders), or a name without DISTILL students."""
    name, flags = os.environ.get("NMT_STUDENT_NAME", ""), os.environ.get("NMT_STUDENT_FLAGS", "").split()
    if name and not re.fullmatch(r"[a-z0-9]+", name):
        die(f"NMT_STUDENT_NAME must be lowercase letters and digits, got '{name}'")
    if re.fullmatch(r"all|ch[0-9]+|g[0-9]+", name):
        die(f"NMT_STUDENT_NAME '{name}' is the tag of an NMT_ENSEMBLE, NMT_CHANNEL or NMT_GENERATIONS run's outputs")
    if flags and not name:
        die("NMT_STUDENT_FLAGS needs NMT_STUDENT_NAME: students trained otherwise need folders of their own")
    if name and not distill:
        die("NMT_STUDENT_NAME needs students to name (NMT_DISTILL=K)")
    return name, flags, merged_flags(base, flags)


def word_kd_weight(value, name):
    """NMT_WORD_KD, checked: the students' --kd-weight as given ("": off).
    Dies unless it is a number above 0 and at most 1, or when the students
    have no name of their own (NMT_STUDENT_NAME: they would share the
    folders of students trained without it)."""
    if not value:
        return ""
    try:
        ok = 0 < float(value) <= 1
    except ValueError:
        ok = False
    if not ok:
        die(f"NMT_WORD_KD must be a weight above 0 and at most 1, got '{value}'")
    if not name:
        die("NMT_WORD_KD needs NMT_STUDENT_NAME: students trained otherwise need folders of their own")
    return value


def merged_flags(base, over):
    """The nmt-train flags BASE with the long options of OVER in place of BASE's
    same ones (nmt-train takes an option once): ["--x", "1", "--y", "2"] and
    ["--x=3"] give ["--y", "2", "--x=3"]. A value goes with the option before it."""
    def groups(flags):
        out = []
        for word in flags:
            if word.startswith("--") or not out:
                out.append([word])
            else:
                out[-1].append(word)
        return out
    replaced = {g[0].split("=", 1)[0] for g in groups(over)}
    return [w for g in groups(base) if g[0].split("=", 1)[0] not in replaced for w in g] + list(over)


# The students' folder names (student-1, ...) by NMT_DISTILL_PICK: paired by seed.
PREFIX = {"top": "student", "closest": "student-closest", "reranked": "student-reranked",
          "diverse": "student-diverse", "bidiverse": "student-bidiverse"}


def reranked_targets(r, teachers, seeds, lp, first_r2l_seed, k):
    """Distillation from the reranked ensemble: trains (or keeps) the K
    right-to-left models of the recipe (seeds FIRST_R2L_SEED + 1.., on the top
    pick, as NMT_R2L trains them anyway), chooses on val the weight and length
    exponent with which they rerank the teachers' beam (5, length penalty LP),
    and has the reranked teachers translate the training source with them into
    train.distilled-reranked.TGT, the students' targets. A .made file beside it
    says how it was made; a file made otherwise (other settings, or older than
    a model) is made again, unless a student already learnt from it (or began
    to: a last.ckpt): then this dies, naming the student to delete. Returns
    the file's name and the (w, a) chosen; when no reranking beats the
    teachers' plain beam on val, the top pick's file and None, and the
    reranked file is left as it is. Dies as the training and translations do."""
    r2l_models = train_r2l(r, first_r2l_seed, k, True)
    label = f"teachers-{seeds}"
    plain = r.translate(translation_name(label, 5, lp), 5, lp, teachers)
    system = {"name": label, "models": teachers, "beam": 5, "lp": lp, "score": plain}
    chosen = choose_rerank(r, system, r2l_models).chosen
    if not chosen:
        print(f"distilling: reranking does not beat the {label} beam on val ({plain}); "
              f"the students are the top pick's ({PREFIX['top']}{'-' + r.student_name if r.student_name else ''}-K)",
              flush=True)
        return f"train.distilled.{r.tgt}", None
    r2l = [f"{d}/best.ckpt" for d in r2l_models]
    name = f"train.distilled-reranked.{r.tgt}"
    made = (f"reranked: w {chosen.w}, a {chosen.a}, beam {chosen.beam or 5}, length penalty {lp}, "
            f"teachers {' '.join(teachers)}, r2l {' '.join(r2l)}")
    inputs = [r.path(f"train.{r.src}"), r.path(f"train.distilled.{r.tgt}")] + list(teachers) + r2l

    def make(part):
        print(f"distilling: the {len(teachers)} teacher(s) translate train.{r.src} with beam 5, length penalty "
              f"{lp}, reranked by {k} right-to-left model(s) (w {chosen.w}, a {chosen.a}; val {chosen.score} "
              f"against {plain})", flush=True)
        rerank(r, system, chosen, r.path(f"train.{r.src}"), part, f"{r.run}/distill-reranked.log", alone=True)
    made_once(r, name, made, inputs, PREFIX["reranked"], make)
    return name, (chosen.w, chosen.a)


def made_once(r, name, made, inputs, learner_prefix, make):
    """The data file NAME, made by MAKE(path) into a part file that replaces it
    whole, with NAME.made saying MADE; kept while it is there, says MADE and
    is newer than every one of INPUTS. A file made otherwise is made again,
    unless a model of the run folder named LEARNER_PREFIX-* learnt (or began
    to learn: a last.ckpt) from it: then this dies, naming the model to
    delete. Dies as MAKE does."""
    out = r.path(name)
    if nonempty(out) and fresh(out, out + ".made", made, inputs):
        return
    learnt = learners(r, learner_prefix)
    if learnt:
        die(f"{learnt[0]} learnt from a {name} made otherwise than now ({made}); "
            f"delete the {learner_prefix}-* folders to train them on the new one")
    make(out + ".part")
    with open(out + ".made.part", "w") as f:
        f.write(made + "\n")
    os.replace(out + ".part", out)
    os.replace(out + ".made.part", out + ".made")


def diverse_data(r, teachers, lp, top, channels=(), data_name=None, own=None):
    """Data diversification (Nguyen et al. 2020): each of TEACHERS (checkpoints)
    alone translates the training source (beam 5, length penalty LP; NMT_JOBS
    at a time) into OWN's file of the same place (default
    train.teacher-1...T.TGT), and the training pairs are written 2 + T times
    over: with the training targets, the ensemble's first choice (TOP) and
    each teacher's own. The backward side, with CHANNELS (target-to-source
    model folders): each translates the training targets (beam 5, length
    penalty 1.0, its best checkpoint) into one more source for them, so the
    pairs come 2 + T + C times. Returns the data folder's (source, target)
    names: train.DATA_NAME.* (default: train.diverse.* or, with CHANNELS,
    train.bidiverse.*). Each file is made again when older than what it is
    made from. Dies as the translations do."""
    src, tgt = f"train.{r.src}", f"train.{r.tgt}"
    own = own or [f"train.teacher-{i}.{r.tgt}" for i in range(1, len(teachers) + 1)]
    back = [f"train.{os.path.basename(d)}.{r.src}" for d in channels]
    jobs = [(t, src, name, lp) for t, name in zip(teachers, own)] + \
        [(f"{d}/best.ckpt", tgt, name, "1.0") for d, name in zip(channels, back)]
    todo = [job for job in jobs if not newer(r.path(job[2]), job[0])]

    def translate(job):
        model, into, name, penalty = job
        # one write with its newline: the threads' lines do not run into each other
        print(f"diversifying: {model} translates {into} with beam 5, length penalty {penalty}\n", end="",
              flush=True)
        r.nmt_translate([model], ["-b", "5", "--length-penalty", penalty, "-i", r.path(into), "-o", r.path(name)],
                        r.path(name) + ".log")

    with concurrent.futures.ThreadPoolExecutor(r.jobs) as pool:
        list(pool.map(translate, todo))
    sources = [src] * (2 + len(own)) + back
    targets = [tgt, top] + own + [tgt] * len(back)
    kind = data_name or ("bidiverse" if channels else "diverse")
    names = (f"train.{kind}.{r.src}", f"train.{kind}.{r.tgt}")
    for name, files in zip(names, (sources, targets)):
        if newer(r.path(name), *map(r.path, files)):
            continue
        with open(r.path(name) + ".part", "wb") as g:
            for f in files:
                with open(r.path(f), "rb") as part:
                    g.write(part.read())
        os.replace(r.path(name) + ".part", r.path(name))
    return names


def sentence_bleu(hyp, ref):
    """BLEU of one tokenized hypothesis against one reference, 1-4-grams, with
    add-one smoothing of the 2-4-gram precisions (Lin & Och 2004)."""
    if not hyp:
        return 0.0
    log_sum = 0.0
    for n in range(1, 5):
        h = collections.Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
        g = collections.Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
        match, total = sum((h & g).values()), max(len(hyp) - n + 1, 0)
        add = 0 if n == 1 else 1
        if match + add == 0:
            return 0.0
        log_sum += math.log((match + add) / (total + add))
    return math.exp(min(0.0, 1.0 - len(ref) / len(hyp)) + log_sum / 4)


def pick_targets(nbest, reference, out, pick):
    """OUT: one target per training pair from NBEST (nmt-translate --n-best lines
    'i ||| hyp ||| features ||| score', best first): the first (top), or the one
    with the highest sentence BLEU against REFERENCE's line (closest; ties go to
    the better-scored). Dies if a pair has no hypothesis."""
    refs = open(reference, encoding="utf-8").read().split("\n")[:-1]
    hyps = [[] for _ in refs]
    with open(nbest, encoding="utf-8") as f:
        for line in f:
            index, hyp = line.split(" ||| ", 2)[:2]
            hyps[int(index)].append(hyp)
    with open(out + ".part", "w", encoding="utf-8") as g:
        for i, (options, ref) in enumerate(zip(hyps, refs)):
            if not options:
                die(f"{nbest}: no hypothesis for line {i + 1}")
            words = ref.split()
            # max() keeps the first of equal keys: ties go to the better-scored
            best = options[0] if pick == "top" else max(options, key=lambda h: sentence_bleu(h.split(), words))
            g.write(best + "\n")
    os.replace(out + ".part", out)
