#!/usr/bin/env python3
"""The Multi30k recipe (task 1): trains nmt, selects the model and the search
settings on val, translates test_2016_flickr once, scores it, and writes
bench/results/multi30k-PAIR-FORM[-PICK]-HOST-COMMIT.json (multi30k_result.py).

  scripts/multi30k.py [DATA_DIR] [PAIR] [FORM]
    DATA_DIR  default ../shared/data/multi30k
    PAIR      en-de (default) or en-fr; the config is configs/multi30k-PAIR.toml
    FORM      tok (default): the papers' lowercased, normalized, Moses-tokenized
              text (train.lc.norm.tok.*); gives bleu_lc_tok, the published figure
              raw: cased, untokenized text; gives cased bleu, bleu_lc and chrf

Environment:
  NMT_SEEDS=N       train N models with seeds 1..N (default 1); with N > 1 the
                    ensemble of all N is compared with the best single one on val,
                    and both are scored on test (the result's single_model)
  NMT_TRAIN_FLAGS   extra nmt-train flags (e.g. "--max-epochs 12"), recorded in
                    model-N.flags when model N starts
  NMT_THREADS       threads for each training and translation (default: the cores
                    divided among the NMT_JOBS that run at once; all of them for a
                    model that trains alone and for the teachers' translation of
                    the training source; a model whose neighbours finish, with none
                    left to start, stops and resumes on its share of the freed cores)
  NMT_JOBS=N        models that train at once, and translations that run at once
                    (default 1): the teachers side by side, the students beside the
                    right-to-left models, the selection's translations N at a time.
                    On one GPU, whose small steps wait on the host, N processes go
                    about N times as fast. Models and choices are those of N = 1
  NMT_RUN           run folder (default runs/multi30k-PAIR-FORM)
  NMT_BUILD_DIR     build folder (default build)
  NMT_RESULTS_DIR   where the result file goes (default bench/results; a relative
                    folder, like NMT_RUN's, is taken from the project root)
  NMT_VAL_ONLY=1    stop after the selection on val (the test set is not read)
  NMT_TRAIN_ONLY=K  train model K alone and stop before the selection, so seeds can
                    train side by side; K > 1 needs model 1's SentencePiece models
  NMT_DISTILL=K     sequence-level knowledge distillation (Kim & Rush 2016): the seeds
                    are teachers; their ensemble translates the training source with
                    beam 5 and its best length penalty on val, and K students
                    (student-1..K, the next seeds) train on that translation. The
                    students join the selection, alone and in the ensemble of all
                    (the teachers' own ensemble stays a candidate).
  NMT_DISTILL_PICK  which of the teachers' 5-best each student learns from: top (default:
                    the ensemble's best) or closest (the one nearest the training target
                    by smoothed sentence BLEU on whitespace tokens: Kim & Rush's
                    seq-inter); closest students are student-closest-1..K, seeded as the
                    top ones, so the two differ only in their targets. reranked (needs
                    NMT_R2L): the right-to-left models train first, on the top pick, and
                    the teachers' beam reranked by them (w and a chosen on val) is what
                    student-reranked-1..K learn. diverse:
                    student-diverse-1..K learn from the training pairs 2 + (teachers)
                    times over, with the training targets, the ensemble's best and each
                    teacher's own (Nguyen et al. 2020's data diversification); an epoch
                    is that many times longer (NMT_TRAIN_FLAGS="--max-epochs 3
                    --lr-decay-start 2" keeps the steps of 15 epochs with 3 teachers).
                    bidiverse (needs NMT_CHANNEL): the diverse pairs and, for the backward
                    side, each channel model's translation of the training targets (beam
                    5, length penalty 1.0) as one more source for them: 2 + (teachers) +
                    (channel models) times; the channel models train before the students
  NMT_STUDENT_FLAGS nmt-train flags for the students alone, in place of the same options
                    of NMT_TRAIN_FLAGS (a larger student: "--dec-hidden 1024"); needs
  NMT_STUDENT_NAME  which names them: student[-PICK]-NAME-1..K, with their own selection
                    log, outputs and result file as a pick other than top has
  NMT_WORD_KD=W     with NMT_DISTILL and NMT_STUDENT_NAME: word-level distillation beside the
                    sequence-level one; the students also learn, at each target position,
                    the distribution of the checkpoints that translated for them (nmt-train
                    --kd-teachers, --kd-weight W), about one forward pass more per teacher
                    and batch. Later generations learn as before
  NMT_R2L=K         right-to-left reranking: K models (r2l-1..K, the next seeds) train
                    on the targets (with NMT_DISTILL, the teachers' first choice,
                    whichever the students' pick) with each line's words reversed; the selected
                    system's beam is rescored (nmt-translate --r2l-model) with
                    ((1 - w) log P_l2r + w log P_r2l) / ((5 + words + 1) / 6)^a, w and a
                    chosen on val, and replaces the plain output only if it scores
                    higher on val and the choice holds on held-out lines: each half
                    of val (even, odd lines) chooses as the recipe does, the other
                    half scores that choice, and the mean gain must be above 0
                    (the result's rerank.val_held_out_gain).
  NMT_CHANNEL=K     noisy-channel reranking: K models (ch-1..K, the next seeds) train from
                    target to source, and + c log P(source | hypothesis) joins the mix
                    (--channel-model), c chosen on val with w and a; the selection log,
                    test outputs and result file are named -chK, apart from the others.
  NMT_GENERATIONS=G with NMT_DISTILL, G generations of K students (default 1): the
                    system selected after one generation (reranked where the reranking
                    held) translates the training source, and K more students
                    (student[-PICK][-NAME][-all][-chK]-gG-1..K, the seeds after the
                    reranking models') learn from it as the top pick's learnt from the
                    teachers (the diverse picks: in place of the ensemble's first
                    choice, and each earlier student's own translation in place of
                    each teacher's). They join the selection alone, in the ensemble of every
                    model and in that of every student; the selection log, test outputs
                    and result file are -gG.
  NMT_ENSEMBLE_WEIGHTS=1  when the selection picks an ensemble of 3 or more models,
                    each member is tried left out (-dropI) and at twice the others'
                    weight (-upI, nmt-translate --ensemble-weights) at its beam and
                    length penalty on val, before the reranking; the best replaces
                    it where it scores higher and the choice holds on held-out lines
                    as the reranking's must (multi30k_weights.py). The selection log,
                    test outputs and result file are named -weighted.
  NMT_RERANK_BEAM=N with NMT_R2L or NMT_CHANNEL: the reranking's settings are tried on the
                    system's N-best list (beam N) too, beside its own beam's, and the
                    choice on val (held-out check included) may take either; the
                    reranked system then translates with beam N. The selection log,
                    test outputs and result file are named -rbN.
  NMT_MBR=1         after the selection and reranking, the system also picks each
                    translation from its beam by minimum Bayes risk (nmt-translate
                    --mbr chrf at temperature 0.25 or 0.5, length penalty 0.6, 1.0 or 1.4,
                    tried on val); the best replaces the plain pick where it scores higher and
                    the choice holds on held-out lines (multi30k_mbr.py). The
                    selection log, test outputs and result file are named -mbr.
  NMT_ENSEMBLE=all  with NMT_DISTILL: every student the run folder holds that finished
                    training, of any pick or name, joins the selection (alone and in the
                    ensemble of all) beside this run's; the selection log, ensemble,
                    test outputs and result file are named -all (default: pick).

A model folder that holds a finished run (its `trained` file) is not trained
again: delete the folder to retrain. Runs of several picks can share one run
folder (the teachers and right-to-left models train once): a pick other than
top keeps its selection log (select/selection-PICK.tsv), test outputs
(test-PICK.*), ensemble names (ensemble-N-PICK) and result file
(multi30k-PAIR-FORM-PICK-HOST-COMMIT.json) apart; give them the same NMT_SEEDS,
NMT_DISTILL, NMT_R2L and NMT_CHANNEL, which number the models' seeds. Test
data is read only in the last step. Every step's command and output files stay in the run
folder; a translation made earlier with the same models, and newer than its
inputs, is reused."""
import gzip
import os
import shutil
import signal
import subprocess
import sys

