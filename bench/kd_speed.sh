#!/bin/bash
# Word-level distillation's cost per training step: the Multi30k config's student with and without
# --kd-teachers (the three teachers of runs/bidiv), 100 steps each, alternated twice, 2 threads
# (bench/results/kd-speed-vm-f35e5fd.txt). Run from the project root once runs/bidiv has its teachers;
# B names the build folder (default build). Writes only /tmp/kdbench-*.
set -e
B=${B:-build}
R=runs/bidiv
for rep in 1 2; do
  for kd in 0 3; do
    out=/tmp/kdbench-$kd-$rep; rm -rf $out
    flags=()
    [ $kd = 3 ] && flags=(--kd-teachers $R/model-1/best.ckpt $R/model-2/best.ckpt $R/model-3/best.ckpt --kd-weight 0.5)
    $B/nmt-train --config configs/multi30k-en-de.toml -o $out --seed 4 --threads 2 --fixed-threads \
      --train-src $R/data/train.en --train-tgt $R/data/train.de --valid-src $R/data/val.en --valid-tgt $R/data/val.de \
      --src-spm $R/model-1/src.spm.model --tgt-spm $R/model-1/tgt.spm.model --max-steps 100 --valid-every 1000 \
      --valid-max-sentences 16 "${flags[@]}" 2>&1 | grep "training finished" | sed "s/^/kd=$kd rep=$rep: /"
  done
done
