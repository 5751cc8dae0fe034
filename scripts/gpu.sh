#!/usr/bin/env bash
# The GPU run: one command on the GPU host (no package registry there;
# ../shared does not travel) that builds, tests, compares CUDA with the CPU,
# trains Multi30k and benchmarks against PyTorch, inside one 10-minute limit.
# Every log and result goes under ${OUT:-gpu-results}; where $OUT is set (the
# device tool, which brings back at most 8 files), they are packed at the end
# into $OUT/gpu-results.tgz beside $OUT/steps.log.
#
# On this (CPU) machine, once:
#   scripts/gpu.sh prepare     # .gpu-deps (Debian libraries, ../shared/gpu/make-prefix.sh)
#                              # and .gpu-data (Multi30k's tokenized form, 500,000 Hansards pairs
#                              # with their ibm2 guide, tiny subsets)
#   NMT_GPU_BENCH_MODEL=runs/m30k/model-1 scripts/gpu.sh bench-model
#                              # .gpu-data/multi30k-model: that run's best.ckpt released (no
#                              # optimizer state) with its SentencePiece models, for the bench
#                              # step's decoding rows (without it they decode with a 2-epoch model)
# On the GPU host, from the project root, carrying .gpu-deps and .gpu-data:
#   NMT_GPU_COMMIT=$(git rev-parse --short HEAD) scripts/gpu.sh
#                              # = build bench cuda test multi30k; on an H100 (16 cores)
#                              # about 135 + 120 + 35 + 100 s, multi30k what is left
#   scripts/gpu.sh build hansards   # guided alignment on Hansards (a command of its own)
# Rehearsal here, on the CPU, with the existing build/ and a tiny corpus:
#   NMT_GPU_DEVICE=cpu NMT_GPU_BUILD=build NMT_GPU_TINY=1 scripts/gpu.sh test cuda bench multi30k hansards
#
# Steps:
#   build     cmake + ninja into build-gpu against python3's torch (LibTorch with CUDA)
#   test      the unit tests (ctest) of that build
#   cuda      CUDA against CPU with one checkpoint: the demo trained on the device,
#             greedy and beam-5 translations on both devices compared line by line
#   multi30k  scripts/multi30k.sh on the device (tok form, the config's recipe); stopped
#             150 s before the deadline (for the benchmark), it resumes in the next call
#   recipe    the whole recipe on the device, timed: NMT_SEEDS=3 NMT_DISTILL=1 NMT_R2L=2
#             scripts/multi30k.sh (three teachers, distillation, a student and two
#             right-to-left models, selection on val, test) with NMT_JOBS=3 (models and
#             translations three at a time); cut at the deadline, it resumes in the next
#             call, and runs/gpu-recipe/calls.tsv adds up each call's seconds.
#             NMT_GPU_TRAIN_FLAGS: more nmt-train flags (e.g. --cuda-graphs);
#             NMT_GPU_PAIR=en-fr: the same recipe on en-fr (runs/gpu-recipe-en-fr)
#   bench     bench/vs-pytorch.sh on the device against the host's python3 PyTorch
#             (fixed shapes at 64 and 256 sentences, and the Multi30k rows when that
#             Python has sentencepiece); NMT_GPU_BENCH_ROUNDS rounds (default 1);
#             NMT_GPU_PYTHON: that Python (default python3; in a CPU rehearsal
#             /usr/bin/python3, Debian's, which has torch)
#   hang      the CTest entry NMT_GPU_HANG alone for 30 s, then its stacks if still running
#             (hang-diagnosis.txt), as the test step does for its first entry unfinished at its limit
#   hansards  guided-alignment en-fr, en-fr and fr-en with alignment heads, and a plain
#             fr-en trained side by side on the device (NMT_GPU_HANSARDS_STEPS steps,
#             default 5,000), then every extraction method scored on the trial set (AER)
# NMT_GPU_SECONDS (default 560): the whole command's deadline; each step after
# the build is cut to what is left of it.
set -euo pipefail

