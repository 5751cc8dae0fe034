"""The test and the result file of the Multi30k recipe (scripts/multi30k.py):
the selected system translates test_2016_flickr once (run_test), and write()
makes bench/results/multi30k-PAIR-FORM[-PICK]-HOST-COMMIT[-N].json (the folder:
NMT_RESULTS_DIR; -N where another command's result holds the name) with the selection on val, the test figures, every model's
training and the machine."""
import itertools
import json
import os
import platform
import shlex
import shutil
import subprocess
import time

from multi30k_rerank import die, system_toml
from multi30k_mbr import result_info as mbr_info
from multi30k_weights import result_info


def figures(scores, tok):
    # Raw form: scored against the raw references. Tokenized form: the output is
    # lowercased Moses-tokenized text, so only --tokenize none against the
    # lc.norm.tok references is like-for-like (the papers' multi-bleu figure).
    return {"bleu": None if tok else scores["bleu"],
            "bleu_lc": None if tok else scores["bleu_lc"],
            "bleu_lc_tok": scores["bleu_none"] if tok else None,
            "chrf": scores["chrf"]}
def metrics(d):
    return [json.loads(l) for l in open(f"{d}/metrics.jsonl") if l.strip()]


def checkout_commit():
    """The checkout's short commit, with -dirty when it has changes ("unknown"
    outside git): read when the recipe starts, as its scripts are then."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    commit = commit or "unknown"
    if subprocess.run(["git", "diff", "--quiet", "HEAD"], capture_output=True).returncode != 0:
        commit += "-dirty"
    return commit


def command(r):
    """The recipe's invocation as one shell line: every NMT_* variable set
    (sorted, quoted) and scripts/multi30k.sh with recipe R's data, pair and form."""
    env = [f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items()) if k.startswith("NMT_") and v]
    return " ".join(env + ["scripts/multi30k.sh", shlex.quote(r.data), r.pair, r.form])


def unclaimed(stem, made_by):
    """STEM.json, unless a result another command made is there (its "command"
    differs from MADE_BY, or it has none or cannot be read): then the first
    STEM-N.json, N = 2, 3, ..., that is not there or MADE_BY made. A run of
    other settings at the same commit so keeps the earlier run's file."""
    for n in itertools.count(1):
        path = f"{stem}.json" if n == 1 else f"{stem}-{n}.json"
        if not os.path.exists(path):
            return path
        try:
            if json.load(open(path)).get("command") == made_by:
                return path
        except (OSError, ValueError, AttributeError):
            pass


def system_against_single(r, tok):
    """The paired bootstrap test on test of recipe R's selected system against
    its best single model (nmt-translate --evaluate --baseline: 1,000
    resampled test sets, sacreBLEU's --paired-bs), in the result file's
    metric: the system's score, mean and 95% half-interval over the
    resamples, the single model's score and the p-value of the two scoring
    alike. None when the system is that single model (one translation).
    Dies when the scoring fails."""
    system, single = f"{r.run}/test{r.out_tag}", f"{r.run}/test-single{r.out_tag}"
    if not os.path.exists(f"{single}.hyp"):
        return None
    scores = f"{system}-vs-single.scores.json"
    cmd = [f"{r.bin}/nmt-translate", "--evaluate", "-i", f"{system}.hyp", "--baseline", f"{single}.hyp",
           "--reference", r.path(f"test.{r.tgt}"), "--scores-json", scores, *(["--tokenize", "none"] if tok else [])]
    with open(f"{system}-vs-single.log", "w") as log:
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=log).returncode != 0:
            die(f"nmt-translate --evaluate --baseline failed (see {log.name})")
    s = json.load(open(scores))
    return {"metric": "bleu_lc_tok" if tok else "bleu", "system": s["bleu"], "system_mean": s["bleu_bootstrap_mean"],
            "system_ci95": s["bleu_bootstrap_ci"], "single": s["baseline_bleu"], "p_value": s["bleu_p_value"],
            "signature": s["bleu_signature"]}


