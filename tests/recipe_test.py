#!/usr/bin/env python3
"""RecipeTest: the Multi30k recipe (scripts/multi30k.py) end to end on a tiny
corpus made from data/demo, with tiny models of a few steps: two teachers,
distillation, a student and a right-to-left model, selection on val, test,
and the result file; the same again, which must reuse every val
translation; then the reranked distillation pick in the same run folder,
which must reuse the teachers and keep the first pick's files apart; named
students of other flags, likewise; a channel model's reranking beside
the right-to-left one, with its own outputs, and channel models alone; the
student of both sides' data diversification (bidiverse), and a second
generation of it; every student of the folder in
one selection, and its members weighed (recipe_weights.py); the teachers' ensemble selected when
it is the best on val; a second generation of students, taught by the
first generation's selected system; the
reranked targets made again when the choice on val changes; the held-out
gain of a choice on val; the pick by minimum Bayes risk (recipe_mbr.py); the teachers' translation made again when a teacher
is newer; a model that finishes as the recipe's stop signal comes, marked
trained; the threads of models and translations that run alone, and of a
model whose neighbour finishes (these
last on the run folder, in recipe_functions.py); and the bad
settings that must fail before anything trains.

  tests/recipe_test.py SOURCE_DIR BUILD_DIR

Exits 0 when every check holds, 1 with the failed check's line otherwise. It
needs no ../shared and writes only under a temporary folder."""
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from recipe_functions import (channel_alone, held_out, remade_targets, rerank_beam, result_names, signal_at_the_end,
                              stale_generation, stale_teachers, system_file, thread_shares)
from recipe_mbr import mbr_choice
from recipe_pieces import pieces
from recipe_settings import bad_settings
from recipe_util import TINY, check, make_data, recipe, restamp, result, snapshot, threads_of
from recipe_weights import weighted_ensemble


def first_pick(source, env, run, results):
    rc, out = recipe(source, env)
    check(rc == 0, f"the top pick's run exits 0 (got {rc}):\n{out[-3000:]}")
    with open(f"{run}/data/train.distilled.de") as f:
        said = sum(1 for line in f if line.strip())
    check(said >= 100, f"the teachers translate most training sources into something ({said} of 200)")
    r = result(results, "multi30k-en-de-tok-*.json")
    check(r["distillation"]["pick"] == "top" and r["distillation"]["pick_rerank"] is None,
          f"the result names the top pick: {r['distillation']}")
    folders = sorted(os.path.basename(t["folder"]) for t in r["training"])
    check(folders == ["model-1", "model-2", "r2l-1", "student-1"], f"the models trained: {folders}")
    seeds = sorted(t["seed"] for t in r["training"])
    check(seeds == [1, 2, 3, 4], f"each model's seed is recorded, teachers first, then students, then r2l: {seeds}")
    command = r["command"]
    check(command.endswith(" scripts/multi30k.sh " + shlex.quote(env["DATA"]) + " en-de tok") and "NMT_SEEDS=2 " in command
          and "NMT_R2L=1 " in command, f"the result gives the command that made it: {command}")
    check(r["rerank"] is not None and r["rerank"]["r2l_models"] == 1, f"the reranking: {r['rerank']}")
    # The plain system is the best candidate on val: a single model, the ensemble of all, or the teachers'.
    rows = [line.rstrip("\n").split("\t") for line in open(f"{run}/select/selection.tsv")][1:]
    plain = max(float(row[3]) for row in rows if "+r2l" not in row[0])
    check(r["rerank"]["val_bleu_without"] == plain, f"the system before reranking is the best on val, {plain}: "
          f"{r['rerank']['val_bleu_without']} ({r['selected']})")
    gain = r["rerank"]["val_held_out_gain"]
    check(isinstance(gain, float) and (r["rerank"]["weight"] is None or gain > 0),
          f"the reranking is kept only with a held-out gain above 0: {r['rerank']}")
    check(r["selection_on_val"] and r["bleu_lc_tok"] is not None, "a selection table and a test score")
    # Each reranking setting is chosen from one rescored n-best list, as nmt-translate would choose
    # (on as many threads as made the list: threads_of()).
    nbest = glob.glob(f"{run}/select/rerank-val-*.nbest")
    check(len(nbest) == 1, f"one rescored n-best list of val: {nbest}")
    models, beam, lp, r2l = open(nbest[0] + ".models").read().replace(" | r2l ", " beam ").replace(
        " length penalty ", " beam ").split(" | ")[0].split(" beam ")
    out = f"{nbest[0][:-len('.nbest')]}-w0.25-a1.4.out"
    p = subprocess.run([f"{env['NMT_BUILD_DIR']}/nmt-translate", *[a for m in models.split() for a in ("-m", m)],
                        "-b", beam, "--length-penalty", lp, *[a for m in r2l.split() for a in ("--r2l-model", m)],
                        "--r2l-weight", "0.25", "--r2l-length-exponent", "1.4", "-i", f"{run}/data/val.en",
                        "--threads", threads_of(nbest[0])],
                       capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout == open(out).read(),
          f"the reranking at w 0.25, a 1.4 from the n-best list is nmt-translate's ({out})")
    system_file(source, env, run, r, out, {"models": models.split(), "beam": beam, "lp": lp}, r2l.split())


