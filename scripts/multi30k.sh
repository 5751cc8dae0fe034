#!/usr/bin/env bash
# Trains nmt on Multi30k (task 1), selects the model and the search settings
# on val, translates test_2016_flickr once with beam search, scores it, and
# writes bench/results/multi30k-PAIR-FORM-HOST-COMMIT.json.
#
#   scripts/multi30k.sh [DATA_DIR] [PAIR] [FORM]
#     DATA_DIR  default ../shared/data/multi30k
#     PAIR      en-de (default) or en-fr; the config is configs/multi30k-PAIR.toml
#     FORM      tok (default): the papers' lowercased, normalized, Moses-tokenized
#               text (train.lc.norm.tok.*); gives bleu_lc_tok, the published figure
#               raw: cased, untokenized text; gives cased bleu, bleu_lc and chrf
#
# Environment:
#   NMT_SEEDS=N        train N models with seeds 1..N (default 1); with N > 1 the
#                      ensemble of all N is compared with the best single one on val,
#                      and both are scored on test (the result's single_model)
#   NMT_TRAIN_FLAGS    extra nmt-train flags (e.g. "--max-epochs 12"), recorded
#                      in model-N.flags when model N starts, so models trained
#                      with different flags in one run folder stay told apart
#   NMT_THREADS        threads for training and translation (default: all cores)
#   NMT_RUN            run folder (default runs/multi30k-PAIR-FORM)
#   NMT_BUILD_DIR      build folder (default build)
#   NMT_VAL_ONLY=1     stop after the selection on val (for comparing settings;
#                      the test set is not read)
#   NMT_TRAIN_ONLY=K   train model K alone and stop before the selection, so seeds
#                      can train side by side (one process each, with NMT_THREADS
#                      splitting the cores); K > 1 needs model 1's SentencePiece
#                      models, written in model 1's first seconds. Run the script
#                      without it afterwards to select and test.
#   NMT_DISTILL=K      sequence-level knowledge distillation (Kim & Rush 2016): the
#                      N seeds are teachers; their ensemble (each member's better
#                      checkpoint on val) translates the training source with beam 5
#                      and the length penalty it does best with on val, and K
#                      students (student-1..K, seeds N+1..N+K, model 1's SentencePiece
#                      models) train on that translation with the same config. The
#                      students join the selection: as single models, and in the
#                      ensemble of every model. Default 0 (none).
#
# A model folder that holds a finished run (its `trained` file) is not trained
# again: delete the folder to retrain. Test data is read only in the last step.
set -euo pipefail

