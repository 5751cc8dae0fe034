// The real executables (nmt-train, nmt-translate, nmt-align): exit codes and
// one-line errors for bad input or options, versions, help, installation
// and configs. The other cli_*_test.cc files run them at work.
#include <expat.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "model/checkpoint.h"
#include "translate/translator.h"
#include "checkpoint_edit.h"
#include "cli_util.h"
#include "test_util.h"
#include "text/alignment.h"
#include "text/corpus.h"
#include "text/metrics.h"


namespace {

namespace fs = std::filesystem;
using nmt::test::read_bytes;
using nmt::test::temp_dir;
using nmt::test::write_bytes;
using nmt::test::write_lines;
using nmt::test::expect_one_line_error;
using nmt::test::quote;
using nmt::test::Result;
using nmt::test::run;
using nmt::test::train_args;
using nmt::test::lines_of;

using Strings = std::vector<std::string>;

TEST(CliTest, TrainRejectsMismatchedLineCounts) {
  const auto dir = temp_dir("cli_mismatch");
  auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  write_lines(f.train_src, {"red cat", "big dog"});
  write_lines(f.train_tgt, {"cato redo", "dogo bigo", "extra"});
  const auto r = run("nmt-train", train_args(f, dir + "/run") + " --max-steps 5", dir);
  expect_one_line_error(r, {"train.tgt:3:"});
  EXPECT_FALSE(fs::exists(dir + "/run/last.ckpt"));
}

TEST(CliTest, TrainRejectsInvalidUtf8) {
  const auto dir = temp_dir("cli_utf8");
  auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  write_lines(f.train_src, {"red cat", "big dog", "old fish"});
  write_lines(f.train_tgt, {"cato redo", "dogo \xC3\x28 bigo", "fisho oldo"});
  const auto r = run("nmt-train", train_args(f, dir + "/run") + " --max-steps 5", dir);
  expect_one_line_error(r, {"train.tgt:2:", "invalid UTF-8"});
}

TEST(CliTest, TrainRejectsMissingFile) {
  const auto dir = temp_dir("cli_missing");
  auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  f.valid_tgt = dir + "/no-such-file.tgt";
  const auto r = run("nmt-train", train_args(f, dir + "/run") + " --max-steps 5", dir);
  expect_one_line_error(r, {"no-such-file.tgt"});
}

TEST(CliTest, TrainRejectsUnknownConfigKey) {
  const auto dir = temp_dir("cli_config");
  auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  const auto cfg = dir + "/bad.toml";
  write_lines(cfg, {"train-src = \"" + f.train_src + "\"", "train-tgt = \"" + f.train_tgt + "\"",
                    "emb-dimm = 16", "max-steps = 1"});
  const auto r = run("nmt-train", "--config " + quote(cfg) + " -o " + quote(dir + "/run"), dir);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("emb-dimm"), std::string::npos) << "the bad key is not named:\n" << r.err;
  EXPECT_FALSE(fs::exists(dir + "/run/last.ckpt"));
}

