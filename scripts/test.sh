#!/usr/bin/env bash
# Sets up, builds and runs the whole unit-test suite.
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd "${NMT_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)"
