# The training steps of scripts/gpu.sh (sourced by it; not a command): the
# Multi30k single model (multi30k), the whole Multi30k recipe (recipe) and
# guided alignment on Hansards (hansards). Each is called from the project
# root with the build folder, the output folder, the device, (the data,) and
# the seconds it may take, and uses gpu.sh's deps_env.
# shellcheck shell=bash
multi30k_step() {
  local build=$1 out=$2 device=$3 data=$4 budget=$5
  deps_env
  local flags="--device $device"  # the rest is the config's recipe
  [[ ${NMT_GPU_TINY:-0} == 1 ]] &&
    flags="--device $device --max-epochs 2 --emb-dim 32 --enc-hidden 32 --dec-hidden 64 --attn-dim 64"
  local rc=0
  NMT_BUILD_DIR=$build NMT_RUN=runs/gpu-multi30k NMT_TRAIN_FLAGS=$flags \
    timeout --signal=TERM "$budget" scripts/multi30k.sh "$data" en-de tok >"$out/multi30k.log" 2>&1 || rc=$?
  cp runs/gpu-multi30k/model-1/metrics.jsonl runs/gpu-multi30k/model-1/training-curves.svg "$out/" 2>/dev/null || true
  if ((rc == 0)); then
    local result
    result=$(sed -n 's/^wrote //p' "$out/multi30k.log" | tail -n1)
    [[ -n $result ]] && mv "$result" "$out/"  # the device's result: committed from $OUT, not left here
    echo "multi30k: finished; $(grep -h 'selected on val' "$out/multi30k.log")" | tee -a "$out/steps.log"
  else
    echo "multi30k: stopped (exit $rc) at $(tail -n1 runs/gpu-multi30k/model-1/metrics.jsonl 2>/dev/null |
      cut -c1-80); run the step again to resume" | tee -a "$out/steps.log"
  fi
}

