#!/usr/bin/env bash
# Peak memory of nmt-translate as the input grows: streaming keeps it flat.
#   bench/memory.sh MODEL.ckpt [LINES...]     (default 1000 10000 100000)
# Input lines cycle through data/demo/test.src. Writes
# bench/results/memory-<host>-<commit>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/memory.sh MODEL.ckpt [LINES...]}
shift
sizes=("$@")
((${#sizes[@]})) || sizes=(1000 10000 100000)
bin=${NMT_BUILD_DIR:-build}
mkdir -p bench/results
out=bench/results/memory-$(hostname)-$(git rev-parse --short HEAD).txt
{
  echo "# nmt-translate peak RSS (GNU time) by input size; greedy, --window 1000, ${NMT_THREADS:-$(nproc)} threads"
  echo "# model $model; commit $(git rev-parse --short HEAD), $(date -u +%F), host $(hostname)"
  for n in "${sizes[@]}"; do
    in=$(mktemp)
    yes "$(paste -sd '\n' data/demo/test.src)" | head -n "$n" > "$in" || true
    stats=$( { /usr/bin/time -v "$bin/nmt-translate" -m "$model" -i "$in" -o /dev/null 2>&1; } |
             grep -E "Maximum resident|sentences/s")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' <<<"$stats")
    sps=$(sed -n 's/.*: \([0-9.]*\) sentences\/s.*/\1/p' <<<"$stats")
    printf 'lines %8d   peak_rss_mib %6d   sentences/s %s\n' "$n" $((rss / 1024)) "$sps"
    rm -f "$in"
  done
} | tee "$out"
echo "written: $out"
