#!/usr/bin/env bash
# Alignment Error Rate on the Hansards trial set (37 sentences with gold
# sure/possible links, NAACL 2003) for every extraction method, using the
# models of scripts/hansards_train.sh. Forced mode: each model reads the
# reference pair. Writes bench/results/hansards-aer-<host>-<commit>.txt.
#   scripts/hansards_align.sh [HANSARDS_DIR]
# Environment: NMT_BUILD_DIR (build), NMT_HANSARDS_RUN (runs/hansards: the
# models' folder; rows are scored for the models it has, en-fr,
# en-fr-guided-w3 or en-fr-head, or none for the statistical rows alone),
# NMT_HANSARDS_IBM (1; 0 leaves out the statistical aligners' rows, ibm2 and
# hmm, which learn from the run's train.en/train.fr), NMT_HANSARDS_RESULT
# (the result file), NMT_DEVICE (auto), NMT_HANSARDS_CKPT (best.ckpt: which
# checkpoint of each model).
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data/hansards-enfr}
bin=${NMT_BUILD_DIR:-build}
m=${NMT_HANSARDS_RUN:-runs/hansards}
ck=${NMT_HANSARDS_CKPT:-best.ckpt}
has() { [ -s "$m/$1/$ck" ]; }
statistical=${NMT_HANSARDS_IBM:-1}
has en-fr || has en-fr-guided-w3 || has en-fr-head || [ "$statistical" = 1 ] ||
  { echo "$m: no en-fr, en-fr-guided-w3 or en-fr-head model ($ck): run scripts/hansards_train.sh first" >&2; exit 1; }
[ "$statistical" = 1 ] && [ ! -s "$m/train.fr" ] &&
  { echo "$m/train.fr: missing: run scripts/hansards_train.sh (or scripts/hansards_pairs.py) first" >&2; exit 1; }
commit=$(git rev-parse --short HEAD)
res=${NMT_HANSARDS_RESULT:-bench/results/hansards-aer-$(hostname -s)-$commit.txt}
mkdir -p "$(dirname "$res")"
work=$(mktemp -d)  # the links themselves are not kept: only the scores
trap 'rm -rf "$work"' EXIT
pair=(--src "$data/trial.en" --tgt "$data/trial.fr" --eval-gold "$data/trial.talp" --gold-one-based --format pharaoh
  -o "$work/links.txt" --device "${NMT_DEVICE:-auto}")