# The whole Multi30k recipe on the device for the pair NMT_GPU_PAIR (en-de, or
# en-fr: the same recipe on the second pair), models and translations
# NMT_GPU_JOBS (3) at a time, within $5 seconds; a later call resumes it. Each
# call's wall time goes to the run's calls.tsv (and $out), whose sum is the
# recipe's. The run: runs/gpu-recipe (en-de), runs/gpu-recipe-en-fr.
recipe_step() {
  local build=$1 out=$2 device=$3 data=$4 budget=$5 pair=${NMT_GPU_PAIR:-en-de}
  [[ $pair == en-de || $pair == en-fr ]] || { echo "gpu.sh: NMT_GPU_PAIR must be en-de or en-fr, got '$pair'" >&2; return 2; }
  local run=runs/gpu-recipe tag=recipe
  [[ $pair == en-de ]] || run=runs/gpu-recipe-$pair tag=recipe-$pair
  deps_env
  local flags="--device $device ${NMT_GPU_TRAIN_FLAGS:-}"
  # tiny: a rate high enough that the teachers say something in 4 epochs (at the
  # config's 1e-3 their best checkpoint, by BLEU 0 throughout, was the first, which
  # says nothing, and the students then had no training pairs)
  [[ ${NMT_GPU_TINY:-0} == 1 ]] &&
    flags="$flags --max-epochs 4 --learning-rate 0.01 --batch-sentences 8 --emb-dim 32 --enc-hidden 32 --dec-hidden 64 --attn-dim 64"
  mkdir -p "$run"
  local rc=0 t0=$SECONDS
  NMT_BUILD_DIR=$build NMT_RUN=$run NMT_TRAIN_FLAGS=$flags NMT_JOBS=${NMT_GPU_JOBS:-3} \
    NMT_SEEDS=3 NMT_DISTILL=1 NMT_R2L=2 \
    timeout --signal=TERM "$budget" scripts/multi30k.sh "$data" "$pair" tok >>"$out/$tag.log" 2>&1 || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "${NMT_GPU_COMMIT:-unknown}" "$((SECONDS - t0))" "$rc" >>"$run/calls.tsv"
  cp "$run/calls.tsv" "$out/$tag-calls.tsv" 2>/dev/null || true
  for f in "$run"/select/selection*.tsv; do [[ -f $f ]] && cp "$f" "$out/$tag-$(basename "$f")"; done
  for m in "$run"/*/metrics.jsonl; do [[ -f $m ]] && cp "$m" "$out/$tag-$(basename "$(dirname "$m")")-metrics.jsonl"; done
  local total
  total=$(awk -F'\t' '{s += $3} END {print s}' "$run/calls.tsv")
  if ((rc == 0)); then
    local result
    result=$(sed -n 's/^wrote //p' "$out/$tag.log" | tail -n1)
    [[ -n $result ]] && mv "$result" "$out/"
    echo "$tag: finished in $total s over $(wc -l <"$run/calls.tsv") call(s); $(grep -h 'selected on val' "$out/$tag.log" | tail -n1)" |
      tee -a "$out/steps.log"
  elif ((rc == 124)); then
    echo "$tag: cut at the deadline after $total s in all; $(find "$run" -mindepth 2 -maxdepth 2 -name trained | wc -l) models" \
      "trained; run the step again to resume" | tee -a "$out/steps.log"
  else
    echo "$tag: failed (exit $rc; $out/$tag.log): $(tail -n1 "$out/$tag.log")" | tee -a "$out/steps.log"
  fi
}

# Guided alignment on Hansards (the GPU issue's alignment target: attention AER
# <= 0.16 on the trial set): en-fr guided by the ibm2 links (weight 3), en-fr
# and fr-en with alignment heads that the same links train (weight 1), and a
# plain fr-en (for the symmetrized rows) train side by side on the device for
# NMT_GPU_HANSARDS_STEPS steps each (a budget of steps, so the result does not
# depend on the machine's speed; the step's time limit only saves and stops a
# run that would overrun it), then scripts/hansards_align.sh scores every
# extraction method on the trial set.
hansards_step() {
  local build=$1 out=$2 device=$3 budget=$4 run=runs/gpu-hansards data=.gpu-data/hansards
  deps_env
  [[ ${NMT_GPU_TINY:-0} == 1 ]] && data=.gpu-data/hansards-tiny
  local steps=${NMT_GPU_HANSARDS_STEPS:-5000} t0=$SECONDS f
  [[ ${NMT_GPU_TINY:-0} == 1 ]] && steps=${NMT_GPU_HANSARDS_STEPS:-60}
  local flags=(--device "$device" --max-steps "$steps" --max-epochs 20 --batch-tokens 6000 --batch-sentences 256)
  if [[ ${NMT_GPU_TINY:-0} == 1 ]]; then
    flags+=(--emb-dim 16 --enc-hidden 16 --dec-hidden 32 --attn-dim 32 --vocab-size 500 --valid-every 20 --log-every 10)
  else
    flags+=(--valid-every 2000 --log-every 500)
  fi
  mkdir -p "$run"
  for f in train.en train.fr train.gdfa; do [[ -s $run/$f ]] || zcat "$data/$f.gz" >"$run/$f"; done
  cp "$data"/valid.* "$run/"
  local limit=$((budget - 60)) pids=() rc=0
  ((limit > 30)) || { echo "hansards: no time left to train" | tee -a "$out/steps.log"; return 0; }
  train_hansards() {  # NAME SRC TGT [flags...]
    local name=$1 s=$2 t=$3 resume=()
    shift 3
    [[ -f $run/$name/last.ckpt ]] && resume=(--resume)
    timeout --signal=TERM "$limit" "$build/nmt-train" --config configs/hansards-en-fr.toml -o "$run/$name" \
      --train-src "$run/train.$s" --train-tgt "$run/train.$t" --valid-src "$run/valid.$s" --valid-tgt "$run/valid.$t" \
      "${flags[@]}" "${resume[@]}" "$@" 2>"$out/hansards-$name.log"
  }
  train_hansards en-fr-guided-w3 en fr --guided-alignment "$run/train.gdfa" --guided-alignment-weight 3 & pids+=($!)
  local head=256
  [[ ${NMT_GPU_TINY:-0} == 1 ]] && head=16
  [[ -s $run/train.gdfa.fr-en ]] || sed -E 's/([0-9]+)-([0-9]+)/\2-\1/g' "$run/train.gdfa" >"$run/train.gdfa.fr-en"
  train_hansards en-fr-head en fr --guided-alignment "$run/train.gdfa" --guided-alignment-weight 1 \
    --alignment-head $head & pids+=($!)
  train_hansards fr-en-head fr en --guided-alignment "$run/train.gdfa.fr-en" --guided-alignment-weight 1 \
    --alignment-head $head & pids+=($!)
  train_hansards fr-en fr en & pids+=($!)
  for f in "${pids[@]}"; do wait "$f" || rc=$?; done
  for f in en-fr-guided-w3 en-fr-head fr-en-head fr-en; do
    echo "hansards: $f: $(grep -h 'training finished' "$out/hansards-$f.log" || tail -n1 "$out/hansards-$f.log")" |
      tee -a "$out/steps.log"
  done
  NMT_BUILD_DIR=$build NMT_HANSARDS_RUN=$run NMT_HANSARDS_IBM=0 NMT_DEVICE=$device NMT_HANSARDS_CKPT=last.ckpt \
    NMT_HANSARDS_RESULT="$out/hansards-aer.txt" scripts/hansards_align.sh "$data" >"$out/hansards-align.log" 2>&1 || rc=$?
  echo "hansards: exit $rc, $((SECONDS - t0)) s; $(grep -E '(guided \(weight 3\) attention|alignment heads?), (argmax|threshold 0.3|argmax, grow-diag-final-and) \|' \
    "$out/hansards-aer.txt" 2>/dev/null | paste -sd ';')" | tee -a "$out/steps.log"
}