def rerun_reuses(source, env, run, build, tmp):
    """The top pick run again with the executables copied elsewhere, newer
    files, nmt-translate restamped as a build of another commit with the same
    code would be (restamp()): no model trains, and every val translation and
    reranking is reused."""
    copy = f"{tmp}/bin-copy"
    os.makedirs(copy)
    for name in ("nmt-train", "nmt-translate", "libnmt_spm.so"):
        if os.path.exists(f"{build}/{name}"):
            shutil.copy(f"{build}/{name}", copy)
    restamp(f"{copy}/nmt-translate")
    logs = ("selection", "selected")  # the selection's tables, written on every run
    before = {p: s for p, s in snapshot(f"{run}/select").items() if not os.path.basename(p).startswith(logs)}
    rc, out = recipe(source, env, NMT_BUILD_DIR=copy)
    check(rc == 0, f"the top pick's second run exits 0 (got {rc}):\n{out[-3000:]}")
    check(": training" not in out, "no model trains again")
    after = snapshot(f"{run}/select")
    remade = sorted(os.path.basename(p) for p, stat in before.items() if after.get(p) != stat)
    check(before and not remade, f"every val translation and reranking is reused; made again: {remade}")


def second_pick(source, env, run, results, kept):
    rc, out = recipe(source, env, NMT_DISTILL_PICK="reranked")
    check(rc == 0, f"the reranked pick's run exits 0 (got {rc}):\n{out[-3000:]}")
    for model in ("model-1", "model-2", "r2l-1"):
        check(f"{run}/{model}: training" not in out, f"{model} is reused, not trained again")
    r = result(results, "multi30k-en-de-tok-reranked-*.json")
    d = r["distillation"]
    check(d["pick"] == "reranked", f"the result names the reranked pick: {d}")
    folders = sorted(os.path.basename(t["folder"]) for t in r["training"])
    # The tiny models may go either way on val: without a reranking that wins,
    # the students are the top pick's, not trained again.
    student = "student-reranked-1" if d["pick_rerank"] else "student-1"
    check(folders == ["model-1", "model-2", "r2l-1", student], f"the models: {folders}")
    check(f"{run}/student-1: training" not in out, "student-1 is reused, not trained again")
    if d["pick_rerank"]:
        with open(f"{run}/data/train.distilled-reranked.de") as f:
            check(sum(1 for _ in f) == 200, "the students' targets have a line per training pair")
        made = open(f"{run}/data/train.distilled-reranked.de.made").read()
        w, a = d["pick_rerank"]["weight"], d["pick_rerank"]["length_exponent"]
        check(made.startswith(f"reranked: w {w}, a {a}"),
              f"the targets' .made file agrees with the result's pick_rerank {d['pick_rerank']}: {made}")
    changed = sorted(p for p, stat in kept.items() if snapshot(run).get(p) != stat)
    check(not changed, f"the top pick's files are left as they were; changed: {changed}")
    for name in ("select/selection-reranked.tsv", "test-reranked.scores.json", "test-single-reranked.scores.json"):
        check(os.path.exists(f"{run}/{name}"), f"the reranked pick writes {name}")


