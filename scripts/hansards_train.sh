#!/usr/bin/env bash
# Trains the two Hansards models that scripts/hansards_align.sh scores:
# en -> fr and fr -> en, each with configs/hansards-en-fr.toml (about 25
# minutes each on CPU, its max-minutes). Prepares the data first: pairs of 3
# to 40 words from ../shared/data/hansards-enfr (or $1), shuffled with a fixed
# seed, 500 held out for validation.
#   scripts/hansards_train.sh [HANSARDS_DIR] [extra nmt-train flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data/hansards-enfr}
shift || true
bin=${NMT_BUILD_DIR:-build}
out=runs/hansards
mkdir -p "$out"
if [ ! -s "$out/valid.fr" ]; then
  python3 - "$data" "$out" <<'PY'
import gzip, random, sys
src, out = sys.argv[1], sys.argv[2]
read = lambda f: gzip.open(f"{src}/train.{f}.gz", "rt", encoding="utf-8").read().split("\n")
pairs = [(e.strip(), f.strip()) for e, f in zip(read("en"), read("fr"))
         if 3 <= len(e.split()) <= 40 and 3 <= len(f.split()) <= 40]
random.seed(1)
random.shuffle(pairs)
for name, part in (("valid", pairs[:500]), ("train", pairs[500:])):
    for k, lang in ((0, "en"), (1, "fr")):
        with open(f"{out}/{name}.{lang}", "w", encoding="utf-8") as f:
            f.write("".join(p[k] + "\n" for p in part))
PY
fi
for dir in en-fr fr-en; do
  s=${dir%-*}; t=${dir#*-}
  [ -s "$out/$dir/last.ckpt" ] && { echo "$out/$dir/last.ckpt exists: skipping"; continue; }
  "$bin/nmt-train" --config configs/hansards-en-fr.toml -o "$out/$dir" \
    --train-src "$out/train.$s" --train-tgt "$out/train.$t" \
    --valid-src "$out/valid.$s" --valid-tgt "$out/valid.$t" "$@"
done
