#!/usr/bin/env bash
# Same outputs before and after a change that should not alter arithmetic
# (a restructuring): trains the demo model with two builds, translates the
# demo test split with each one's model, and translates a trained model's
# validation source greedy and with beam 5 with both builds; then compares
# every output line for line and prints one line per comparison.
#   bench/same-outputs.sh OLD_BIN_DIR NEW_BIN_DIR MODEL.ckpt VAL_SRC [OUT_DIR]
# OLD_BIN_DIR and NEW_BIN_DIR hold nmt-train and nmt-translate (a build
# folder, or a copy of one). Exit status 1 when anything differs.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 OLD_BIN_DIR NEW_BIN_DIR MODEL.ckpt VAL_SRC [OUT_DIR]" >&2
  exit 2
fi
old=$1 new=$2 model=$3 val=$4 out=${5:-runs/same-outputs}
cd "$(dirname "$0")/.."
export NMT_THREADS=${NMT_THREADS:-$(nproc)}
mkdir -p "$out"
status=0

compare() {  # compare NAME FILE_A FILE_B
  if cmp -s "$2" "$3"; then
    echo "same-outputs: $1: $(wc -l < "$2") lines, identical"
  else
    echo "same-outputs: $1: $(diff "$2" "$3" | grep -c '^<' || true) of $(wc -l < "$2") lines differ"
    status=1
  fi
}

for side in old new; do
  bin=${!side}
  rm -rf "$out/demo-$side"
  "$bin/nmt-train" --config configs/demo.toml --output "$out/demo-$side" > "$out/demo-$side.log" 2>&1
  "$bin/nmt-translate" -m "$out/demo-$side/best.ckpt" --input data/demo/test.src \
    --output "$out/demo-test-$side.hyp" 2> /dev/null
  for beam in 1 5; do
    "$bin/nmt-translate" -m "$model" --beam-size "$beam" --input "$val" \
      --output "$out/val-beam$beam-$side.hyp" 2> /dev/null
  done
done
compare "demo test translations (each build trains its own demo model)" \
  "$out/demo-test-old.hyp" "$out/demo-test-new.hyp"
compare "$(basename "$model") greedy" "$out/val-beam1-old.hyp" "$out/val-beam1-new.hyp"
compare "$(basename "$model") beam 5" "$out/val-beam5-old.hyp" "$out/val-beam5-new.hyp"
exit $status
