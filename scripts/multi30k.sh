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
#   NMT_R2L=K          right-to-left reranking: K models (r2l-1..K, the next seeds, their
#                      own SentencePiece models) train on the students' targets (the
#                      original ones without NMT_DISTILL) with the words of each line
#                      reversed; the selected system's n-best list (as many as its
#                      beam) is rescored with ((1 - w) log P_l2r + w log P_r2l) /
#                      ((5 + words) / 6)^a, w and a chosen on val, and the reranked
#                      output replaces the plain one only if it scores higher on val.
#                      Default 0 (none).
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
seconds_since() { python3 -c "import sys,time; print(round(time.time()-float(sys.argv[1]),1))" "$1"; }
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

# train_model SEED DIR TARGET VALID [FLAGS...]: trains DIR on the training source and
# TARGET, validating on val's source and VALID (files of $run/data), unless DIR holds
# a finished run; resumes a stopped one.
train_model() {
  local seed=$1 dir=$2 target=$3 valid=$4 resume=() t0; shift 4
  [[ -f $dir/trained ]] && { echo "$dir: trained earlier, kept"; return 0; }
  [[ -f $dir/last.ckpt ]] && resume=(--resume)
  if [[ ! -f $dir/last.ckpt ]]; then
    git rev-parse --short HEAD >"$dir.commit" 2>/dev/null || true
    printf '%s\n' "${NMT_TRAIN_FLAGS:-}" >"$dir.flags"
  fi
  t0=$(date +%s.%N)
  "$bin/nmt-train" --config "$config" -o "$dir" --seed "$seed" --threads "$threads" \
    --train-src "$run/data/train.$src" --train-tgt "$run/data/$target" \
    --valid-src "$run/data/val.$src" --valid-tgt "$run/data/$valid" \
    "${resume[@]}" "$@" "${extra[@]}" 2> >(tee -a "$dir.log" >&2)
  seconds_since "$t0" >"$dir/trained"
}
# Every model after the first uses its SentencePiece models, so they can ensemble.
shared_spm=(--src-spm "$run/model-1/src.spm.model" --tgt-spm "$run/model-1/tgt.spm.model")

# Training, one model per seed.
models=()
only=${NMT_TRAIN_ONLY:-}
distill=${NMT_DISTILL:-0}
r2l=${NMT_R2L:-0}
[[ -z $only || $only =~ ^[1-9][0-9]*$ ]] || die "NMT_TRAIN_ONLY must be a model number, got '$only'"
[[ $distill =~ ^[0-9]+$ ]] || die "NMT_DISTILL must be a number of students, got '$distill'"
[[ $r2l =~ ^[0-9]+$ ]] || die "NMT_R2L must be a number of right-to-left models, got '$r2l'"
((${only:-0} > seeds)) && seeds=$only
for ((seed = 1; seed <= seeds; seed++)); do
  dir=$run/model-$seed
  models+=("$dir")
  [[ -n $only && $seed != "$only" ]] && continue
  ((seed > 1)) && [[ ! -f $dir/last.ckpt && ! -f $run/model-1/tgt.spm.model ]] &&
    die "$run/model-1/tgt.spm.model: not there yet (model $seed shares model 1's SentencePiece models; start model 1 first)"
  spm=()
  ((seed > 1)) && [[ ! -f $dir/last.ckpt ]] && spm=("${shared_spm[@]}")
  train_model "$seed" "$dir" "train.$tgt" "val.$tgt" "${spm[@]}"
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
score_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$key"; }
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
  score_of "$sel/$name.json"
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
    train_model "$((seeds + k))" "$dir" "train.distilled.$tgt" "val.$tgt" "${spm[@]}"
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

