#!/usr/bin/env bash
# Builds nmt against Debian 13 (trixie) and runs its unit tests there: LibTorch
# 2.6, GCC 14, cpp-httplib 0.18, in a chroot made with debootstrap from
# Debian's archive, on a Debian 12 machine and without a GPU. It is the CPU
# half of "the same code builds against LibTorch 2.x": what changed in LibTorch,
# the compiler or a library since Debian 12 shows up here instead of on a GPU
# host. Not part of CI (it downloads about 1 GB and needs root).
#
#   scripts/debian13-check.sh [CHROOT]    # default /srv/trixie; made once, then reused
#
# The committed tree (HEAD, as `git archive` gives it) is built in CHROOT/src and
# every unit test run there (NMT_THREADS=2, no browser: chromium is not installed).
# Exits non-zero when the chroot cannot be made, the build fails or a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-/srv/trixie}
packages=(g++ cmake ninja-build pkg-config libtorch-dev libopenblas0-openmp libsentencepiece-dev
  libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev libgtest-dev libexpat1-dev libgloo-dev
  zlib1g-dev nlohmann-json3-dev libcpp-httplib-dev python3)

if [[ ! -x $root/usr/bin/cmake ]]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  [[ -d $root/usr ]] || debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
  chroot "$root" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends ${packages[*]} >/dev/null"
fi
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
rm -rf "$root/src/nmt" && mkdir -p "$root/src/nmt"
git archive HEAD | tar x -C "$root/src/nmt"
echo "debian13-check: $(git rev-parse --short HEAD), $(chroot "$root" dpkg-query -W -f '${Version}' libtorch-dev) LibTorch," \
  "$(chroot "$root" g++ -dumpfullversion) GCC"
chroot "$root" bash -c 'cmake -S /src/nmt -B /src/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/src/cmake.log &&
  ninja -C /src/build -j"$(nproc)" nmt_tests nmt-train nmt-translate nmt-align nmt-serve'
chroot "$root" bash -c 'cd /src/build/tests && NMT_THREADS=2 NMT_NO_BROWSER=1 ./nmt_tests --gtest_brief=1'
