"""Reranking in the Multi30k recipe (scripts/multi30k.py): models trained on
the targets with each line's words reversed (right-to-left), and models
trained from target to source (the noisy channel), rescore the selected
system's beam (nmt-translate --r2l-model, --channel-model), with the weights
and length exponent that do best on val."""
import collections
import concurrent.futures
import itertools
import json
import os
import subprocess

from multi30k_cache import cached, fresh, newer, record, translator
from multi30k_select import weight_args, weights_key


def die(message):
    raise SystemExit(f"multi30k.py: {message}")


# A reranking chosen on val: the right-to-left weight w, channel weight c and
# length exponent a, its val score, the model folders it rescores with (made
# by rerank_of()), and the beam whose n-best it rescores where that is not
# the system's own (NMT_RERANK_BEAM; None: the system's beam).
Rerank = collections.namedtuple("Rerank", "w c a score r2l channel beam", defaults=(None,))

# The recipe's reranking for the result file: the numbers of right-to-left and
# channel models, the Rerank chosen on val (None: none was kept), the plain
# system's val score, and the reranking's held-out gain on val (held_out_gain()).
RerankRun = collections.namedtuple("RerankRun", "r2l channel chosen plain_score held_out")

# What choose_rerank() decided: the Rerank kept (None: the plain system stays)
# and the held-out gain on val of choosing on val (held_out_gain()).
RerankChoice = collections.namedtuple("RerankChoice", "chosen held_out")


def rerank_of(w, c, a, score, r2l_models, channel_models, beam=None):
    """The Rerank of weights W, C and exponent A with the models it needs: the
    channel models are left out when C is 0 and right-to-left models remain
    (the mix is theirs alone then); with no right-to-left models they stay,
    at weight 0, so that nmt-translate has a model to rescore with (a model
    of weight 0 is loaded and not run). BEAM: the n-best's beam when it is
    not the system's (None)."""
    keep_channel = c > 0 or not r2l_models
    return Rerank(w, c, a, score, list(r2l_models), list(channel_models) if keep_channel else [], beam)


def rerank_suffix(chosen):
    """What reranking adds to the reranked system's name: +r2l, +ch or both
    (+ch where the channel models rescore, even at weight 0)."""
    return ("+r2l" if chosen.r2l else "") + ("+ch" if chosen.channel else "")


def reverse_words(path, out):
    """OUT: PATH with each line's words reversed (kept when newer than PATH)."""
    if newer(out, path):
        return
    with open(path, encoding="utf-8") as f, open(out + ".part", "w", encoding="utf-8") as g:
        for line in f:
            g.write(" ".join(reversed(line.split())) + "\n")
    os.replace(out + ".part", out)


def r2l_specs(r, first_seed, k, distilled):
    """The K right-to-left models' folders and training specs (Recipe.train_models())
    on the (distilled) targets with each line's words reversed (written now);
    the first trains its SentencePiece models, the others share them."""
    target = f"train.distilled.{r.tgt}" if distilled else f"train.{r.tgt}"
    for name in (target, f"val.{r.tgt}"):
        reverse_words(r.path(name), r.path(name + ".r2l"))
    folders = [f"{r.run}/r2l-{i}" for i in range(1, k + 1)]
    return folders, [(first_seed + i, folder, target + ".r2l", f"val.{r.tgt}.r2l",
                      r.shared_spm("r2l-1") if i > 1 else ()) for i, folder in enumerate(folders, 1)]


def train_r2l(r, first_seed, k, distilled):
    """Trains (or keeps) r2l_specs()'s models; returns their folders."""
    folders, specs = r2l_specs(r, first_seed, k, distilled)
    r.train_models(specs)
    return folders