# Right-to-left reranking of the selected system's n-best list.
r2l_dirs=() rerank_w="" rerank_a="" plain_score=$best_score
if ((r2l > 0)); then
  reverse_words() { awk '{for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : ""); print ""}'; }
  rtarget=train.$tgt
  ((distill > 0)) && rtarget=train.distilled.$tgt
  for f in "$rtarget" "val.$tgt"; do
    [[ -s $run/data/$f.r2l ]] && continue
    reverse_words <"$run/data/$f" >"$run/data/$f.r2l.part"
    mv "$run/data/$f.r2l.part" "$run/data/$f.r2l"
  done
  r2l_ckpts=()
  for ((k = 1; k <= r2l; k++)); do
    dir=$run/r2l-$k
    r2l_dirs+=("$dir")
    r2l_ckpts+=("$dir/best.ckpt")
    spm=()  # r2l-1 trains its own; the others share them, so the K score as one ensemble
    ((k > 1)) && [[ ! -f $dir/last.ckpt ]] &&
      spm=(--src-spm "$run/r2l-1/src.spm.model" --tgt-spm "$run/r2l-1/tgt.spm.model")
    train_model "$((seeds + distill + k))" "$dir" "$rtarget.r2l" "val.$tgt.r2l" "${spm[@]}"
  done
  # nbest_scores PREFIX INPUT: the selected system's n-best list of INPUT in PREFIX.nbest,
  # and each hypothesis's log-probability under it (PREFIX.l2r) and the r2l models (PREFIX.r2l).
  nbest_scores() {
    local prefix=$1 input=$2 margs=() m
    for m in "${best_models[@]}"; do margs+=(-m "$m"); done
    "$bin/nmt-translate" "${margs[@]}" -b "$best_beam" --n-best "$best_beam" --length-penalty "$best_lp" \
      --threads "$threads" -i "$input" -o "$prefix.nbest" 2>"$prefix.nbest.log"
    # source<TAB>hypothesis, in the n-best list's order; the r2l models read the words reversed
    awk -F' [|][|][|] ' 'NR == FNR {src[NR - 1] = $0; next} {print src[$1] "\t" $2}' \
      "$input" "$prefix.nbest" >"$prefix.pairs"
    cut -f1 "$prefix.pairs" >"$prefix.pairs.src"
    cut -f2 "$prefix.pairs" | reverse_words | paste "$prefix.pairs.src" - >"$prefix.pairs.r2l"
    "$bin/nmt-translate" "${margs[@]}" --score-pairs --threads "$threads" -i "$prefix.pairs" \
      -o "$prefix.l2r" 2>"$prefix.l2r.log"
    margs=()
    for m in "${r2l_ckpts[@]}"; do margs+=(-m "$m"); done
    "$bin/nmt-translate" "${margs[@]}" --score-pairs --threads "$threads" -i "$prefix.pairs.r2l" \
      -o "$prefix.r2l" 2>"$prefix.r2l.log"
  }
  # rerank PREFIX W A OUT: each sentence's best hypothesis of PREFIX's list under W and A.
  rerank() {
    python3 - "$1.nbest" "$1.l2r" "$1.r2l" "$2" "$3" "$4" <<'PY'
import os, sys
nbest, l2r, r2l, w, a, out = sys.argv[1:]
w, a = float(w), float(a)
best = {}
for line, p, q in zip(open(nbest, encoding="utf-8"), open(l2r), open(r2l)):
    i, hyp = line.rstrip("\n").split(" ||| ")[:2]
    score = ((1 - w) * float(p) + w * float(q)) / ((5 + len(hyp.split()) + 1) / 6) ** a
    if int(i) not in best or score > best[int(i)][0]:
        best[int(i)] = (score, hyp)
with open(out + ".part", "w", encoding="utf-8") as f:
    for i in range(max(best) + 1):
        f.write(best[i][1] + "\n")
os.replace(out + ".part", out)
PY
  }
  evaluate() {  # evaluate HYP REF JSON -> prints the score (the log beside JSON)
    "$bin/nmt-translate" --evaluate -i "$1" --reference "$2" --scores-json "$3" >/dev/null 2>"${3%.json}.log"
    score_of "$3"
  }
  nbest_scores "$sel/rerank-val" "$run/data/val.$src"
  for w in 0.0 0.25 0.5 0.75; do
    for a in 0.6 1.0 1.4; do
      rerank "$sel/rerank-val" "$w" "$a" "$sel/rerank-val-w$w-a$a.out"
      s=$(evaluate "$sel/rerank-val-w$w-a$a.out" "$run/data/val.$tgt" "$sel/rerank-val-w$w-a$a.json")
      printf '%s\t%s\t%s\t%s\n' "$best_name+r2l-w$w-a$a" "$best_beam" "$best_lp" "$s" >>"$log"
      if better "$s" "$best_score"; then best_score=$s rerank_w=$w rerank_a=$a; fi
    done
  done
  [[ -n $rerank_w ]] && best_name=$best_name+r2l
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
  seconds_since "$t0"
}
if [[ -n $rerank_w ]]; then
  t0=$(date +%s.%N)
  nbest_scores "$run/test-rerank" "$run/data/test.$src"
  rerank "$run/test-rerank" "$rerank_w" "$rerank_a" "$run/test.hyp"
  "$bin/nmt-translate" --evaluate -i "$run/test.hyp" --reference "$run/data/test.$tgt" \
    --scores-json "$run/test.scores.json" >/dev/null 2>"$run/test.log"
  test_seconds=$(seconds_since "$t0")
else
  test_seconds=$(test_translate test "$best_beam" "$best_lp" "${best_models[@]}")
fi
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
rerank_info=""
((r2l > 0)) && rerank_info="$r2l ${rerank_w:-none} ${rerank_a:-none} $plain_score"
NMT_BIN=$bin NMT_SINGLE="$single_name $single_beam $single_lp $single_score $single_test_seconds" \
  NMT_DISTILL_INFO=$distill_info NMT_RERANK_INFO=$rerank_info \
  python3 - "$run" "$form" "$pair" "$config" "$best_name" "$best_beam" "$best_lp" "$best_score" \
  "$test_seconds" "$threads" "$commit" "$result" "${NMT_TRAIN_FLAGS:-}" "${models[@]}" "${r2l_dirs[@]}" <<'PY'
import json, os, platform, shutil, subprocess, sys
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
        # a right-to-left model reranks the selected system's n-best list
        "r2l": os.path.basename(d).startswith("r2l-"),
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
# translation of the training source, and the number of students (None: off).
d_info = os.environ.get("NMT_DISTILL_INFO", "").split()
distillation = ({"teachers": int(d_info[0]), "beam": int(d_info[1]), "length_penalty": float(d_info[2]),
                 "students": int(d_info[3])} if d_info else None)
# Right-to-left reranking: the r2l models, the weight w and length exponent a chosen
# on val (None: the reranked output did not beat the plain one there), and the
# plain system's val score (None: off).
r_info = os.environ.get("NMT_RERANK_INFO", "").split()
rerank = ({"r2l_models": int(r_info[0]), "weight": None if r_info[1] == "none" else float(r_info[1]),
           "length_exponent": None if r_info[2] == "none" else float(r_info[2]),
           "val_bleu_without": float(r_info[3])} if r_info else None)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
try:  # the GPU's name where there is one
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines()[0] if shutil.which("nvidia-smi") else ""
except (OSError, IndexError):
    gpu = ""
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
    "rerank": rerank,
    # where the models trained ("cpu", "cuda:0"; several when they differ)
    "device": ",".join(sorted({t["device"] for t in train if t.get("device")})) or None,
    "gpu": gpu or None, "cpu": cpu, "threads": int(threads), "host": platform.node(),
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
