#!/usr/bin/env bash
# Data-parallel nmt-train on one machine: starts N ranks joined by c10d
# (Gloo) on loopback, the way torchrun would, and waits for all of them.
# Rank 0 logs, validates and writes checkpoints; every rank trains on its
# own share of each step's batches (one step = N batches). Ctrl-C reaches
# every rank: they stop together and rank 0 saves last.ckpt.
#
#   scripts/train-distributed.sh N [nmt-train options...]
#   scripts/train-distributed.sh 2 --config configs/demo.toml -o runs/demo-dp --threads 1
#
# On CUDA each rank uses cuda:LOCAL_RANK. Several machines: run nmt-train
# once per process on every machine with RANK (global), LOCAL_RANK,
# WORLD_SIZE (all processes), MASTER_ADDR (rank 0's host, reachable from all)
# and MASTER_PORT set, e.g. on the second of two 4-GPU machines:
#   RANK=4..7 LOCAL_RANK=0..3 WORLD_SIZE=8 MASTER_ADDR=host0 MASTER_PORT=29500 nmt-train ...
# (torchrun --nnodes 2 --nproc-per-node 4 --no-python nmt-train ... sets the
# same variables). GLOO_SOCKET_IFNAME picks the network interface.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] && [ "$1" -ge 1 ] 2>/dev/null || { echo "usage: $0 N [nmt-train options...]" >&2; exit 2; }
n=$1; shift
bin=${NMT_BUILD_DIR:-build}
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
export MASTER_PORT=${MASTER_PORT:-$((29500 + RANDOM % 1000))}
export WORLD_SIZE=$n
pids=()
trap 'kill -INT "${pids[@]}" 2>/dev/null || true' INT TERM
for ((r = 0; r < n; r++)); do
  RANK=$r LOCAL_RANK=$r "$bin/nmt-train" "$@" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do
  while true; do
    wait "$p" && break
    rc=$?
    kill -0 "$p" 2>/dev/null && continue  # wait was interrupted by the trap: keep waiting
    status=$rc; break
  done
done
exit "$status"