def named_students(source, env, run, results, kept):
    """Students of other flags (NMT_STUDENT_FLAGS, named by NMT_STUDENT_NAME) in
    the folder of a finished run: only they train, with their flags in place
    of NMT_TRAIN_FLAGS's same options (and with NMT_WORD_KD, the teachers'
    checkpoints as --kd-teachers), and their selection, outputs and result
    file are their own."""
    rc, out = recipe(source, env, NMT_STUDENT_NAME="wide", NMT_STUDENT_FLAGS="--dec-hidden 48 --dropout 0.1",
                     NMT_WORD_KD="0.5")
    check(rc == 0, f"the named students' run exits 0 (got {rc}):\n{out[-3000:]}")
    trained = sorted(line.split(":")[0].rsplit("/", 1)[1] for line in out.splitlines() if ": training" in line)
    check(trained == ["student-wide-1"], f"only the named student trains: {trained}")
    config = open(f"{run}/student-wide-1/config.toml").read()
    check("dec-hidden = 48" in config and "dropout = 0.1" in config and "emb-dim = 16" in config,
          "the named student's flags replace NMT_TRAIN_FLAGS's same options and keep the others")
    kd = [line for line in config.splitlines() if line.startswith("kd-")]
    check(len(kd) == 2 and "kd-weight = 0.5" in kd and all(f"{run}/model-{i}/" in kd[0] for i in (1, 2)),
          f"NMT_WORD_KD: the student learns from the two teachers' checkpoints at weight 0.5: {kd}")
    r = result(results, "multi30k-en-de-tok-wide-*.json")
    d = r["distillation"]
    check(d["student_name"] == "wide" and d["student_flags"] == "--dec-hidden 48 --dropout 0.1",
          f"the result names the students and their flags: {d}")
    flags = {os.path.basename(t["folder"]): t["train_flags"] for t in r["training"]}
    check(sorted(flags) == ["model-1", "model-2", "r2l-1", "student-wide-1"], f"the models: {sorted(flags)}")
    check("--dec-hidden 48" in flags["student-wide-1"] and "--dec-hidden 32" not in flags["student-wide-1"],
          f"the student's recorded flags are those it trained with: {flags['student-wide-1']}")
    check(os.path.exists(f"{run}/select/selection-wide.tsv"), "the named students keep their own selection log")
    changed = sorted(p for p, stat in kept.items() if snapshot(run).get(p) != stat)
    check(not changed, f"the other picks' files are left as they were; changed: {changed}")


