#!/usr/bin/env bash
# Decoding speed of several nmt builds side by side, in interleaved rounds:
# nmt-translate on the first N val sentences (greedy and beam 5) and
# nmt-bench-step's fixed shape (64 sentences x 16 pieces, greedy and beam 5),
# each build's lines compared with the first build's. For measuring a change
# against the commit before it: build each into its own folder first.
#
#   bench/decode-ab.sh CHECKPOINT BUILD_DIR... > results.txt
#
# Environment: NMT_THREADS (all cores), NMT_ROUNDS (3), NMT_BENCH_VALID (500),
# MULTI30K (../shared/data/multi30k; the tokenized val source is read). Each
# BUILD_DIR holds nmt-translate, nmt-bench-step and libnmt_spm.so. Prints every
# measurement, then the medians and each build's ratio to the first. Nothing
# else may run meanwhile: every figure is a rate.
set -euo pipefail

main() {
  (($# >= 2)) || { echo "usage: bench/decode-ab.sh CHECKPOINT BUILD_DIR..." >&2; exit 2; }
  local ckpt=$1 threads=${NMT_THREADS:-$(nproc)} rounds=${NMT_ROUNDS:-3} n=${NMT_BENCH_VALID:-500}
  shift
  local data=${MULTI30K:-../shared/data/multi30k} dir
  [[ -f $ckpt ]] || { echo "decode-ab.sh: no checkpoint $ckpt" >&2; exit 1; }
  for dir in "$@"; do
    [[ -x $dir/nmt-translate && -x $dir/nmt-bench-step ]] ||
      { echo "decode-ab.sh: $dir lacks nmt-translate or nmt-bench-step" >&2; exit 1; }
  done
  local work
  work=$(mktemp -d)
  trap "rm -rf '$work'" EXIT
  head -n "$n" "$data/val.lc.norm.tok.en" >"$work/val.en"
  echo "checkpoint $ckpt; $n val sentences; $threads threads; $rounds rounds; $(date -u +%FT%TZ)"
  echo "round	build	row	value	same_lines_as_first"
  local r i beam line rate same
  for ((r = 1; r <= rounds; r++)); do
    for beam in 1 5; do
      i=0
      for dir in "$@"; do
        line=$("$dir/nmt-translate" -m "$ckpt" -b "$beam" --threads "$threads" -i "$work/val.en" \
                 -o "$work/out-$i-b$beam.txt" 2>&1 | grep "sentences/s")
        rate=$(sed -nE 's/.* ([0-9.]+) sentences\/s.*/\1/p' <<<"$line")
        same=$(paste -d '\t' "$work/out-0-b$beam.txt" "$work/out-$i-b$beam.txt" | awk -F'\t' '$1 == $2' | wc -l)
        printf '%s\t%s\tval_b%s_sent_s\t%s\t%s\n' "$r" "$dir" "$beam" "$rate" "$same"
        i=$((i + 1))
      done
      for dir in "$@"; do
        rate=$("$dir/nmt-bench-step" decode "$threads" 64 16 "$beam" 10 "$ckpt" |
                 sed -nE 's/.*"sentences_per_s":([0-9.]+).*/\1/p')
        printf '%s\t%s\tfixed_b%s_sent_s\t%s\t\n' "$r" "$dir" "$beam" "$rate"
      done
    done
  done | tee "$work/rows.tsv"
  echo
  python3 - "$work/rows.tsv" "$@" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
builds = sys.argv[2:]
print("medians (sentences/s) and ratio to " + builds[0] + ":")
for row in sorted({r[2] for r in rows}):
    base = None
    for b in builds:
        vals = [float(r[3]) for r in rows if r[1] == b and r[2] == row]
        med = statistics.median(vals)
        base = base or med
        print(f"  {row:18s} {b:40s} {med:9.2f}  {med / base:5.2f}x")
PY
}

main "$@"
exit
