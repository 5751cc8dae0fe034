#!/usr/bin/env bash
# What the approximate decoding options cost in quality: BLEU on Multi30k val
# (tok form, sacreBLEU --tokenize none against val.lc.norm.tok.de, as the
# papers score) for float32, --int8, --bf16, --shortlist and the shortlist
# with each reduced precision, greedy and beam 5, and how many output lines
# equal float32's. Quality only: nothing here is timed (bench/vs-pytorch.sh
# times the same options), so it may run beside other work.
#   bench/approx-bleu.sh MODEL.ckpt [DATA_DIR] [THREADS]
# The shortlist's table: nmt-align's ibm2 over the model's pieces of the
# whole tok-form training split (as bench/vs-pytorch.sh makes it). Prints a
# TSV (option, beam, BLEU, lines equal to float32) on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/approx-bleu.sh MODEL.ckpt [DATA_DIR] [THREADS]}
data=${2:-../shared/data/multi30k}
threads=${3:-$(nproc)}
bin=${NMT_BUILD_DIR:-build}
work=$(mktemp -d)  # every output lives here: nothing is written onto a device
trap 'rm -rf "$work"' EXIT
cp "$data/val.lc.norm.tok.en" "$work/val.en"
cp "$data/val.lc.norm.tok.de" "$work/val.de"
zcat "$data/train.lc.norm.tok.en.gz" >"$work/train.en"
zcat "$data/train.lc.norm.tok.de.gz" >"$work/train.de"
"$bin/nmt-align" --aligner ibm2 --format lex -m "$model" --src "$work/train.en" --tgt "$work/train.de" \
  --threads "$threads" -o "$work/lex.tsv" 2>"$work/lex.log"
printf 'option\tbeam\tbleu_tok_none\tlines_equal_to_float32\n'
for beam in 1 5; do
  for option in float32 int8 bf16 shortlist int8-shortlist bf16-shortlist; do
    flags=()
    [[ $option == *int8* ]] && flags+=(--int8)
    [[ $option == *bf16* ]] && flags+=(--bf16)
    [[ $option == *shortlist* ]] && flags+=(--shortlist "$work/lex.tsv")
    out=$work/$option.b$beam
    "$bin/nmt-translate" -m "$model" --threads "$threads" -b "$beam" "${flags[@]}" -i "$work/val.en" -o "$out" \
      --reference "$work/val.de" --tokenize none --scores-json "$out.json" 2>"$out.log"
    bleu=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["bleu_none"])' "$out.json")
    same=$(paste -d '\t' "$work/float32.b$beam" "$out" | awk -F '\t' '$1 == $2' | wc -l)
    printf '%s\t%s\t%s\t%s\n' "$option" "$beam" "$bleu" "$same"
  done
done
