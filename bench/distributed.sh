#!/usr/bin/env bash
# Data-parallel scaling on this machine: the demo configuration trained for a
# fixed number of steps as 1 process with all cores, then as N processes
# (scripts/train-distributed.sh) sharing the cores, each run ROUNDS times,
# interleaved. Reports target tokens/s (the "training finished" figure:
# steps' tokens over training time, validation excluded) and the ratio.
#   bench/distributed.sh [N=2] [STEPS=300] [ROUNDS=3]
# Writes bench/results/distributed-<host>-<commit>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2} steps=${2:-300} rounds=${3:-3}
bin=${NMT_BUILD_DIR:-build}
cores=$(nproc)
per_rank=$(( cores / n > 0 ? cores / n : 1 ))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--config configs/demo.toml --max-steps "$steps" --valid-every 0 --max-epochs 100 --keep-checkpoints 0 --log-every 100000)
speed() { sed -n 's/.*training finished ([a-z_]*): [0-9]* steps, \([0-9]*\) target tokens\/s.*/\1/p' "$1"; }
one=() many=()
for ((k = 1; k <= rounds; k++)); do
  rm -rf "$tmp/one" "$tmp/many"
  "$bin/nmt-train" "${common[@]}" -o "$tmp/one" --threads "$cores" 2> "$tmp/one.log"
  one+=("$(speed "$tmp/one.log")")
  scripts/train-distributed.sh "$n" "${common[@]}" -o "$tmp/many" --threads "$per_rank" 2> "$tmp/many.log"
  many+=("$(speed "$tmp/many.log")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
m1=$(median "${one[@]}") mn=$(median "${many[@]}")
out=bench/results/distributed-$(hostname -s)-$(git rev-parse --short HEAD).txt
mkdir -p bench/results
{
  echo "# data-parallel scaling, configs/demo.toml, $steps steps per run, $rounds interleaved rounds"
  echo "# commit $(git rev-parse --short HEAD), $(hostname -s), $cores cores, $(date -u +%F)"
  echo "1 process x $cores threads: target tokens/s ${one[*]} (median $m1)"
  echo "$n processes x $per_rank threads (Gloo, loopback): target tokens/s ${many[*]} (median $mn)"
  awk -v a="$mn" -v b="$m1" 'BEGIN {printf "ratio %d processes / 1 process: %.2fx\n", '"$n"', a / b}'
} | tee "$out"
echo "written: $out"
