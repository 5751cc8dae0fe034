#!/usr/bin/env bash
# CPU kernel choices, measured against each other in one run (interleaved
# rounds, medians): nmt-train's target tokens/s on Multi30k batches and
# nmt-translate's greedy sentences/s on val, each
#   default    in the default environment (no OPENBLAS_CORETYPE: nmt keeps
#              OpenBLAS's own choice, or switches it to the widest family
#              when OpenBLAS picked narrower; base/blas_kernels.h)
#   best       with OPENBLAS_CORETYPE set to the widest family by hand
#   prescott   with OPENBLAS_CORETYPE=Prescott: what a CPU that OpenBLAS does
#              not know ran before nmt chose for it
# and training once more with --bf16 (default environment): bfloat16 products,
# float weights and loss.
#
#   bench/cpu-kernels.sh [ROUNDS] [DATA_DIR]    (default 3, ../shared/data/multi30k)
#
# Environment: NMT_BUILD_DIR (build), NMT_THREADS (all cores), NMT_BENCH_PAIRS
# (training pairs, 6000), NMT_BENCH_STEPS (training steps per run, 60),
# NMT_BENCH_VALID (val sentences to translate, 500). Writes
# bench/results/cpu-kernels-HOST-COMMIT.txt. Nothing else may run meanwhile:
# every figure is a rate.
set -euo pipefail

main() {
cd "$(dirname "$0")/.."
local rounds=${1:-3} data=${2:-../shared/data/multi30k}
local bin=${NMT_BUILD_DIR:-build} threads=${NMT_THREADS:-$(nproc)}
local pairs=${NMT_BENCH_PAIRS:-6000} steps=${NMT_BENCH_STEPS:-60} nvalid=${NMT_BENCH_VALID:-500}
local work=runs/cpu-kernels
for exe in nmt-train nmt-translate; do
  [[ -x $bin/$exe ]] || { echo "cpu-kernels.sh: build nmt first (scripts/build.sh): no $bin/$exe" >&2; exit 1; }
done
[[ -z ${OPENBLAS_CORETYPE:-} ]] || { echo "cpu-kernels.sh: unset OPENBLAS_CORETYPE first: the rows set it themselves" >&2; exit 1; }
mkdir -p "$work"
head -n "$pairs" <(zcat "$data/train.lc.norm.tok.en.gz") >"$work/train.en"  # (zcat's SIGPIPE is not ours)
head -n "$pairs" <(zcat "$data/train.lc.norm.tok.de.gz") >"$work/train.de"
head -n "$nvalid" "$data/val.lc.norm.tok.en" >"$work/val.en"

# The family nmt runs in the default environment, from --version.
local version best how
version=$(env -u NMT_OPENBLAS_CHOICE "$bin/nmt-train" --version)
best=$(sed -nE 's/^BLAS: .*, ([A-Za-z0-9_]+) kernels, (.*)\)$/\1/p' <<<"$version")
how=$(sed -nE 's/^BLAS: .*, ([A-Za-z0-9_]+) kernels, (.*)\)$/\2/p' <<<"$version")
[[ -n $best ]] || { echo "cpu-kernels.sh: the BLAS is not OpenBLAS:" >&2; echo "$version" >&2; exit 1; }

# Multi30k's model (configs/multi30k-en-de.toml) and batches; a model to translate with.
local common=(--config configs/multi30k-en-de.toml --threads "$threads" --device cpu --train-src "$work/train.en"
              --train-tgt "$work/train.de" --lr-decay-start 0 --average 0 --keep-checkpoints 0 --log-every 100000
              --valid-every 0)
if [[ ! -f $work/model/last.ckpt ]]; then
  rm -rf "$work/model"
  "$bin/nmt-train" "${common[@]}" -o "$work/model" --max-epochs 2 2>"$work/model.log"
fi
local tsv=$work/measurements.tsv
printf 'round\tside\trow\tvalue\n' >"$tsv"
# run_side SIDE COMMAND...: COMMAND in SIDE's environment.
run_side() {
  local side=$1
  shift
  case $side in
    default|bf16) env -u OPENBLAS_CORETYPE -u NMT_OPENBLAS_CHOICE "$@" ;;
    best) env -u NMT_OPENBLAS_CHOICE OPENBLAS_CORETYPE="$best" "$@" ;;
    prescott) env -u NMT_OPENBLAS_CHOICE OPENBLAS_CORETYPE=Prescott "$@" ;;
  esac
}
local r side
for ((r = 1; r <= rounds; r++)); do
  echo "round $r of $rounds" >&2
  for side in default best prescott bf16; do
    local flags=()
    [[ $side == bf16 ]] && flags=(--bf16)
    rm -rf "$work/train-$side"
    run_side "$side" "$bin/nmt-train" "${common[@]}" "${flags[@]}" -o "$work/train-$side" --max-steps "$steps" \
      --src-spm "$work/model/src.spm.model" --tgt-spm "$work/model/tgt.spm.model" 2>"$work/train-$side.log"
    printf '%s\t%s\ttrain_tok_s\t%s\n' "$r" "$side" \
      "$(sed -nE 's/.*training finished.* steps, ([0-9.]+) target tokens\/s.*/\1/p' "$work/train-$side.log")" >>"$tsv"
    [[ $side == bf16 ]] && continue
    run_side "$side" "$bin/nmt-translate" -m "$work/model/last.ckpt" --threads "$threads" -i "$work/val.en" \
      -o "$work/greedy-$side.out" 2>"$work/greedy-$side.log"
    printf '%s\t%s\tgreedy_sent_s\t%s\n' "$r" "$side" \
      "$(sed -nE 's/.*translated [0-9]+ sentences? .* ([0-9.]+) sentences\/s.*/\1/p' "$work/greedy-$side.log")" >>"$tsv"
  done