main() {
cd "$(dirname "$0")/.."
local out=${OUT:-gpu-results}
local device=${NMT_GPU_DEVICE:-cuda}
local build=${NMT_GPU_BUILD:-build-gpu}
local deadline=$((SECONDS + ${NMT_GPU_SECONDS:-560}))
local data=.gpu-data/multi30k
[[ ${NMT_GPU_TINY:-0} == 1 ]] && data=.gpu-data/multi30k-tiny
mkdir -p "$out"
# shellcheck disable=SC2064  # $out expands now: the trap runs after main's locals are gone
[[ -n ${OUT:-} ]] && trap "pack $(printf %q "$out")" EXIT
(($#)) || set -- build bench cuda test multi30k
# The device host's copy of .git can be older than the tree that travels, so
# its binaries' --version may name another commit: the caller says which.
echo "== gpu.sh at commit ${NMT_GPU_COMMIT:-unknown (NMT_GPU_COMMIT unset)}: $*" | tee -a "$out/steps.log"
local later
for step in "$@"; do
  shift
  later=" $* "
  local left=$((deadline - SECONDS))
  echo "== gpu.sh $step ($(date -u +%H:%M:%S), $left s left)" | tee -a "$out/steps.log"
  if [[ $step != prepare && $step != bench-model && $step != build ]] && ((left < 20)); then
    echo "gpu.sh: no time left for $step" | tee -a "$out/steps.log"; continue
  fi
  case $step in
    prepare) prepare ;;
    bench-model) bench_model ;;
    build) build_step "$build" "$out" ;;
    test) test_step "$build" "$out" "$((left > 240 ? 240 : left))" ;;
    cuda) cuda_step "$build" "$out" "$device" "$((left > 120 ? 120 : left))" ;;
    bench)  # at most 240 s when steps follow it
      [[ -n ${later// /} ]] && ((left > 240)) && left=240
      bench_step "$build" "$out" "$device" "$data" "$left" ;;
    multi30k)  # a bench step after it keeps 150 s
      [[ $later == *" bench "* ]] && ((left > 300)) && left=$((left - 150))
      multi30k_step "$build" "$out" "$device" "$data" "$left" ;;
    recipe)  # a bench or test step after it keeps 150 s
      [[ $later == *" bench "* || $later == *" test "* ]] && ((left > 300)) && left=$((left - 150))
      recipe_step "$build" "$out" "$device" "$data" "$left" ;;
    hansards) hansards_step "$build" "$out" "$device" "$left" ;;
    headers) headers_step "$out" ;;
    hang) diagnose_hang "$build" "$out" "${NMT_GPU_HANG:?NMT_GPU_HANG: the CTest entry to run alone}" 30 ;;
    *) echo "gpu.sh: unknown step '$step' (prepare, bench-model, build, test, cuda, multi30k, recipe, bench, hansards, headers, hang)" >&2
       exit 2 ;;
  esac
done
}

# Everything under $1 into $1/gpu-results.tgz, steps.log and the headers' parts
# (headers_step) kept beside it.
pack() {
  local out=$1 tgz
  tgz=$(mktemp -d)/gpu-results.tgz
  tar czf "$tgz" -C "$out" --exclude='./cuda-headers.tar.xz.*' . &&
    find "$out" -mindepth 1 ! -name steps.log ! -name 'cuda-headers.tar.xz.*' -delete && mv "$tgz" "$out/"
}

# Ignored folders that travel to the GPU host with `carry`.
exclude() {
  local f
  f=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$f")"
  grep -qx "/$1/" "$f" 2>/dev/null || echo "/$1/" >>"$f"
}

# The prefix's shared libraries (Debian keeps some in /lib, some in /usr/lib).
deps_env() {
  export LD_LIBRARY_PATH=$PWD/.gpu-deps/usr/lib/x86_64-linux-gnu:$PWD/.gpu-deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
}

prepare() {
  exclude .gpu-deps
  NMT_EXTRA_DEBS="libexpat1-dev libexpat1 zlib1g-dev nlohmann-json3-dev" ../shared/gpu/make-prefix.sh .gpu-deps
  local src=../shared/data/multi30k dst=.gpu-data/multi30k tiny=.gpu-data/multi30k-tiny
  mkdir -p "$dst" "$tiny"
  exclude .gpu-data
  for l in en de fr; do
    cp "$src/train.lc.norm.tok.$l.gz" "$dst/"
    for f in val test_2016_flickr; do cp "$src/$f.lc.norm.tok.$l" "$dst/"; done
    head -n 400 <(zcat "$src/train.lc.norm.tok.$l.gz") | gzip >"$tiny/train.lc.norm.tok.$l.gz"
    head -n 40 "$src/val.lc.norm.tok.$l" >"$tiny/val.lc.norm.tok.$l"
    head -n 40 "$src/test_2016_flickr.lc.norm.tok.$l" >"$tiny/test_2016_flickr.lc.norm.tok.$l"
  done
  [[ ${NMT_GPU_HANSARDS_PAIRS:-500000} == 0 ]] || prepare_hansards  # 0: no Hansards step planned
  du -sh .gpu-deps .gpu-data
}

