#!/usr/bin/env bash
# Configures and builds nmt (Release) into build/ (or $NMT_BUILD_DIR).
#   scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${NMT_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif (($#)); then
  cmake -S . -B "$build" "$@"
fi
cmake --build "$build" -j "$(nproc)"
