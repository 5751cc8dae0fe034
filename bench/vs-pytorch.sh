#!/usr/bin/env bash
# nmt against a PyTorch-eager mirror of its model (bench/reference/nmt_ref.py:
# same architecture, sizes, batch shapes, training step and searches), on
# the same data and machine, in interleaved rounds; prints medians and the
# ratios nmt / PyTorch from the same run.
#
#   bench/vs-pytorch.sh [ROUNDS] [DATA_DIR]     (default 3, ../shared/data/multi30k)
#
# Rows: training target tokens/s on Multi30k batches planned as nmt-train
# plans them (configs/multi30k-en-de.toml's sizes, Bahdanau decoder, 4096-token
# budget, at most 128 sentences; the first NMT_BENCH_PAIRS pairs of the tokenized training split,
# one epoch) and at a fixed shape (64 sentences x 16/16 pieces); greedy and
# beam-5 sentences/s translating NMT_BENCH_VALID val sentences (val repeated
# past its 1,014 lines) with the same
# weights (both sides' outputs are compared line by line) and at a fixed
# shape; peak RSS; the model's FLOPs per target token against the measured
# fp32 matrix-product peak; and nmt-train's rate beside one busy
# single-threaded process (as it runs by default, and with --fixed-threads).
#
# Fixed-shape rows also run nmt's decoder in its plain formulation (side
# "nmt-plain", DecoderImpl::Path::kPlain and EngineOptions::plain) and, for training, with the
# optimized step forced (side "nmt-optimized"; by default training takes the
# plain one), so each path's gain is measured in the same run. The training
# row on text also runs with whole batches (side "nmt-whole": nmt-train
# --batch-parts 1; by default large batches train as one part per thread),
# fixed-shape training rows with one part per thread (side "nmt-parts"), and
# decoding rows on text with one batch at a time (side "nmt-serial":
# nmt-translate --parallel-batches 1), so each lever is measured against the
# default in the same run (the result's alt_side, nmt_alt and nmt_over_alt).
# On CUDA (or with NMT_BENCH_GRAPHS=1) the training rows also run as
# nmt-train --cuda-graphs (side "nmt-graphs": the result's nmt_graphs and
# graphs_ratio).
#
# Environment: NMT_BUILD_DIR (build), NMT_THREADS (all cores), NMT_PYTHON
# (/usr/bin/python3), NMT_BENCH_DEVICE (cpu; cuda on a GPU host: every side
# runs there, and the contention row is left out), NMT_BENCH_FIXED_BATCHES
# (sentences of the fixed-shape training rows, default "64"), NMT_BENCH_PAIRS
# (6000), NMT_BENCH_VALID (500), NMT_BENCH_CKPT (a checkpoint to decode with,
# e.g. a Multi30k run's best.ckpt, with its run folder's src/tgt.spm.model, which
# every row then uses; default: one trained here on the subset for 2 epochs), NMT_BENCH_ONLY
# ("decode": only the decoding rows and the peak; default: every row).
# Decoding rows on text also run the approximate options, their lines
# compared with the float ones: nmt-translate --int8 (side "nmt-int8": the
# decoder step's products in int8, CPU only), --bf16 (side "nmt-bf16": in
# bfloat16, CPU only), --shortlist (side
# "nmt-shortlist": a lexical shortlist, nmt-align's ibm2 table of the whole
# tokenized training split over the checkpoint's pieces) and each precision
# with the shortlist ("nmt-int8-shortlist", "nmt-bf16-shortlist").
# nmt runs LibTorch's AVX-512 kernels where the CPU has them
# (prefer_avx512_kernels(); LibTorch 1.13 keeps them opt-in), so on the CPU the
# rows on text also run the mirror with ATEN_CPU_CAPABILITY=avx512 (side
# "pytorch-avx512"; the result's ratio_vs_pytorch_avx512): the ratio against
# the mirror as PyTorch runs out of the box, and against it with the same kernels.
# Both sides run the BLAS kernel family nmt runs (the mirror gets it as
# OPENBLAS_CORETYPE), and the result records each side's (blas_kernels).
# Needs python3-torch and python3-sentencepiece (scripts/setup.sh --bench).
# Writes bench/results/vs-pytorch[-cuda]-HOST-COMMIT.json. Nothing else may run
# meanwhile: every figure is a rate.
set -euo pipefail