# .gpu-data/multi30k-model: the best.ckpt of the run folder NMT_GPU_BENCH_MODEL
# (a Multi30k tok-form model) without its optimizer state (a third of the size:
# carry takes 64 MiB in all) and the folder's SentencePiece models beside it,
# as bench/vs-pytorch.sh's NMT_BENCH_CKPT wants them.
bench_model() {
  local run=${NMT_GPU_BENCH_MODEL:?NMT_GPU_BENCH_MODEL: the run folder of a Multi30k tok-form model} dst=.gpu-data/multi30k-model
  mkdir -p "$dst"
  exclude .gpu-data
  build/nmt-train --release "$run/best.ckpt" "$dst/model.ckpt"
  cp "$run/src.spm.model" "$run/tgt.spm.model" "$dst/"
  du -sh .gpu-deps .gpu-data
}

# .gpu-data/hansards: NMT_GPU_HANSARDS_PAIRS (500,000) training pairs of 3 to 40
# words (scripts/hansards_train.sh's filter and shuffle: its 200,000 pairs are
# the first of these, its 500 validation pairs the same), their ibm2
# grow-diag-final-and links (the guide, computed here with build/nmt-align),
# and the trial set; -tiny: 2,000 pairs, for the rehearsal.
prepare_hansards() {
  local src=../shared/data/hansards-enfr dst=.gpu-data/hansards tiny=.gpu-data/hansards-tiny
  local n=${NMT_GPU_HANSARDS_PAIRS:-500000} d pairs
  for d in "$dst" "$tiny"; do
    [[ -s $d/train.gdfa.gz ]] && continue
    pairs=$n
    [[ $d == "$tiny" ]] && pairs=2000
    mkdir -p "$d"
    scripts/hansards_pairs.py "$src" "$d" "$pairs"
    build/nmt-align --aligner ibm2 --symmetrize grow-diag-final-and --format pharaoh \
      --src "$d/train.en" --tgt "$d/train.fr" -o "$d/train.gdfa" 2>"$d/guide.log"
    gzip -f "$d/train.en" "$d/train.fr" "$d/train.gdfa"
    cp "$src/trial.en" "$src/trial.fr" "$src/trial.talp" "$d/"
  done
}

# The GPU host's LibTorch and CUDA headers, for scripts/cuda-compile-check.sh on a
# machine without them: $1/cuda-headers.tar.xz.00, .01, ... (parts of 15 MiB, as the
# device tool brings back files of at most 16 MiB) holding torch/include and the
# CUDA toolkit's include folders (every one that has cuda_runtime_api.h).
headers_step() {
  local out=$1 t0=$SECONDS tmp torch_inc d
  tmp=$(mktemp -d)
  torch_inc=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
  mkdir -p "$tmp/cuda-headers/cuda"
  cp -a "$torch_inc" "$tmp/cuda-headers/torch"
  python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' >"$tmp/cuda-headers/VERSION"
  # every toolkit include folder the host has (nvcc's, the pip wheels'), merged
  for d in "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../include" \
    $(timeout 60 find /usr/local /opt /usr/lib/python3* /usr/include -name cuda_runtime_api.h -path '*include*' -printf '%h\n' 2>/dev/null | sort -u); do
    if [[ -f $d/cuda_runtime_api.h ]]; then
      cp -an "$d/." "$tmp/cuda-headers/cuda/" && echo "$d" >>"$tmp/cuda-headers/SOURCES"
    fi
  done
  tar cf - -C "$tmp" cuda-headers | xz -T0 -6 | split -b 15M -d - "$out/cuda-headers.tar.xz."
  rm -rf "$tmp"
  echo "headers: $(cat "$out"/cuda-headers.tar.xz.* | wc -c) bytes in $(ls "$out"/cuda-headers.tar.xz.* | wc -l) parts," \
    "$((SECONDS - t0)) s" | tee -a "$out/steps.log"
}

