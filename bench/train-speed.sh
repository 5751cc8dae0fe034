#!/usr/bin/env bash
# Training speed of nmt-train builds and flag sets on one corpus, the rows
# interleaved round by round (the order rotating): each row's median target
# tokens/s over ROUNDS runs, and its ratio to the first row's. Each run is
# configs/multi30k-en-de.toml's recipe (seed 1, so the same batches in every
# run) for STEPS steps with SentencePiece models given, no validation; its
# figure is the rate over its last 100 steps (the warm-up and the reading of
# the corpus left out).
#   bench/train-speed.sh SRC TGT SRC_SPM TGT_SPM STEPS ROUNDS NAME=BIN_DIR:FLAGS...
# e.g. bench/train-speed.sh runs/m/data/train.{en,de} runs/m/model-1/{src,tgt}.spm.model 200 3 \
#        plain=build: r-drop=build:"--r-drop 5"
# Environment: NMT_THREADS (all cores). Nothing else may run meanwhile:
# every figure is a rate. Prints one line per row; the caller keeps them
# (bench/results/train-speed-HOST-COMMIT.txt).
set -euo pipefail
if [ $# -lt 7 ]; then
  echo "usage: $0 SRC TGT SRC_SPM TGT_SPM STEPS ROUNDS NAME=BIN_DIR:FLAGS..." >&2
  exit 2
fi
src=$1 tgt=$2 src_spm=$3 tgt_spm=$4 steps=$5 rounds=$6
shift 6
if ((steps <= 100)); then
  echo "$0: STEPS must be above 100 (the rate is the last 100 steps')" >&2
  exit 2
fi
threads=${NMT_THREADS:-$(nproc)}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows=("$@")

run() {  # run INDEX ROW: one run of the row, its rate appended to $work/INDEX
  local i=$1 name=${2%%=*} spec=${2#*=} bin flags rate
  bin=${spec%%:*}
  flags=${spec#*:}
  rm -rf "$work/run"
  # shellcheck disable=SC2086  # FLAGS are words
  "$bin/nmt-train" --config configs/multi30k-en-de.toml -o "$work/run" --seed 1 --threads "$threads" \
    --train-src "$src" --train-tgt "$tgt" --src-spm "$src_spm" --tgt-spm "$tgt_spm" \
    --max-steps "$steps" --log-every 100 --valid-every 0 --average 0 $flags > "$work/log" 2>&1 ||
    { echo "$0: row $name failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
  rate=$(grep '"type":"train"' "$work/run/metrics.jsonl" | tail -1 | sed -n 's/.*"tgt_tokens_per_s":\([0-9.]*\).*/\1/p')
  [[ -n $rate ]] || { echo "$0: row $name logged no rate" >&2; exit 1; }
  echo "$rate" >> "$work/$i"
}

for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < ${#rows[@]}; k++)); do
    i=$(((k + r) % ${#rows[@]}))
    run "$i" "${rows[$i]}"
  done
done

median() { sort -g "$1" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
first=$(median "$work/0")
for ((i = 0; i < ${#rows[@]}; i++)); do
  m=$(median "$work/$i")
  printf '%-12s %s  median %.0f tgt tok/s (runs: %s), %.2fx the first row\n' "${rows[$i]%%=*}" "${rows[$i]#*=}" "$m" \
    "$(paste -sd' ' "$work/$i")" "$(awk -v a="$m" -v b="$first" 'BEGIN {print a / b}')"
done
