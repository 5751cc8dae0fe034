#!/usr/bin/env bash
# nmt-serve under load against nmt-translate on the same sentences: N
# clients at once on 127.0.0.1 (bench/serve_load.py; one sentence per
# request), N = 1, 8 and 64, each ROUNDS times interleaved with
# nmt-translate over the whole file in one process; medians of sentences/s,
# p50/p99 latency, the ratio to nmt-translate, whether the outputs are the
# same, and a burst of 64 clients on a server with a queue of 8 sentences
# (--queue-sentences 8 --max-sentences 8), which must refuse some with 503 and
# fail none. The server's resident memory (VmRSS) after the warm-up and after
# each round shows whether it stays flat over thousands of requests.
#   bench/serve-load.sh MODEL.ckpt SENTENCES [ROUNDS] [BEAM]   (ROUNDS 3, BEAM 1)
# Environment: NMT_BUILD_DIR (build), NMT_THREADS (all cores). The clients
# run on the same machine as the server, as they would beside it. Nothing
# else may run meanwhile: every figure is a rate. Prints the table; the
# caller keeps it (bench/results/serve-load-HOST-COMMIT.txt).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 MODEL.ckpt SENTENCES [ROUNDS] [BEAM]" >&2
  exit 2
fi
model=$1 sentences=$2 rounds=${3:-3} beam=${4:-1}
bin=${NMT_BUILD_DIR:-build}
threads=${NMT_THREADS:-$(nproc)}
py=${NMT_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

start_server() {  # start_server LOG [FLAGS...]: starts nmt-serve, sets $port to its port
  local log=$1
  shift
  "$bin/nmt-serve" -m "$model" --port 0 --threads "$threads" "$@" > /dev/null 2> "$log" &
  pids+=($!)
  for _ in $(seq 600); do
    if grep -q "listening on" "$log"; then
      port=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$log" | head -1)
      return
    fi
    sleep 0.1
  done
  echo "serve-load: nmt-serve did not start (see $log):" >&2
  cat "$log" >&2
  exit 1
}

rss_mib() {  # the resident memory of process $1 in MiB
  awk '/^VmRSS:/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"
}

start_server "$work/serve.log"
server=${pids[-1]}
lines=$(wc -l < "$sentences")
"$py" "$here/serve_load.py" "$port" "$sentences" 8 "$beam" > /dev/null  # warm-up
echo "warm-up $(rss_mib "$server")" >> "$work/rss"
for r in $(seq "$rounds"); do
  t0=$EPOCHREALTIME
  "$bin/nmt-translate" -m "$model" -b "$beam" --threads "$threads" -i "$sentences" -o "$work/translate.out" 2> /dev/null
  t1=$EPOCHREALTIME
  echo "translate $("$py" -c "print($lines / ($t1 - $t0))")" >> "$work/rates"
  for n in 1 8 64; do
    "$py" "$here/serve_load.py" "$port" "$sentences" "$n" "$beam" > "$work/load-$n.json"
    "$py" - "$work/load-$n.json" "$work/translate.out" "$n" >> "$work/rates" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want = open(sys.argv[2], encoding="utf-8").read().splitlines()
same = sum(a == b for a, b in zip(d["outputs"], want))
print(f"serve{sys.argv[3]} {d['sentences_per_s']} {d['p50_ms']} {d['p99_ms']} {d['refused']} {d['failed']} {same}")
PY
  done
  echo "round-$r $(rss_mib "$server")" >> "$work/rss"
  echo "serve-load: round $r of $rounds done" >&2
done

start_server "$work/burst.log" --queue-sentences 8 --max-sentences 8 --batch-wait-ms 20
"$py" "$here/serve_load.py" "$port" "$sentences" 64 "$beam" > "$work/burst.json"

"$py" - "$work/rates" "$work/burst.json" "$lines" "$rounds" "$beam" "$work/rss" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, *vals = line.split()
    rows.setdefault(name, []).append([float(v) for v in vals])
lines, rounds, beam = int(sys.argv[3]), sys.argv[4], sys.argv[5]
base = statistics.median(r[0] for r in rows["translate"])
print(f"# {lines} sentences, beam {beam}, {rounds} rounds (medians); one sentence per request")
print(f"{'side':<12}{'sent/s':>10}{'vs translate':>14}{'p50 ms':>10}{'p99 ms':>10}{'refused':>9}{'failed':>8}{'same lines':>12}")
print(f"{'translate':<12}{base:>10.1f}{1.0:>14.3f}")
for n in ("1", "8", "64"):
    r = rows["serve" + n]
    med = lambda k: statistics.median(x[k] for x in r)
    print(f"{'serve x' + n:<12}{med(0):>10.1f}{med(0) / base:>14.3f}{med(1):>10.1f}{med(2):>10.1f}"
          f"{int(max(x[3] for x in r)):>9}{int(max(x[4] for x in r)):>8}{int(min(x[5] for x in r)):>7}/{lines}")
b = json.load(open(sys.argv[2]))
print(f"burst: 64 clients, --queue-sentences 8: {lines - b['refused'] - b['failed']} answered, "
      f"{b['refused']} refused with 503, {b['failed']} failed")
rss = [line.split() for line in open(sys.argv[6])]
print(f"server RSS over {3 * int(rounds) * lines + lines} requests (MiB): " + ", ".join(f"{k} {v}" for k, v in rss))
PY
