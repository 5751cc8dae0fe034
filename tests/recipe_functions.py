"""The Multi30k recipe's functions called directly on the run folder that
tests/recipe_test.py's runs leave (not through a run of the recipe): the
reranked targets made again when the choice on val changes, the channel
models' reranking alone, the held-out gain of a choice on val, result files
of other commands kept, the teachers' translation made again when a teacher
is newer, a generation's teacher's translation made again for another
system, a reranking over another beam's n-best list (NMT_RERANK_BEAM), and
a model that finishes as the recipe's stop signal comes, and the selected
system's file read by nmt-translate (with the paired test of the system
against the single model on test). Each function exits through check()
when a check fails."""
import contextlib
import glob
import io
import json
import os
import shutil
import subprocess
import sys

from recipe_util import check, stand_in, threads_of


def system_file(source, env, run, r, out, best, r2l):
    """The selected system as one file (RUN/system.toml; single.toml for the
    best single model), which result R holds and test was translated with;
    and system BEST (models, beam, lp) reranked by the right-to-left
    checkpoints R2L at w 0.25, a 1.4 written as such a file
    (multi30k_rerank.system_toml()): nmt-translate -c reads it and
    translates val as the reranking of that setting did (OUT), whichever
    setting the tiny models chose."""
    check(r["selected"]["toml"] == open(f"{run}/system.toml").read() and
          r["single_model"]["toml"] == open(f"{run}/single.toml").read(),
          f"the result holds the system's and the single model's files: {r['selected']}")
    # The system against the single model on test: a paired bootstrap test in the result's metric.
    paired = r["test_system_vs_single"]
    if os.path.exists(f"{run}/test-single.hyp"):
        check(paired is not None and paired["system"] == r["bleu_lc_tok"] and
              paired["single"] == r["single_model"]["bleu_lc_tok"] and 0 < paired["p_value"] <= 1 and
              paired["system_ci95"] >= 0 and "|bs:1000|seed:12345|" in paired["signature"],
              f"the paired test of the system against the single model: {paired}")
    else:
        check(paired is None, f"no paired test when the system is the single model: {paired}")
    sys.path.insert(0, f"{source}/scripts")
    from multi30k_rerank import Rerank, system_toml
    folders = [c[:-len("/best.ckpt")] for c in r2l]
    toml = system_toml(best, Rerank(0.25, 0.0, 1.4, None, folders, []))
    path = f"{os.path.dirname(run)}/system-w0.25-a1.4.toml"  # beside the run folder, which later checks snapshot
    with open(path, "w") as f:
        f.write(toml)
    p = subprocess.run([f"{env['NMT_BUILD_DIR']}/nmt-translate", "-c", path, "-i",
                        f"{run}/data/val.en", "--threads", threads_of(out[:-len("-w0.25-a1.4.out")] + ".nbest")],
                       capture_output=True, text=True, cwd=source)
    check(p.returncode == 0 and p.stdout == open(out).read(),
          f"nmt-translate -c FILE translates val as the reranking at w 0.25, a 1.4 did ({out}):\n{toml}{p.stderr}")


