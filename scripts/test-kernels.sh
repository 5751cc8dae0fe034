#!/usr/bin/env bash
# Runs the floating-point tests (CTest label "numeric": packed products, step
# kernels, decoder paths, gradients, reduced precision, search scores) again
# under each other kernel choice this CPU can run, one run each: OpenBLAS's
# Prescott, Haswell and SkylakeX kernels (OPENBLAS_CORETYPE), then LibTorch's
# default and AVX2 vector code (ATEN_CPU_CAPABILITY), so that a tolerance
# that holds only for this machine's own kernels fails here and not on the
# next CPU. Needs the build (scripts/build.sh); builds nothing. One line per
# stage, each stage's ctest output in <build>/Testing/test-kernels-*.log;
# exits non-zero naming the stages that failed.
#   scripts/test-kernels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${NMT_BUILD_DIR:-build}
if [[ ! -f $build/CTestTestfile.cmake ]]; then
  echo "test-kernels: no build in $build (scripts/build.sh makes it)" >&2
  exit 2
fi
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() {  # has FLAG...: whether the CPU has every one of them
  for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done
}
mkdir -p "$build/Testing"
failed=()

# stage NAME VAR=VALUE: ctest -L numeric with that variable set and the other unset.
stage() {
  local name=$1 setting=$2 log="$build/Testing/test-kernels-$1.log" start=$SECONDS rc=0
  (cd "$build" && env -u OPENBLAS_CORETYPE -u ATEN_CPU_CAPABILITY "$setting" \
    ctest -L numeric --output-on-failure -j "$(nproc)") > "$log" 2>&1 || rc=$?
  if ((rc == 0)) && grep -q '^100% tests passed' "$log"; then
    echo "test-kernels: $setting: passed ($((SECONDS - start)) s)"
  else
    echo "test-kernels: $setting: FAILED ($((SECONDS - start)) s): $(grep -c '(Failed)' "$log" || true) failed, see $log"
    failed+=("$setting")
  fi
}
skip() { echo "test-kernels: $1: skipped ($2)"; }

stage prescott OPENBLAS_CORETYPE=Prescott
if has avx2 fma; then stage haswell OPENBLAS_CORETYPE=Haswell; else skip OPENBLAS_CORETYPE=Haswell "no AVX2 and FMA"; fi
if has avx512f avx512bw avx512vl avx512dq avx512cd; then
  stage skylakex OPENBLAS_CORETYPE=SkylakeX
else
  skip OPENBLAS_CORETYPE=SkylakeX "no AVX-512 F, BW, VL, DQ and CD"
fi
stage aten-default ATEN_CPU_CAPABILITY=default
if has avx2; then stage aten-avx2 ATEN_CPU_CAPABILITY=avx2; else skip ATEN_CPU_CAPABILITY=avx2 "no AVX2"; fi

if ((${#failed[@]})); then
  echo "test-kernels: failed under ${failed[*]}" >&2
  exit 1
fi
echo "test-kernels: every stage passed"