def write(r, models, best, test_seconds, single_seconds, info):
    """Writes the result of recipe R (multi30k.Recipe): MODELS trained, the
    selected system BEST, the test translation's seconds (the selected system's
    and the single model's) and INFO (distillation and reranking, None when off)."""
    run, form, pair, config, threads = r.run, r.form, r.pair, r.config, r.threads
    name, beam, lp, val_score, weights = best["name"], best["beam"], best["lp"], best["score"], best.get("weights")
    s_name, s_beam, s_lp, s_val, s_seconds = (r.single["name"], r.single["beam"], r.single["lp"],
                                              r.single["score"], single_seconds)
    extra = os.environ.get("NMT_TRAIN_FLAGS", "")
    commit = r.commit
    results = os.environ.get("NMT_RESULTS_DIR", "") or "bench/results"
    os.makedirs(results, exist_ok=True)
    result = unclaimed(f"{results}/multi30k-{pair}-{form}{r.out_tag}-{platform.node().split('.')[0]}-{commit}",
                       command(r))
    scores = json.load(open(f"{run}/test{r.out_tag}.scores.json"))
    tok = form == "tok"
    train = []
    for d in models:
        m = metrics(d)
        valid = [x for x in m if x["type"] == "valid"]
        top = max(valid, key=lambda x: x["bleu"]) if valid else {}
        train.append({
            "folder": d,
            "steps": max((x.get("step", 0) for x in m), default=0),
            "best_val_bleu_greedy": top.get("bleu"), "best_step": top.get("step"),
            # the trainer's own clock: wall time of training and validation, over resumes
            "train_seconds": max((x.get("elapsed", 0) for x in m), default=0),
            "commit": open(f"{d}.commit").read().strip() if os.path.exists(f"{d}.commit") else None,
            # the seed it trained with, from its config.toml (None: not there)
            "seed": next((int(l.split("=", 1)[1]) for l in open(f"{d}/config.toml") if l.startswith("seed =")), None)
            if os.path.exists(f"{d}/config.toml") else None,
            # the extra nmt-train flags this model was started with (NMT_TRAIN_FLAGS, and a
            # student's NMT_STUDENT_FLAGS in place of the same options; None: not recorded)
            "train_flags": open(f"{d}.flags").read().strip() if os.path.exists(f"{d}.flags") else None,
            # a student trains on the teachers' translation of the training source
            "student": os.path.basename(d).startswith("student-"),
            # a right-to-left model reranks the selected system's n-best list
            "r2l": os.path.basename(d).startswith("r2l-"),
            # a channel model (target to source) reranks it too
            "channel": os.path.basename(d).startswith("ch-"),
            })
        per_epoch = [int(l.split(" batches per epoch")[0].rsplit(" ", 1)[1])
                     for l in open(f"{d}.log") if " batches per epoch" in l]
        # the device of the last (re)start, as nmt-train logged it ("model: ..., device cuda:0, ..." or
        # "device cpu (OpenBLAS ...)")
        devices = [l.split(", device ", 1)[1].split()[0].rstrip(",") for l in open(f"{d}.log") if ", device " in l]
        train[-1]["device"] = devices[-1] if devices else None
        if per_epoch:
            train[-1]["epochs"] = round(train[-1]["steps"] / per_epoch[-1], 2)
    # Sequence-level distillation: teachers, the beam and length penalty of their
    # translation of the training source, the number of students and which of the
    # 5 best each learnt from (top, closest, reranked, diverse or bidiverse; None: off); with
    # reranked, the right-to-left weight and length exponent chosen on val (None:
    # reranking did not beat the teachers' beam there, and the top pick was learnt).
    d_info = info["distill"]
    distillation = ({"teachers": d_info[0], "beam": d_info[1], "length_penalty": float(d_info[2]),
                     "students": d_info[3], "pick": d_info[4],
                     # NMT_STUDENT_NAME and NMT_STUDENT_FLAGS (None: the students train as the teachers)
                     "student_name": r.student_name or None, "student_flags": " ".join(r.student_flags) or None,
                     "pick_rerank": ({"weight": d_info[5][0], "length_exponent": d_info[5][1]}
                                     if d_info[5] else None)}
                    if d_info else None)
    # Reranking: the numbers of r2l and channel models, the right-to-left weight w,
    # channel weight c and length exponent a chosen on val (None: not kept, as the
    # reranked output did not beat the plain one there or its held-out gain was not
    # above 0), the plain system's val score, and the held-out gain: the mean, over
    # the two halves of val, of what the half's own choice gains on the other half
    # (multi30k_rerank.held_out_gain()). None: reranking was off.
    r_info = info["rerank"]  # a multi30k_rerank.RerankRun, or None
    chosen = r_info.chosen if r_info else None
    rerank = ({"r2l_models": r_info.r2l, "weight": chosen.w if chosen else None,
               "beam": int(chosen.beam or beam) if chosen else None,  # the n-best's: NMT_RERANK_BEAM's or the system's
               "length_exponent": chosen.a if chosen else None,
               "channel_models": r_info.channel, "channel_weight": chosen.c if chosen else None,
               "val_bleu_without": float(r_info.plain_score),
               "val_held_out_gain": round(r_info.held_out, 4)} if r_info else None)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    try:  # the GPU's name where there is one
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True).stdout.strip().splitlines()[0] if shutil.which("nvidia-smi") else ""
    except (OSError, IndexError):
        gpu = ""
    version = subprocess.run([os.path.join(r.bin, "nmt-translate"), "--version"],
                             capture_output=True, text=True).stdout.splitlines()
    out = {
        # the command that made this file: the recipe's NMT_* environment and arguments, in shell form
        "command": command(r),
        "pair": pair, "form": form, "config": config, "config_text": open(config).read(),
        "extra_train_flags": extra,
        "selection_on_val": [dict(zip(["candidate", "beam", "length_penalty", "val_bleu"], l.rstrip("\n").split("\t")))
                             for l in list(open(f"{r.sel}/selection{r.out_tag}.tsv"))[1:]],
        "selected": {"models": name, "beam": int(beam), "length_penalty": float(lp), "weights": weights,
                     "val_metric": "bleu_none" if tok else "bleu", "val_bleu": float(val_score),
                     # the system as one file (run_test()): nmt-translate -c FILE and nmt-serve -c FILE
                     "toml": open(f"{run}/system{r.out_tag}.toml").read()},
        **figures(scores, tok),
        # The best single checkpoint on val, with its own beam and length penalty
        # (the selected system itself when that is a single model).
        "single_model": {"models": s_name, "beam": int(s_beam), "length_penalty": float(s_lp),
                         "val_bleu": float(s_val), **figures(json.load(open(f"{run}/test-single{r.out_tag}.scores.json")), tok),
                         "test_translate_seconds": float(s_seconds),
                         "toml": open(f"{run}/single{r.out_tag}.toml").read()},
        "signatures": {k: v for k, v in scores.items() if k.endswith("signature")},
        "test_scores": scores,
        "test": "test_2016_flickr", "test_translate_seconds": float(test_seconds),
        # the system against the single model on test, paired bootstrap (None: they are one)
        "test_system_vs_single": system_against_single(r, tok),
        "training": train,
        "distillation": distillation,
        "rerank": rerank,
        # NMT_ENSEMBLE_WEIGHTS=1: the member left out or weighed twice that the selection kept
        # (multi30k_weights.result_info(); None: off, or the system was no ensemble of 3 or more)
        "ensemble_weights": result_info(info.get("weights")),
        # NMT_MBR=1: the minimum Bayes-risk utility and temperature kept on val (None: the plain pick
        # stayed), the plain pick's val score and the held-out gain (multi30k_mbr.result_info(); None: off)
        "mbr": mbr_info(info.get("mbr")),
        # NMT_GENERATIONS: each later generation's teacher (the system selected before it, its
        # search and reranking, its val score), the students' targets and folders ([]: one generation)
        "generations": info.get("generations", []),
        # where the models trained ("cpu", "cuda:0"; several when they differ)
        "device": ",".join(sorted({t["device"] for t in train if t.get("device")})) or None,
        "gpu": gpu or None, "cpu": cpu, "threads": int(threads), "host": platform.node(),
        # the vector units, which tell machines of one "model name" apart
        "cpu_features": sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags")
                                for f in l.split(":", 1)[1].split() if f.startswith(("avx", "amx", "fma"))}),
        "commit": commit,  # the checkout's when the recipe started (the binaries': nmt_version)
        "nmt_version": version[0],
        # the BLAS kernels the binaries ran (OPENBLAS_CORETYPE, when set, forces them)
        "blas": next((l.split(": ", 1)[1] for l in version if l.startswith("BLAS: ")), None),
    }
    with open(result + ".part", "w") as f:
        json.dump(out, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(result + ".part", result)
    print(f"wrote {result}")


def run_test(r, best, rerank_info):
    """Writes the selected system (reranked where RERANK_INFO, a RerankRun or
    None, kept a reranking) and the best single model as the files
    system{out_tag}.toml and single{out_tag}.toml in the run folder
    (multi30k_rerank.system_toml(): what nmt-translate -c and nmt-serve -c
    read), and translates and scores the test set once with each file (one
    translation when the system is that single model) into the run's
    test{out_tag}.* and test-single{out_tag}.* files. Returns both times in
    seconds. Dies as the translations do."""
    r.fetch("test_2016_flickr", r.src, f"test.{r.src}")
    r.fetch("test_2016_flickr", r.tgt, f"test.{r.tgt}")
    test_src, test_ref = r.path(f"test.{r.src}"), r.path(f"test.{r.tgt}")
    test, single = f"{r.run}/test{r.out_tag}", f"{r.run}/test-single{r.out_tag}"

    def translate(out, system, chosen, config):
        with open(config + ".part", "w") as f:
            f.write(system_toml(system, chosen))
        os.replace(config + ".part", config)
        t0 = time.time()
        r.nmt_translate([], ["-c", config, "-i", test_src, "-o", f"{out}.hyp", "--reference", test_ref,
                             "--scores-json", f"{out}.scores.json"], f"{out}.log")
        return round(time.time() - t0, 1)

    test_seconds = translate(test, best, rerank_info.chosen if rerank_info else None,
                             f"{r.run}/system{r.out_tag}.toml")
    print(open(f"{test}.log").read(), end="")
    if best["name"] != r.single["name"]:
        return test_seconds, translate(single, r.single, None, f"{r.run}/single{r.out_tag}.toml")
    with open(f"{r.run}/single{r.out_tag}.toml", "w") as f:  # the same model, beam and length penalty
        f.write(system_toml(r.single, None))
    shutil.copy(f"{test}.scores.json", f"{single}.scores.json")
    return test_seconds, test_seconds