def remade_targets(source, env, run):
    """reranked_targets() with the choice on val forced (the tiny models may go
    either way): targets made again when the choice changes, left alone and
    replaced by the top pick's when no reranking wins, refused once a student
    has learnt from them; student_specs() then names the top pick's students."""
    os.chdir(source)  # as multi30k.main() does: the recipe's paths are the project root's
    sys.path.insert(0, f"{source}/scripts")
    os.environ.update({k: v for k, v in env.items() if k.startswith("NMT_")})
    os.environ["NMT_DISTILL_PICK"] = "reranked"
    import multi30k
    import multi30k_distill
    from multi30k_rerank import Rerank, RerankChoice
    r = multi30k.Recipe(env["DATA"], "en-de", "tok")
    teachers = [f"{run}/model-{i}/best.ckpt" for i in (1, 2)]
    target = f"{run}/data/train.distilled-reranked.de"
    shutil.rmtree(f"{run}/student-reranked-1", ignore_errors=True)
    r2l = [f"{run}/r2l-1"]
    for choice, want in ((Rerank(0.25, 0.0, 1.0, 99.0, r2l, []), "reranked: w 0.25, a 1.0"),
                         (None, "reranked: w 0.25, a 1.0"),
                         (Rerank(0.5, 0.0, 0.6, 99.0, r2l, []), "reranked: w 0.5, a 0.6")):
        multi30k_distill.choose_rerank = lambda *_, c=choice: RerankChoice(c, 0.5 if c else 0.0)
        name, setting = multi30k_distill.reranked_targets(r, teachers, 2, "1.0", 3, 1)
        wanted = ("train.distilled-reranked.de", (choice.w, choice.a)) if choice else ("train.distilled.de", None)
        check((name, setting) == wanted, f"reranked_targets() returns {wanted} for {choice}: {name}, {setting}")
        check(open(target + ".made").read().startswith(want), f"the targets are made again for {choice}")
        with open(target) as f:
            lines = f.read().split("\n")[:-1]
        check(len(lines) == 200, f"{len(lines)} targets for {choice}, not 200")
    os.makedirs(f"{run}/student-reranked-1")
    multi30k_distill.choose_rerank = lambda *_: RerankChoice(Rerank(0.75, 0.0, 1.4, 99.0, r2l, []), 0.5)
    for marker in ("last.ckpt", "trained"):  # a student stopped part way, then one that finished
        open(f"{run}/student-reranked-1/{marker}", "w").close()
        try:
            multi30k_distill.reranked_targets(r, teachers, 2, "1.0", 3, 1)
        except SystemExit as e:
            check("student-reranked-1 learnt from" in str(e), f"the refusal names the student ({marker}): {e}")
        else:
            check(False, f"new targets are refused where a student learnt from the old ones ({marker})")
        os.remove(f"{run}/student-reranked-1/{marker}")
    merged = multi30k_distill.merged_flags(["--x", "1", "--y", "-2", "--z"], ["--x=3", "--z", "4"])
    check(merged == ["--y", "-2", "--x=3", "--z", "4"], f"merged_flags() replaces the same options: {merged}")
    multi30k_distill.choose_rerank = lambda *_: RerankChoice(None, 0.0)
    info = {}
    students, specs = multi30k_distill.student_specs(r, [f"{run}/model-1", f"{run}/model-2"], 2, 1, 1, info)
    check(students == [f"{run}/student-1"] and specs[0][2] == "train.distilled.de",
          f"without a reranking that wins, the students are the top pick's: {students}, {specs}")
    check(info["distill"][4:] == ("reranked", None), f"the result records the pick and no reranking: {info}")
    return r


def channel_alone(r, run):
    """A reranking by channel models alone keeps them even at weight 0 (its
    mix is then the left-to-right one, length-normalized), and nmt-translate
    runs it; beside right-to-left models, weight 0 drops them."""
    from multi30k_rerank import rerank, rerank_of
    chosen = rerank_of(0.0, 0.0, 1.0, 1.0, [], [f"{run}/ch-1"])
    check(chosen.channel == [f"{run}/ch-1"], f"channel models alone stay at weight 0: {chosen}")
    beside = rerank_of(0.5, 0.0, 1.0, 1.0, [f"{run}/r2l-1"], [f"{run}/ch-1"])
    check(beside.channel == [], f"beside right-to-left models, weight 0 drops them: {beside}")
    out = f"{run}/channel-alone.out"
    rerank(r, {"models": [f"{run}/model-1/best.ckpt"], "beam": 2, "lp": "1.0"}, chosen, r.path("val.en"), out,
           f"{run}/channel-alone.log")
    with open(out) as f:
        check(sum(1 for _ in f) == 30, "the channel-alone reranking translates every val line")


