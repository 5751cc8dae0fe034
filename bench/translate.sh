#!/usr/bin/env bash
# Translation speed: sentences/s of nmt-translate, greedy and beam 5, on the
# Multi30k test_2016_flickr English source, with a Multi30k en->de model.
#   bench/translate.sh MODEL.ckpt [DEVICE] [THREADS] [ROUNDS]
#   bench/translate.sh runs/multi30k-en-de/best.ckpt cpu 2 3
# Multi30k comes from $MULTI30K (default ../shared/data/multi30k). Writes
# bench/results/translate-<device>-<host>-<commit>.txt with the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/translate.sh MODEL.ckpt [DEVICE] [THREADS] [ROUNDS]}
device=${2:-cpu}
threads=${3:-$(nproc)}
rounds=${4:-3}
data=${MULTI30K:-../shared/data/multi30k}
bin=${NMT_BUILD_DIR:-build}
work=$(mktemp -d)  # inputs and outputs live here: nothing is written onto a device
trap 'rm -rf "$work"' EXIT
src=$work/test.en
zcat "$data/test_2016_flickr.en.gz" > "$src"
n=$(wc -l < "$src")
tmp=$work/runs.txt
for ((r = 0; r < rounds; r++)); do
  for beam in 1 5; do
    # The tool's own summary line gives wall time including model loading.
    line=$("$bin/nmt-translate" -m "$model" --device "$device" --threads "$threads" -b "$beam" \
             --batch-sentences 64 -i "$src" -o "$work/out.txt" 2>&1 | grep "sentences/s")
    echo "$beam $(sed -n 's/.*: \([0-9.]*\) sentences\/s.*/\1/p' <<<"$line")" >> "$tmp"
  done
done
mkdir -p bench/results
out=bench/results/translate-$device-$(hostname)-$(git rev-parse --short HEAD).txt
{
  echo "# nmt-translate on Multi30k test_2016_flickr ($n sentences, en->de), batch 64, device $device, threads $threads"
  echo "# model $model; commit $(git rev-parse --short HEAD), $(date -u +%F), host $(hostname), $(nproc) cores"
  echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p'); median of $rounds interleaved rounds (wall time incl. model load)"
  python3 - "$tmp" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    beam, sps = line.split()
    runs.setdefault(int(beam), []).append(float(sps))
for beam in sorted(runs):
    name = "greedy" if beam == 1 else f"beam {beam}"
    print(f"{name:<8} median {statistics.median(runs[beam]):8.1f} sentences/s   runs {runs[beam]}")
PY
} | tee "$out"
echo "written: $out"
