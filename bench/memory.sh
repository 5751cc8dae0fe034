#!/usr/bin/env bash
# Peak memory of nmt-translate on ordinary and on hostile input: streaming,
# the per-line byte cap (--max-line-bytes) and the early refusal of binary
# input keep it bounded whatever arrives. Cases, each under GNU time:
#   - N ordinary lines cycling through data/demo/test.src (default 1000 10000 100000)
#   - one line of 200 MB (cropped to --max-line-bytes, then to --max-input-length pieces)
#   - head -c 1G /dev/zero on stdin (refused at its first byte: exit 1)
# Outputs go to a temporary folder, never onto a device.
#   bench/memory.sh MODEL.ckpt [LINES...]
# Writes bench/results/memory-<host>-<commit>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/memory.sh MODEL.ckpt [LINES...]}
shift
sizes=("$@")
((${#sizes[@]})) || sizes=(1000 10000 100000)
bin=${NMT_BUILD_DIR:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p bench/results
out=bench/results/memory-$(hostname)-$(git rev-parse --short HEAD).txt

# measure LABEL INPUT_FILE: one nmt-translate run, one result line.
first=""
measure() {
  local label=$1 input=$2 stats rss secs code
  stats=$( { /usr/bin/time -v "$bin/nmt-translate" -m "$model" -o "$work/out.txt" < "$input" 2>&1; } || true)
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' <<<"$stats")
  secs=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' <<<"$stats")
  code=$(sed -n 's/.*Exit status: //p' <<<"$stats")
  [[ -n $first ]] || first=$rss
  printf '%-28s peak_rss_mib %6d   x_first %4.2f   exit %s   wall %s\n' "$label" $((rss / 1024)) \
    "$(awk -v a="$rss" -v b="$first" 'BEGIN { printf "%.2f", a / b }')" "$code" "$secs"
}

{
  echo "# nmt-translate peak RSS (GNU time): ordinary and hostile input; greedy, defaults (--window 1000, --max-line-bytes 65536), ${NMT_THREADS:-$(nproc)} threads"
  echo "# model $model; commit $(git rev-parse --short HEAD), $(date -u +%F), host $(hostname), $(nproc) cores"
  for n in "${sizes[@]}"; do
    yes "$(paste -sd '\n' data/demo/test.src)" | head -n "$n" > "$work/in.txt" || true
    measure "$n lines" "$work/in.txt"
  done
  { yes 'a small city liked him on the kings yesterday' | tr '\n' ' ' | head -c 200000000 || true; echo; } > "$work/in.txt"
  measure "one 200 MB line" "$work/in.txt"
  rm -f "$work/in.txt"
  measure "head -c 1G /dev/zero" <(head -c 1G /dev/zero)
} | tee "$out"
echo "written: $out"