done

local out host commit
host=$(hostname -s)
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src apps || echo -dirty)
out=bench/results/cpu-kernels-$host-$commit.txt
{
  echo "CPU kernel choices, $rounds interleaved rounds, medians; nmt $commit on $host"
  echo "CPU: $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1), $(nproc) cores," \
       "flags: $(grep -m1 -o -E 'avx512_bf16|amx_bf16|avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "default environment: $best kernels, $how; threads $threads"
  echo "training: configs/multi30k-en-de.toml, $steps steps on the first $pairs tokenized pairs;" \
       "greedy: $nvalid val sentences"
  echo "command: NMT_THREADS=$threads NMT_BENCH_PAIRS=$pairs NMT_BENCH_STEPS=$steps NMT_BENCH_VALID=$nvalid" \
       "bench/cpu-kernels.sh $rounds $data"
  echo
  awk -F'\t' 'NR > 1 && $4 != "" { v[$3 "\t" $2] = v[$3 "\t" $2] " " $4 }
    function median(s,   a, n, i, j, t) {
      n = split(s, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
      split("train_tok_s greedy_sent_s", rows, " ")
      split("default best prescott bf16", sides, " ")
      printf "%-16s %10s %10s %10s %10s %14s %15s %12s\n", "row", "default", "best", "prescott", "bf16",
             "default/best", "best/prescott", "bf16/default"
      for (i = 1; i <= 2; i++) {
        for (k = 1; k <= 4; k++) m[k] = (rows[i] "\t" sides[k]) in v ? median(v[rows[i] "\t" sides[k]]) : ""
        printf "%-16s %10s %10s %10s %10s %14s %15s %12s\n", rows[i], m[1], m[2], m[3], m[4] == "" ? "-" : m[4],
               m[2] ? sprintf("%.3f", m[1] / m[2]) : "-", m[3] ? sprintf("%.2f", m[2] / m[3]) : "-",
               m[4] != "" && m[1] ? sprintf("%.2f", m[4] / m[1]) : "-"
      }
      print ""
      print "every measurement (round side row value):"
    }' "$tsv"
  tail -n +2 "$tsv"
} >"$out"
cat "$out"
echo "wrote $out" >&2
}

main "$@"; exit  # on one line: bash reads no further, so editing the file during a run is safe
