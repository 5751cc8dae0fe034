#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UBSan) and fuzzes
# each parser of untrusted input for a while: corpus/TSV reader, gold
# alignment reader, model config, TOML config files, checkpoint body (past
# its checksum), the reader of old checkpoints that runs no code in them.
#   scripts/fuzz.sh [seconds per target]      (default 60)
# Crashes are saved under build-fuzz/artifacts/; turn each into a unit test.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
b=${NMT_FUZZ_BUILD_DIR:-build-fuzz}
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang (apt-get install clang)" >&2; exit 1; }
if [[ ! -f $b/CMakeCache.txt ]]; then
  CXX=clang++ cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNMT_FUZZ=ON \
    -DNMT_BUILD_TESTS=OFF -DNMT_SANITIZE=address,undefined,fuzzer-no-link
fi
cmake --build "$b" -j "$(nproc)"
export ASAN_OPTIONS=alloc_dealloc_mismatch=0:detect_leaks=0  # see src/text/tokenizer.cc
seeds=$b/seeds
mkdir -p "$seeds"/{corpus,gold,config,toml,checkpoint,legacy_checkpoint} "$b/artifacts"
head -n 20 data/demo/test.src > "$seeds/corpus/lines"
paste data/demo/test.src data/demo/test.tgt | head -n 20 > "$seeds/corpus/tsv"
head -n 20 data/demo/test.align > "$seeds/gold/pharaoh"
printf '1-1 2p3 3-2\n1?1 2-2\n' > "$seeds/gold/possible"
if [[ ! -f $seeds/checkpoint/tiny.ckpt ]]; then
  "$b/nmt-train" --train-src data/demo/valid.src --train-tgt data/demo/valid.tgt -o "$b/seed-model" \
    --vocab-size 200 --emb-dim 8 --enc-hidden 8 --dec-hidden 16 --attn-dim 8 --max-steps 2 --valid-every 0 \
    --keep-checkpoints 0 --threads 1 2>/dev/null
  tail -c +25 "$b/seed-model/last.ckpt" > "$seeds/checkpoint/tiny.ckpt"  # the body: the target seals it
  rm -rf "$b/seed-model"
fi
printf 'src_vocab=200\ntgt_vocab=200\nemb_dim=8\nenc_hidden=8\nenc_layers=1\ndec_hidden=16\nattn_dim=8\nattention=additive\ndropout=0.2\ntie_embeddings=0\n' \
  > "$seeds/config/config"
cp configs/demo.toml "$seeds/toml/demo.toml"
printf '[model.sizes]\nemb-dim = 8\n"quoted.key" = "a.b.c"\nx = { y.z = [1.5, [2]] }\n[[a.b]]\n' > "$seeds/toml/nested.toml"
tail -c +25 tests/data/format2-tiny.ckpt > "$seeds/legacy_checkpoint/format2-tiny.archive"  # after the nmt header
status=0
for t in corpus gold config toml checkpoint legacy_checkpoint; do
  max_len=65536
  [[ $t == legacy_checkpoint ]] && max_len=$(($(stat -c %s "$seeds/legacy_checkpoint/format2-tiny.archive") + 4096))
  [[ $t == checkpoint ]] && max_len=$(($(stat -c %s "$seeds/checkpoint/tiny.ckpt") + 4096))
  mkdir -p "$b/corpus/$t"
  log=$b/fuzz-$t.log
  if "$b/tests/fuzz/${t}_fuzz" -max_total_time="$secs" -print_final_stats=1 -max_len="$max_len" \
       -artifact_prefix="$b/artifacts/$t-" "$b/corpus/$t" "$seeds/$t" > "$log" 2>&1; then
    result=ok
  else
    result="CRASH (see $log and $b/artifacts/)"
    status=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz $t: $execs executions in ${secs}s, $result"
done
exit $status
