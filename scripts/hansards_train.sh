#!/usr/bin/env bash
# Trains the Hansards models that scripts/hansards_align.sh scores, each for
# configs/hansards-en-fr.toml's 1,500 steps (about 14 minutes each on 2 CPU
# cores):
#   en-fr         English -> French
#   fr-en         French -> English (for symmetrized alignments)
#   en-fr-guided  English -> French with guided alignment: attention is
#                 trained towards statistical links of the training pairs
#                 in both directions (train.gdfa; NMT_HANSARDS_GUIDE says
#                 how they are made) (weight 0.5, the default)
#   en-fr-guided-w3  the same with --guided-alignment-weight 3
#   en-fr-head    English -> French with an alignment head (--alignment-head
#                 256): the guide trains the head (weight 1), whose query
#                 also sees the target piece it aligns; nmt-align reads it
#   fr-en-head    the same French -> English, guided by the same links
#                 reversed (train.gdfa.fr-en), for symmetrized head rows
# Data: 200,000 pairs of 3 to 40 words from ../shared/data/hansards-enfr (or
# $1), shuffled with a fixed seed, plus 500 held out for validation.
#   scripts/hansards_train.sh [HANSARDS_DIR]      # into runs/hansards/
# Environment: NMT_HANSARDS_MODELS (all six: which of them to train, e.g.
# "en-fr-head"), NMT_BUILD_DIR (build), NMT_HANSARDS_RUN (runs/hansards: the
# folder), NMT_HANSARDS_GUIDE (ibm2: ibm2's links symmetrized with
# grow-diag-final-and; hmm: the links where the mean of both directions' HMM
# link posteriors reaches 0.5; hmm-agreement: the same with both directions
# trained in agreement, nmt-align --ibm-agreement).
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data/hansards-enfr}
bin=${NMT_BUILD_DIR:-build}
out=${NMT_HANSARDS_RUN:-runs/hansards}
guide=${NMT_HANSARDS_GUIDE:-ibm2}
[[ $guide == ibm2 || $guide == hmm || $guide == hmm-agreement ]] ||
  { echo "NMT_HANSARDS_GUIDE: ibm2, hmm or hmm-agreement, not '$guide'" >&2; exit 2; }
mkdir -p "$out"
if [ ! -s "$out/valid.fr" ]; then
  scripts/hansards_pairs.py "$data" "$out" 200000
fi
models=" ${NMT_HANSARDS_MODELS:-en-fr en-fr-guided fr-en en-fr-guided-w3 en-fr-head fr-en-head} "
train() {  # train NAME SRC TGT [flags...]
  local name=$1 s=$2 t=$3; shift 3
  [[ $models == *" $name "* ]] || return 0
  [ -s "$out/$name/last.ckpt" ] && { echo "$out/$name/last.ckpt exists: skipping"; return; }
  "$bin/nmt-train" --config configs/hansards-en-fr.toml -o "$out/$name" \
    --train-src "$out/train.$s" --train-tgt "$out/train.$t" \
    --valid-src "$out/valid.$s" --valid-tgt "$out/valid.$t" "$@"
}
train en-fr en fr
if [ ! -s "$out/train.gdfa" ]; then
  how=(--aligner ibm2 --symmetrize grow-diag-final-and)
  [ "$guide" = hmm ] && how=(--aligner hmm --symmetrize average --method threshold --threshold 0.5)
  [ "$guide" = hmm-agreement ] && how=(--aligner hmm --ibm-agreement --symmetrize average --method threshold --threshold 0.5)
  "$bin/nmt-align" "${how[@]}" --format pharaoh \
    --src "$out/train.en" --tgt "$out/train.fr" -o "$out/train.gdfa"
  echo "$guide" >"$out/train.gdfa.aligner"
fi
made_by=$(cat "$out/train.gdfa.aligner" 2>/dev/null || echo ibm2)
[ "$made_by" = "$guide" ] ||
  { echo "$out/train.gdfa was made by $made_by, not $guide: use another NMT_HANSARDS_RUN" >&2; exit 2; }
train en-fr-guided en fr --guided-alignment "$out/train.gdfa"
train fr-en fr en
train en-fr-guided-w3 en fr --guided-alignment "$out/train.gdfa" --guided-alignment-weight 3
train en-fr-head en fr --guided-alignment "$out/train.gdfa" --guided-alignment-weight 1 --alignment-head 256
if [[ $models == *" fr-en-head "* && ! -s $out/train.gdfa.fr-en ]]; then  # links i-j as j-i
  sed -E 's/([0-9]+)-([0-9]+)/\2-\1/g' "$out/train.gdfa" >"$out/train.gdfa.fr-en.tmp"
  mv "$out/train.gdfa.fr-en.tmp" "$out/train.gdfa.fr-en"
fi
train fr-en-head fr en --guided-alignment "$out/train.gdfa.fr-en" --guided-alignment-weight 1 --alignment-head 256
