#!/usr/bin/env bash
# Installs the Debian 12 packages nmt needs to build, test and run. Idempotent:
# when everything is installed it only checks and returns in about a second.
#   scripts/setup.sh           what building, testing and running need
#   scripts/setup.sh --bench   also Python's torch and sentencepiece, for the
#                              PyTorch reference of bench/vs-pytorch.sh
#   scripts/setup.sh --list    prints the packages of the first form, one a
#                              line, and installs nothing (scripts/debian-check.sh
#                              installs them in its chroot)
# BLAS: LibTorch on Debian calls the system BLAS (libblas.so.3). The reference
# BLAS makes a GRU training step 26x slower than OpenBLAS. OpenBLAS's OpenMP
# flavour measured fastest (bench/blas.sh, bench/results/blas-*.txt) and
# shares LibTorch's OpenMP thread pool, so the two never oversubscribe the
# cores; it is installed and selected.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config ccache
  libtorch-dev libopenblas0-openmp
  libsentencepiece-dev libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev libgtest-dev libexpat1-dev libgloo-dev zlib1g-dev nlohmann-json3-dev
  libcpp-httplib-dev chromium python3
)

if [[ ${1:-} == --list ]]; then
  printf '%s\n' "${packages[@]}"
  exit 0
elif [[ ${1:-} == --bench ]]; then
  packages+=(python3-torch python3-sentencepiece)
elif (($#)); then
  echo "setup.sh: unknown argument '$1' (expected nothing, --bench or --list)" >&2
  exit 2
fi

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

# Select OpenBLAS (OpenMP) for every BLAS/LAPACK alternative libtorch loads
# (libblas.so.3, liblapack.so.3 and libopenblas.so.0 are switched separately;
# mixing flavours in one process loads two OpenBLAS builds).
lib=/usr/lib/x86_64-linux-gnu
for alt in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  want=$lib/openblas-openmp/$alt
  current=$(readlink -f "$lib/$alt" || true)
  if [[ -e "$want" && "$current" != "$(readlink -f "$want")" ]]; then
    $sudo update-alternatives --set "$alt-x86_64-linux-gnu" "$want" >/dev/null
    echo "setup.sh: $alt now OpenBLAS (OpenMP)"
  fi
done
echo "setup.sh: all packages present"