def channel_run(source, env, run, results, kept):
    """NMT_CHANNEL=1 in the folder of a finished run: only the channel model
    trains, from German to English with model 1's SentencePiece models
    swapped; the selection tries c beside w and a from one rescored n-best
    list, each choice nmt-translate's own; the selection log, test outputs
    and result file carry -ch1, and the other runs' files stay as they were."""
    rc, out = recipe(source, env, NMT_CHANNEL="1")
    check(rc == 0, f"the channel run exits 0 (got {rc}):\n{out[-3000:]}")
    trained = sorted(line.split(":")[0].rsplit("/", 1)[1] for line in out.splitlines() if ": training" in line)
    check(trained == ["ch-1"], f"only the channel model trains: {trained}")
    for mine, theirs in (("src", "tgt"), ("tgt", "src")):
        check(open(f"{run}/ch-1/{mine}.spm.model", "rb").read() == open(f"{run}/model-1/{theirs}.spm.model", "rb").read(),
              f"the channel model's {mine} SentencePiece model is model 1's {theirs} one")
    r = result(results, "multi30k-en-de-tok-ch1-*.json")
    check(r["rerank"]["channel_models"] == 1 and r["rerank"]["r2l_models"] == 1, f"the reranking: {r['rerank']}")
    channel = [t for t in r["training"] if t["channel"]]
    check([os.path.basename(t["folder"]) for t in channel] == ["ch-1"], f"the channel model is recorded: {channel}")
    rows = [line.rstrip("\n").split("\t") for line in open(f"{run}/select/selection-ch1.tsv")][1:]
    mixed = [row for row in rows if "+r2l+ch-" in row[0]]
    check(len(mixed) == 4 * 5 * 3, f"every w, c and a is tried on val: {len(mixed)} rows")
    nbest = glob.glob(f"{run}/select/rerank-val-*-ch1.nbest")
    check(len(nbest) == 1, f"one rescored n-best list of val with the channel: {nbest}")
    made = open(nbest[0] + ".models").read().split(" | ")
    models, beam, lp = made[0].replace(" length penalty ", " beam ").split(" beam ")
    r2l, ch = made[1].split()[1:], made[2].split()[1:]
    out = f"{nbest[0][:-len('.nbest')]}-w0.25-c0.5-a1.0.out"
    p = subprocess.run([f"{env['NMT_BUILD_DIR']}/nmt-translate", *[a for m in models.split() for a in ("-m", m)],
                        "-b", beam, "--length-penalty", lp, *[a for m in r2l for a in ("--r2l-model", m)],
                        *[a for m in ch for a in ("--channel-model", m)], "--r2l-weight", "0.25",
                        "--channel-weight", "0.5", "--r2l-length-exponent", "1.0", "-i", f"{run}/data/val.en",
                        "--threads", threads_of(nbest[0])],
                       capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout == open(out).read(),
          f"the reranking at w 0.25, c 0.5, a 1.0 from the n-best list is nmt-translate's ({out}): {p.stderr[-500:]}")
    for name in ("select/selected-ch1.tsv", "test-ch1.scores.json", "test-single-ch1.scores.json"):
        check(os.path.exists(f"{run}/{name}"), f"the channel run writes {name}")
    changed = sorted(p for p, stat in kept.items() if snapshot(run).get(p) != stat)
    check(not changed, f"the other runs' files are left as they were; changed: {changed}")


