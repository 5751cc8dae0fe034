#!/usr/bin/env bash
# The demo: sets up and builds nmt, trains an attention model on the bundled
# corpus (data/demo), translates a few test sentences, scores the whole test
# split (exact match must reach 95%), dumps one attention matrix as CSV and
# SVG, and scores the attention's hard alignments against the true ones (AER).
#   scripts/demo.sh            # results in runs/demo/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
bin=${NMT_BUILD_DIR:-build}
out=runs/demo
export NMT_THREADS=${NMT_THREADS:-$(nproc)}

rm -rf "$out"  # the demo always starts from scratch
echo "== training (configs/demo.toml) =="
"$bin/nmt-train" --config configs/demo.toml --output "$out"

echo "== translating 5 test sentences =="
head -n 5 data/demo/test.src > "$out/sample.src"
"$bin/nmt-translate" -m "$out/best.ckpt" < "$out/sample.src" > "$out/sample.hyp" 2>/dev/null
paste -d '\n' "$out/sample.src" "$out/sample.hyp" <(head -n 5 data/demo/test.tgt) /dev/null |
  awk 'NR%4==1{print "src: " $0} NR%4==2{print "hyp: " $0} NR%4==3{print "ref: " $0} NR%4==0{print ""}'

echo "== scoring the test split =="
"$bin/nmt-translate" -m "$out/best.ckpt" --input data/demo/test.src --output "$out/test.hyp" \
  --reference data/demo/test.tgt 2>&1 | tee "$out/test.score" | grep -E "BLEU|exact"
exact=$(sed -n 's/.*exact match = \([0-9.]*\)%.*/\1/p' "$out/test.score")

echo "== attention of test pair 1 (forced alignment, word level, CSV; heatmap in $out/heatmap/0001.svg) =="
"$bin/nmt-align" -m "$out/best.ckpt" --src data/demo/test.src --tgt data/demo/test.tgt -n 1 \
  --level word --heatmap "$out/heatmap" --output "$out/attention-1.csv" 2>/dev/null
cat "$out/attention-1.csv"

echo "== hard alignments of the test split vs the generator's true links =="
"$bin/nmt-align" -m "$out/best.ckpt" --src data/demo/test.src --tgt data/demo/test.tgt --format pharaoh \
  --eval-gold data/demo/test.align --output "$out/test.links" 2>&1 | grep -o "precision.*"

if awk -v e="$exact" 'BEGIN{exit !(e >= 95)}'; then
  echo "demo: test exact match ${exact}% (>= 95%)"
else
  echo "demo: test exact match ${exact}% is below 95%" >&2
  exit 1
fi