def rerank_beam(r, run):
    """NMT_RERANK_BEAM: the reranking's grid also runs over the N-best list of
    a beam other than the system's, logged at that beam, and a Rerank chosen
    there translates with beam N (as the choice from the N-best list)."""
    from multi30k_rerank import Rerank, choose_rerank, rerank
    from multi30k_select import translation_name
    models, r2l = [f"{run}/model-1/best.ckpt"], [f"{run}/r2l-1"]
    best = {"name": "model-1-rb", "models": models, "beam": 2, "lp": "1.0"}
    best["score"] = r.translate(translation_name("model-1-rb", 2, "1.0"), 2, "1.0", models)
    saved = r.out_tag, r.log_rows
    r.rerank_beam, r.out_tag, r.log_rows = 4, "-rb4test", []  # a selection log of its own
    choose_rerank(r, best, r2l)
    prefix = f"{r.sel}/rerank-val{r.tag}-model-1-rb"
    for name, beam in ((prefix, 2), (f"{prefix}-b4", 4)):
        with open(f"{name}.nbest") as f:
            ids = [line.split(" ||| ")[0] for line in f]
        check(max(ids.count(i) for i in set(ids)) == beam, f"{name}.nbest holds the {beam} best of a line")
    rows = [row for row in r.log_rows if row[1] == 4]
    check(len(rows) == 12 and len(r.log_rows) == 24, f"the grid runs at both beams: {r.log_rows}")
    texts = {(w, a, b): open(f"{prefix}{'-b4' if b == 4 else ''}-w{w}-a{a}.out").read()
             for w in (0.0, 0.25, 0.5, 0.75) for a in (0.6, 1.0, 1.4) for b in (2, 4)}
    differ = [(w, a) for (w, a, b) in texts if b == 4 and texts[(w, a, 4)] != texts[(w, a, 2)]]
    check(differ, "some setting chooses otherwise from 4 hypotheses than from 2")
    w, a = differ[0]
    out = f"{run}/rerank-beam.out"
    rerank(r, best, Rerank(w, 0.0, a, 0.0, r2l, [], 4), r.path("val.en"), out, f"{run}/rerank-beam.log")
    check(open(out).read() == texts[(w, a, 4)], f"a reranking of beam 4 translates with beam 4 (w {w}, a {a})")
    r.rerank_beam, (r.out_tag, r.log_rows) = 0, saved


def held_out(r, run):
    """The held-out gain of the choice on val: each half of val chooses the best
    setting where it beats the plain system there, the other half scores that
    choice; here from scores, then from translations scored by nmt-translate."""
    from multi30k_rerank import cross_validated_gain, held_out_gain
    for halves, want in (([[10, 12, 11], [10, 9, 13]], 0.0),  # each half's choice loses 1 / gains 1 on the other
                         ([[10, 12], [10, 11]], 1.5), ([[10, 9], [10, 8]], 0.0),  # no setting beats the plain one
                         ([[10, 12, 12], [10, 11, 13]], 1.5),  # a tie goes to the first setting
                         ([[10], [10]], 0.0)):
        got = cross_validated_gain(halves)
        check(got == want, f"cross_validated_gain({halves}) is {want}: {got}")
    ref = r.path("val.de")
    with open(ref) as f:
        lines = f.readlines()
    for name, text in (("plain", lines), ("same", lines), ("worse", [line.split()[0] + "\n" for line in lines])):
        with open(f"{run}/held-{name}.out", "w") as f:
            f.writelines(text)
    plain, same, worse = (f"{run}/held-{n}.out" for n in ("plain", "same", "worse"))
    check(held_out_gain(r, ref, plain, [same, worse]) == 0.0, "a setting that ties the plain system gains nothing")
    check(held_out_gain(r, ref, worse, [worse, plain]) > 50, "a setting far above the plain one gains on both halves")
    check(os.path.exists(f"{plain}.1.json"), "each half's score is kept beside its translation")


