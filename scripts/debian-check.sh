#!/usr/bin/env bash
# Builds nmt against a newer Debian and runs its unit tests there, in a chroot
# made with debootstrap from Debian's archive, on a Debian 12 machine and
# without a GPU: Debian 13 (trixie: LibTorch 2.6, GCC 14, cpp-httplib 0.18) or
# unstable (sid: the newest LibTorch Debian has, 2.14 on 2026-12-04). It is the
# CPU half of "the same code builds against LibTorch 2.x": what changed in
# LibTorch, the compiler or a library since Debian 12 shows up here instead of
# on a GPU host. Not part of CI (it downloads about 1 GB and needs root).
#
#   scripts/debian-check.sh [SUITE [CHROOT]]   # default trixie, /srv/SUITE; made once, then reused
#   NMT_CHECK_FILTER=FixedRowTest.* scripts/debian-check.sh sid   # some tests only
#
# The committed tree (HEAD, as `git archive` gives it) is built in CHROOT/src and
# every unit test run there (NMT_THREADS=2, no browser: chromium is not installed),
# or those NMT_CHECK_FILTER names (a --gtest_filter pattern). A sid chroot older
# than a day is brought up to date first: sid changes daily.
# Exits non-zero when the chroot cannot be made, the build fails or a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:-trixie}
root=${2:-/srv/$suite}
# setup.sh's packages, without the browser (the tests run with NMT_NO_BROWSER=1)
# and with gdb, to see where a test that hangs is waiting
mapfile -t packages < <(scripts/setup.sh --list | grep -vx chromium)
packages+=(gdb)
# Debian's SentencePiece 0.2.2 (sid) includes the system's Abseil headers, which its -dev package does not pull in
[[ $suite == trixie ]] || packages+=(libabsl-dev)
install="DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${packages[*]} >/dev/null"

if [[ ! -x $root/usr/bin/cmake ]]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  [[ -d $root/usr ]] || debootstrap --variant=minbase "$suite" "$root" http://deb.debian.org/debian
  # A mirror that serves a snapshot of the archive can hold a sid Release file
  # past its 7 days of validity: apt would refuse it.
  echo 'Acquire::Check-Valid-Until "false";' > "$root/etc/apt/apt.conf.d/99nmt-snapshot"
  chroot "$root" bash -c "apt-get update -qq && $install"
elif [[ $suite == sid && -n $(find "$root/var/lib/apt/lists" -maxdepth 0 -mtime +0) ]]; then
  chroot "$root" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get full-upgrade -y -qq >/dev/null && $install"
fi
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
rm -rf "$root/src/nmt" && mkdir -p "$root/src/nmt"
git archive HEAD | tar x -C "$root/src/nmt"
echo "debian-check ($suite): $(git rev-parse --short HEAD)," \
  "LibTorch $(chroot "$root" dpkg-query -W -f '${Version}' libtorch-dev), GCC $(chroot "$root" g++ -dumpfullversion)"
chroot "$root" bash -c 'cmake -S /src/nmt -B /src/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/src/cmake.log &&
  ninja -C /src/build -j"$(nproc)" nmt_tests nmt-train nmt-translate nmt-align nmt-serve'
chroot "$root" env NMT_CHECK_FILTER="${NMT_CHECK_FILTER:-*}" bash -c \
  'cd /src/build/tests && NMT_THREADS=2 NMT_NO_BROWSER=1 ./nmt_tests --gtest_brief=1 --gtest_filter="$NMT_CHECK_FILTER"'