build_step() {
  local build=$1 out=$2
  local p=$PWD/.gpu-deps/usr tp
  tp=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  deps_env
  local t0=$SECONDS
  # The prefix's fmt 9, which its spdlog 1.10 was built for, ahead of the fmt 12
  # headers that a PyTorch install ships: -I is searched before every -isystem,
  # but gcc drops an -I of a folder that is also -isystem, hence a folder of its own.
  mkdir -p "$build/fmt-include"
  ln -sfn "$p/include/fmt" "$build/fmt-include/fmt"
  local cmake_flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tp;$p"
    -DCMAKE_LIBRARY_PATH="$p/lib/x86_64-linux-gnu" -DCMAKE_INCLUDE_PATH="$p/include"
    -DCMAKE_CXX_FLAGS="-I$(cd "$build/fmt-include" && pwd)"
    -DCMAKE_UNITY_BUILD=OFF)  # file by file, as scripts/cuda-compile-check.sh checks the CUDA-only code
  # shellcheck disable=SC2086  # NMT_GPU_CMAKE_FLAGS: several flags, split on spaces
  cmake -S . -B "$build" "${cmake_flags[@]}" ${NMT_GPU_CMAKE_FLAGS:-} >>"$out/build.log" 2>&1
  # -k 0: every compile error in one go (a GPU session may have time for one fix)
  local rc=0
  cmake --build "$build" -j "$(nproc)" -- -k 0 >>"$out/build.log" 2>&1 || rc=$?
  echo "build: exit $rc, $((SECONDS - t0)) s" | tee -a "$out/steps.log"
  if ((rc)); then
    grep -E -m 60 'error|Error|FAILED' "$out/build.log" | cut -c1-400 | tee "$out/build-errors.txt" || true
    # The CUDA-graph code is the part compiled only here: without it, the rest of
    # the session (tests, training, benchmarks) still has a build to run.
    echo "build: again without CUDA graphs (-DNMT_CUDA_GRAPHS=OFF)" | tee -a "$out/steps.log"
    # shellcheck disable=SC2086
    cmake -S . -B "$build" "${cmake_flags[@]}" ${NMT_GPU_CMAKE_FLAGS:-} -DNMT_CUDA_GRAPHS=OFF >>"$out/build.log" 2>&1
    rc=0
    cmake --build "$build" -j "$(nproc)" -- -k 0 >>"$out/build.log" 2>&1 || rc=$?
    echo "build: exit $rc, $((SECONDS - t0)) s (without CUDA graphs)" | tee -a "$out/steps.log"
    ((rc == 0)) || return "$rc"
  fi
  "$build/nmt-train" --version | tee "$out/version.txt"
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
}

test_step() {
  local build=$1 out=$2 limit=$3
  deps_env
  local t0=$SECONDS rc=0
  # -LE recipe: the recipe's scripts are the CPU's to test, not the device's time
  (cd "$build" && NMT_NO_BROWSER=1 timeout "$limit" ctest -j "$(nproc)" --output-on-failure --timeout 400 -LE recipe) \
    >"$out/test.log" 2>&1 ||
    rc=$?
  echo "test: exit $rc, $((SECONDS - t0)) s; $(grep -E 'tests passed' "$out/test.log" || echo 'no summary')" |
    tee -a "$out/steps.log"
  grep -E '^[[:space:]]+[0-9]+ - ' "$out/test.log" | head -n 40 | tee -a "$out/steps.log" || true
  local crashed
  crashed=$(grep -m1 -oE '[0-9]+ - [A-Za-z0-9_./-]+ \((SEGFAULT|Child aborted)\)' "$out/test.log" | awk '{print $3}' || true)
  [[ -n $crashed ]] && crashed=$(group_filter "$build" "$crashed")
  [[ -n ${NMT_GPU_DIAGNOSE_TEST:-} ]] && crashed=$NMT_GPU_DIAGNOSE_TEST
  [[ -z $crashed ]] || diagnose_crash "$build" "$out" "$crashed"
  # Entries still running at the limit: the first (the longest running) alone, its stacks after 40 s.
  local unfinished
  unfinished=$(unfinished_entries "$out/test.log")
  if [[ -n $unfinished ]]; then
    echo "test: unfinished at the limit: $(echo "$unfinished" | paste -sd ' ')" | tee -a "$out/steps.log"
    diagnose_hang "$build" "$out" "$(echo "$unfinished" | head -n1)" 40
  fi
}

# The CTest entries of ctest's log $1 that started and never finished, in the
# order they started.
unfinished_entries() {
  awk '/^ +Start +[0-9]+: / { started[++n] = $3 }
       /Test +#[0-9]+: / { for (i = 1; i <= NF; ++i) if ($i ~ /^#[0-9]+:$/) done[$(i + 1)] = 1 }
       END { for (i = 1; i <= n; ++i) if (!(started[i] in done)) print started[i] }' "$1"
}