import multi30k_result
from multi30k_cache import kernels, nonempty, translator
from multi30k_distill import PREFIX, learners, student_settings, student_specs, word_kd_weight
from multi30k_generation import generation
from multi30k_mbr import mbr_stage
from multi30k_pieces import PIECE_LINES, WINDOW, in_pieces
from multi30k_rerank import channel_specs, r2l_specs, rerank_stage
from multi30k_select import Selection
from multi30k_weights import weigh_stage
from multi30k_train import STOP, Training, env_int


def die(message):
    sys.exit(f"multi30k.py: {message}")


class Recipe(Training, Selection):
    """One run of the recipe: its data, models, selection log and choices."""

    def __init__(self, data, pair, form):
        self.data, self.pair, self.form = data, pair, form
        self.src, self.tgt = pair.split("-", 1)
        self.config = f"configs/multi30k-{pair}.toml"
        self.bin = os.environ.get("NMT_BUILD_DIR", "build")
        self.run = os.environ.get("NMT_RUN", f"runs/multi30k-{pair}-{form}")
        self.jobs = env_int("NMT_JOBS", 1)
        if self.jobs < 1:
            die("NMT_JOBS must be at least 1")
        self.threads = self.threads_for(self.jobs)
        self.extra = os.environ.get("NMT_TRAIN_FLAGS", "").split()
        self.sel, self.commit = f"{self.run}/select", multi30k_result.checkout_commit()
        # The distillation pick and the students' name (checked before anything trains): either
        # names its own selection log, test outputs and result file; all share the folder's models.
        self.pick = os.environ.get("NMT_DISTILL_PICK", "") or "top"
        if self.pick not in PREFIX:
            die(f"NMT_DISTILL_PICK must be one of {', '.join(PREFIX)}, got '{self.pick}'")
        distill = env_int("NMT_DISTILL", 0)
        if distill and self.pick == "reranked" and env_int("NMT_R2L", 0) < 1:
            die("NMT_DISTILL_PICK=reranked needs right-to-left models to rerank with (NMT_R2L=K)")
        self.channel = env_int("NMT_CHANNEL", 0)
        if distill and self.pick == "bidiverse" and self.channel < 1:
            die("NMT_DISTILL_PICK=bidiverse needs channel models to translate the targets back (NMT_CHANNEL=K)")
        self.student_name, self.student_flags, self.student_extra = student_settings(self.extra, distill)
        self.word_kd = word_kd_weight(os.environ.get("NMT_WORD_KD", ""), self.student_name)
        self.tag = "".join(f"-{x}" for x in (self.pick if self.pick != "top" else "", self.student_name)
                           if x and distill)
        ensemble = os.environ.get("NMT_ENSEMBLE", "") or "pick"
        if ensemble not in ("pick", "all"):
            die(f"NMT_ENSEMBLE must be pick or all, got '{ensemble}'")
        if ensemble == "all" and not distill:
            die("NMT_ENSEMBLE=all adds the run folder's students: it needs NMT_DISTILL=K")
        self.ensemble_all = ensemble == "all"
        # The ensembles' tag: the models' own, -all with every student; the outputs' tag adds
        # -chK with channel reranking (the models they choose from are the same).
        self.ensemble_tag = self.tag + ("-all" if self.ensemble_all else "")
        self.base_tag = self.ensemble_tag + (f"-ch{self.channel}" if self.channel else "")
        # Generations of students (multi30k_generation.py): -gG on the outputs of G > 1.
        self.generations = env_int("NMT_GENERATIONS", 1)
        if self.generations < 1:
            die("NMT_GENERATIONS must be at least 1")
        if self.generations > 1 and not distill:
            die("NMT_GENERATIONS needs students to teach the next generation (NMT_DISTILL=K)")
        weigh = os.environ.get("NMT_ENSEMBLE_WEIGHTS", "")
        if weigh not in ("", "0", "1"):
            die(f"NMT_ENSEMBLE_WEIGHTS must be 0 or 1, got '{weigh}'")
        self.weigh = weigh == "1"  # multi30k_weights.py
        self.rerank_beam = env_int("NMT_RERANK_BEAM", 0)  # multi30k_rerank.choose_rerank()
        if self.rerank_beam and not 2 <= self.rerank_beam <= 64:
            die(f"NMT_RERANK_BEAM must be a beam of 2 to 64, got {self.rerank_beam}")
        mbr = os.environ.get("NMT_MBR", "")
        if mbr not in ("", "0", "1"):
            die(f"NMT_MBR must be 0 or 1, got '{mbr}'")
        self.mbr = mbr == "1"  # multi30k_mbr.py
        self.out_tag = (self.base_tag + (f"-g{self.generations}" if self.generations > 1 else "")
                        + ("-weighted" if self.weigh else "") + (f"-rb{self.rerank_beam}" if self.rerank_beam else "")
                        + ("-mbr" if self.mbr else ""))
        # The selecting metric: BLEU in the form's own terms (--tokenize none on
        # the tokenized form, as multi-bleu; cased 13a on raw text).
        self.key = "bleu_none" if form == "tok" else "bleu"
        self.log_rows = []  # (candidate, beam, length penalty, score)
        if not os.path.isfile(self.config):
            die(f"no config for pair '{pair}' ({self.config})")
        if form not in ("raw", "tok"):
            die(f"FORM must be raw or tok, got '{form}'")
        for tool in ("nmt-train", "nmt-translate"):
            if not os.access(f"{self.bin}/{tool}", os.X_OK):
                die("build nmt first: scripts/build.sh")

    def path(self, name):
        return f"{self.run}/data/{name}"

    # --- data -----------------------------------------------------------------
    def fetch(self, split, lang, out_name=None):
        """Copies SPLIT.LANG of the form into the run's data folder (once)."""
        out = self.path(out_name or f"{split}.{lang}")
        if nonempty(out):
            return
        if self.form == "raw":
            source = f"{self.data}/{split}.{lang}.gz"
        else:
            source = f"{self.data}/{split}.lc.norm.tok.{lang}"
            if os.path.exists(source + ".gz"):
                source += ".gz"
        opener = gzip.open if source.endswith(".gz") else open
        with opener(source, "rb") as f, open(out + ".part", "wb") as g:
            shutil.copyfileobj(f, g)
        os.replace(out + ".part", out)

    def shared_spm(self, first="model-1"):
        return ["--src-spm", f"{self.run}/{first}/src.spm.model", "--tgt-spm", f"{self.run}/{first}/tgt.spm.model"]

    # --- translation (the selection on val: multi30k_select.Selection) --------
    def nmt_translate(self, models, args, log, alone=False):
        """nmt-translate with MODELS (an ensemble when several) and ARGS, which
        name the input and output (-i SOURCE -o OUT), its stderr in LOG; on
        all the cores when ALONE (nothing runs beside it), else on this run's
        share. A SOURCE longer than a piece (the training source or targets)
        goes in pieces that a stopped run keeps (multi30k_pieces.py), unless
        the translation is scored (--reference, --scores-json: the scores are
        the whole file's) or its --window does not divide a piece. The pieces'
        key: the command, the nmt-translate code, the kernels and SentencePiece
        module it runs with here, and each file argument's size and time. Dies
        when a run fails, a piece is wrong, or the stop signal came. A -c
        config file counts by its size and time, not the checkpoints it
        names: give those as arguments where pieces are kept."""
        if STOP.is_set():  # a queued translation does not start after the signal
            die("stopped by a signal")
        cmd = [f"{self.bin}/nmt-translate"] + [a for m in models for a in ("-m", m)]
        threads = self.threads_for(1) if alone else self.threads  # ALONE: nothing runs beside it
        if "-i" not in args[:-1] or "-o" not in args[:-1]:
            die(f"nmt_translate() needs -i and -o: {' '.join(args)}")
        i, o = args.index("-i"), args.index("-o")
        source, out = args[i + 1], args[o + 1]
        rest = [a for k, a in enumerate(args) if k not in (i, i + 1, o, o + 1)]  # without -i, -o
        value = dict(zip(rest, rest[1:]))  # an option's value (the flags without one are not asked for)
        cmd += ["--threads", threads] + rest
        whole = ("--reference" in rest or "--scores-json" in rest or
                 PIECE_LINES % int(value.get("--window", WINDOW)) != 0)

        def key():
            files = [a for a in [source] + cmd[1:] if os.path.isfile(a)]
            return "\n".join([" ".join(cmd), f"nmt-translate {translator(self.bin)}", *kernels(self.bin)] +
                              [f"{a} {os.stat(a).st_size} {os.stat(a).st_mtime_ns}" for a in files]) + "\n"
        with open(log, "w") as f:
            def translate(piece, piece_out):
                if STOP.is_set():
                    return False
                if piece != source:
                    print(f"{piece} (of {source}):", file=f, flush=True)
                return subprocess.run(cmd + ["-i", piece, "-o", piece_out], stderr=f).returncode == 0
            try:
                made = in_pieces(source, out, key, translate, nbest=int(value.get("--n-best", 1)) > 1,
                                 lines=float("inf") if whole else PIECE_LINES)
            except (OSError, ValueError) as e:
                die(f"{out}: {e}")
            if not made:
                die("stopped by a signal" if STOP.is_set() else f"nmt-translate failed (see {log})")