def result_names(tmp):
    """A result file another command made is kept: the next run at the same
    commit writes STEM-2.json (then -3, ...); the same command's file is
    replaced."""
    from multi30k_result import unclaimed
    stem = f"{tmp}/names/multi30k-en-de-tok-vm-abc1234"
    os.makedirs(f"{tmp}/names")
    check(unclaimed(stem, "A") == f"{stem}.json", "a name no file holds is taken")
    with open(f"{stem}.json", "w") as f:
        json.dump({"command": "A"}, f)
    check(unclaimed(stem, "A") == f"{stem}.json", "the same command's result is replaced")
    check(unclaimed(stem, "B") == f"{stem}-2.json", "another command's result is kept: -2")
    with open(f"{stem}-2.json", "w") as f:
        f.write("not json")
    check(unclaimed(stem, "B") == f"{stem}-3.json", "a file that cannot be read is kept too: -3")


def stale_teachers(r, run, tmp):
    """The teachers' translation of the training source (the n-best file the
    students' targets come from): kept while no teacher is newer (whatever
    the choices on val); once one is, refused while a model that learnt from
    it is there, and made again, with the targets from it, when none is."""
    import multi30k_distill
    r.pick = "top"
    teachers, nbest = [f"{run}/model-1", f"{run}/model-2"], f"{run}/data/train.distilled.nbest.de"
    before = os.stat(nbest).st_mtime_ns
    multi30k_distill.student_specs(r, teachers, 2, 1, 1, {})
    check(os.stat(nbest).st_mtime_ns == before, "the teachers' translation is kept while no teacher is newer")
    for ckpt in glob.glob(f"{run}/model-2/*.ckpt"):  # model-2 retrained, say
        os.utime(ckpt)
    try:
        multi30k_distill.student_specs(r, teachers, 2, 1, 1, {})
    except SystemExit as e:
        check("learnt from the teachers' translation" in str(e), f"the refusal names the model: {e}")
    else:
        check(False, "a stale teachers' translation is refused while a model that learnt from it is there")
    check(os.stat(nbest).st_mtime_ns == before, "the refused translation is left as it was")
    os.makedirs(f"{tmp}/learnt")
    for folder in glob.glob(f"{run}/student-*") + glob.glob(f"{run}/r2l-*"):
        shutil.move(folder, f"{tmp}/learnt")
    multi30k_distill.student_specs(r, teachers, 2, 1, 1, {})
    check(os.stat(nbest).st_mtime_ns > before and open(nbest + ".made").read().startswith("teachers "),
          "the teachers translate the training source again, and say how")
    top = f"{run}/data/train.distilled.de"
    check(os.path.getmtime(top) >= os.path.getmtime(nbest), "the students' targets are made again from it")


def stale_generation(r, run):
    """system_targets(): the training source translated by the system a
    generation's selection chose, made once, kept while made as now, copied
    when the same system teaches the generation after (and not when
    another does), refused
    for another system while a student of the next generation learnt from it
    (its folder named as generation() names it), and made again for that
    system when none did."""
    import multi30k_generation
    best = {"name": "model-1-best", "models": [f"{run}/model-1/best.ckpt"], "beam": 5, "lp": "1.0", "score": 1.0}
    name = multi30k_generation.system_targets(r, best, None, 2)
    out = f"{run}/data/{name}"
    check(name == f"train.system{r.base_tag}-g1.de" and open(out + ".made").read().startswith("system model-1-best: "),
          f"the system's translation is made and says how: {name}")
    before = os.stat(out).st_mtime_ns
    multi30k_generation.system_targets(r, best, None, 2)
    check(os.stat(out).st_mtime_ns == before, "it is kept while made as now")
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        again = multi30k_generation.system_targets(r, best, None, 3)
    check(again == f"train.system{r.base_tag}-g2.de" and "is copied from" in said.getvalue() and
          open(f"{run}/data/{again}").read() == open(out).read(),
          f"the same system teaching the next generation is not run again: {said.getvalue()!r}")
    for made in (again, again + ".made"):
        os.remove(f"{run}/data/{made}")
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        multi30k_generation.system_targets(r, {**best, "lp": "1.4"}, None, 3)
    check("translates" in said.getvalue() and "copied" not in said.getvalue() and
          "length penalty 1.4" in open(f"{run}/data/{again}.made").read(),
          f"another system teaching the next generation translates: {said.getvalue()!r}")
    for made in (again, again + ".made"):
        os.remove(f"{run}/data/{made}")
    learner = f"{run}/{multi30k_generation.generation_name(r, 2)}-1"
    os.makedirs(learner)
    open(f"{learner}/last.ckpt", "w").close()
    other = {**best, "lp": "1.4"}
    try:
        multi30k_generation.system_targets(r, other, None, 2)
    except SystemExit as e:
        check(f"{os.path.basename(learner)} learnt from" in str(e), f"the refusal names the student: {e}")
    else:
        check(False, "another system's translation is refused while a student learnt from the old one")
    check(os.stat(out).st_mtime_ns == before, "the refused translation is left as it was")
    shutil.rmtree(learner)
    multi30k_generation.system_targets(r, other, None, 2)
    check(os.stat(out).st_mtime_ns > before and "length penalty 1.4" in open(out + ".made").read(),
          "with no student of it, the other system's translation replaces it")


