#!/usr/bin/env bash
# Compiles the project's C++ sources against LibTorch 2.x with CUDA on a machine
# that has neither (syntax and types only: -fsyntax-only, nothing is linked), so
# that an API that LibTorch 2.x dropped or a typo in the CUDA-only code
# (NMT_WITH_CUDA) costs a minute here instead of a build on the rarely lent GPU
# host. Not part of CI: the headers do not live in the repository.
#
#   scripts/cuda-compile-check.sh HEADERS [FILE.cc...]
#
# HEADERS: the folder that `scripts/gpu.sh headers` packs on the GPU host
# (cuda-headers.tar.xz.*, unpacked: HEADERS/torch is PyTorch's include folder,
# HEADERS/cuda the CUDA toolkit's, HEADERS/VERSION their versions). Without
# FILEs every .cc of src/, apps/, tests/ and bench/ is checked, two at a time.
# Each source gets the library's precompiled header (src/model/torch_pch.h)
# first, as the build does. Prints each failing file's errors; exits 1 if any
# file failed, 2 on a bad HEADERS folder.
set -euo pipefail
cd "$(dirname "$0")/.."
h=${1:?usage: scripts/cuda-compile-check.sh HEADERS [FILE.cc...]}
shift
[[ -d $h/torch/torch/csrc/api/include && -f $h/cuda/cuda_runtime_api.h ]] || {
  echo "cuda-compile-check.sh: $h is not an unpacked cuda-headers folder (torch/, cuda/)" >&2
  exit 2
}
h=$(cd "$h" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The system's fmt 9 (what Debian's spdlog is built for) ahead of the fmt that
# PyTorch ships in its include folder, as scripts/gpu.sh's build does.
mkdir -p "$tmp/fmt" "$tmp/generated"
ln -s /usr/include/fmt "$tmp/fmt/fmt"
echo '#define NMT_COMMIT "compile-check"' >"$tmp/generated/nmt_commit.h"
# C++20 where LibTorch's headers stop at anything less (as its CMake package asks the build)
std=c++17
! grep -q 'C++20 or later' "$h/torch/ATen/ATen.h" 2>/dev/null || std=c++20
flags=(-std=$std -fsyntax-only -fopenmp -Wall -Wextra -DNMT_WITH_CUDA -DNMT_VERSION=\"check\" -DNMT_SPM_MODULE_PATH=\"check\"
  -DSPDLOG_SHARED_LIB -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL  # as the CMake targets define them
  -DNMT_SOURCE_DIR=\"$PWD\" -DNMT_BINARY_DIR=\"$PWD/build\" -DNMT_CMAKE_COMMAND=\"cmake\"
  -DNMT_APP_MAIN=train_main  # apps/main.cc: each executable names its entry point
  -I"$tmp/fmt" -Isrc -Iapps -Itests -I"$tmp/generated"
  -isystem "$h/torch" -isystem "$h/torch/torch/csrc/api/include" -isystem "$h/cuda"
  -include src/model/torch_pch.h)
(($#)) || mapfile -t files < <(git ls-files 'src/*.cc' 'apps/*.cc' 'tests/*.cc' 'bench/*.cc')
(($#)) && files=("$@")
echo "cuda-compile-check: ${#files[@]} files against $(cat "$h/VERSION" 2>/dev/null || echo '?')" >&2
export tmp
printf '%s\n' "${files[@]}" | xargs -P 2 -I{} sh -c '
  out=$tmp/$(echo "$1" | tr / _).log
  g++ "$@" >"$out" 2>&1 || { echo "FAILED $1"; grep -E "error" "$out" | head -n 20; }
' sh {} "${flags[@]}" | tee "$tmp/result"
if grep -q '^FAILED' "$tmp/result"; then
  echo "cuda-compile-check: $(grep -c '^FAILED' "$tmp/result") of ${#files[@]} files failed" >&2
  exit 1
fi
echo "cuda-compile-check: all ${#files[@]} files compile" >&2
