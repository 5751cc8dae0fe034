// read_legacy_checkpoint given hostile files: real format 2 archives taken
// apart (legacy_archive_edit.h), changed where a stranger could change them
// (names to call, storage counts, tensor views, zip entries, truncations,
// pickles that would run away) and put together again, each refused with
// one nmt::Error line. Real files read back are in legacy_checkpoint_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "legacy_archive_edit.h"
#include "legacy_checkpoint_test_util.h"
#include "model/legacy_checkpoint.h"
#include "test_util.h"

namespace {

using nmt::test::contains;
using nmt::test::error_of;
using nmt::test::read_bytes;

using nmt::legacy_test::adam_checkpoint;
using nmt::legacy_test::archive_of;
using nmt::legacy_test::central_record;
using nmt::legacy_test::first_storage;
using nmt::legacy_test::long1;
using nmt::legacy_test::pickle_of;
using nmt::legacy_test::put_le;
using nmt::legacy_test::refusal;
using nmt::legacy_test::replaced;
using nmt::legacy_test::set_le;
using nmt::legacy_test::unzip;
using nmt::legacy_test::with_pickle;
using nmt::legacy_test::zip;

TEST(LegacyCheckpointTest, RebuiltArchiveStillReads) {  // so that the edits below test what they edit
  const std::string a = archive_of(adam_checkpoint());
  const auto c = nmt::read_legacy_checkpoint(with_pickle(a, pickle_of(a)), "model.ckpt");
  EXPECT_EQ(c.weights.size(), nmt::read_legacy_checkpoint(a, "model.ckpt").weights.size());
}

TEST(LegacyCheckpointTest, RefusesGlobalsNmtNeverWrites) {
  const std::string a = archive_of(adam_checkpoint()), pk = pickle_of(a);
  const std::string module_class = "c__torch__\nModule\n";
  EXPECT_TRUE(contains(refusal(with_pickle(a, replaced(pk, module_class, "cos\nsystem\n"))),
                       "pickle uses 'os.system', which nmt never writes; refusing to read it"));
  EXPECT_TRUE(contains(refusal(with_pickle(a, replaced(pk, "ctorch._utils\n_rebuild_tensor_v2\n", "cbuiltins\neval\n"))),
                       "pickle uses 'builtins.eval'"));
  const std::string stack_global("X\x08\0\0\0" "builtinsX\x04\0\0\0" "eval\x93", 23);
  EXPECT_TRUE(contains(refusal(with_pickle(a, replaced(pk, module_class, stack_global))), "opcode 0x93 at byte 24"));
  // A module class called rather than built: REDUCE where NEWOBJ was.
  EXPECT_TRUE(contains(refusal(with_pickle(a, replaced(pk, ")\x81", ")R"))), "calls a module class"));
}

TEST(LegacyCheckpointTest, RefusesStorageCountsPastTheirEntry) {
  const std::string a = archive_of(adam_checkpoint()), pk = pickle_of(a);
  const auto f = first_storage(pk);
  std::string big("J", 1);
  put_le(big, 1000000, 4);
  EXPECT_TRUE(contains(refusal(with_pickle(a, std::string(pk).replace(f.count_at, f.count_len, big))),
                       "declares storage '0' of 1000000 elements of 4 bytes, but its entry holds"));
  EXPECT_TRUE(contains(refusal(with_pickle(a, std::string(pk).replace(f.count_at, f.count_len, long1(int64_t{1} << 62)))),
                       "declares storage '0' of 4611686018427387904 elements"));  // bytes overflow 64 bits
  EXPECT_TRUE(contains(refusal(with_pickle(a, std::string(pk).replace(f.count_at, f.count_len, long1(-1)))),
                       "declares storage '0' of -1 elements"));
}

TEST(LegacyCheckpointTest, RefusesTensorViewsPastTheirStorage) {
  const std::string a = archive_of(adam_checkpoint()), pk = pickle_of(a);
  const auto f = first_storage(pk);
  const int64_t eight_gb = (int64_t{8} << 30) / 4;  // float elements
  EXPECT_TRUE(contains(refusal(with_pickle(a, std::string(pk).replace(f.offset_at, f.offset_len, long1(eight_gb)))),
                       "tensor view (offset 2147483648) outside its storage '0'"));
  EXPECT_TRUE(contains(refusal(with_pickle(a, std::string(pk).replace(f.offset_at, f.offset_len, long1(-1)))),
                       "tensor view (offset -1) outside its storage '0'"));
}

TEST(LegacyCheckpointTest, RefusesZipEntriesPastTheBuffer) {
  const std::string a = archive_of(adam_checkpoint());
  const size_t at = central_record(a, "archive/data.pkl");
  std::string sized = a;
  set_le(sized, at + 20, 0x7FFFFFF0, 4);
  set_le(sized, at + 24, 0x7FFFFFF0, 4);
  EXPECT_TRUE(contains(refusal(sized), "zip entry 'archive/data.pkl' (2147483632 bytes at"));
  EXPECT_TRUE(contains(refusal(sized), "runs past the end of the archive"));
  std::string moved = a;
  set_le(moved, at + 42, 0xFFFFFFF0, 4);
  EXPECT_TRUE(contains(refusal(moved), "zip entry 'archive/data.pkl' has no local header where the directory says"));
  auto entries = unzip(a);
  entries.push_back(entries.front());
  EXPECT_TRUE(contains(refusal(zip(entries)), "zip entry 'archive/data/0' appears twice"));
  std::string flipped = a;
  flipped[flipped.find("encoder.embed.weight")] ^= 1;  // inside data.pkl
  EXPECT_TRUE(contains(refusal(flipped), "zip entry 'archive/data.pkl' is damaged (CRC mismatch)"));
}

TEST(LegacyCheckpointTest, RefusesTruncatedFiles) {
  const std::string file = read_bytes(adam_checkpoint()), a = archive_of(adam_checkpoint());
  for (int k = 0; k < 16; ++k) {
    const std::string cut = a.substr(0, a.size() * k / 16);
    EXPECT_FALSE(refusal(cut).empty()) << k;
    const std::string msg = error_of([&] { nmt::legacy_archive_bytes(file.substr(0, file.size() * k / 16), "model.ckpt"); });
    EXPECT_TRUE(contains(msg, "model.ckpt: legacy checkpoint: ")) << msg;
  }
  EXPECT_TRUE(contains(refusal(a.substr(0, a.size() - 1)), "no end-of-central-directory record"));
  EXPECT_TRUE(contains(error_of([&] { nmt::legacy_archive_bytes(file.substr(0, file.size() - 1), "m"); }), "truncated"));
}

TEST(LegacyCheckpointTest, RefusesPicklesThatWouldRunAway) {
  const std::string a = archive_of(adam_checkpoint()), pk = pickle_of(a);
  const std::string head = pk.substr(0, 2);  // PROTO 2
  // A string longer than the pickle.
  EXPECT_TRUE(contains(refusal(with_pickle(a, replaced(pk, std::string("X\x06\0\0\0" "config", 11),
                                                          std::string("X\xf0\xff\xff\xff" "config", 11)))),
                       "pickle wants 4294967280 bytes at byte 31, past its end"));
  // Memo reads and writes far out of range: refused, nothing allocated.
  EXPECT_TRUE(contains(refusal(with_pickle(a, head + "j\xf0\xff\xff\x7f" + pk.substr(2))),
                       "reads memo entry 2147483632 of 0: out of range"));
  EXPECT_TRUE(contains(refusal(with_pickle(a, head + "K\x01r\xff\xff\xff\x7f" + pk.substr(2))),
                       "stores memo entry 2147483647 out of order (0 so far)"));
  // MARKs nested 100000 deep.
  EXPECT_TRUE(contains(refusal(with_pickle(a, head + std::string(100000, '(') + pk.substr(2))),
                       "nests MARKs deeper than 32"));
  // Values without end.
  EXPECT_TRUE(contains(refusal(with_pickle(a, head + std::string(300000, ')') + pk.substr(2))),
                       "creates more than 262144 values"));
  // A value left over at the STOP; a dict's items popped past its MARK.
  EXPECT_TRUE(contains(refusal(with_pickle(a, head + "(t" + pk.substr(2))), "does not end with exactly one value"));
  EXPECT_TRUE(contains(refusal(with_pickle(a, head + "(u" + pk.substr(2))), "pops an empty stack"));
}

}  // namespace