main() {
cd "$(dirname "$0")/.."
local rounds=${1:-3} data=${2:-../shared/data/multi30k}
local bin=${NMT_BUILD_DIR:-build} threads=${NMT_THREADS:-$(nproc)}
local pairs=${NMT_BENCH_PAIRS:-6000} nvalid=${NMT_BENCH_VALID:-500}
local work=runs/vs-pytorch ref=bench/reference/nmt_ref.py
local py=${NMT_PYTHON:-/usr/bin/python3}  # Debian's, with python3-torch (the same LibTorch and BLAS)
local dev=${NMT_BENCH_DEVICE:-cpu} fixed_batches=${NMT_BENCH_FIXED_BATCHES:-64}
local train_rows=1
# Training rows of nmt-train --cuda-graphs (side "nmt-graphs"): on CUDA, or
# with NMT_BENCH_GRAPHS=1 elsewhere (eager padded steps: a rehearsal).
local graph_rows=0
[[ $dev == cuda* || ${NMT_BENCH_GRAPHS:-} == 1 ]] && graph_rows=1
case ${NMT_BENCH_ONLY:-} in
  "") ;;
  decode) train_rows=0 fixed_batches="" ;;
  *) echo "vs-pytorch.sh: NMT_BENCH_ONLY is 'decode' or unset, not '$NMT_BENCH_ONLY'" >&2; exit 1 ;;
esac
for exe in nmt-train nmt-translate nmt-align nmt-bench-step; do
  [[ -x $bin/$exe ]] || { echo "vs-pytorch.sh: build nmt first (scripts/build.sh): no $bin/$exe" >&2; exit 1; }
done
"$py" -c "import torch" 2>/dev/null ||
  { echo "vs-pytorch.sh: needs python3-torch and python3-sentencepiece (scripts/setup.sh --bench)" >&2; exit 1; }
# Without Python's sentencepiece (a GPU host's PyTorch install may lack it) the
# rows on real text are left out and only the fixed-shape rows run.
local text_rows=1
"$py" -c "import sentencepiece" 2>/dev/null ||
  { text_rows=0; echo "vs-pytorch.sh: no Python sentencepiece: only the fixed-shape rows" >&2; }