def signal_at_the_end(r, tmp):
    """train_model() when the recipe's stop signal came while nmt-train (here a
    stand-in script) was finishing: a run that says it finished is `trained`
    and an interrupted one is not (it resumes); the recipe stops either way,
    and starts no translation after it. A folder with a step checkpoint but
    no last.ckpt resumes. A model trained beside others (no echo) shows its
    warnings, and nothing else of its log, on the terminal."""
    import multi30k
    r.bin = f"{tmp}/fake-bin"
    os.makedirs(r.bin)
    multi30k.STOP.set()
    for reason, trained in (("max_epochs", True), ("interrupted", False)):
        stand_in(f"{r.bin}/nmt-train", f"echo 'training finished ({reason}): 7 steps' >&2")
        folder = f"{tmp}/signalled-{reason}"
        os.makedirs(folder)
        try:
            r.train_model(1, folder, "train.de", "val.de", echo=False)
        except SystemExit as e:
            check("stopped by a signal" in str(e), f"the recipe stops after a signal ({reason}): {e}")
        else:
            check(False, f"the recipe stops after a signal ({reason})")
        check(os.path.exists(f"{folder}/trained") == trained,
              f"a run that ends '{reason}' under a signal is{'' if trained else ' not'} marked trained")
    open(f"{r.bin}/nmt-translate", "w").close()  # not to be run: anything queued stays unstarted
    try:
        r.nmt_translate(["model.ckpt"], ["-i", "in", "-o", "out"], f"{tmp}/translate.log")
    except SystemExit as e:
        check("stopped by a signal" in str(e), f"a translation after the signal is not started: {e}")
    else:
        check(False, "a translation after the signal is not started")
    multi30k.STOP.clear()
    # A run stopped before its first last.ckpt (a second signal during the save) resumes from a step checkpoint.
    # Its warnings reach the terminal though its log does not.
    warning = "--lr-decay-start 2 with --max-epochs 2: the decay lowers no rate a step trains at"
    stand_in(f"{r.bin}/nmt-train", f"echo \"$@\" > {tmp}/args\necho '[2026-12-06 19:00:00] [info] step 1' >&2\n"
             f"echo '[2026-12-06 19:00:00] [warning] {warning}' >&2\n"
             "echo 'training finished (max_epochs): 7 steps' >&2")
    folder = f"{tmp}/stepped"
    os.makedirs(folder)
    open(f"{folder}/step-500.ckpt", "w").close()
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        r.train_model(1, folder, "train.de", "val.de", echo=False)
    check("--resume" in open(f"{tmp}/args").read().split(), "a folder with only step-N.ckpt is resumed")
    check(f"{folder}: {warning}\n" in said.getvalue() and "step 1" not in said.getvalue(),
          f"a model trained beside others shows its warnings, and only them: {said.getvalue()!r}")