TEST(CliTest, UsageErrorsExitWithTwo) {
  const auto dir = temp_dir("cli_usage");
  for (const char* tool : {"nmt-train", "nmt-translate", "nmt-align"}) {
    EXPECT_EQ(run(tool, "--no-such-flag", dir).exit_code, 2) << tool;   // CLI11 says 109
    EXPECT_EQ(run(tool, "--threads", dir).exit_code, 2) << tool;        // a flag without its value
    EXPECT_EQ(run(tool, "--help", dir).exit_code, 0) << tool;
  }
  write_lines(dir + "/typo.toml", {"max-epocks = 3"});
  const auto r = run("nmt-train", "-c " + quote(dir + "/typo.toml"), dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("typo.toml:1:1: unknown option 'max-epocks' (did you mean 'max-epochs'?)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir + "/model")) << "nothing is created before the options are good";
}

// With stdin, stdout or stderr closed, a file the tool opens must not take
// their place: nmt-train's log lines once went into .nmt.lock (2>&-) and
// metrics.jsonl (all three closed).
TEST(CliTest, ClosedStandardStreamsReceiveNothingOfTheTools) {
  const auto dir = temp_dir("cli_closed_streams");
  const auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  for (const std::string closed : {"2>&-", "<&- >&- 2>&-"}) {
    SCOPED_TRACE(closed);
    const std::string out = dir + "/run";
    nmt::test::remove_tree(out);
    const std::string cmd = "NMT_THREADS=1 " + quote(nmt::test::bin("nmt-train")) + " " + train_args(f, out) +
                            " --max-steps 2 --valid-every 2 " + closed;
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
    for (const auto& e : fs::directory_iterator(out)) {
      if (e.path().extension() == ".ckpt" || e.path().filename() == "train.log") continue;
      EXPECT_FALSE(nmt::test::contains(read_bytes(e.path().string()), "] [info] "))
          << e.path() << " holds log lines";
    }
    EXPECT_TRUE(fs::exists(out + "/last.ckpt"));
  }
}

TEST(CliTest, EveryToolPrintsItsVersion) {
  const auto dir = temp_dir("cli_version");
  for (const char* tool : {"nmt-train", "nmt-translate", "nmt-align"}) {
    const auto r = run(tool, "--version", dir);
    EXPECT_EQ(r.exit_code, 0) << tool << ": " << r.err;
    for (const char* part : {"nmt 0.", "(commit ", "LibTorch ", "CUDA: ", "BLAS: ", "SentencePiece module: /"})
      EXPECT_NE(r.out.find(part), std::string::npos) << tool << " --version lacks '" << part << "':\n" << r.out;
  }
}

// --info shows what a checkpoint holds without loading it for translation.
TEST(CliTest, InfoDescribesACheckpoint) {
  const auto dir = temp_dir("cli_info");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  auto r = run("nmt-translate", "-m " + quote(ckpt) + " --info", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto loaded = nmt::load_checkpoint(ckpt, torch::kCPU);
  for (const std::string& part : std::vector<std::string>{
           "format version: 3\n", "parameters: " + std::to_string(nmt::count_parameters(*loaded.model)) + "\n",
        "source vocabulary: " + std::to_string(loaded.src_tok.vocab_size()) + " pieces\n",
        "target vocabulary: " + std::to_string(loaded.tgt_tok.vocab_size()) + " pieces\n",
        "training state: yes", "\nstep: ", "  emb_dim=" + std::to_string(loaded.options.emb_dim) + "\n"})
    EXPECT_NE(r.out.find(part), std::string::npos) << "'" << part << "' missing from:\n" << r.out;
  r = run("nmt-translate", "-m " + quote(ckpt) + " --info --score-pairs", dir);
  expect_one_line_error(r, {"--info"}, nmt::test::kExitUsage);
}

// cmake --install puts the three tools in PREFIX/bin and the SentencePiece
// module in PREFIX/lib/nmt, where the installed tools find it, and they run
// from there (they translate with a checkpoint).
TEST(CliTest, InstalledToolsRunFromTheirPrefix) {
  const auto dir = temp_dir("cli_install");
  const std::string prefix = dir + "/prefix";
  const std::string install = quote(NMT_CMAKE_COMMAND) + " --install " + quote(NMT_BINARY_DIR) + " --prefix " +
                              quote(prefix) + " > " + quote(dir + "/install.log") + " 2>&1";
  ASSERT_EQ(std::system(install.c_str()), 0) << read_bytes(dir + "/install.log");
  for (const char* f : {"bin/nmt-train", "bin/nmt-translate", "bin/nmt-align", "lib/nmt/libnmt_spm.so"})
    EXPECT_TRUE(fs::exists(prefix + "/" + f)) << f;
  const std::string version = "NMT_THREADS=1 " + quote(prefix + "/bin/nmt-translate") + " --version > " +
                              quote(dir + "/version.txt");
  ASSERT_EQ(std::system(version.c_str()), 0);
  EXPECT_NE(read_bytes(dir + "/version.txt").find("SentencePiece module: " + prefix + "/lib/nmt/libnmt_spm.so"),
            std::string::npos)
      << read_bytes(dir + "/version.txt");
  write_lines(dir + "/in.txt", {"red cat"});
  const std::string translate = "NMT_THREADS=1 " + quote(prefix + "/bin/nmt-translate") + " -m " +
                                quote(nmt::test::trained_toy_checkpoint()) + " < " + quote(dir + "/in.txt") + " > " +
                                quote(dir + "/out.txt") + " 2> " + quote(dir + "/err.txt");
  ASSERT_EQ(std::system(translate.c_str()), 0) << read_bytes(dir + "/err.txt");
  const std::string out = read_bytes(dir + "/out.txt");
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST(CliTest, DumpConfigReadsBackUnchanged) {
  const auto dir = temp_dir("cli_dump");
  const struct {
    const char* tool;
    std::string flags;
  } cases[] = {{"nmt-train", "--train-src a.en --train-tgt a.de --emb-dim 64 --attention dot --dec-hidden 128 "
                             "--enc-hidden 64 --learning-rate 0.0005 --shared-vocab"},
               {"nmt-translate", "-m one.ckpt -m two.ckpt -b 5 --length-penalty 1.2"},
               {"nmt-align", "--aligner ibm2 --format pharaoh --symmetrize union"}};
  for (const auto& c : cases) {
    const auto first = run(c.tool, c.flags + " --dump-config", dir);
    ASSERT_EQ(first.exit_code, 0) << c.tool << ": " << first.err;
    write_lines(dir + "/dumped.toml", {first.out});
    const auto second = run(c.tool, "-c " + quote(dir + "/dumped.toml") + " --dump-config", dir);
    ASSERT_EQ(second.exit_code, 0) << c.tool << ": " << second.err;
    EXPECT_EQ(second.out, first.out) << c.tool;
    // The command line overrides the file.
    const auto over = run(c.tool, "--config=" + quote(dir + "/dumped.toml") + " --threads 3 --dump-config", dir);
    EXPECT_NE(over.out.find("threads = 3"), std::string::npos) << over.out;
  }
}

TEST(CliTest, TranslateRejectsMissingModel) {
  const auto dir = temp_dir("cli_nomodel");
  const auto model = dir + "/absent.ckpt";
  const auto r = run("nmt-translate", "-m " + quote(model) + " --device cpu --threads 1", dir);
  expect_one_line_error(r, {model});
}

TEST(CliTest, TranslateRejectsCorruptModel) {
  const auto dir = temp_dir("cli_corrupt");
  const auto model = dir + "/corrupt.ckpt";
  std::mt19937 rng(9);
  std::string junk;
  for (int i = 0; i < 5000; ++i) junk.push_back(static_cast<char>(rng()));
  write_bytes(model, junk);
  auto r = run("nmt-translate", "-m " + quote(model) + " --device cpu --threads 1", dir);
  expect_one_line_error(r, {model, "not an nmt checkpoint"});
  // A real header and checksum over garbage: the tensor header is refused.
  nmt::test::write_sealed(model, junk);
  r = run("nmt-translate", "-m " + quote(model) + " --device cpu --threads 1", dir);
  expect_one_line_error(r, {model, "tensor header"});
}

TEST(CliTest, TrainRejectsAnEmptyCorpus) {
  const auto dir = temp_dir("cli_empty");
  nmt::test::write_bytes(dir + "/e.src", "");
  nmt::test::write_bytes(dir + "/e.tgt", "");
  auto r = run("nmt-train", "--train-src " + quote(dir + "/e.src") + " --train-tgt " + quote(dir + "/e.tgt") +
                                " -o " + quote(dir + "/out"), dir);
  expect_one_line_error(r, {"e.src", "no usable training pairs"});
}

// A missing option a run cannot do without is a usage error (exit 2) naming
// the option, before anything is read or created.
TEST(CliTest, MissingRequiredOptionsAreUsageErrors) {
  const auto dir = temp_dir("cli_required");
  write_lines(dir + "/a.en", {"red cat"});
  write_lines(dir + "/a.de", {"cato redo"});
  const std::string en = quote(dir + "/a.en"), de = quote(dir + "/a.de");
  const int usage = nmt::test::kExitUsage;
  expect_one_line_error(run("nmt-translate", "--threads 1", dir), {"--model (-m) is required"}, usage);
  expect_one_line_error(run("nmt-align", "--src " + en + " --tgt " + de, dir), {"--model (-m) is required"}, usage);
  expect_one_line_error(run("nmt-align", "--aligner ibm2 --src " + en, dir), {"--tgt is required"}, usage);
  expect_one_line_error(run("nmt-translate", "-m x.ckpt --score-pairs --src " + en, dir), {"--tgt is required"}, usage);
  const std::string out = " -o " + quote(dir + "/run");
  expect_one_line_error(run("nmt-train", out, dir), {"--train-src is required"}, usage);
  expect_one_line_error(run("nmt-train", "--train-src " + en + out, dir), {"--train-tgt is required"}, usage);
  expect_one_line_error(run("nmt-train", "--train-src " + en + " --train-tgt " + de + " --valid-src " + en + out, dir),
                        {"--valid-tgt is required"}, usage);
  EXPECT_FALSE(fs::exists(dir + "/run")) << "nothing is created before the options are good";
}

// An unknown option is named with the nearest one, as a misspelt config key
// is; the former spellings are not offered.
TEST(CliTest, UnknownOptionsGetTheNearestName) {
  const auto dir = temp_dir("cli_unknown");
  const int usage = nmt::test::kExitUsage;
  auto r = run("nmt-translate", "--beam 5", dir);
  expect_one_line_error(r, {"unknown option '--beam' (did you mean '--beam-size'?)"}, usage);
  r = run("nmt-train", "--max-epoch=3", dir);
  expect_one_line_error(r, {"unknown option '--max-epoch' (did you mean '--max-epochs'?)"}, usage);
  r = run("nmt-align", "--frobnicate", dir);
  expect_one_line_error(r, {"unknown option '--frobnicate'"}, usage);
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  r = run("nmt-translate", "model.ckpt", dir);
  expect_one_line_error(r, {"unexpected argument 'model.ckpt'"}, usage);
}

// --help never lists "Excludes:" with nothing after it; an option given
// under its former and its present spelling is refused.
TEST(CliTest, HelpNeverShowsAnEmptyExcludesAndFormerSpellingsExcludeTheirOption) {
  const auto dir = temp_dir("cli_help");
  for (const char* tool : {"nmt-train", "nmt-translate", "nmt-align"}) {
    const auto r = run(tool, "--help", dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const auto& line : lines_of(r.out)) {
      const size_t at = line.find("Excludes:");
      if (at != std::string::npos) {
        EXPECT_NE(line.find_first_not_of(' ', at + 9), std::string::npos) << tool << ": " << line;
      }
    }
  }
  expect_one_line_error(run("nmt-translate", "-m x.ckpt --scores --with-scores", dir),
                        {"--scores and --with-scores are one option"}, nmt::test::kExitUsage);
}

// Each config shipped in configs/ reads (and dumps) as nmt-train's options.
TEST(CliTest, ShippedConfigsParse) {
  const auto dir = temp_dir("cli_configs");
  int n = 0;
  for (const auto& e : fs::directory_iterator(std::string(NMT_SOURCE_DIR) + "/configs")) {
    if (e.path().extension() != ".toml") continue;
    ++n;
    const auto r = run("nmt-train", "-c " + quote(e.path().string()) + " --dump-config", dir);
    EXPECT_EQ(r.exit_code, 0) << e.path() << ":\n" << r.err;
  }
  EXPECT_GE(n, 3);
}

}  // namespace
