#!/usr/bin/env bash
# Measures one bidirectional-GRU training step (forward + backward, batch 64,
# 16 tokens, emb 256, hidden 512) under each Debian BLAS flavour and thread
# setting, to choose what scripts/setup.sh installs and what nmt's --threads
# does. Needs the flavours installed (this script installs them if missing).
#   bench/blas.sh [rounds]      # writes bench/results/blas-<host>-<commit>.txt
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
bin=${NMT_BUILD_DIR:-build}/nmt-bench-gru
[[ -x "$bin" ]] || scripts/build.sh
for p in libblas3 libopenblas0-pthread libopenblas0-openmp; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { apt-get install -y -qq "$p" >/dev/null; }
done
lib=/usr/lib/x86_64-linux-gnu
declare -A dirs=([reference]=$lib/blas [openblas-pthread]=$lib/openblas-pthread [openblas-openmp]=$lib/openblas-openmp)
configs=("reference 1 1" "openblas-pthread 1 1" "openblas-pthread 1 2" "openblas-pthread 2 1" "openblas-pthread 2 2"
         "openblas-openmp 1 1" "openblas-openmp 2 1" "openblas-openmp 2 2")
mkdir -p bench/results
out=bench/results/blas-$(hostname)-$(git rev-parse --short HEAD).txt
tmp=$(mktemp)
# Rounds interleave the configurations so drift in machine load hits all alike.
for ((r = 0; r < rounds; r++)); do
  for c in "${configs[@]}"; do
    read -r flavour tt bt <<<"$c"
    reps=20; [[ $flavour == reference ]] && reps=3
    ms=$(LD_LIBRARY_PATH=${dirs[$flavour]} OMP_NUM_THREADS=$tt "$bin" "$tt" "$bt" 64 16 256 512 $reps |
         sed -n 's/.*median_ms=//p')
    echo "$flavour $tt $bt $ms" >>"$tmp"
  done
done
{
  echo "# GRU forward+backward (bi-GRU, batch 64 x 16 tokens, emb 256, hidden 512), ms per step"
  echo "# commit $(git rev-parse --short HEAD), $(date -u +%F), host $(hostname), $(nproc) cores,"
  echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p'), libtorch $(dpkg-query -W -f='${Version}' libtorch-dev)"
  echo "# median over $rounds interleaved rounds (each round's figure is itself a median of 20 steps; 3 for reference)"
  printf '%-18s %13s %12s %10s %12s\n' flavour torch_threads blas_threads median_ms vs_best
  python3 - "$tmp" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    runs.setdefault(tuple(f[:3]), []).append(float(f[3]))
med = {k: statistics.median(v) for k, v in runs.items()}
best = min(med.values())
for k, m in sorted(med.items(), key=lambda kv: kv[1]):
    print(f"{k[0]:<18} {k[1]:>13} {k[2]:>12} {m:>10.2f} {m / best:>11.2f}x")
PY
} | tee "$out"
rm -f "$tmp"
echo "written: $out"