def grown(r, tmp, cores):
    """With 2 jobs and nothing left to start, the model still training when
    its neighbour finishes is stopped (SIGTERM) and resumed on every core:
    stand-ins for nmt-train, one that finishes at once and one that runs
    until the signal (then says it was interrupted, as nmt-train does after
    saving last.ckpt) or 60 s, and finishes when resumed; a third model,
    trained earlier, is kept."""
    r.bin = f"{tmp}/grow-bin"
    os.makedirs(r.bin)
    stand_in(f"{r.bin}/nmt-train", f"""out=; prev=; for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
echo "$@" >> {tmp}/grow.args
case "$out" in
  *long) case " $* " in *" --resume "*) echo 'training finished (max_epochs): 9 steps' >&2; exit 0;; esac
    mkdir -p "$out" && touch "$out/last.ckpt"
    trap "echo 'training finished (interrupted): 3 steps' >&2; exit 0" TERM
    i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
    echo 'training finished (max_epochs): 9 steps' >&2;;
  *) mkdir -p "$out"; sleep 0.5; echo 'training finished (max_epochs): 7 steps' >&2;;
esac""")
    short, long, kept = f"{tmp}/grow-short", f"{tmp}/grow-long", f"{tmp}/grow-kept"
    os.makedirs(kept)
    open(f"{kept}/trained", "w").close()  # a finished model takes no place and changes no share
    r.train_models([(1, short, "train.de", "val.de", ()), (2, long, "train.de", "val.de", ()),
                    (3, kept, "train.de", "val.de", ())])
    runs = [line.split() for line in open(f"{tmp}/grow.args")]
    longs = [a for a in runs if a[a.index("-o") + 1] == long]
    shares = [(a[a.index("--threads") + 1], "--resume" in a) for a in longs]
    check(shares == [(str(cores // 2), False), (str(cores), True)],
          f"the model left training resumes on every core when its neighbour finishes: {shares}")
    check(all(os.path.exists(f"{d}/trained") for d in (short, long)), "both models are trained")


def thread_shares(r, tmp):
    """threads_for(): NMT_THREADS where given, else the cores divided among the
    models or translations that run at once (at most NMT_JOBS); train_models()
    gives a model that trains alone (the others kept) all the cores, and
    records the commit its nmt-train names; a translation ALONE gets every
    core too; a model whose neighbour finishes grows (grown())."""
    cores, saved = os.cpu_count() or 1, os.environ.pop("NMT_THREADS", None)
    try:
        r.jobs = 2
        for k, want in ((1, cores), (2, max(1, cores // 2)), (5, max(1, cores // 2))):
            check(r.threads_for(k) == str(want), f"threads_for({k}) with 2 jobs on {cores} cores: {r.threads_for(k)}")
        r.bin = f"{tmp}/thread-bin"
        os.makedirs(r.bin)
        for tool in ("nmt-train", "nmt-translate"):
            stand_in(f"{r.bin}/{tool}", f"echo \"$@\" > {tmp}/{tool}.args\n"
                     "echo 'training finished (max_epochs): 7 steps' >&2")
        kept, alone = f"{tmp}/threads-kept", f"{tmp}/threads-alone"
        os.makedirs(kept)
        open(f"{kept}/trained", "w").close()
        os.makedirs(alone)
        r.train_models([(1, kept, "train.de", "val.de", ()), (2, alone, "train.de", "val.de", ())])
        args = open(f"{tmp}/nmt-train.args").read().split()
        check(args[args.index("--threads") + 1] == str(cores), f"a model that trains alone gets every core: {args}")
        made = open(f"{alone}.commit").read().strip()
        check(made == "feedbee", f"a model's .commit names its nmt-train's build, not the checkout: {made}")
        r.nmt_translate(["m.ckpt"], ["-i", "in", "-o", "out"], f"{tmp}/alone.log", alone=True)
        args = open(f"{tmp}/nmt-translate.args").read().split()
        check(args[args.index("--threads") + 1] == str(cores), f"a lone translation gets every core: {args}")
        if cores > 1:
            grown(r, tmp, cores)
        os.environ["NMT_THREADS"] = "3"
        check(r.threads_for(1) == "3", "NMT_THREADS where given")
    finally:
        os.environ.pop("NMT_THREADS", None)
        if saved is not None:
            os.environ["NMT_THREADS"] = saved