row() {  # row LABEL nmt-align-args...
  local label=$1; shift
  local score
  score=$("$bin/nmt-align" "${pair[@]}" "$@" 2>&1 | grep -o 'precision.*') || { echo "failed: $label" >&2; exit 1; }
  printf '| %s | %s |\n' "$label" "$(echo "$score" | sed -E 's/precision ([0-9.]+) recall ([0-9.]+) AER ([0-9.]+).*/\1 | \2 | \3/')"
}
paired() {  # paired LABEL MODEL: MODEL's argmax links combined with the plain fr-en's (when there is one)
  has fr-en || return 0
  local s
  for s in intersection grow-diag-final-and; do
    row "$1 x fr-en attention, argmax, $s" -m "$2" "${R[@]}" --symmetrize $s
  done
}
{
  echo "# Hansards en-fr trial set (37 pairs, 1-based talp gold), forced alignment"
  echo "# commit $commit, $(hostname -s), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# models: $(for d in en-fr fr-en en-fr-guided en-fr-guided-w3 en-fr-head fr-en-head; do has $d && printf "%s " "$d"; done)in $m ($ck)"
  echo
  echo "| method | precision | recall | AER |"
  echo "|---|---|---|---|"
  F=(-m "$m/en-fr/$ck"); G=(-m "$m/en-fr-guided/$ck"); G3=(-m "$m/en-fr-guided-w3/$ck")
  H=(-m "$m/en-fr-head/$ck")
  R=(--reverse-model "$m/fr-en/$ck"); RH=(--reverse-model "$m/fr-en-head/$ck")
  if has en-fr; then
    row "en-fr attention, argmax" "${F[@]}"
    row "en-fr attention, argmax, shift 1" "${F[@]}" --shift 1
    row "en-fr attention, argmax, shift 2" "${F[@]}" --shift 2
    row "en-fr attention, threshold 0.5" "${F[@]}" --method threshold --threshold 0.5
    row "en-fr attention, threshold 0.3" "${F[@]}" --method threshold --threshold 0.3
    if has fr-en; then
      for s in intersection union grow-diag grow-diag-final grow-diag-final-and; do
        row "en-fr x fr-en attention, argmax, $s" "${F[@]}" "${R[@]}" --symmetrize $s
      done
      row "en-fr x fr-en attention, average, argmax" "${F[@]}" "${R[@]}" --symmetrize average
      row "en-fr x fr-en attention, average, threshold 0.3" "${F[@]}" "${R[@]}" --symmetrize average --method threshold --threshold 0.3
    fi
  fi
  if has en-fr-guided; then
    row "en-fr guided attention, argmax" "${G[@]}"
    row "en-fr guided attention, threshold 0.3" "${G[@]}" --method threshold --threshold 0.3
    paired "en-fr guided" "$m/en-fr-guided/$ck"
  fi
  if has en-fr-guided-w3; then
    row "en-fr guided (weight 3) attention, argmax" "${G3[@]}"
    row "en-fr guided (weight 3) attention, argmax, shift 1" "${G3[@]}" --shift 1
    row "en-fr guided (weight 3) attention, threshold 0.3" "${G3[@]}" --method threshold --threshold 0.3
    row "en-fr guided (weight 3) attention, threshold 0.5" "${G3[@]}" --method threshold --threshold 0.5
    paired "en-fr guided (weight 3)" "$m/en-fr-guided-w3/$ck"
  fi
  if has en-fr-head; then
    row "en-fr alignment head, argmax" "${H[@]}"
    row "en-fr alignment head, threshold 0.3" "${H[@]}" --method threshold --threshold 0.3
    row "en-fr alignment head, threshold 0.5" "${H[@]}" --method threshold --threshold 0.5
    paired "en-fr alignment head" "$m/en-fr-head/$ck"
    if has fr-en-head; then
      for s in intersection union grow-diag grow-diag-final grow-diag-final-and; do
        row "en-fr x fr-en alignment heads, argmax, $s" "${H[@]}" "${RH[@]}" --symmetrize $s
      done
      row "en-fr x fr-en alignment heads, average, argmax" "${H[@]}" "${RH[@]}" --symmetrize average
      row "en-fr x fr-en alignment heads, average, threshold 0.3" "${H[@]}" "${RH[@]}" --symmetrize average --method threshold --threshold 0.3
      row "en-fr x fr-en alignment heads, average, threshold 0.5" "${H[@]}" "${RH[@]}" --symmetrize average --method threshold --threshold 0.5
    fi
  fi
  if [ "$statistical" = 1 ]; then
    ibm=(--aligner ibm2 --ibm-train-src "$m/train.en" --ibm-train-tgt "$m/train.fr")
    row "ibm2 en-fr (statistical baseline)" "${ibm[@]}"
    row "ibm2 en-fr x fr-en, grow-diag-final-and (the guide's method)" "${ibm[@]}" --symmetrize grow-diag-final-and
    row "ibm2 en-fr x fr-en, intersection" "${ibm[@]}" --symmetrize intersection
    row "ibm2 en-fr x fr-en, average posterior, threshold 0.5" "${ibm[@]}" --symmetrize average --method threshold
    hmm=(--aligner hmm --ibm-train-src "$m/train.en" --ibm-train-tgt "$m/train.fr")
    row "hmm en-fr" "${hmm[@]}"
    row "hmm en-fr, posterior threshold 0.5" "${hmm[@]}" --method threshold
    for s in intersection grow-diag grow-diag-final-and; do
      row "hmm en-fr x fr-en, $s" "${hmm[@]}" --symmetrize $s
    done
    for t in 0.3 0.5; do
      row "hmm en-fr x fr-en, average posterior, threshold $t" "${hmm[@]}" --symmetrize average --method threshold --threshold $t
    done
    for s in intersection grow-diag-final-and; do
      row "hmm en-fr x fr-en in agreement, $s" "${hmm[@]}" --ibm-agreement --symmetrize $s
    done
    row "hmm en-fr x fr-en in agreement, average posterior, threshold 0.5" "${hmm[@]}" --ibm-agreement \
      --symmetrize average --method threshold
  fi
} | tee "$res"
echo "written: $res"