def both_sides(source, env, run, results, kept):
    """NMT_DISTILL_PICK=bidiverse with NMT_CHANNEL=1 in the folder of a finished
    channel run: only its student trains, on the training pairs 2 + 2 + 1
    times over: with their own targets, the teachers' first choice, each
    teacher's own, and the channel model's translation of the targets (beam
    5, length penalty 1.0, nmt-translate's own) as their source; the other
    runs' files stay as they were."""
    rc, out = recipe(source, env, NMT_DISTILL_PICK="bidiverse", NMT_CHANNEL="1")
    check(rc == 0, f"the bidiverse run exits 0 (got {rc}):\n{out[-3000:]}")
    trained = sorted(line.split(":")[0].rsplit("/", 1)[1] for line in out.splitlines() if ": training" in line)
    check(trained == ["student-bidiverse-1"], f"only the bidiverse student trains: {trained}")

    def lines(name):
        with open(f"{run}/data/{name}") as f:
            return f.read().splitlines()
    en, de = lines("train.bidiverse.en"), lines("train.bidiverse.de")
    check(len(en) == len(de) == 5 * 200, f"the pairs come 5 times over: {len(en)} sources, {len(de)} targets")
    parts = [("train.en", "train.de"), ("train.en", "train.distilled.de"), ("train.en", "train.teacher-1.de"),
             ("train.en", "train.teacher-2.de"), ("train.ch-1.en", "train.de")]
    for i, (s, t) in enumerate(parts):
        check(en[200 * i:200 * (i + 1)] == lines(s) and de[200 * i:200 * (i + 1)] == lines(t),
              f"part {i + 1} of the pairs is {s} with {t}")
    p = subprocess.run([f"{env['NMT_BUILD_DIR']}/nmt-translate", "-m", f"{run}/ch-1/best.ckpt", "-b", "5",
                        "--length-penalty", "1.0", "-i", f"{run}/data/train.de", "--threads", "1"],
                       capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.splitlines() == lines("train.ch-1.en"),
          f"the backward sources are the channel model's translation of the targets: {p.stderr[-500:]}")
    r = result(results, "multi30k-en-de-tok-bidiverse-ch1-*.json")
    check(r["distillation"]["pick"] == "bidiverse", f"the result names the bidiverse pick: {r['distillation']}")
    changed = sorted(p for p, stat in kept.items() if snapshot(run).get(p) != stat)
    check(not changed, f"the other runs' files are left as they were; changed: {changed}")


def diverse_generation(source, env, run, kept):
    """NMT_GENERATIONS=2 with the bidiverse pick (on val only) in the folder of
    the finished bidiverse run: only the second generation's student trains
    (named with the run's tag, seeded after the channel model), on the pairs
    4 times over: their own targets, the first system's translation in place
    of the teachers' first choice, the first student's own translation in
    place of the teachers' own, and the channel model's backward pairs."""
    rc, out = recipe(source, env, NMT_DISTILL_PICK="bidiverse", NMT_CHANNEL="1", NMT_GENERATIONS="2",
                     NMT_VAL_ONLY="1")
    check(rc == 0, f"the bidiverse two-generation run exits 0 (got {rc}):\n{out[-3000:]}")
    trained = sorted(line.split(":")[0].rsplit("/", 1)[1] for line in out.splitlines() if ": training" in line)
    check(trained == ["student-bidiverse-ch1-g2-1"], f"only the second generation's student trains: {trained}")
    seed = [line for line in open(f"{run}/student-bidiverse-ch1-g2-1/config.toml") if line.startswith("seed =")]
    check(seed == ["seed = 6\n"], f"its seed comes after the channel model's: {seed}")

    def lines(name):
        with open(f"{run}/data/{name}") as f:
            return f.read().splitlines()
    en, de = lines("train.g2-bidiverse-ch1.en"), lines("train.g2-bidiverse-ch1.de")
    parts = [("train.en", "train.de"), ("train.en", "train.system-bidiverse-ch1-g1.de"),
             ("train.en", "train.student-bidiverse-1.de"), ("train.ch-1.en", "train.de")]
    check(len(en) == len(de) == len(parts) * 200, f"the pairs come 4 times over: {len(en)} sources, {len(de)} targets")
    for i, (s, t) in enumerate(parts):
        check(en[200 * i:200 * (i + 1)] == lines(s) and de[200 * i:200 * (i + 1)] == lines(t),
              f"part {i + 1} of the pairs is {s} with {t}")
    rows = [line.split("\t")[0] for line in open(f"{run}/select/selection-bidiverse-ch1-g2.tsv")][1:]
    check("student-bidiverse-ch1-g2-1-best" in rows and "student-bidiverse-1-best" in rows,
          f"both generations' students are candidates: {rows}")
    changed = sorted(p for p, stat in kept.items() if snapshot(run).get(p) != stat)
    check(not changed, f"the earlier runs' files are left as they were; changed: {changed}")