# The whole script is one function, read before it runs: editing the file
# while a long run is going cannot change what that run does.
main() {
cd "$(dirname "$0")/.."
data=${1:-../shared/data/multi30k}
pair=${2:-en-de}
form=${3:-tok}
src=${pair%-*}
tgt=${pair#*-}
config=configs/multi30k-$pair.toml
bin=${NMT_BUILD_DIR:-build}
run=${NMT_RUN:-runs/multi30k-$pair-$form}
seeds=${NMT_SEEDS:-1}
threads=${NMT_THREADS:-$(nproc)}
read -r -a extra <<<"${NMT_TRAIN_FLAGS:-}"

die() { echo "multi30k.sh: $*" >&2; exit 1; }
[[ -f $config ]] || die "no config for pair '$pair' ($config)"
[[ $form == raw || $form == tok ]] || die "FORM must be raw or tok, got '$form'"
[[ -x $bin/nmt-train && -x $bin/nmt-translate ]] || die "build nmt first: scripts/build.sh"

# Data: train and val now; the test set only at the end.
mkdir -p "$run/data"
fetch() {  # fetch SPLIT LANG -> $run/data/SPLIT.LANG
  local split=$1 lang=$2 out="$run/data/$1.$2"
  [[ -s $out ]] && return
  if [[ $form == raw ]]; then
    zcat "$data/$split.$lang.gz" >"$out.part"
  elif [[ -f $data/$split.lc.norm.tok.$lang.gz ]]; then
    zcat "$data/$split.lc.norm.tok.$lang.gz" >"$out.part"
  else
    cat "$data/$split.lc.norm.tok.$lang" >"$out.part"
  fi
  mv "$out.part" "$out"
}
for split in train val; do fetch "$split" "$src"; fetch "$split" "$tgt"; done

# train_model SEED DIR TARGET [FLAGS...]: trains DIR on the training source and
# TARGET (a file of $run/data) unless DIR holds a finished run; resumes a stopped one.
train_model() {
  local seed=$1 dir=$2 target=$3 resume=() t0; shift 3
  [[ -f $dir/trained ]] && { echo "$dir: trained earlier, kept"; return 0; }
  [[ -f $dir/last.ckpt ]] && resume=(--resume)
  if [[ ! -f $dir/last.ckpt ]]; then
    git rev-parse --short HEAD >"$dir.commit" 2>/dev/null || true
    printf '%s\n' "${NMT_TRAIN_FLAGS:-}" >"$dir.flags"
  fi
  t0=$(date +%s.%N)
  "$bin/nmt-train" --config "$config" -o "$dir" --seed "$seed" --threads "$threads" \
    --train-src "$run/data/train.$src" --train-tgt "$run/data/$target" \
    --valid-src "$run/data/val.$src" --valid-tgt "$run/data/val.$tgt" \
    "${resume[@]}" "$@" "${extra[@]}" 2> >(tee -a "$dir.log" >&2)
  python3 -c "import sys,time; print(round(time.time()-float(sys.argv[1]),1))" "$t0" >"$dir/trained"
}
# Every model after the first uses its SentencePiece models, so they can ensemble.
shared_spm=(--src-spm "$run/model-1/src.spm.model" --tgt-spm "$run/model-1/tgt.spm.model")

# Training, one model per seed.
models=()
only=${NMT_TRAIN_ONLY:-}
distill=${NMT_DISTILL:-0}
[[ -z $only || $only =~ ^[1-9][0-9]*$ ]] || die "NMT_TRAIN_ONLY must be a model number, got '$only'"
[[ $distill =~ ^[0-9]+$ ]] || die "NMT_DISTILL must be a number of students, got '$distill'"
((${only:-0} > seeds)) && seeds=$only
for ((seed = 1; seed <= seeds; seed++)); do
  dir=$run/model-$seed
  models+=("$dir")
  [[ -n $only && $seed != "$only" ]] && continue
  ((seed > 1)) && [[ ! -f $dir/last.ckpt && ! -f $run/model-1/tgt.spm.model ]] &&
    die "$run/model-1/tgt.spm.model: not there yet (model $seed shares model 1's SentencePiece models; start model 1 first)"
  spm=()
  ((seed > 1)) && [[ ! -f $dir/last.ckpt ]] && spm=("${shared_spm[@]}")
  train_model "$seed" "$dir" "train.$tgt" "${spm[@]}"
done
[[ -n $only ]] && return 0

# Selection on val. The metric that selects is BLEU in the form's own terms:
# --tokenize none on the tokenized form (multi-bleu), cased 13a on raw text.
key=bleu
[[ $form == tok ]] && key=bleu_none
sel=$run/select
mkdir -p "$sel"
# A translation made by an earlier run of the script is reused when it was made
# with the same models (recorded beside it) and its scores are newer than the
# input, the reference, every model and nmt-translate: the search is deterministic.
translate() {  # translate NAME INPUT REFERENCE BEAM LP MODEL... -> prints the score
  local name=$1 input=$2 ref=$3 beam=$4 lp=$5; shift 5
  local margs=() m fresh=1 made="$*"
  for m in "$@"; do margs+=(-m "$m"); done
  [[ -s $sel/$name.json && -f $sel/$name.models && $(<"$sel/$name.models") == "$made" ]] || fresh=0
  for m in "$input" "$ref" "$bin/nmt-translate" "$@"; do [[ $sel/$name.json -nt $m ]] || fresh=0; done
  if ((!fresh)); then
    "$bin/nmt-translate" "${margs[@]}" -b "$beam" --length-penalty "$lp" --threads "$threads" \
      -i "$input" -o "$sel/$name.out" --reference "$ref" --scores-json "$sel/$name.json" 2>"$sel/$name.log"
    printf '%s\n' "$made" >"$sel/$name.models"
  fi
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$sel/$name.json" "$key"
}
better() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$1" "$2"; }

log=$sel/selection.tsv
# at_b5 NAME: NAME's val score at beam 5, lp 1.0 (the log also holds its tuning rows).
at_b5() { awk -F'\t' -v n="$1" '$1==n && $2==5 && $3=="1.0" {print $4}' "$log"; }
printf 'candidate\tbeam\tlength_penalty\tval_%s\n' "$key" >"$log"
# score_models DIR...: each model's best and average checkpoints at beam 5, lp 1.0;
# the best of them so far is the single model.
single_score=-1 single_models=() single_name=""
score_models() {
  local dir ckpt name s
  for dir in "$@"; do
    for ckpt in best average; do
      [[ -f $dir/$ckpt.ckpt ]] || continue
      name=$(basename "$dir")-$ckpt
      s=$(translate "$name-b5" "$run/data/val.$src" "$run/data/val.$tgt" 5 1.0 "$dir/$ckpt.ckpt")
      printf '%s\t5\t1.0\t%s\n' "$name" "$s" >>"$log"
      if better "$s" "$single_score"; then single_score=$s single_models=("$dir/$ckpt.ckpt") single_name=$name; fi
    done
  done
}
# pick_members DIR... -> members: each model's better checkpoint (best or average, on val).
pick_members() {
  local dir pick a b
  members=()
  for dir in "$@"; do
    pick=$dir/best.ckpt
    b=$(at_b5 "$(basename "$dir")-best")
    a=$(at_b5 "$(basename "$dir")-average")
    [[ -n $a ]] && better "$a" "$b" && pick=$dir/average.ckpt
    members+=("$pick")
  done
}
# tune NAME MODEL...: beam 5 and 10 by length penalty 0.6, 1.0 and 1.4 on val (beam 5,
# lp 1.0 is in the log already) -> tuned_beam, tuned_lp, tuned_score, and
# tuned_lp5, the best length penalty at beam 5.
tune() {
  local name=$1 beam lp s best5; shift
  tuned_beam=5 tuned_lp=1.0 tuned_lp5=1.0
  tuned_score=$(at_b5 "$name")
  best5=$tuned_score
  for beam in 5 10; do
    for lp in 0.6 1.0 1.4; do
      [[ $beam == 5 && $lp == 1.0 ]] && continue
      s=$(translate "$name-b$beam-lp$lp" "$run/data/val.$src" "$run/data/val.$tgt" "$beam" "$lp" "$@")
      printf '%s\t%s\t%s\t%s\n' "$name" "$beam" "$lp" "$s" >>"$log"
      if better "$s" "$tuned_score"; then tuned_score=$s tuned_beam=$beam tuned_lp=$lp; fi
      if [[ $beam == 5 ]] && better "$s" "$best5"; then best5=$s tuned_lp5=$lp; fi
    done
  done
}
# ensemble_b5 NAME MODEL...: the ensemble's val score at beam 5, lp 1.0, logged.
ensemble_b5() {
  local name=$1 s; shift
  s=$(translate "$name-b5" "$run/data/val.$src" "$run/data/val.$tgt" 5 1.0 "$@")
  printf '%s\t5\t1.0\t%s\n' "$name" "$s" >>"$log"
}
score_models "${models[@]}"

# Distillation: the teachers' ensemble translates the training source once, and
# the students train on that translation.
if ((distill > 0)); then
  pick_members "${models[@]}"
  teachers=("${members[@]}")
  lp=1.0
  if ((seeds > 1)); then
    ensemble_b5 "teachers-$seeds" "${teachers[@]}"
    tune "teachers-$seeds" "${teachers[@]}"
    lp=$tuned_lp5
  fi
  distilled=$run/data/train.distilled.$tgt
  if [[ ! -s $distilled ]]; then
    margs=()
    for m in "${teachers[@]}"; do margs+=(-m "$m"); done
    echo "distilling: the ${#teachers[@]} teacher(s) translate train.$src with beam 5, length penalty $lp"
    "$bin/nmt-translate" "${margs[@]}" -b 5 --length-penalty "$lp" --threads "$threads" \
      -i "$run/data/train.$src" -o "$distilled" 2>"$run/distill.log"
    tail -n1 "$run/distill.log"
  fi
  students=()
  for ((k = 1; k <= distill; k++)); do
    dir=$run/student-$k
    students+=("$dir")
    spm=()
    [[ ! -f $dir/last.ckpt ]] && spm=("${shared_spm[@]}")
    train_model "$((seeds + k))" "$dir" "train.distilled.$tgt" "${spm[@]}"
  done
  score_models "${students[@]}"
  models+=("${students[@]}")
fi

tune "$single_name" "${single_models[@]}"
single_beam=$tuned_beam single_lp=$tuned_lp single_score=$tuned_score
best_name=$single_name best_models=("${single_models[@]}") best_beam=$tuned_beam best_lp=$tuned_lp best_score=$tuned_score
n=${#models[@]}
if ((n > 1)); then
  # The ensemble of every model's better checkpoint (best or average, on val).
  pick_members "${models[@]}"
  ensemble_b5 "ensemble-$n" "${members[@]}"
  tune "ensemble-$n" "${members[@]}"
  if better "$tuned_score" "$best_score"; then
    best_name=ensemble-$n best_models=("${members[@]}") best_beam=$tuned_beam best_lp=$tuned_lp best_score=$tuned_score
  fi
fi
echo "selected on val: $best_name, beam $best_beam, length penalty $best_lp ($key $best_score)"
printf '%s\t%s\t%s\t%s\n' "$best_name" "$best_beam" "$best_lp" "$best_score" >"$sel/selected.tsv"
[[ ${NMT_VAL_ONLY:-0} == 1 ]] && return 0

# Test, once.
if [[ $form == raw ]]; then
  zcat "$data/test_2016_flickr.$src.gz" >"$run/data/test.$src"
  zcat "$data/test_2016_flickr.$tgt.gz" >"$run/data/test.$tgt"
else
  cp "$data/test_2016_flickr.lc.norm.tok.$src" "$run/data/test.$src"
  cp "$data/test_2016_flickr.lc.norm.tok.$tgt" "$run/data/test.$tgt"
fi
# test_translate OUT BEAM LP MODEL...: translates and scores the test set into
# $run/OUT.{hyp,scores.json,log}; prints the seconds it took.
test_translate() {
  local out=$1 beam=$2 lp=$3 margs=() m t0; shift 3
  for m in "$@"; do margs+=(-m "$m"); done
  t0=$(date +%s.%N)
  "$bin/nmt-translate" "${margs[@]}" -b "$beam" --length-penalty "$lp" --threads "$threads" \
    -i "$run/data/test.$src" -o "$run/$out.hyp" --reference "$run/data/test.$tgt" \
    --scores-json "$run/$out.scores.json" 2>"$run/$out.log"
  python3 -c "import sys,time; print(round(time.time()-float(sys.argv[1]),1))" "$t0"
}
test_seconds=$(test_translate test "$best_beam" "$best_lp" "${best_models[@]}")
cat "$run/test.log"
# With several seeds the single model chosen on val is scored too (its own
# output, once), so the result gives the single-model and the ensemble figure.
if [[ $best_name != "$single_name" ]]; then
  single_test_seconds=$(test_translate test-single "$single_beam" "$single_lp" "${single_models[@]}")
else
  cp "$run/test.scores.json" "$run/test-single.scores.json"
  single_test_seconds=$test_seconds
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit=$commit-dirty
host=$(hostname -s)
mkdir -p bench/results
result=bench/results/multi30k-$pair-$form-$host-$commit.json
distill_info=""
((distill > 0)) && distill_info="$seeds 5 $lp $distill"
NMT_BIN=$bin NMT_SINGLE="$single_name $single_beam $single_lp $single_score $single_test_seconds" \
  NMT_DISTILL_INFO=$distill_info \
  python3 - "$run" "$form" "$pair" "$config" "$best_name" "$best_beam" "$best_lp" "$best_score" \
  "$test_seconds" "$threads" "$commit" "$result" "${NMT_TRAIN_FLAGS:-}" "${models[@]}" <<'PY'
import json, os, platform, subprocess, sys
(run, form, pair, config, name, beam, lp, val_score, test_seconds, threads, commit, result,
 extra), models = sys.argv[1:14], sys.argv[14:]
scores = json.load(open(f"{run}/test.scores.json"))
tok = form == "tok"
def figures(scores):
    # Raw form: scored against the raw references. Tokenized form: the output is
    # lowercased Moses-tokenized text, so only --tokenize none against the
    # lc.norm.tok references is like-for-like (the papers' multi-bleu figure).
    return {"bleu": None if tok else scores["bleu"],
            "bleu_lc": None if tok else scores["bleu_lc"],
            "bleu_lc_tok": scores["bleu_none"] if tok else None,
            "chrf": scores["chrf"]}
s_name, s_beam, s_lp, s_val, s_seconds = os.environ["NMT_SINGLE"].split()
def metrics(d):
    return [json.loads(l) for l in open(f"{d}/metrics.jsonl") if l.strip()]
train = []
for d in models:
    m = metrics(d)
    valid = [x for x in m if x["type"] == "valid"]
    best = max(valid, key=lambda x: x["bleu"]) if valid else {}
    train.append({
        "folder": d,
        "steps": max((x.get("step", 0) for x in m), default=0),
        "best_val_bleu_greedy": best.get("bleu"), "best_step": best.get("step"),
        # the trainer's own clock: wall time of training and validation, over resumes
        "train_seconds": max((x.get("elapsed", 0) for x in m), default=0),
        "commit": open(f"{d}.commit").read().strip() if os.path.exists(f"{d}.commit") else None,
        # the NMT_TRAIN_FLAGS this model was started with (None: not recorded)
        "train_flags": open(f"{d}.flags").read().strip() if os.path.exists(f"{d}.flags") else None,
        # a student trains on the teachers' translation of the training source
        "student": os.path.basename(d).startswith("student-"),
        })
    per_epoch = [int(l.split(" batches per epoch")[0].rsplit(" ", 1)[1])
                 for l in open(f"{d}.log") if " batches per epoch" in l]
    if per_epoch:
        train[-1]["epochs"] = round(train[-1]["steps"] / per_epoch[-1], 2)
# Sequence-level distillation: teachers, the beam and length penalty of their
# translation of the training source, and the number of students (None: off).
d_info = os.environ.get("NMT_DISTILL_INFO", "").split()
distillation = ({"teachers": int(d_info[0]), "beam": int(d_info[1]), "length_penalty": float(d_info[2]),
                 "students": int(d_info[3])} if d_info else None)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
version = subprocess.run([os.path.join(os.environ["NMT_BIN"], "nmt-translate"), "--version"],
                         capture_output=True, text=True).stdout.splitlines()
out = {
    "pair": pair, "form": form, "config": config, "config_text": open(config).read(),
    "extra_train_flags": extra,
    "selection_on_val": [dict(zip(["candidate", "beam", "length_penalty", "val_bleu"], l.rstrip("\n").split("\t")))
                         for l in list(open(f"{run}/select/selection.tsv"))[1:]],
    "selected": {"models": name, "beam": int(beam), "length_penalty": float(lp),
                 "val_metric": "bleu_none" if tok else "bleu", "val_bleu": float(val_score)},
    **figures(scores),
    # The best single checkpoint on val, with its own beam and length penalty
    # (the selected system itself when that is a single model).
    "single_model": {"models": s_name, "beam": int(s_beam), "length_penalty": float(s_lp),
                     "val_bleu": float(s_val), **figures(json.load(open(f"{run}/test-single.scores.json"))),
                     "test_translate_seconds": float(s_seconds)},
    "signatures": {k: v for k, v in scores.items() if k.endswith("signature")},
    "test_scores": scores,
    "test": "test_2016_flickr", "test_translate_seconds": float(test_seconds),
    "training": train,
    "distillation": distillation,
    "device": "cpu", "cpu": cpu, "threads": int(threads), "host": platform.node(),
    # the vector units, which tell machines of one "model name" apart
    "cpu_features": sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags")
                            for f in l.split(":", 1)[1].split() if f.startswith(("avx", "amx", "fma"))}),
    "commit": commit,
    "nmt_version": version[0],
    # the BLAS kernels the binaries ran (OPENBLAS_CORETYPE, when set, forces them)
    "blas": next((l.split(": ", 1)[1] for l in version if l.startswith("BLAS: ")), None),
}
with open(result + ".part", "w") as f:
    json.dump(out, f, indent=2, ensure_ascii=False)
    f.write("\n")
os.replace(result + ".part", result)
print(f"wrote {result}")
PY
}

main "$@"; exit  # on one line: bash reads no further, so editing the file during a run is safe
