#!/usr/bin/env bash
# nmt-translate alone and beside one busy single-threaded process, greedy and
# beam 5: 2 threads with --parallel-batches 0 (one batch per thread) and 1
# (one batch at a time over both threads), and --threads 1. Interleaved
# rounds; prints every rate (sentences/s, from nmt-translate's summary line)
# and the medians, and checks that the outputs of every row are the same.
#
#   bench/translate-contention.sh MODEL INPUT [ROUNDS]     (default 3)
#
# Environment: NMT_BUILD_DIR (build). Nothing else may run meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/translate-contention.sh MODEL INPUT [ROUNDS]}
input=${2:?usage: bench/translate-contention.sh MODEL INPUT [ROUNDS]}
rounds=${3:-3}
bin=${NMT_BUILD_DIR:-build}
work=$(mktemp -d)
busy=""
cleanup() {
  [[ -n $busy ]] && kill "$busy" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

rate() {  # rate NAME BEAM FLAGS...: one run; prints its sentences/s
  local name=$1 beam=$2
  shift 2
  "$bin/nmt-translate" -m "$model" -b "$beam" -i "$input" -o "$work/$name-b$beam.out" "$@" 2>"$work/log"
  sed -nE 's/.*translated [0-9]+ sentences .* ([0-9.]+) sentences\/s.*/\1/p' "$work/log"
}

declare -A runs
rows=("pb0:--threads 2 --parallel-batches 0" "pb1:--threads 2 --parallel-batches 1" "t1:--threads 1")
for load in alone busy; do
  if [[ $load == busy ]]; then
    python3 -c "while True: pass" &
    busy=$!
    sleep 1
  fi
  for ((r = 1; r <= rounds; r++)); do
    for row in "${rows[@]}"; do
      name=${row%%:*}
      read -ra flags <<<"${row#*:}"
      for beam in 1 5; do
        v=$(rate "$load-$name" "$beam" "${flags[@]}")
        runs[$load-$name-$beam]+="$v "
        echo "round $r $load $name beam $beam: $v sentences/s" >&2
      done
    done
  done
  if [[ $load == busy ]]; then
    kill "$busy"
    busy=""
  fi
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "rows: pb0 = --threads 2 --parallel-batches 0 (default), pb1 = --threads 2 --parallel-batches 1, t1 = --threads 1"
printf '%-22s %-28s %-28s\n' "" "greedy (runs; median)" "beam 5 (runs; median)"
for load in alone busy; do
  for row in "${rows[@]}"; do
    name=${row%%:*}
    line=$(printf '%-22s' "$load, $name")
    for beam in 1 5; do
      line+=$(printf ' %-28s' "${runs[$load-$name-$beam]}; $(median <<<"${runs[$load-$name-$beam]}")")
    done
    echo "$line"
  done
done
same=1
for f in "$work"/*-b1.out; do cmp -s "$f" "$work/alone-pb0-b1.out" || same=0; done
for f in "$work"/*-b5.out; do cmp -s "$f" "$work/alone-pb0-b5.out" || same=0; done
echo "outputs of every row identical: $((same == 1 ? 1 : 0))"