def every_student(source, env, run, kept):
    """NMT_ENSEMBLE=all (on val only): nothing trains, and every finished
    student of the folder, of any pick or name, is a candidate alone and in
    the ensemble of all, whose selection log is its own."""
    rc, out = recipe(source, env, NMT_ENSEMBLE="all", NMT_VAL_ONLY="1")
    check(rc == 0, f"the run with every student exits 0 (got {rc}):\n{out[-3000:]}")
    check(": training" not in out, "no model trains")
    students = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(f"{run}/student-*/trained"))
    check(len(students) >= 2, f"the folder holds the students of several runs: {students}")
    rows = [line.split("\t")[0] for line in open(f"{run}/select/selection-all.tsv")][1:]
    for student in students:
        check(f"{student}-best" in rows, f"{student} is a candidate: {rows}")
    check(f"ensemble-{2 + len(students)}-all" in rows, f"the ensemble of the 2 teachers and {students}: {rows}")
    changed = sorted(p for p, stat in kept.items() if snapshot(run).get(p) != stat and "/select/" not in p)
    check(not changed, f"the models and the other runs' outputs are left as they were; changed: {changed}")


def teachers_win(source, env, run):
    """With the teachers' own ensemble best on val (its score forced), the
    selection picks it over the ensemble of all and the single models."""
    scores = f"{run}/select/teachers-2-b5.json"
    kept = open(scores).read()
    with open(scores, "w") as f:
        json.dump({**json.loads(kept), "bleu_none": 99.0}, f)
    rc, out = recipe(source, env, NMT_VAL_ONLY="1")
    with open(scores, "w") as f:
        f.write(kept)
    check(rc == 0, f"the run with the teachers best on val exits 0 (got {rc}):\n{out[-3000:]}")
    selected = open(f"{run}/select/selected.tsv").read().split("\t")
    check(selected[:3] == ["teachers-2", "5", "1.0"], f"the teachers' ensemble is selected: {selected}")


def next_generation(source, env, run, results):
    """NMT_GENERATIONS=2 in the folder of a finished top-pick run: only the
    second generation's student trains (seed 5, after the teachers, the
    student and the right-to-left model), on the training source as the
    system that the first generation's selection chose translates it
    (nmt-translate's own output, reranked as that system was); it joins the
    selection alone and in the two ensembles, in a log, test outputs and
    result file of their own; the earlier runs' files stay as they were."""
    rc, out = recipe(source, env, NMT_VAL_ONLY="1")  # the first generation's choice, all reused
    check(rc == 0 and ": training" not in out, f"the one-generation run on val exits 0 (got {rc}):\n{out[-3000:]}")
    first = open(f"{run}/select/selected.tsv").read().split("\t")
    kept = snapshot(run)
    rc, out = recipe(source, env, NMT_GENERATIONS="2")
    check(rc == 0, f"the two-generation run exits 0 (got {rc}):\n{out[-3000:]}")
    trained = sorted(line.split(":")[0].rsplit("/", 1)[1] for line in out.splitlines() if ": training" in line)
    check(trained == ["student-g2-1"], f"only the second generation's student trains: {trained}")
    seed = [line for line in open(f"{run}/student-g2-1/config.toml") if line.startswith("seed =")]
    check(seed == ["seed = 5\n"], f"its seed comes after the reranking model's: {seed}")
    r = result(results, "multi30k-en-de-tok-g2-*.json")
    generations = r["generations"]
    check(len(generations) == 1 and generations[0]["students"] == ["student-g2-1"]
          and generations[0]["targets"] == "train.system-g1.de", f"the result names the generation: {generations}")
    teacher = generations[0]["teacher"]
    made = open(f"{run}/data/train.system-g1.de.made").read().strip()
    check([teacher["name"], str(teacher["beam"]), str(teacher["length_penalty"]), str(teacher["val_bleu"])]
          == [first[0], first[1], str(float(first[2])), str(float(first[3]))],
          f"the teacher is the system the first generation's selection chose ({first}): {teacher}")
    models, rest = made.split(": ", 1)[1].split(", beam ", 1)
    args = [a for m in models.split() for a in ("-m", m)] + ["-b", str(teacher["beam"]),
                                                           "--length-penalty", rest.split("length penalty ")[1].split(",")[0]]
    if teacher["rerank"]:  # each rescoring model by its folder: r2l-K or ch-K
        rescorers = rest.split(", by ")[1].split()
        kinds = {"--r2l-model" if "/r2l-" in m else "--channel-model" for m in rescorers}
        args += [a for m in rescorers for a in ("--r2l-model" if "/r2l-" in m else "--channel-model", m)] + \
            (["--r2l-weight", str(teacher["rerank"]["weight"])] if "--r2l-model" in kinds else []) + \
            (["--channel-weight", str(teacher["rerank"]["channel_weight"])] if "--channel-model" in kinds else []) + \
            ["--r2l-length-exponent", str(teacher["rerank"]["length_exponent"])]
    p = subprocess.run([f"{env['NMT_BUILD_DIR']}/nmt-translate", *args, "-i", f"{run}/data/train.en",
                        "--threads", "1"], capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout == open(f"{run}/data/train.system-g1.de").read(),
          f"the student's targets are the first system's translation ({made}): {p.stderr[-500:]}")
    rows = [line.split("\t")[0] for line in open(f"{run}/select/selection-g2.tsv")][1:]
    for row in ("student-1-best", "student-g2-1-best", "ensemble-4-g2", "students-2-g2"):
        check(row in rows, f"{row} is a candidate of the two generations' selection: {rows}")
    changed = sorted(p for p, stat in kept.items() if snapshot(run).get(p) != stat)
    check(not changed, f"the earlier runs' files are left as they were; changed: {changed}")


