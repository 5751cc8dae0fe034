#!/usr/bin/env bash
# Installs the Debian 12 packages nmt needs to build, test and run. Idempotent:
# when everything is installed it only checks and returns in about a second.
#   scripts/setup.sh
# BLAS: LibTorch on Debian calls the system BLAS (libblas.so.3). The reference
# BLAS makes GRU training ~26x slower; OpenBLAS's pthread flavour measured
# fastest here (bench/blas.sh, figures in bench/results/blas-*.txt), so it is
# installed and selected.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config ccache
  libtorch-dev libopenblas0-pthread
  libsentencepiece-dev libcli11-dev libspdlog-dev libfmt-dev libgtest-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi

if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Select OpenBLAS (pthread) as the system BLAS even if another flavour was
# installed later with a higher priority.
blas=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
current=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
if [[ -e "$blas" && "$current" != "$(readlink -f "$blas")" ]]; then
  $sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas" >/dev/null
  echo "setup.sh: system BLAS set to OpenBLAS (pthread)"
fi
echo "setup.sh: all packages present"
