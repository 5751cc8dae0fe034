#!/usr/bin/env bash
# Makes the headers folder that scripts/cuda-compile-check.sh reads, without a
# GPU host: LibTorch 2.x's headers as built with CUDA, from Debian's
# libtorch-cuda-dev (contrib), and the CUDA toolkit's include folder of this
# machine. The package comes from Debian's archive, checked along the chain
# the archive signs: InRelease against the system's Debian archive keyring,
# then the Packages index's SHA-256, then the package's.
#
#   scripts/cuda-headers.sh OUT [SUITE]
#
# OUT: a new folder (or one this script made before, which is made again),
# outside the repository: OUT/torch (ATen, c10, caffe2, torch), OUT/cuda (a link
# to the toolkit's include folder), OUT/VERSION. SUITE: the Debian suite to take
# libtorch-cuda-dev from (default trixie; sid has the newest). The toolkit is
# $CUDA_HOME, else /usr/local/cuda. Needs curl, gpgv, xz and dpkg-deb. Exits 1
# when the archive, a checksum or the toolkit fails, naming which, 2 on bad
# arguments; OUT is only replaced once everything is in place.
set -euo pipefail
out=${1:?usage: scripts/cuda-headers.sh OUT [SUITE]}
suite=${2:-trixie}
mirror=${NMT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cuda=${CUDA_HOME:-/usr/local/cuda}
fail() { echo "cuda-headers.sh: $*" >&2; exit 1; }
[[ $suite =~ ^[a-z]+$ ]] || { echo "cuda-headers.sh: SUITE must be a Debian suite name, got '$suite'" >&2; exit 2; }
if [[ -e $out && ! -f $out/VERSION ]]; then
  echo "cuda-headers.sh: $out exists and is not a folder this script made (no VERSION); give a new folder" >&2
  exit 2
fi
[[ -f $cuda/include/cuda_runtime_api.h ]] ||
  fail "no CUDA toolkit headers at $cuda/include (cuda_runtime_api.h); set CUDA_HOME to the toolkit"
for tool in curl gpgv xz dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null || fail "$tool is not installed"
done

tmp=$(mktemp -d "${out%/}.part.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
get() { curl -fsS --retry 2 -m 600 -o "$2" "$mirror/$1" || fail "could not fetch $mirror/$1"; }
# same_sum FILE SHA256 WHAT WHOSE: dies unless FILE's SHA-256 is SHA256 (WHOSE list's), naming WHAT
same_sum() { [[ $(sha256sum <"$1" | cut -d' ' -f1) == "$2" ]] || fail "$3: SHA-256 differs from $4's"; }

# InRelease, signed by the archive; the contrib index's SHA-256 from it
get "dists/$suite/InRelease" "$tmp/InRelease"
gpgv --keyring "$keyring" --output "$tmp/Release" "$tmp/InRelease" 2>"$tmp/gpgv.log" ||
  fail "$mirror/dists/$suite/InRelease: bad signature ($(tail -n 1 "$tmp/gpgv.log"))"
index=contrib/binary-amd64/Packages.xz
want=$(awk -v f="$index" '/^SHA256:/ {s = 1; next} /^[^ ]/ {s = 0} s && $3 == f {print $1}' "$tmp/Release")
[[ -n $want ]] || fail "dists/$suite/InRelease lists no $index"
get "dists/$suite/$index" "$tmp/Packages.xz"
same_sum "$tmp/Packages.xz" "$want" "dists/$suite/$index" InRelease

# libtorch-cuda-dev's entry: its file, version and SHA-256
# (the first entry; awk reads to the end, so xz never writes into a closed pipe)
xz -dc "$tmp/Packages.xz" | awk '/^Package: libtorch-cuda-dev$/ && !done {p = 1} p && /^$/ {p = 0; done = 1} p' >"$tmp/entry"
field() { sed -n "s/^$1: //p" "$tmp/entry"; }
file=$(field Filename) version=$(field Version) sum=$(field SHA256)
[[ -n $file && -n $sum ]] || fail "$suite's contrib has no libtorch-cuda-dev"
echo "cuda-headers.sh: libtorch-cuda-dev $version ($suite)" >&2
get "$file" "$tmp/dev.deb"
same_sum "$tmp/dev.deb" "$sum" "$file" "the index"

dpkg-deb -x "$tmp/dev.deb" "$tmp/x"
mkdir -p "$tmp/h/torch"
for dir in ATen c10 caffe2 torch; do
  [[ ! -d $tmp/x/usr/include/$dir ]] || mv "$tmp/x/usr/include/$dir" "$tmp/h/torch/"
done
[[ -f $tmp/h/torch/ATen/cuda/CUDAGraph.h && -d $tmp/h/torch/torch/csrc/api/include ]] ||
  fail "$file holds no LibTorch CUDA headers (ATen/cuda/CUDAGraph.h, torch/csrc/api/include)"
ln -s "$(cd "$cuda/include" && pwd)" "$tmp/h/cuda"
nvcc=$("$cuda/bin/nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' || echo "release ?")
echo "LibTorch $version (Debian $suite libtorch-cuda-dev), CUDA $nvcc ($cuda)" >"$tmp/h/VERSION"
rm -rf "$out"
mv "$tmp/h" "$out"
echo "cuda-headers.sh: $out: $(cat "$out/VERSION")" >&2
