#!/usr/bin/env bash
# Speed of two builds of nmt in one run: the same rows, interleaved round by
# round (the order alternating), medians and the ratio new / old. For a
# change that should not alter speed (a restructuring) or one that should.
#   bench/before-after.sh OLD_BIN_DIR NEW_BIN_DIR MODEL.ckpt VAL_SRC [ROUNDS]
# Rows: nmt-bench-step's fixed-shape training step (64 sentences x 16/16
# pieces, 30 steps) and searches (64 x 16 pieces, greedy and beam 5, 10
# repetitions) with MODEL.ckpt, and nmt-translate over VAL_SRC greedy and
# with beam 5 (sentences/s, the whole process). ROUNDS defaults to 5.
# Environment: NMT_THREADS (all cores). Nothing else may run meanwhile:
# every figure is a rate. Prints one line per row; the caller keeps them
# (bench/results/before-after-HOST-COMMIT.txt).
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 OLD_BIN_DIR NEW_BIN_DIR MODEL.ckpt VAL_SRC [ROUNDS]" >&2
  exit 2
fi
old=$1 new=$2 model=$3 val=$4 rounds=${5:-5}
threads=${NMT_THREADS:-$(nproc)}
export NMT_THREADS=$threads
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lines=$(wc -l < "$val")

field() {  # field JSON_LINE NAME: a number from nmt-bench-step's JSON line
  sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" <<< "$1"
}

row() {  # row SIDE BIN ROW: one measurement, appended to $work/SIDE.ROW
  local side=$1 bin=$2 name=$3 j t0 t1
  case $name in
    train_fixed_tok_s)
      j=$("$bin/nmt-bench-step" train "$threads" 64 16 16 30)
      field "$j" tgt_tokens_per_s >> "$work/$side.$name" ;;
    decode_fixed_b1_sent_s | decode_fixed_b5_sent_s)
      j=$("$bin/nmt-bench-step" decode "$threads" 64 16 "${name:14:1}" 10 "$model")
      field "$j" sentences_per_s >> "$work/$side.$name" ;;
    translate_b1_sent_s | translate_b5_sent_s)
      t0=$(date +%s.%N)
      "$bin/nmt-translate" -m "$model" --beam-size "${name:11:1}" --input "$val" \
        --output "$work/$side.$name.hyp" 2> /dev/null
      t1=$(date +%s.%N)
      python3 -c "print(f'{$lines / ($t1 - $t0):.2f}')" >> "$work/$side.$name" ;;
  esac
}

rows="train_fixed_tok_s decode_fixed_b1_sent_s decode_fixed_b5_sent_s translate_b1_sent_s translate_b5_sent_s"
for ((r = 1; r <= rounds; ++r)); do
  for name in $rows; do
    if (( r % 2 )); then
      row old "$old" "$name"; row new "$new" "$name"
    else
      row new "$new" "$name"; row old "$old" "$name"
    fi
  done
  echo "before-after: round $r of $rounds done" >&2
done

echo "# bench/before-after.sh $old $new $model $val $rounds; threads $threads; $(date -u +%F)"
printf '%-24s %12s %12s %10s  %s\n' row old new new/old "rounds (old | new)"
for name in $rows; do
  python3 - "$work/old.$name" "$work/new.$name" "$name" << 'EOF'
import statistics, sys
old = [float(x) for x in open(sys.argv[1])]
new = [float(x) for x in open(sys.argv[2])]
mo, mn = statistics.median(old), statistics.median(new)
print(f"{sys.argv[3]:<24} {mo:12.2f} {mn:12.2f} {mn / mo:10.3f}  {' '.join(map(str, old))} | {' '.join(map(str, new))}")
EOF
done
for name in translate_b1_sent_s translate_b5_sent_s; do
  if cmp -s "$work/old.$name.hyp" "$work/new.$name.hyp"; then
    echo "# $name: the two builds' translations are identical"
  else
    echo "# $name: the two builds' translations differ"
  fi
done