# What a CTest entry $3 that does not finish is doing, into $2/hang-diagnosis.txt: its tests
# run alone (from the tests folder, one thread, as ctest runs them) for $4 s; if still running
# then, every thread's stack, and it is stopped. Its last "[ RUN ]" line names the test.
diagnose_hang() {
  local build=$1 out=$2 entry=$3 wait=$4 f filter pid gdb
  f=$out/hang-diagnosis.txt
  filter=$(group_filter "$build" "$entry")
  [[ -n $filter ]] || filter="$entry.*"  # an entry that is one test suite
  {
    echo "== $entry (--gtest_filter=$filter), alone, $wait s"
    # a process group of its own, so that the processes its tests start stop with it
    (cd "$build/tests" && NMT_THREADS=1 exec setsid ./nmt_tests --gtest_filter="$filter") >"$out/hang-run.log" 2>&1 &
    pid=$!
    local t=0
    while ((t < wait)) && kill -0 "$pid" 2>/dev/null; do sleep 1; t=$((t + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      echo "== still running after $t s"
      echo "== the last lines of its output"
      tail -n 8 "$out/hang-run.log"
      gdb=$(find_gdb)
      if [[ -n $gdb ]]; then
        echo "== every thread's stack ($gdb)"
        timeout 60 "$gdb" -batch -p "$pid" -ex 'thread apply all bt 30' 2>&1 |
          grep -vE '^\[(New|Thread|Detaching)' | head -n 300 || true
      fi
      kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
    else
      wait "$pid" && echo "== finished in $t s, exit 0" || echo "== finished in $t s, exit $?"
      tail -n 8 "$out/hang-run.log"
    fi
  } >"$f" 2>&1
  echo "test: $entry run alone: $(sed -n 's/^== \(still running.*\|finished.*\)/\1/p' "$f" | head -n1); see hang-diagnosis.txt" |
    tee -a "$out/steps.log"
}

# the debugger for host stacks (cuda-gdb debugs host code too), or nothing
find_gdb() { command -v cuda-gdb || command -v gdb || ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null || true; }
# group_filter BUILD ENTRY: the --gtest_filter of the CTest entry ENTRY (a
# group of tests: cmake/test_groups.cmake).
group_filter() {
  awk -v name="add_test([==[$2]==] " 'index($0, name) == 1 {
    sub(/.*--gtest_filter=/, ""); sub(/\]==\]\)$/, ""); print; exit }' "$1/tests/nmt_tests_groups.cmake"
}

# What a crashing test binds to and where it dies, into $2/crash-diagnosis.txt
# (about 30 s): the binary's NEEDED and RUNPATH, the libraries it loads, the
# dynamic linker's bindings of std::filesystem symbols, a backtrace (cuda-gdb
# debugs host code too), and the test once more with the compiler's own
# libstdc++ preloaded.
diagnose_crash() {
  local build=$1 out=$2 test=$3 bin=$1/tests/nmt_tests gdb f
  f=$out/crash-diagnosis.txt
  {
    echo "== $test"
    readelf -d "$bin" | grep -E 'NEEDED|RUNPATH|RPATH'
    echo "== ldd"; ldd "$bin"
    echo "== g++ -print-file-name=libstdc++.so.6: $(g++ -print-file-name=libstdc++.so.6)"
    echo "== std::filesystem symbols bound anywhere but libstdc++ (LD_DEBUG=bindings)"
    LD_DEBUG=bindings LD_DEBUG_OUTPUT=$out/ld-debug timeout 60 "$bin" --gtest_filter="$test" >/dev/null 2>&1 &&
      echo "exit 0" || echo "exit $?"
    cat "$out"/ld-debug.* 2>/dev/null | grep -E '10filesystem' | grep -vE ' to [^ ]*libstdc\+\+[^ ]* ' |
      sed -E 's/^ *[0-9]+: *//' | sort | uniq -c | head -n 40 || true
    rm -f "$out"/ld-debug.*
    gdb=$(find_gdb)
    if [[ -n $gdb ]]; then
      echo "== backtrace ($gdb)"
      timeout 120 "$gdb" -batch -ex run -ex bt --args "$bin" --gtest_filter="$test" 2>&1 |
        grep -vE '^\[(New|Thread|Detaching)' | tail -n 40 || true
    fi
    echo "== with the compiler's libstdc++ preloaded"
    LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6) timeout 60 "$bin" --gtest_filter="$test" >/dev/null 2>&1 &&
      echo "exit 0" || echo "exit $?"
  } >"$f" 2>&1
  echo "test: $test diagnosed in crash-diagnosis.txt; with libstdc++ preloaded: $(grep -A1 'preloaded' "$f" | tail -n1)" |
    tee -a "$out/steps.log"
}