def main():
    args = sys.argv[1:] + [None] * 3
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: STOP.set())
    r = Recipe(args[0] or "../shared/data/multi30k", args[1] or "en-de", args[2] or "tok")
    seeds, only = env_int("NMT_SEEDS", 1), env_int("NMT_TRAIN_ONLY", 0)
    distill, r2l, channel = env_int("NMT_DISTILL", 0), env_int("NMT_R2L", 0), r.channel
    seeds = max(seeds, only)
    os.makedirs(f"{r.run}/data", exist_ok=True)
    for split in ("train", "val"):
        r.fetch(split, r.src)
        r.fetch(split, r.tgt)

    # Training, one model per seed; every model after the first uses its SentencePiece models.
    models = [f"{r.run}/model-{seed}" for seed in range(1, seeds + 1)]
    specs = [(seed, folder, f"train.{r.tgt}", f"val.{r.tgt}", r.shared_spm() if seed > 1 else ())
             for seed, folder in enumerate(models, 1)]
    if only:
        folder = models[only - 1]
        if only > 1 and not os.path.exists(f"{folder}/last.ckpt") and not nonempty(f"{r.run}/model-1/tgt.spm.model"):
            die(f"{r.run}/model-1/tgt.spm.model: not there yet (model {only} shares model 1's "
                "SentencePiece models; start model 1 first)")
        r.train_model(*specs[only - 1])
        return
    r.train_models(specs)

    os.makedirs(r.sel, exist_ok=True)
    r.single = {"name": "", "models": [], "score": -1.0}
    r.score_models(models)
    info = {"distill": None, "rerank": None, "generations": [], "weights": None, "mbr": None}
    if distill:
        students, specs = student_specs(r, models, seeds, distill, r2l, info)
        if r.jobs > 1:  # the right-to-left and channel models train beside the students
            specs += (r2l_specs(r, seeds + distill, r2l, True)[1] if r2l else []) + \
                channel_specs(r, seeds + distill + r2l, channel)[1]
        r.train_models(specs)
        generation_students = list(students)  # this run's: the next generation has as many
        if r.ensemble_all:  # the folder's other finished students, of any pick or name
            students += [d for d in learners(r, "student") if os.path.exists(f"{d}/trained") and d not in students]
        r.score_models(students)
        models += students
    best_single, _ = r.tune(r.single["name"], r.single["models"])
    r.single.update(best_single)
    best = dict(r.single)
    if len(models) > 1:  # the ensemble of every model's better checkpoint
        ensemble = r.tuned_ensemble(f"ensemble-{len(models)}{r.ensemble_tag}", models)
        if ensemble["score"] > best["score"]:
            best = ensemble
    if distill and seeds > 1:  # the teachers' own ensemble, tuned when they distilled, is a candidate too
        name, beam, lp, score = max((row for row in r.log_rows if row[0] == f"teachers-{seeds}"), key=lambda x: x[3])
        if score > best["score"]:
            best = {"name": name, "models": r.members(models[:seeds]), "beam": beam, "lp": lp, "score": score}
    if r.weigh:  # the selected ensemble's members weighed (multi30k_weights.py)
        info["weights"] = weigh_stage(r, best)
    r2l_models, channel_models = rerank_stage(r, best, seeds + distill, r2l, channel, distill > 0, info)
    for g in range(2, r.generations + 1):  # the selected system teaches the next generation's students
        first_seed = seeds + distill + r2l + channel + (g - 2) * distill
        best, models, generation_students = generation(r, g, best, models, generation_students, info, first_seed,
                                                       r2l_models, channel_models)
    if r.mbr:  # the system's pick from its beam by minimum Bayes risk (multi30k_mbr.py)
        info["mbr"] = mbr_stage(r, best, info["rerank"].chosen if info["rerank"] else None)
    print(f"selected on val: {best['name']}, beam {best['beam']}, length penalty {best['lp']} "
          f"({r.key} {best['score']})")
    with open(f"{r.sel}/selected{r.out_tag}.tsv", "w") as f:
        f.write(f"{best['name']}\t{best['beam']}\t{best['lp']}\t{best['score']}\n")
    if os.environ.get("NMT_VAL_ONLY") == "1":
        return
    test_seconds, single_seconds = multi30k_result.run_test(r, best, info["rerank"])
    multi30k_result.write(r, models + r2l_models + channel_models, best, test_seconds, single_seconds, info)


if __name__ == "__main__":
    main()