def rerank_stage(r, best, first_seed, r2l, channel, distilled, info):
    """The recipe's reranking of the selected system BEST: trains (or keeps)
    R2L right-to-left models (seeds FIRST_SEED + 1..; on the distilled
    targets when DISTILLED) and CHANNEL channel models (the seeds after them),
    and reranks BEST by them (rerank_system()), setting INFO["rerank"] when
    either is on. Returns the two lists of model folders. Dies as the training
    and translations do."""
    if not (r2l or channel):
        return [], []
    r2l_models = train_r2l(r, first_seed, r2l, distilled) if r2l else []
    channel_models = train_channel(r, first_seed + r2l, channel)
    info["rerank"] = rerank_system(r, best, r2l_models, channel_models)
    return r2l_models, channel_models


def rerank_system(r, best, r2l_models, channel_models):
    """The RerankRun of system BEST by the trained R2L_MODELS and
    CHANNEL_MODELS (folders; not both empty): when choose_rerank() keeps a
    reranking, BEST becomes that reranked system (name + rerank_suffix(), its
    val score). Dies as the translations do."""
    plain_score = best["score"]
    chosen, held_out = choose_rerank(r, best, r2l_models, channel_models)
    if chosen:
        best.update(name=best["name"] + rerank_suffix(chosen), score=chosen.score)
    return RerankRun(len(r2l_models), len(channel_models), chosen, plain_score, held_out)


def channel_specs(r, first_seed, k):
    """The K channel models' folders and training specs (Recipe.train_models()):
    from target to source on the training pairs, validated on val the same way
    round, with model 1's SentencePiece models swapped (its target model reads
    their source)."""
    folders = [f"{r.run}/ch-{i}" for i in range(1, k + 1)]
    spm = ["--src-spm", f"{r.run}/model-1/tgt.spm.model", "--tgt-spm", f"{r.run}/model-1/src.spm.model"]
    return folders, [(first_seed + i, folder, f"train.{r.src}", f"val.{r.src}", spm, f"train.{r.tgt}", None,
                      f"val.{r.tgt}") for i, folder in enumerate(folders, 1)]


def train_channel(r, first_seed, k):
    """Trains (or keeps) channel_specs()'s models; returns their folders. Dies
    as the training does."""
    folders, specs = channel_specs(r, first_seed, k)
    r.train_models(specs)
    return folders


def rescoring_args(r2l_models, channel_models):
    """nmt-translate's arguments that load the folders' models for rescoring."""
    return ([a for d in r2l_models for a in ("--r2l-model", f"{d}/best.ckpt")] +
            [a for d in channel_models for a in ("--channel-model", f"{d}/best.ckpt")])


def system_settings(best, chosen):
    """The options (without -m, -i and -o) that translate as system BEST does,
    as (long option name, value) pairs in nmt-translate's order, a value
    being a string or, for an option given once per item, a list of them:
    its weights, beam and length penalty, its beam rescored as CHOSEN (a
    Rerank; None: not reranked) says, at CHOSEN's beam where it has its own,
    and its minimum Bayes-risk setting where it has one (BEST["mbr"]: utility
    and temperature, multi30k_mbr.py)."""
    settings = [("ensemble-weights", [str(w) for w in best["weights"]])] if best.get("weights") else []
    settings += [("beam-size", str((chosen.beam if chosen else None) or best["beam"])),
                 ("length-penalty", str(best["lp"]))]
    if chosen:
        settings += [(option, [f"{d}/best.ckpt" for d in folders])
                     for option, folders in (("r2l-model", chosen.r2l), ("channel-model", chosen.channel)) if folders]
        settings += [*([("r2l-weight", str(chosen.w))] if chosen.r2l else []),
                     *([("channel-weight", str(chosen.c))] if chosen.channel else []),
                     ("r2l-length-exponent", str(chosen.a))]
    if best.get("mbr"):
        settings += [("mbr", best["mbr"][0]), ("mbr-temperature", best["mbr"][1])]
    return settings