cuda_step() {
  local build=$1 out=$2 device=$3 limit=$4 run=runs/gpu-demo
  deps_env
  rm -rf "$run"
  local t0=$SECONDS
  # at the limit nmt-train saves and stops (SIGTERM); the translations then use what it has
  timeout "$((limit * 2 / 3))" "$build/nmt-train" --config configs/demo.toml -o "$run" --device "$device" \
    2>"$out/cuda-train.log" || echo "cuda: training stopped at the step's time limit" | tee -a "$out/steps.log"
  echo "cuda: demo trained on $device in $((SECONDS - t0)) s: $(grep 'training finished' "$out/cuda-train.log")" |
    tee -a "$out/steps.log"
  for beam in 1 5; do
    for dev in "$device" cpu; do
      "$build/nmt-translate" -m "$run/best.ckpt" -b "$beam" --device "$dev" -i data/demo/test.src \
        -o "$out/demo-b$beam-$dev.hyp" --reference data/demo/test.tgt 2>"$out/demo-b$beam-$dev.log"
    done
    local same total
    same=$(paste -d '\t' "$out/demo-b$beam-$device.hyp" "$out/demo-b$beam-cpu.hyp" | awk -F'\t' '$1 == $2' | wc -l)
    total=$(wc -l <"$out/demo-b$beam-cpu.hyp")
    echo "cuda: beam $beam, $device and cpu translations identical on $same of $total lines;" \
      "$device: $(grep -m1 'BLEU =' "$out/demo-b$beam-$device.log" | sed 's/.*\] //')" | tee -a "$out/steps.log"
  done
}

bench_step() {
  local build=$1 out=$2 device=$3 data=$4 budget=$5
  deps_env
  # The training rows on the whole training split (about 230 steps): a graphed
  # run's first two steps of each shape (eager, then captured) are not replayed,
  # and on a 6,000-pair subset (about 50 steps) those were most of the epoch.
  # The decoding rows on 5,000 val sentences (val repeated): 500 took half a second,
  # most of it the first batch's start-up.
  local rc=0 t0=$SECONDS rounds=${NMT_GPU_BENCH_ROUNDS:-1} pairs=29000 valid=5000 model=()
  [[ ${NMT_GPU_TINY:-0} == 1 ]] && rounds=1 pairs=400 valid=40
  # a trained model (bench_model) for the decoding rows, when one travelled
  [[ ${NMT_GPU_TINY:-0} != 1 && -f .gpu-data/multi30k-model/model.ckpt ]] &&
    model=(NMT_BENCH_CKPT="$PWD/.gpu-data/multi30k-model/model.ckpt")
  rm -f runs/vs-pytorch/*.log  # an earlier run's logs are not this one's
  env "${model[@]}" NMT_BUILD_DIR=$build NMT_BENCH_DEVICE=$device NMT_PYTHON=${NMT_GPU_PYTHON:-python3} NMT_BENCH_PAIRS=$pairs \
    NMT_BENCH_VALID=$valid NMT_BENCH_FIXED_BATCHES="64 256" \
    timeout --signal=TERM "$budget" bench/vs-pytorch.sh "$rounds" "$data" >"$out/bench.log" 2>&1 || rc=$?
  cp runs/vs-pytorch/measurements.tsv "$out/bench-measurements.tsv" 2>/dev/null || true
  mkdir -p "$out/bench-logs" && cp runs/vs-pytorch/*.log "$out/bench-logs/" 2>/dev/null || true
  local result
  result=$(sed -n 's/^wrote //p' "$out/bench.log" | tail -n1)
  [[ -n $result ]] && mv "$result" "$out/"
  echo "bench: exit $rc, $((SECONDS - t0)) s; $(grep -E '^(train|decode)' "$out/bench.log" | tr -s ' ' | paste -sd ';')" |
    tee -a "$out/steps.log"
  # how many batch shapes the graphed training row had, and how many of them replay a CUDA graph
  grep -ho -- '--cuda-graphs: .*' runs/vs-pytorch/nmt-train-graphs.log 2>/dev/null | tail -n1 | sed 's/^/bench: /' |
    tee -a "$out/steps.log" || true
}


# shellcheck source=scripts/gpu-training.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu-training.sh"
main "$@"; exit  # on one line: bash reads no further, so editing the file during a run is safe
