#!/usr/bin/env bash
# nmt-train alone and beside one busy single-threaded process (python3 -c
# "while True: pass"): the contention row of bench/vs-pytorch.sh, for several
# builds or flag sets side by side, in interleaved rounds. Prints one line per
# run: ROUND NAME alone|busy TARGET_TOKENS_PER_S GOVERNOR_CHANGES.
#   bench/train-contention.sh ROUNDS "NAME:BUILD_DIR:FLAGS" ...
#   e.g. bench/train-contention.sh 3 "before:/tmp/old-build:" "now:build:" "four:build:--batch-parts 4"
# Data: what bench/vs-pytorch.sh prepared in runs/vs-pytorch (its 6,000
# training pairs and SentencePiece models; NMT_BENCH_WORK names another
# folder). Time nothing else beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:?usage: bench/train-contention.sh ROUNDS NAME:BUILD_DIR:FLAGS ...}
shift
W=${NMT_BENCH_WORK:-runs/vs-pytorch}
[[ -s $W/train.en && -s $W/model/src.spm.model ]] ||
  { echo "train-contention.sh: $W has no prepared data: run bench/vs-pytorch.sh first" >&2; exit 2; }
common=(--config configs/multi30k-en-de.toml --threads 2 --device cpu --train-src "$W/train.en" --train-tgt "$W/train.de"
        --decoder bahdanau --batch-tokens 4096 --batch-sentences 128 --lr-decay-start 0 --average 0
        --log-every 100000 --keep-checkpoints 0 --max-epochs 1 --src-spm "$W/model/src.spm.model"
        --tgt-spm "$W/model/tgt.spm.model")
out=$(mktemp -d)
busy=
trap '[[ -n $busy ]] && kill $busy 2>/dev/null; rm -rf "$out"' EXIT
rate() { sed -nE 's/.*training finished.* steps, ([0-9.]+) target tokens\/s.*/\1/p' "$1"; }
for r in $(seq "$rounds"); do
  for v in "$@"; do
    IFS=: read -r name bin flags <<<"$v"
    for mode in alone busy; do
      if [[ $mode == busy ]]; then python3 -c "while True: pass" & busy=$!; fi
      rm -rf "$out/run"
      # shellcheck disable=SC2086  # FLAGS are words
      "$bin/nmt-train" "${common[@]}" $flags -o "$out/run" 2>"$out/$mode.log" || true
      if [[ $mode == busy ]]; then kill $busy; wait $busy 2>/dev/null || true; busy=; fi
      echo "$r $name $mode $(rate "$out/$mode.log") $(grep -c 'threads:' "$out/$mode.log" || true)"
    done
  done
done