def system_args(best, chosen):
    """nmt-translate's arguments for system_settings(BEST, CHOSEN): -b for the
    beam, --ensemble-weights once with all its values, a model option once
    per model."""
    args = []
    for option, value in system_settings(best, chosen):
        flag = "-b" if option == "beam-size" else f"--{option}"
        if option == "ensemble-weights":
            args += [flag, *value]
        else:
            args += [a for v in (value if isinstance(value, list) else [value]) for a in (flag, v)]
    return args


def system_toml(best, chosen):
    """System BEST with its models and system_settings(BEST, CHOSEN) as a
    TOML file's text, the keys that nmt-translate -c and nmt-serve -c both
    read (docs/serving.md); paths as the recipe gives them (from the
    project's root)."""
    text = [("model", list(best["models"]))] + system_settings(best, chosen)
    quoted = {"model", "r2l-model", "channel-model", "mbr"}  # strings; the other values are numbers

    def toml(option, v):
        return json.dumps(v) if option in quoted else str(float(v)) if option != "beam-size" else str(int(v))
    return "".join(f"{option} = " + (f"[{', '.join(toml(option, v) for v in value)}]" if isinstance(value, list)
                                     else toml(option, value)) + "\n"
                   for option, value in text)


def rerank(r, best, chosen, source, out, log, alone=False):
    """OUT: the selected system's translation of SOURCE, its beam rescored as
    CHOSEN (a Rerank) says (system_args()), on all the cores when ALONE
    (Recipe.nmt_translate()). Dies when the translation fails."""
    r.nmt_translate(best["models"], [*system_args(best, chosen), "-i", source, "-o", out], log, alone)


def evaluate(r, hyp, ref, scores, log_path=None):
    """The score of HYP against REF (nmt-translate --evaluate, its scores in
    SCORES, its log in LOG_PATH or beside SCORES)."""
    with open(log_path or scores[:-len(".json")] + ".log", "w") as log:
        cmd = [f"{r.bin}/nmt-translate", "--evaluate", "-i", hyp, "--reference", ref, "--scores-json", scores]
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=log).returncode != 0:
            die(f"nmt-translate --evaluate failed (see {log.name})")
    return json.load(open(scores))[r.key]