def main():
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="nmt-recipe-") as tmp:
        make_data(source, f"{tmp}/data", 200)
        run, results = f"{tmp}/run", f"{tmp}/results"
        env = {**os.environ, "DATA": f"{tmp}/data", "NMT_RUN": run, "NMT_BUILD_DIR": build,
               "NMT_RESULTS_DIR": results, "NMT_SEEDS": "2", "NMT_DISTILL": "1", "NMT_R2L": "1",
               "NMT_JOBS": "2", "NMT_THREADS": "1", "NMT_TRAIN_FLAGS": TINY}
        for name in ("NMT_DISTILL_PICK", "NMT_TRAIN_ONLY", "NMT_VAL_ONLY", "NMT_STUDENT_NAME", "NMT_STUDENT_FLAGS",
                     "NMT_CHANNEL", "NMT_ENSEMBLE", "NMT_GENERATIONS", "NMT_ENSEMBLE_WEIGHTS", "NMT_WORD_KD",
                     "NMT_RERANK_BEAM", "NMT_MBR"):
            env.pop(name, None)
        bad_settings(source, env, tmp)
        first_pick(source, env, run, results)
        rerun_reuses(source, env, run, build, tmp)
        second_pick(source, env, run, results, snapshot(run))
        named_students(source, env, run, results, snapshot(run))
        channel_run(source, env, run, results, snapshot(run))
        both_sides(source, env, run, results, snapshot(run))
        diverse_generation(source, env, run, snapshot(run))
        every_student(source, env, run, snapshot(run))
        weighted_ensemble(source, env, run, results)
        teachers_win(source, env, run)
        next_generation(source, env, run, results)
        r = remade_targets(source, env, run)
        channel_alone(r, run)
        held_out(r, run)
        rerank_beam(r, run)
        mbr_choice(r, run)
        stale_generation(r, run)
        result_names(tmp)
        stale_teachers(r, run, tmp)
        pieces(r, run, tmp)
        signal_at_the_end(r, tmp)
        thread_shares(r, tmp)
    print("recipe_test.py: every check holds")


if __name__ == "__main__":
    main()
