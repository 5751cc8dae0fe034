#!/usr/bin/env bash
# Measures the training levers on Multi30k val, one at a time against the
# same budget: each variant is scripts/multi30k.sh with extra nmt-train
# flags and NMT_VAL_ONLY=1 (the test set is never read). Every run ends with
# --average 3, so the selection on val also compares the best checkpoint
# with the average of the last three.
#
#   bench/multi30k_levers.sh [EPOCHS] [DATA_DIR] [PAIR] [FORM] [VARIANT...]
#     EPOCHS   epoch budget per variant (default 12)
#     VARIANT  names from the table below (default: all)
#   NMT_LEVERS_FLAGS   flags added to every variant (e.g. tiny sizes for a rehearsal)
#
# Writes bench/results/multi30k-levers-PAIR-FORM-HOST-COMMIT.tsv: variant,
# flags, best greedy val BLEU during training (the trainer's, 13a), and the
# val BLEU after selecting checkpoint, beam and length penalty (in the form's
# own terms: --tokenize none on the tokenized form). Runs go to
# runs/levers/NAME and are kept, so an interrupted sweep continues.
set -euo pipefail

main() {
  cd "$(dirname "$0")/.."
  local epochs=${1:-12} data=${2:-../shared/data/multi30k} pair=${3:-en-de} form=${4:-tok}
  shift $(($# < 4 ? $# : 4))
  declare -A flags=(
    [bahdanau]="--decoder bahdanau"
    [cgru]="--decoder cgru"
    [cgru-spm-alpha]="--decoder cgru --spm-alpha 0.1"
    [cgru-shared-vocab]="--decoder cgru --shared-vocab --vocab-size 10000"
    [cgru-vocab-4000]="--decoder cgru --vocab-size 4000"
    [cgru-label-smoothing-0.2]="--decoder cgru --label-smoothing 0.2"
    [cgru-dropout-0.5]="--decoder cgru --dropout 0.5"
    [cgru-no-label-smoothing]="--decoder cgru --label-smoothing 0"
    [cgru-batch-2048]="--decoder cgru --batch-tokens 2048"
    [cgru-lr-0.0005]="--decoder cgru --learning-rate 0.0005"
  )
  local order=(bahdanau cgru cgru-spm-alpha cgru-shared-vocab cgru-vocab-4000 cgru-dropout-0.5
               cgru-no-label-smoothing cgru-label-smoothing-0.2 cgru-batch-2048 cgru-lr-0.0005)
  (($#)) && order=("$@")
  local commit host out
  commit=$(git rev-parse --short HEAD)
  host=$(hostname -s)
  out=bench/results/multi30k-levers-$pair-$form-$host-$commit.tsv
  mkdir -p bench/results runs/levers
  printf 'variant\tflags\tepochs\tval_bleu_greedy_best\tselected\tbeam\tlength_penalty\tval_bleu_selected\n' >"$out.part"
  for name in "${order[@]}"; do
    [[ -n ${flags[$name]+x} ]] || { echo "unknown variant '$name'" >&2; exit 1; }
    local run=runs/levers/$name
    NMT_RUN=$run NMT_VAL_ONLY=1 NMT_SEEDS=1 \
      NMT_TRAIN_FLAGS="${flags[$name]} --average 3 --max-epochs $epochs ${NMT_LEVERS_FLAGS:-}" \
      scripts/multi30k.sh "$data" "$pair" "$form"
    local greedy
    greedy=$(python3 -c "
import json, sys
v = [json.loads(l) for l in open(sys.argv[1]) if '\"valid\"' in l]
print(max(x['bleu'] for x in v))" "$run/model-1/metrics.jsonl")
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "${flags[$name]}" "$epochs" "$greedy" "$(cat "$run/select/selected.tsv")" >>"$out.part"
  done
  mv "$out.part" "$out"
  column -t -s $'\t' "$out"
  echo "wrote $out"
}

main "$@"; exit  # on one line: bash reads no further, so editing the file during a run is safe