def choose_rerank(r, best, r2l_models, channel_models=()):
    """The RerankChoice of system BEST (its name, models, beam, length penalty
    and val score) by R2L_MODELS and CHANNEL_MODELS (folders; either may be
    empty, not both): the Rerank that scores highest on val, kept only when
    it beats the plain output there and the choice also gains on held-out
    lines (held_out_gain() > 0), else None. One run rescores
    the system's whole beam on val into the n-best list
    select/rerank-val[-PICK]-NAME[-chK].nbest (the pick's tag: two picks may
    select the same system; -chK with K channel models), whose features hold
    each hypothesis' log-probabilities and words; each setting's choice from
    it is select/rerank-val[-PICK]-NAME[-chK]-wW[-cC]-aA.out, as nmt-translate
    would choose with those weights (the features read back exactly): w over
    0-0.75 with right-to-left models (else 0), c over 0-1 with channel models
    (else 0), a over 0.6-1.4. With R.rerank_beam (NMT_RERANK_BEAM=N) other
    than the system's beam, the grid runs over the N-best list too
    (...-NAME[-chK]-bN.nbest, its choices ...-bN-wW[-cC]-aA.out), and the
    Rerank chosen there carries beam N. Each is reused when made with the
    same models, settings and nmt-translate, and nothing is newer. Dies as
    the translation and scoring do."""
    channel_models = list(channel_models)
    system_prefix = f"{r.sel}/rerank-val{r.tag}-{best['name']}" + (f"-ch{len(channel_models)}" if channel_models else "")
    grid = list(itertools.product((0.0, 0.25, 0.5, 0.75) if r2l_models else (0.0,),
                                  (0.0, 0.1, 0.25, 0.5, 1.0) if channel_models else (0.0,), (0.6, 1.0, 1.4)))
    # The system's beam, and NMT_RERANK_BEAM's where it is another (its files named -bN).
    beams = [None] + ([r.rerank_beam] if r.rerank_beam and r.rerank_beam != int(best["beam"]) else [])
    checkpoints = [f"{d}/best.ckpt" for d in list(r2l_models) + channel_models]
    inputs = [r.path(f"val.{r.src}"), r.path(f"val.{r.tgt}")] + list(best["models"]) + checkpoints

    def nbest_of(beam):  # the n-best list of BEAM (None: the system's), rescored; its file prefix and key
        prefix = system_prefix + (f"-b{beam}" if beam else "")
        made = (f"{' '.join(best['models'])}{weights_key(best.get('weights'))} beam {beam or best['beam']} "
                f"length penalty {best['lp']} | r2l "
                f"{' '.join(f'{d}/best.ckpt' for d in r2l_models)}"
                + (f" | channel {' '.join(f'{d}/best.ckpt' for d in channel_models)}" if channel_models else "")
                + f" | nmt-translate {translator(r.bin)}")
        nbest = prefix + ".nbest"
        if not fresh(nbest, nbest + ".models", made, inputs):
            b = str(beam or best["beam"])
            r.nmt_translate(best["models"], [*weight_args(best.get("weights")), "-b", b, "--n-best", b,
                                             "--length-penalty", best["lp"],
                                             *rescoring_args(r2l_models, channel_models), "-i", inputs[0],
                                             "-o", nbest], prefix + ".nbest.log")
            with open(nbest + ".models", "w") as f:
                f.write(made + "\n")
        return prefix, made, nbest, read_rescored(nbest, bool(r2l_models), bool(channel_models))
    lists_of = {beam: nbest_of(beam) for beam in beams}
    settings = [(w, c, a, beam) for beam in beams for (w, c, a) in grid]

    def name(setting):  # the setting's part of the file and log names
        w, c, a, _ = setting
        return f"w{w}-c{c}-a{a}" if channel_models else f"w{w}-a{a}"

    def output(setting):
        return f"{lists_of[setting[3]][0]}-{name(setting)}"

    def score(setting):  # reused as Recipe.translate() reuses a translation
        _, made, nbest, lists = lists_of[setting[3]]
        out, made_so = output(setting), f"{made} | {name(setting).replace('-', ' ')}"
        if not channel_models:  # the key the right-to-left reranking has always had
            made_so = f"{made} | w {setting[0]} a {setting[2]}"
        reused = cached(out, made_so, inputs + [nbest], r.key)
        if reused is not None:
            return reused
        with open(out + ".out.part", "w", encoding="utf-8") as f:
            f.writelines(max(hyps, key=lambda h: mix(h, *setting[:3]))[0] + "\n" for hyps in lists)
        os.replace(out + ".out.part", out + ".out")
        evaluate(r, out + ".out", inputs[1], out + ".json")
        return record(out, made_so, r.key)

    with concurrent.futures.ThreadPoolExecutor(r.jobs) as pool:  # NMT_JOBS at a time
        scores = list(pool.map(score, settings))
    label = best["name"] + ("+r2l" if r2l_models else "") + ("+ch" if channel_models else "")
    chosen, top = None, best["score"]
    for (w, c, a, beam), s in zip(settings, scores):
        r.logged(f"{label}-{name((w, c, a, beam))}", beam or best["beam"], best["lp"], s)
        if s > top:
            chosen, top = rerank_of(w, c, a, s, r2l_models, channel_models, beam), s
    held_out = held_out_gain(r, inputs[1], r.output(best), [f"{output(s)}.out" for s in settings])
    verdict = "kept" if chosen and held_out > 0 else "not kept"
    print(f"reranking {label}: best on val {top} against {best['score']}; held out (two halves of val, "
          f"each choosing for the other) {held_out:+.2f}: {verdict}", flush=True)
    return RerankChoice(chosen if held_out > 0 else None, held_out)


