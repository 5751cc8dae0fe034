// A tiny end-to-end run of the real executables: nmt-train, then
// nmt-translate and nmt-align with the model it wrote.
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
using nmt::test::csv_fields;

// Trains the toy model with -v into `run_dir` (inputs `f`, run in `dir`)
// and checks what it writes: checkpoints, the verbose log, train.log and
// the curves picture, redrawn at the last validation.
void expect_a_verbose_training_run(const std::string& dir, const nmt::test::ToyFiles& f, const std::string& run_dir) {
  const auto r = run("nmt-train", train_args(f, run_dir) + " --max-steps 150 --valid-every 50 --log-every 50 --learning-rate 0.01 -v", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ckpt = run_dir + "/best.ckpt";
  ASSERT_TRUE(fs::exists(ckpt));
  ASSERT_TRUE(fs::exists(run_dir + "/last.ckpt"));
  // -v: the effective options, each checkpoint written, data preparation timings;
  // train.log holds what went to stderr from the moment the folder was taken.
  EXPECT_NE(r.err.find("effective options"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("wrote " + run_dir + "/step-50.ckpt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("read the training data in"), std::string::npos) << r.err;
  const std::string log = read_bytes(run_dir + "/train.log");
  for (const char* part : {"effective options", "valid | step 50", "training finished"})
    EXPECT_NE(log.find(part), std::string::npos) << part << "\n" << log;
  // The curves picture is redrawn at each validation, the last one included.
  std::smatch last;
  ASSERT_TRUE(std::regex_search(log, last, std::regex("training finished \\([a-z_]+\\): ([0-9]+) steps"))) << log;
  const std::string svg = read_bytes(run_dir + "/training-curves.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("BLEU at step " + last[1].str() + ":"), std::string::npos) << svg;
}

// Translates lines with the model `ckpt` (`loaded`): one output line per
// input line, in order, the same as each line alone (near ties aside), and
// the same through --output.
void expect_translations_in_order(const std::string& dir, const std::string& ckpt, const nmt::LoadedModel& loaded) {
  // Translate: one output line per input line, in order; empty stays empty.
  const std::vector<std::string> input = {"red cat sees big dog", "blue bird", "", "old fish eats new tree house",
                                          "green", "", "small dog runs"};
  const auto in_file = dir + "/input.txt";
  write_lines(in_file, input);
  auto r = run("nmt-translate", "-m " + quote(ckpt) + " --device cpu --threads 1 --batch-sentences 2", dir, in_file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  {
    std::istringstream s(r.out);
    std::string l;
    while (std::getline(s, l)) out.push_back(l);
  }
  ASSERT_EQ(out.size(), input.size()) << r.out;
  EXPECT_EQ(r.out.back(), '\n');
  // The model must tell the inputs apart, or the order check below is void.
  std::set<std::string> distinct;
  for (const auto& l : out)
    if (!l.empty()) distinct.insert(l);
  EXPECT_GE(distinct.size(), 4u) << r.out;
  nmt::Translator tr(loaded);
  nmt::TranslateOptions one;
  one.batch_sentences = 1;
  // Alone, the products have other shapes: the same text unless a choice
  // was a near tie (nmt::test::greedy_near_tie()).
  int compared = 0;
  for (size_t i = 0; i < input.size(); ++i) {
    if (input[i].empty()) {
      EXPECT_EQ(out[i], "") << "line " << i;
      continue;
    }
    const auto alone = tr.translate({input[i]}, one)[0][0];
    if (nmt::test::greedy_near_tie(tr, input[i], alone, one.search)) continue;
    ++compared;
    EXPECT_EQ(out[i], tr.detokenize(alone, input[i], false)) << "line " << i << " out of order or wrong";
  }
  EXPECT_GT(compared, 0) << "every choice a near tie: nothing compared";
  // --output writes a file with the same lines.
  r = run("nmt-translate", "-m " + quote(ckpt) + " --device cpu --threads 1 -i " + quote(in_file) + " -o " +
                               quote(dir + "/out.txt"),
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string joined;
  for (const auto& l : out) joined += l + "\n";
  EXPECT_EQ(read_bytes(dir + "/out.txt"), joined);
}

// Forced alignment with the model `ckpt` (`loaded`): CSV blocks with the
// source pieces as header and one row per target piece, each summing to 1.
void expect_forced_attention_csv(const std::string& dir, const std::string& ckpt, const nmt::LoadedModel& loaded) {
  // Align (forced): CSV blocks with the source pieces as header; rows sum to 1.
  const std::vector<std::string> asrc = {"red cat sees big dog", "old fish"};
  const std::vector<std::string> atgt = {"dogo bigo seeso cato redo", "fisho oldo"};
  write_lines(dir + "/a.src", asrc);
  write_lines(dir + "/a.tgt", atgt);
  const auto r = run("nmt-align", "-m " + quote(ckpt) + " --device cpu --threads 1 --src " + quote(dir + "/a.src") + " --tgt " +
                           quote(dir + "/a.tgt"),
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::vector<std::string>> blocks(1);
  {
    std::istringstream s(r.out);
    std::string l;
    while (std::getline(s, l)) {
      if (l.empty()) blocks.emplace_back();
      else blocks.back().push_back(l);
    }
  }
  ASSERT_EQ(blocks.size(), asrc.size()) << r.out;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const auto& block = blocks[k];
    auto src_pieces = loaded.src_tok.pieces(asrc[k]);
    src_pieces.push_back("</s>");
    auto tgt_pieces = loaded.tgt_tok.pieces(atgt[k]);
    tgt_pieces.push_back("</s>");
    ASSERT_EQ(block.size(), tgt_pieces.size() + 1) << "block " << k;
    const auto header = csv_fields(block[0]);
    ASSERT_EQ(header.size(), src_pieces.size() + 1);
    EXPECT_EQ(header[0], "");
    for (size_t j = 0; j < src_pieces.size(); ++j) EXPECT_EQ(header[j + 1], src_pieces[j]) << "block " << k;
    for (size_t t = 0; t < tgt_pieces.size(); ++t) {
      const auto row = csv_fields(block[t + 1]);
      ASSERT_EQ(row.size(), header.size()) << block[t + 1];
      EXPECT_EQ(row[0], tgt_pieces[t]);
      double sum = 0;
      for (size_t j = 1; j < row.size(); ++j) {
        const double w = std::stod(row[j]);
        EXPECT_GE(w, 0.0);
        sum += w;
      }
      EXPECT_NEAR(sum, 1.0, 1e-4) << block[t + 1];
    }
  }
}

TEST(CliTest, TrainTranslateAlignEndToEnd) {
  const auto dir = temp_dir("cli_e2e");
  const auto f = nmt::test::write_toy_corpus(dir, 200, 20);
  const auto run_dir = dir + "/model";
  ASSERT_NO_FATAL_FAILURE(expect_a_verbose_training_run(dir, f, run_dir));
  const auto ckpt = run_dir + "/best.ckpt";
  const auto loaded = nmt::load_checkpoint(ckpt, torch::kCPU);
  ASSERT_NO_FATAL_FAILURE(expect_translations_in_order(dir, ckpt, loaded));
  expect_forced_attention_csv(dir, ckpt, loaded);
}

}  // namespace