# Both sides run the same BLAS kernels: the family nmt runs here (OpenBLAS's
# own choice, or the widest one when OpenBLAS picked narrower; see
# src/base/blas_kernels.h) is set for the mirror too, and both are recorded.
# (A build whose --version names no kernel family, as against a PyTorch install's
# LibTorch, sets none: `env` alone.)
local nmt_blas pyenv=(env)
nmt_blas=$("$bin/nmt-train" --version | sed -nE 's/^BLAS: .*, ([A-Za-z0-9_]+) kernels, .*/\1/p')
[[ -n $nmt_blas ]] && pyenv+=(OPENBLAS_CORETYPE="$nmt_blas")
mkdir -p "$work"
local tsv=$work/measurements.tsv
printf 'round\tside\trow\tvalue\n' >"$tsv"
record() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$tsv"; }
# The mirror as PyTorch runs by default (side "pytorch") or with LibTorch's
# AVX-512 kernels ("pytorch-avx512"): mirror SIDE ARGS...
mirror() {
  if [[ $1 == pytorch-avx512 ]]; then "${pyenv[@]}" ATEN_CPU_CAPABILITY=avx512 "$py" "$ref" "${@:2}"
  else "${pyenv[@]}" "$py" "$ref" "${@:2}"; fi
}
field() { "$py" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

# Data: the subset for training, val sentences for decoding.
head -n "$pairs" <(zcat "$data/train.lc.norm.tok.en.gz") >"$work/train.en"  # (zcat's SIGPIPE is not ours)
head -n "$pairs" <(zcat "$data/train.lc.norm.tok.de.gz") >"$work/train.de"
# NMT_BENCH_VALID val sentences, val read again from its start as often as that
# takes (val has 1,014): on a GPU a few hundred sentences measure mostly the
# start-up of the first batch (library handles, kernel loading), not the search.
local val_lines reps
val_lines=$(wc -l <"$data/val.lc.norm.tok.en")
reps=$(((nvalid + val_lines - 1) / val_lines))
head -n "$nvalid" <(for ((i = 0; i < reps; i++)); do cat "$data/val.lc.norm.tok.en"; done) >"$work/val.en"

# The mirror's model and batches (nmt_ref.py's defaults), whatever the config's quality recipe says.
local config=configs/multi30k-en-de.toml
local common=(--config "$config" --threads "$threads" --device "$dev" --train-src "$work/train.en" --train-tgt "$work/train.de"
              --decoder bahdanau --dec-hidden-dropout 0 --batch-tokens 4096 --batch-sentences 128 --lr-decay-start 0 --average 0
              --log-every 100000 --keep-checkpoints 0)
# A model to decode with and the SentencePiece models every row uses: NMT_BENCH_CKPT's
# and its folder's, or one short nmt-train run's.
local ckpt=${NMT_BENCH_CKPT:-$work/model/last.ckpt}
if [[ -z ${NMT_BENCH_CKPT:-} ]]; then
  if [[ ! -f $work/model/last.ckpt ]]; then
    rm -rf "$work/model"
    "$bin/nmt-train" "${common[@]}" -o "$work/model" --max-epochs 2 2>"$work/model.log"
  fi
  echo "vs-pytorch.sh: decoding with a model trained here for 2 epochs, whose translations run to their length" \
       "caps; set NMT_BENCH_CKPT to a trained model for decoding figures that say something" >&2
fi
local spm_dir
spm_dir=$(dirname "$ckpt")
local src_spm=$spm_dir/src.spm.model tgt_spm=$spm_dir/tgt.spm.model
for f in "$ckpt" "$src_spm" "$tgt_spm"; do
  [[ -f $f ]] || { echo "vs-pytorch.sh: no $f (NMT_BENCH_CKPT wants its run folder's src/tgt.spm.model beside it)" >&2; exit 1; }
done
# The mirror as PyTorch runs out of the box, and on the CPU also with LibTorch's
# AVX-512 kernels (ATEN_CPU_CAPABILITY touches no GPU kernel).
local mirror_sides=(pytorch)
[[ $dev == cpu ]] && mirror_sides+=(pytorch-avx512)

# The lexical shortlist's table: ibm2 over the checkpoint's pieces of the whole training split.
local lex=$work/lex.tsv
if ((text_rows)); then
  zcat "$data/train.lc.norm.tok.en.gz" >"$work/lex-train.en"
  zcat "$data/train.lc.norm.tok.de.gz" >"$work/lex-train.de"
  "$bin/nmt-align" --aligner ibm2 --format lex -m "$ckpt" --src "$work/lex-train.en" --tgt "$work/lex-train.de" \
    --threads "$threads" -o "$lex" 2>"$work/lex.log"
fi

for ((r = 1; r <= rounds; r++)); do
  echo "round $r of $rounds" >&2
  # Training on Multi30k batches, one epoch of the subset.
  local j side
  if ((text_rows && train_rows)); then
    rm -rf "$work/nmt-train"
    "$bin/nmt-train" "${common[@]}" -o "$work/nmt-train" --max-epochs 1 --src-spm "$src_spm" --tgt-spm "$tgt_spm" \
      2>"$work/nmt-train.log"
    local line
    line=$(grep "training finished" "$work/nmt-train.log")
    record "$r" nmt train_corpus_tok_s "$(sed -E 's/.* steps, ([0-9.]+) target tokens\/s.*/\1/' <<<"$line")"
    record "$r" nmt train_peak_rss_mb "$(sed -E 's/.*peak memory ([0-9]+) MiB.*/\1/' <<<"$line")"
    rm -rf "$work/nmt-train"
    "$bin/nmt-train" "${common[@]}" -o "$work/nmt-train" --max-epochs 1 --src-spm "$src_spm" --tgt-spm "$tgt_spm" \
      --batch-parts 1 2>"$work/nmt-train-whole.log"
    line=$(grep "training finished" "$work/nmt-train-whole.log")
    record "$r" nmt-whole train_corpus_tok_s "$(sed -E 's/.* steps, ([0-9.]+) target tokens\/s.*/\1/' <<<"$line")"
    if ((graph_rows)); then
      rm -rf "$work/nmt-train"
      "$bin/nmt-train" "${common[@]}" -o "$work/nmt-train" --max-epochs 1 --src-spm "$src_spm" --tgt-spm "$tgt_spm" \
        --cuda-graphs 2>"$work/nmt-train-graphs.log"
      line=$(grep "training finished" "$work/nmt-train-graphs.log")
      record "$r" nmt-graphs train_corpus_tok_s "$(sed -E 's/.* steps, ([0-9.]+) target tokens\/s.*/\1/' <<<"$line")"
    fi
    for side in "${mirror_sides[@]}"; do
      j=$(mirror "$side" train-corpus --threads "$threads" --device "$dev" --src "$work/train.en" \
            --tgt "$work/train.de" --src-spm "$src_spm" --tgt-spm "$tgt_spm" --epochs 1)
      record "$r" "$side" train_corpus_tok_s "$(field "$j" tgt_tokens_per_s)"
    done
    record "$r" pytorch train_peak_rss_mb "$(field "$j" peak_rss_mb)"
  fi
  # Training at a fixed shape (64 sentences: row train_fixed_tok_s; others train_fixed_bN_tok_s).
  local B row train_batches=$fixed_batches
  for B in $train_batches; do
    row=train_fixed_tok_s
    ((B == 64)) || row=train_fixed_b${B}_tok_s
    j=$(NMT_BENCH_DEVICE=$dev "$bin/nmt-bench-step" train "$threads" "$B" 16 16 30)
    record "$r" nmt "$row" "$(field "$j" tgt_tokens_per_s)"
    j=$(NMT_BENCH_DEVICE=$dev NMT_BENCH_PARTS=$threads "$bin/nmt-bench-step" train "$threads" "$B" 16 16 30)
    record "$r" nmt-parts "$row" "$(field "$j" tgt_tokens_per_s)"
    if ((graph_rows)); then
      j=$(NMT_BENCH_DEVICE=$dev NMT_BENCH_GRAPHS=1 "$bin/nmt-bench-step" train "$threads" "$B" 16 16 30)
      record "$r" nmt-graphs "$row" "$(field "$j" tgt_tokens_per_s)"
    fi
    j=$(NMT_BENCH_DEVICE=$dev NMT_BENCH_REFERENCE=1 "$bin/nmt-bench-step" train "$threads" "$B" 16 16 30)
    record "$r" nmt-plain "$row" "$(field "$j" tgt_tokens_per_s)"
    j=$(NMT_BENCH_DEVICE=$dev NMT_BENCH_PATH=optimized "$bin/nmt-bench-step" train "$threads" "$B" 16 16 30)
    record "$r" nmt-optimized "$row" "$(field "$j" tgt_tokens_per_s)"
    j=$("${pyenv[@]}" "$py" "$ref" train-fixed --threads "$threads" --device "$dev" --batch "$B" --src-len 16 --tgt-len 16 --steps 30)
    record "$r" pytorch "$row" "$(field "$j" tgt_tokens_per_s)"
  done
  # Decoding val sentences, greedy and beam 5, same weights.
  for beam in 1 5; do
    if ((text_rows)); then
      "$bin/nmt-translate" -m "$ckpt" -b "$beam" --threads "$threads" --device "$dev" -i "$work/val.en" -o "$work/nmt-b$beam.out" \
        2>"$work/nmt-b$beam.log"
      record "$r" nmt "decode_b${beam}_sent_s" \
        "$(sed -nE 's/.*translated [0-9]+ sentences .* ([0-9.]+) sentences\/s.*/\1/p' "$work/nmt-b$beam.log")"
      for side in "${mirror_sides[@]}"; do
        j=$(mirror "$side" decode --threads "$threads" --device "$dev" -m "$ckpt" --src-spm "$src_spm" \
              --tgt-spm "$tgt_spm" --input "$work/val.en" --beam "$beam" --output "$work/$side-b$beam.out")
        record "$r" "$side" "decode_b${beam}_sent_s" "$(field "$j" sentences_per_s)"
      done
      record "$r" both "decode_b${beam}_same_lines" \
        "$(paste -d '\t' "$work/nmt-b$beam.out" "$work/pytorch-b$beam.out" | awk -F'\t' '$1 == $2' | wc -l)"
      "$bin/nmt-translate" -m "$ckpt" -b "$beam" --parallel-batches 1 --threads "$threads" --device "$dev" \
        -i "$work/val.en" -o "$work/nmt-serial-b$beam.out" 2>"$work/nmt-serial-b$beam.log"
      record "$r" nmt-serial "decode_b${beam}_sent_s" \
        "$(sed -nE 's/.*translated [0-9]+ sentences .* ([0-9.]+) sentences\/s.*/\1/p' "$work/nmt-serial-b$beam.log")"
      record "$r" both "decode_b${beam}_serial_same_lines" \
        "$(paste -d '\t' "$work/nmt-b$beam.out" "$work/nmt-serial-b$beam.out" | awk -F'\t' '$1 == $2' | wc -l)"
      # The approximate decoding options, each on its own and together (int8 on the CPU only);
      # on a GPU also greedy steps run eagerly instead of replayed as CUDA graphs ("eager").
      local variant flags
      for variant in int8 bf16 shortlist int8-shortlist bf16-shortlist eager; do
        [[ ($variant == *int8* || $variant == *bf16*) && $dev != cpu ]] && continue
        [[ $variant == eager && $dev == cpu ]] && continue
        flags=()
        [[ $variant == eager ]] && flags+=(--no-cuda-graphs)
        [[ $variant == *int8* ]] && flags+=(--int8)
        [[ $variant == *bf16* ]] && flags+=(--bf16)
        [[ $variant == *shortlist* ]] && flags+=(--shortlist "$lex")
        "$bin/nmt-translate" -m "$ckpt" -b "$beam" "${flags[@]}" --threads "$threads" --device "$dev" \
          -i "$work/val.en" -o "$work/nmt-$variant-b$beam.out" 2>"$work/nmt-$variant-b$beam.log"
        record "$r" "nmt-$variant" "decode_b${beam}_sent_s" \
          "$(sed -nE 's/.*translated [0-9]+ sentences .* ([0-9.]+) sentences\/s.*/\1/p' "$work/nmt-$variant-b$beam.log")"
        record "$r" both "decode_b${beam}_${variant}_same_lines" \
          "$(paste -d '\t' "$work/nmt-b$beam.out" "$work/nmt-$variant-b$beam.out" | awk -F'\t' '$1 == $2' | wc -l)"
      done
    fi
    j=$(NMT_BENCH_DEVICE=$dev "$bin/nmt-bench-step" decode "$threads" 64 16 "$beam" 10 "$ckpt")
    record "$r" nmt "decode_fixed_b${beam}_sent_s" "$(field "$j" sentences_per_s)"
    j=$(NMT_BENCH_DEVICE=$dev NMT_BENCH_REFERENCE=1 "$bin/nmt-bench-step" decode "$threads" 64 16 "$beam" 10 "$ckpt")
    record "$r" nmt-plain "decode_fixed_b${beam}_sent_s" "$(field "$j" sentences_per_s)"
    if [[ $dev != cpu ]]; then  # search steps eagerly instead of replayed as CUDA graphs
      j=$(NMT_BENCH_DEVICE=$dev NMT_BENCH_NO_CUDA_GRAPHS=1 "$bin/nmt-bench-step" decode "$threads" 64 16 "$beam" 10 "$ckpt")
      record "$r" nmt-eager "decode_fixed_b${beam}_sent_s" "$(field "$j" sentences_per_s)"
    fi
    j=$("${pyenv[@]}" "$py" "$ref" decode-fixed --threads "$threads" --device "$dev" -m "$ckpt" --batch 64 --src-len 16 --beam "$beam" --steps 10)
    record "$r" pytorch "decode_fixed_b${beam}_sent_s" "$(field "$j" sentences_per_s)"
  done
done

# Contention (CPU): nmt-train beside one busy single-threaded process.
if [[ $dev == cpu ]] && ((text_rows && train_rows)); then
  "$py" -c "while True: pass" &
  local busy=$!
  rm -rf "$work/nmt-train"
  "$bin/nmt-train" "${common[@]}" -o "$work/nmt-train" --max-epochs 1 --src-spm "$src_spm" --tgt-spm "$tgt_spm" \
    2>"$work/nmt-train-busy.log"
  rm -rf "$work/nmt-train"
  "$bin/nmt-train" "${common[@]}" -o "$work/nmt-train" --max-epochs 1 --src-spm "$src_spm" --tgt-spm "$tgt_spm" \
    --fixed-threads 2>"$work/nmt-train-busy-fixed.log"
  kill "$busy"
  record 0 nmt train_corpus_tok_s_beside_busy \
    "$(grep "training finished" "$work/nmt-train-busy.log" | sed -E 's/.* steps, ([0-9.]+) target tokens\/s.*/\1/')"
  record 0 nmt train_corpus_tok_s_beside_busy_fixed_threads \
    "$(grep "training finished" "$work/nmt-train-busy-fixed.log" | sed -E 's/.* steps, ([0-9.]+) target tokens\/s.*/\1/')"
fi

local sgemm flops
local sgemm_size=()
[[ $dev == cpu ]] || sgemm_size=(--n 8192)
sgemm=$("${pyenv[@]}" "$py" "$ref" sgemm --threads "$threads" --device "$dev" "${sgemm_size[@]}")
local decoding=()
[[ -f $ckpt ]] && decoding=(-m "$ckpt")  # decoding's products, with that model's sizes
flops=$("$py" "$ref" flops --src-len 14 --tgt-len 15 "${decoding[@]}")  # Multi30k's mean pieces per sentence, about

local commit host
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- src apps bench || commit=$commit-dirty
host=$(hostname -s)
mkdir -p bench/results
local name=vs-pytorch
[[ $dev == cpu ]] || name=vs-pytorch-$dev
"$py" bench/vs_pytorch_report.py "$tsv" "$sgemm" "$flops" "$threads" "$commit" "$host" "$pairs" "$nvalid" "$ckpt" \
  "bench/results/$name-$host-$commit.json" "$("$bin/nmt-train" --version)"
}

main "$@"; exit  # on one line: bash reads no further, so editing the file during a run is safe