def halves_of(path, out):
    """OUT.0 and OUT.1: PATH's even and odd lines (counting from 0), each kept
    when newer than PATH."""
    if all(newer(f"{out}.{k}", path) for k in (0, 1)):
        return
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for k in (0, 1):
        with open(f"{out}.{k}.part", "w", encoding="utf-8") as g:
            g.writelines(lines[k::2])
        os.replace(f"{out}.{k}.part", f"{out}.{k}")


def held_out_gain(r, ref, plain, outputs):
    """Two-fold cross-validation of the choice on val: each half of val (the
    even lines, the odd lines) chooses what the recipe would choose on it,
    the best of OUTPUTS (val translations, one per setting) if it beats PLAIN
    (the system's own val translation) there, else PLAIN; the other half scores
    that choice against PLAIN. Returns the mean of the two gains, in the
    recipe's figure: an estimate of what choosing among the settings gains on
    lines it was not chosen on, free of the upward bias of the best of many
    noisy scores on the same lines (0 where both halves keep PLAIN). REF is
    val's reference. Dies as the scoring does."""
    files = [plain] + list(outputs)
    halves_of(ref, f"{r.sel}/val-reference")
    for path in files:  # here, not in the pool: two threads would write one file's halves at once
        halves_of(path, path)

    def score(item):  # one half of one translation, its score reused while newer than the translation
        path, k = item
        scores = f"{path}.{k}.json"
        if newer(scores, f"{path}.{k}", f"{r.sel}/val-reference.{k}"):
            return json.load(open(scores))[r.key]
        return evaluate(r, f"{path}.{k}", f"{r.sel}/val-reference.{k}", scores)

    with concurrent.futures.ThreadPoolExecutor(r.jobs) as pool:
        flat = list(pool.map(score, [(f, k) for k in (0, 1) for f in files]))
    return cross_validated_gain([flat[:len(files)], flat[len(files):]])


def cross_validated_gain(halves):
    """HALVES: for each of two halves, the scores of the plain system and then
    of each setting. The mean over the halves of the gain on the other half of
    the setting this half would choose (the first of the highest, where it is
    above the plain system's; none, gaining 0, otherwise)."""
    gains = []
    for k in (0, 1):
        mine, other = halves[k], halves[1 - k]
        pick = max(range(1, len(mine)), key=lambda i: mine[i], default=0)
        gains.append(other[pick] - other[0] if mine[pick] > mine[0] else 0.0)
    return sum(gains) / 2


def read_rescored(path, r2l, channel):
    """The n-best lists of nmt-translate --n-best after rescoring (Moses' form,
    its features with L2R= and Words=, R2L= when R2L and CH= when CHANNEL), one
    per input line in order: each (text, log P_l2r, log P_r2l, log P_channel,
    words) in the file's order, a log-probability 0 where its models did not
    run. Dies on an entry without them."""
    wanted = {"L2R=", "Words="} | ({"R2L="} if r2l else set()) | ({"CH="} if channel else set())
    lists = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            index, text, features = line.rstrip("\n").split(" ||| ")[:3]
            values = dict(zip(features.split()[::2], features.split()[1::2]))
            if not wanted <= values.keys():
                die(f"{path}:{number}: no {', '.join(sorted(wanted - values.keys()))} feature (not a rescored n-best "
                    "list of these models: an nmt-translate older than the recipe? scripts/build.sh)")
            while len(lists) <= int(index):
                lists.append([])
            lists[int(index)].append((text, float(values["L2R="]), float(values.get("R2L=", 0)),
                                      float(values.get("CH=", 0)), int(values["Words="])))
    return lists


def mix(hyp, w, c, a):
    """The reranking score of HYP (text, log P_l2r, log P_r2l, log P_channel,
    words) under weights W and C and length exponent A, as nmt-translate mixes
    them (W is 0 without right-to-left models, C without channel models): the
    same doubles in the same order, so the same bits (adding a missing
    model's 0 changes nothing)."""
    return ((1 - w) * hyp[1] + w * hyp[2] + c * hyp[3]) / ((5 + hyp[4] + 1) / 6) ** a
