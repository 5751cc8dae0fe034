// Parallel corpus reading and validation: read_parallel, read_tsv, read_lines.
#include "text/corpus.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "test_util.h"

namespace {

using nmt::test::temp_dir;
using nmt::test::write_bytes;
using nmt::test::write_lines;
using V = std::vector<std::string>;

using nmt::test::contains;
using nmt::test::error_of;

struct Files {
  std::string dir, src, tgt;
  explicit Files(const std::string& tag) : dir(temp_dir(tag)), src(dir + "/a.src"), tgt(dir + "/a.tgt") {}
};

TEST(CorpusTest, ReadsGoodFiles) {
  Files f("corpus_good");
  write_lines(f.src, {"ein Haus", "  zwei  ", "gr\xC3\xBCn"});
  write_lines(f.tgt, {"a house", "two", "green"});
  auto c = nmt::read_parallel(f.src, f.tgt);
  EXPECT_EQ(c.src, (V{"ein Haus", "zwei", "gr\xC3\xBCn"}));
  EXPECT_EQ(c.tgt, (V{"a house", "two", "green"}));
  EXPECT_EQ(c.line, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(c.stats.lines, 3);
  EXPECT_EQ(c.stats.kept, 3);
  EXPECT_EQ(c.stats.empty, 0);
  EXPECT_EQ(c.stats.too_long, 0);
  EXPECT_EQ(c.stats.summary(), "3 pairs read, 3 kept (0 empty, 0 over-long)");
}

TEST(CorpusTest, FileWithoutFinalNewline) {
  Files f("corpus_nonl");
  write_bytes(f.src, "a\nb");
  write_bytes(f.tgt, "x\ny\n");
  auto c = nmt::read_parallel(f.src, f.tgt);
  EXPECT_EQ(c.src, (V{"a", "b"}));
  EXPECT_EQ(c.tgt, (V{"x", "y"}));
}

TEST(CorpusTest, SourceLongerThanTarget) {
  Files f("corpus_srclong");
  write_lines(f.src, {"a", "b", "c", "d"});
  write_lines(f.tgt, {"x", "y"});
  auto msg = error_of([&] { nmt::read_parallel(f.src, f.tgt); });
  EXPECT_TRUE(contains(msg, f.src + ":3:")) << msg;
  EXPECT_TRUE(contains(msg, f.tgt)) << msg;  // names the shorter file too
}

TEST(CorpusTest, TargetLongerThanSource) {
  Files f("corpus_tgtlong");
  write_lines(f.src, {"a", "b"});
  write_lines(f.tgt, {"x", "y", "z"});
  auto msg = error_of([&] { nmt::read_parallel(f.src, f.tgt); });
  EXPECT_TRUE(contains(msg, f.tgt + ":3:")) << msg;
  EXPECT_FALSE(contains(msg, f.src + ":")) << msg;
}

TEST(CorpusTest, InvalidUtf8NamesFileAndLine) {
  Files f("corpus_utf8");
  write_lines(f.src, {"a", "b", "c"});
  write_lines(f.tgt, {"x", "ok \xC3\x28", "z"});
  auto msg = error_of([&] { nmt::read_parallel(f.src, f.tgt); });
  EXPECT_TRUE(contains(msg, f.tgt + ":2:")) << msg;
  EXPECT_TRUE(contains(msg, "invalid UTF-8")) << msg;
  EXPECT_TRUE(contains(msg, "byte 4")) << msg;

  // The same on the source side.
  write_lines(f.src, {"\xED\xA0\x80", "b", "c"});
  write_lines(f.tgt, {"x", "y", "z"});
  msg = error_of([&] { nmt::read_parallel(f.src, f.tgt); });
  EXPECT_TRUE(contains(msg, f.src + ":1:")) << msg;
  EXPECT_TRUE(contains(msg, "invalid UTF-8")) << msg;
}

TEST(CorpusTest, NulByteIsAnError) {
  Files f("corpus_nul");
  write_lines(f.src, {"a", "b"});
  write_bytes(f.tgt, std::string("x\ny\0y\n", 6));
  auto msg = error_of([&] { nmt::read_parallel(f.src, f.tgt); });
  EXPECT_TRUE(contains(msg, f.tgt + ":2:")) << msg;
  EXPECT_TRUE(contains(msg, "NUL")) << msg;
}

TEST(CorpusTest, MissingFileNamesPath) {
  Files f("corpus_missing");
  write_lines(f.src, {"a"});
  const std::string missing = f.dir + "/does-not-exist.tgt";
  auto msg = error_of([&] { nmt::read_parallel(f.src, missing); });
  EXPECT_TRUE(contains(msg, missing)) << msg;
  msg = error_of([&] { nmt::read_parallel(missing, f.src); });
  EXPECT_TRUE(contains(msg, missing)) << msg;
  msg = error_of([&] { nmt::read_tsv(missing); });
  EXPECT_TRUE(contains(msg, missing)) << msg;
  msg = error_of([&] { nmt::read_lines(missing); });
  EXPECT_TRUE(contains(msg, missing)) << msg;
}

TEST(CorpusTest, EmptyAndOverlongPairsAreSkippedAndCounted) {
  Files f("corpus_skip");
  // lines:             1      2   3      4                5        6       7
  write_lines(f.src, {"one", "", "two", "0123456789abc", "three", "  \t ", "four"});
  write_lines(f.tgt, {"eins", "leer", "", "lang", "drei", "nichts", "0123456789abcdef"});
  nmt::CorpusLimits limits;
  limits.max_line_bytes = 12;
  auto c = nmt::read_parallel(f.src, f.tgt, limits);
  EXPECT_EQ(c.src, (V{"one", "three"}));
  EXPECT_EQ(c.tgt, (V{"eins", "drei"}));
  EXPECT_EQ(c.line, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(c.stats.lines, 7);
  EXPECT_EQ(c.stats.kept, 2);
  EXPECT_EQ(c.stats.empty, 3);     // lines 2, 3, 6
  EXPECT_EQ(c.stats.too_long, 2);  // lines 4, 7
  EXPECT_EQ(c.stats.summary(), "7 pairs read, 2 kept (3 empty, 2 over-long)");

  // The limit counts bytes after trimming, and a line at the limit is kept.
  write_lines(f.src, {"  123456789012  "});
  write_lines(f.tgt, {"x"});
  c = nmt::read_parallel(f.src, f.tgt, limits);
  EXPECT_EQ(c.src, (V{"123456789012"}));
}

TEST(CorpusTest, CrlfLineEndingsAreTrimmed) {
  Files f("corpus_crlf");
  write_bytes(f.src, "a b\r\nc\r\n");
  write_bytes(f.tgt, "x\r\ny z \r\n");
  auto c = nmt::read_parallel(f.src, f.tgt);
  EXPECT_EQ(c.src, (V{"a b", "c"}));
  EXPECT_EQ(c.tgt, (V{"x", "y z"}));
}

TEST(CorpusTest, CheckedLine) {
  EXPECT_EQ(nmt::checked_line(" hi\r", "f", 1), "hi");
  auto msg = error_of([] { nmt::checked_line("a\xFF", "some/file", 17); });
  EXPECT_TRUE(contains(msg, "some/file:17:")) << msg;
}

TEST(CorpusTest, ReadTsv) {
  Files f("corpus_tsv");
  const std::string path = f.dir + "/pairs.tsv";
  write_bytes(path, "ein Haus\ta house\r\n\n  zwei \t two\nlong source\tx\n");
  nmt::CorpusLimits limits;
  limits.max_line_bytes = 10;
  auto c = nmt::read_tsv(path, limits);
  EXPECT_EQ(c.src, (V{"ein Haus", "zwei"}));
  EXPECT_EQ(c.tgt, (V{"a house", "two"}));
  EXPECT_EQ(c.line, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.stats.lines, 4);
  EXPECT_EQ(c.stats.kept, 2);
  EXPECT_EQ(c.stats.empty, 1);
  EXPECT_EQ(c.stats.too_long, 1);
}

// A pair with one empty side is "merely unusable": corpus.h promises it is
// skipped and counted, as read_parallel does, not a fatal error.
TEST(CorpusTest, ReadTsvSkipsPairWithEmptySide) {
  Files f("corpus_tsv_empty_side");
  const std::string path = f.dir + "/pairs.tsv";
  write_bytes(path, "a\tb\n\tonly target\nonly source\t\nc\td\n");
  nmt::ParallelCorpus c;
  try {
    c = nmt::read_tsv(path);
  } catch (const nmt::Error& e) {
    FAIL() << "an empty TSV side should be skipped, not rejected: " << e.what();
  }
  EXPECT_EQ(c.src, (V{"a", "c"}));
  EXPECT_EQ(c.tgt, (V{"b", "d"}));
  EXPECT_EQ(c.line, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(c.stats.empty, 2);
}

TEST(CorpusTest, ReadTsvRejectsWrongTabCount) {
  Files f("corpus_tsv_bad");
  const std::string path = f.dir + "/pairs.tsv";
  write_lines(path, {"a\tb", "no tab here", "c\td"});
  auto msg = error_of([&] { nmt::read_tsv(path); });
  EXPECT_TRUE(contains(msg, path + ":2:")) << msg;
  EXPECT_TRUE(contains(msg, "tab")) << msg;

  write_lines(path, {"a\tb", "c\td", "one\ttwo\tthree"});
  msg = error_of([&] { nmt::read_tsv(path); });
  EXPECT_TRUE(contains(msg, path + ":3:")) << msg;

  write_lines(path, {"a\tb", "\xC0\x80\tb"});
  msg = error_of([&] { nmt::read_tsv(path); });
  EXPECT_TRUE(contains(msg, path + ":2:")) << msg;
  EXPECT_TRUE(contains(msg, "invalid UTF-8")) << msg;
}

TEST(CorpusTest, ReadLinesKeepsEmptyLines) {
  Files f("corpus_lines");
  const std::string path = f.dir + "/mono.txt";
  write_bytes(path, "first\n\n  third \r\n\n");
  EXPECT_EQ(nmt::read_lines(path), (V{"first", "", "third", ""}));

  write_bytes(path, "ok\nbad \xE0\x80\x80\n");
  auto msg = error_of([&] { nmt::read_lines(path); });
  EXPECT_TRUE(contains(msg, path + ":2:")) << msg;
}

}  // namespace
