// The real executables (nmt-train, nmt-translate, nmt-align): exit codes and
// one-line errors for bad input, and a tiny end-to-end run.
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

const std::string kBin = NMT_BINARY_DIR;
using nmt::test::expect_one_line_error;
using nmt::test::quote;
using nmt::test::Result;
using nmt::test::run;

std::string train_args(const nmt::test::ToyFiles& f, const std::string& out) {
  return "--train-src " + quote(f.train_src) + " --train-tgt " + quote(f.train_tgt) + " --valid-src " +
         quote(f.valid_src) + " --valid-tgt " + quote(f.valid_tgt) + " -o " + quote(out) +
         " --emb-dim 16 --enc-hidden 16 --dec-hidden 32 --attn-dim 16 --vocab-size 60 --threads 1 --device cpu"
         " --batch-tokens 300";
}

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
    fs::remove_all(out);
    const std::string cmd = "NMT_THREADS=1 " + quote(kBin + "/nmt-train") + " " + train_args(f, out) +
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
  EXPECT_NE(read_bytes(dir + "/version.txt").find("SentencePiece module: " + prefix + "/bin/../lib/nmt/libnmt_spm.so"),
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

// Splits one CSV line with "..." quoting ("" inside quotes is a quote).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

TEST(CliTest, TrainTranslateAlignEndToEnd) {
  const auto dir = temp_dir("cli_e2e");
  const auto f = nmt::test::write_toy_corpus(dir, 200, 20);
  const auto run_dir = dir + "/model";
  auto r = run("nmt-train", train_args(f, run_dir) + " --max-steps 150 --valid-every 50 --log-every 50 --learning-rate 0.01 -v", dir);
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

  // Translate: one output line per input line, in order; empty stays empty.
  const std::vector<std::string> input = {"red cat sees big dog", "blue bird", "", "old fish eats new tree house",
                                          "green", "", "small dog runs"};
  const auto in_file = dir + "/input.txt";
  write_lines(in_file, input);
  r = run("nmt-translate", "-m " + quote(ckpt) + " --device cpu --threads 1 --batch-size 2", dir, in_file);
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
  auto loaded = nmt::load_checkpoint(ckpt, torch::kCPU);
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

  // Align (forced): CSV blocks with the source pieces as header; rows sum to 1.
  const std::vector<std::string> asrc = {"red cat sees big dog", "old fish"};
  const std::vector<std::string> atgt = {"dogo bigo seeso cato redo", "fisho oldo"};
  write_lines(dir + "/a.src", asrc);
  write_lines(dir + "/a.tgt", atgt);
  r = run("nmt-align", "-m " + quote(ckpt) + " --device cpu --threads 1 --src " + quote(dir + "/a.src") + " --tgt " +
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

}  // namespace

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

std::vector<std::string> split_bars(const std::string& line) {
  std::vector<std::string> f;
  size_t pos = 0;
  while (true) {
    size_t bar = line.find(" ||| ", pos);
    f.push_back(line.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos));
    if (bar == std::string::npos) return f;
    pos = bar + 5;
  }
}

TEST(CliTest, TranslateNBestFormatAndRanks) {
  const auto dir = temp_dir("cli_nbest");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/in.txt", {"red cat sees big dog", "", "old fish eats"});
  auto r = run("nmt-translate", "-m " + quote(ckpt) + " -b 4 --n-best 3", dir, dir + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = lines_of(r.out);
  std::map<int, std::vector<double>> scores;
  for (const auto& l : out) {
    // Moses' form, which rerankers read: i ||| hypothesis ||| features ||| score.
    auto f = split_bars(l);
    ASSERT_EQ(f.size(), 4u) << "not 'i ||| hyp ||| features ||| score': " << l;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(f[2], m, std::regex(R"(LogProb= (-?[0-9.]+) Length= ([0-9]+) LengthPenalty= ([0-9.]+))")))
        << f[2];
    const double score = std::stod(f[3]);
    EXPECT_LE(std::stod(m[1]), 0.0) << l;
    EXPECT_EQ(std::stoul(m[2]) > 0, !f[1].empty()) << "Length counts the hypothesis' pieces: " << l;
    // Each figure is printed to 4 decimals, within h = 5e-5 of its value:
    // L / P then moves by at most h / P + |L| h / P^2 (P >= 1), the score by
    // h; the float score itself is within a few float roundings of L / P.
    const double L = std::stod(m[1]), P = std::stod(m[3]), h = 5e-5;
    ASSERT_GE(P, 1.0) << l;
    const double bound = h / P + std::abs(L) * h / (P * P) + h + 4 * 0x1p-24 * std::abs(score);
    EXPECT_NEAR(L / P, score, bound) << "score = LogProb / LengthPenalty: " << l;
    scores[std::stoi(f[0])].push_back(score);
  }
  ASSERT_EQ(scores.size(), 3u) << r.out;
  EXPECT_EQ(scores[0].size(), 3u);
  EXPECT_EQ(scores[1].size(), 1u);  // an empty line has one (empty) hypothesis
  EXPECT_EQ(scores[2].size(), 3u);
  for (auto& [i, s] : scores)
    for (size_t k = 1; k < s.size(); ++k) EXPECT_GE(s[k - 1], s[k]) << "sentence " << i << " not best first";
  // The first hypothesis of each sentence is the plain output of the same beam.
  auto plain = run("nmt-translate", "-m " + quote(ckpt) + " -b 4 --with-scores", dir, dir + "/in.txt");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto p = lines_of(plain.out);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(split_bars(p[0])[0], split_bars(out[0])[1]);
  EXPECT_EQ(std::stod(split_bars(p[0])[1]), scores[0][0]);
  // An empty line's one hypothesis has no pieces.
  for (const auto& l : out)
    if (split_bars(l)[0] == "1") {
      EXPECT_NE(split_bars(l)[2].find("Length= 0 "), std::string::npos) << l;
    }
}

TEST(CliTest, TranslateScoreModePrintsOneLogProbPerPair) {
  const auto dir = temp_dir("cli_score");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  nmt::test::write_bytes(dir + "/pairs.tsv", "red cat\tcato redo\nred cat\tfisho fisho fisho\n\tcato\n");
  auto r = run("nmt-translate", "-m " + quote(ckpt) + " --score-pairs", dir, dir + "/pairs.tsv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = lines_of(r.out);
  ASSERT_EQ(out.size(), 3u) << r.out;
  const double good = std::stod(out[0]), bad = std::stod(out[1]);
  EXPECT_LT(good, 0);
  EXPECT_GT(good, bad) << "the right translation should be more probable";
  auto loaded = nmt::load_checkpoint(ckpt, torch::kCPU);
  nmt::Translator tr(loaded);
  EXPECT_NEAR(good, tr.score({"red cat"}, {"cato redo"}, 1)[0], 1e-3);
  // A line without a tab is a located error.
  nmt::test::write_bytes(dir + "/bad.tsv", "red cat\tcato\nno tab here\n");
  r = run("nmt-translate", "-m " + quote(ckpt) + " --score-pairs -i " + quote(dir + "/bad.tsv"), dir);
  expect_one_line_error(r, {"bad.tsv:2:", "tab"});
}

// The former spellings --score and --scores still work, with a warning, and
// pairs given to translation (the old one-letter slip) are pointed out.
TEST(CliTest, TranslateWarnsOnFormerSpellingsAndTabInput) {
  const auto dir = temp_dir("cli_spelling");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  nmt::test::write_bytes(dir + "/pairs.tsv", "red cat\tcato redo\nold fish\tfisho\n");
  auto scores = run("nmt-translate", "-m " + quote(ckpt) + " --scores", dir, dir + "/pairs.tsv");
  ASSERT_EQ(scores.exit_code, 0) << scores.err;
  EXPECT_NE(scores.err.find("--scores is deprecated: use --with-scores"), std::string::npos) << scores.err;
  EXPECT_NE(scores.err.find("line 1 holds a TAB"), std::string::npos) << scores.err;
  EXPECT_NE(scores.err.find("--score-pairs"), std::string::npos) << scores.err;
  const auto lines = lines_of(scores.out);
  ASSERT_EQ(lines.size(), 2u) << scores.out;
  EXPECT_NE(lines[0].find(" ||| "), std::string::npos) << lines[0];
  // The old --score scores the pairs exactly as --score-pairs does.
  auto old = run("nmt-translate", "-m " + quote(ckpt) + " --score", dir, dir + "/pairs.tsv");
  auto now = run("nmt-translate", "-m " + quote(ckpt) + " --score-pairs", dir, dir + "/pairs.tsv");
  ASSERT_EQ(old.exit_code, 0) << old.err;
  ASSERT_EQ(now.exit_code, 0) << now.err;
  EXPECT_EQ(old.out, now.out);
  EXPECT_NE(old.err.find("--score is deprecated: use --score-pairs"), std::string::npos) << old.err;
  EXPECT_EQ(now.err.find("deprecated"), std::string::npos) << now.err;
  EXPECT_EQ(now.err.find("TAB"), std::string::npos) << now.err;
}

TEST(CliTest, TranslateRejectsBadSearchOptions) {
  const auto dir = temp_dir("cli_badopt");
  auto r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " -b 2 --n-best 5", dir);
  expect_one_line_error(r, {"n-best"}, nmt::test::kExitUsage);
  // Options that would do nothing in score mode are refused, not ignored.
  r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --score-pairs -b 5 --n-best 2", dir);
  expect_one_line_error(r, {"--score-pairs"}, nmt::test::kExitUsage);
}

TEST(CliTest, AReferenceOfTheWrongLengthNeverCostsTheTranslations) {
  const auto dir = temp_dir("cli_refcount");
  const auto model = quote(nmt::test::trained_toy_checkpoint());
  write_lines(dir + "/in.txt", {"red cat", "old fish eats", "big dog"});
  write_lines(dir + "/one.txt", {"cato redo"});
  // A file input is counted first: nothing is translated, nothing written.
  auto r = run("nmt-translate", "-m " + model + " -i " + quote(dir + "/in.txt") + " -o " + quote(dir + "/out.txt") +
                                    " --reference " + quote(dir + "/one.txt"), dir);
  expect_one_line_error(r, {"one.txt", "1 reference lines for 3 input lines"});
  EXPECT_FALSE(fs::exists(dir + "/out.txt"));
  // From stdin the count is known only at the end: the translations are kept.
  r = run("nmt-translate", "-m " + model + " -o " + quote(dir + "/out.txt") + " --reference " + quote(dir + "/one.txt"),
          dir, dir + "/in.txt");
  expect_one_line_error(r, {"one.txt", "1 reference lines for 3 input lines"});
  EXPECT_EQ(lines_of(nmt::test::read_bytes(dir + "/out.txt")).size(), 3u);
}

TEST(CliTest, TranslateNBestWithoutBeamSizeWidensTheBeam) {
  const auto dir = temp_dir("cli_nbest_nob");
  write_lines(dir + "/in.txt", {"red cat sees big dog"});
  auto r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --n-best 3", dir,
               dir + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 3u) << r.out;
}

}  // namespace

namespace {

TEST(CliTest, TranslateCropsAMegabyteLine) {
  const auto dir = temp_dir("cli_long");
  std::string huge;
  while (huge.size() < (1u << 20)) huge += "red cat sees big dog ";
  write_lines(dir + "/in.txt", {"red cat", huge, "old fish"});
  auto r = run("nmt-translate", "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --max-input-length 200", dir,
               dir + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 3u);
  EXPECT_NE(r.err.find("1 input line longer than 200 pieces was cropped"), std::string::npos) << r.err;
}

TEST(CliTest, TranslateReportsUnwritableOutputAndFullDisk) {
  const auto dir = temp_dir("cli_full");
  write_lines(dir + "/in.txt", {"red cat", "old fish"});
  const auto model = quote(nmt::test::trained_toy_checkpoint());
  auto r = run("nmt-translate", "-m " + model + " -i " + quote(dir + "/in.txt") + " -o " + quote(dir + "/no/such/dir/out"), dir);
  expect_one_line_error(r, {"no/such/dir/out", "cannot open output"});
  // stdout on a full disk: the write error is reported, not ignored.
  const std::string cmd = "NMT_THREADS=1 " + quote(kBin + "/nmt-translate") + " -m " + model + " < " +
                          quote(dir + "/in.txt") + " > /dev/full 2> " + quote(dir + "/err.txt");
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(read_bytes(dir + "/err.txt").find("write failed"), std::string::npos) << read_bytes(dir + "/err.txt");
}

TEST(CliTest, TrainRejectsAnEmptyCorpus) {
  const auto dir = temp_dir("cli_empty");
  nmt::test::write_bytes(dir + "/e.src", "");
  nmt::test::write_bytes(dir + "/e.tgt", "");
  auto r = run("nmt-train", "--train-src " + quote(dir + "/e.src") + " --train-tgt " + quote(dir + "/e.tgt") +
                                " -o " + quote(dir + "/out"), dir);
  expect_one_line_error(r, {"e.src", "no usable training pairs"});
}

}  // namespace

namespace {

TEST(CliTest, TranslateStreamsManyWindowsInOrder) {
  const auto dir = temp_dir("cli_windows");
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(23, 9, &src, &tgt);
  src[4] = "";  // an empty line inside a window
  write_lines(dir + "/in.txt", src);
  const std::string m = "-m " + quote(nmt::test::trained_toy_checkpoint()) + " --threads 1";
  auto whole = run("nmt-translate", m + " --window 1000", dir, dir + "/in.txt");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // Windows of 3 (8 windows, the last one short) sort and batch each window
  // on its own; lines must still come out one per input line, in order.
  auto windows = run("nmt-translate", m + " --window 3 --batch-size 2", dir, dir + "/in.txt");
  ASSERT_EQ(windows.exit_code, 0) << windows.err;
  const auto got = lines_of(windows.out), want = lines_of(whole.out);
  ASSERT_EQ(got.size(), src.size());
  ASSERT_EQ(want.size(), src.size());
  EXPECT_EQ(got[4], "");
  // Other batches mean other product shapes: the same line unless a choice
  // was a near tie (nmt::test::greedy_near_tie()).
  auto loaded = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU);
  nmt::Translator tr(loaded);
  nmt::TranslateOptions one;
  one.batch_sentences = 1;
  int compared = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i].empty() && nmt::test::greedy_near_tie(tr, src[i], tr.translate({src[i]}, one)[0][0], one.search))
      continue;
    ++compared;
    EXPECT_EQ(got[i], want[i]) << "line " << i << " out of order or wrong";
  }
  EXPECT_GT(compared, 1) << "every choice a near tie: nothing compared";
}

TEST(CliTest, TranslateAnswersAWindowWhileThePipeStaysOpen) {
  const auto dir = temp_dir("cli_pipe");
  const auto fifo = dir + "/in";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int hold = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);  // the writing side stays open (not inherited)
  ASSERT_GE(hold, 0);
  auto c = nmt::test::spawn({nmt::test::bin("nmt-translate"), "-m", nmt::test::trained_toy_checkpoint(), "--threads",
                             "1", "--window", "2"},
                            dir + "/err.txt", dir + "/out.txt", fifo);
  (void)!::write(hold, "red cat\nold fish\n", 17);
  // Two lines fill a window: both are answered with the input still open.
  EXPECT_TRUE(nmt::test::wait_until([&] { return lines_of(read_bytes(dir + "/out.txt")).size() == 2; }, 60))
      << read_bytes(dir + "/err.txt");
  (void)!::write(hold, "blue bird\n", 10);
  ::close(hold);
  EXPECT_EQ(nmt::test::wait_exit(c, 60), 0) << read_bytes(dir + "/err.txt");
  EXPECT_EQ(lines_of(read_bytes(dir + "/out.txt")).size(), 3u);
}

TEST(CliTest, TranslateAnswersOneLineAsSoonAsThePipePauses) {
  const auto dir = temp_dir("cli_pipe_one");
  const auto fifo = dir + "/in";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int hold = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(hold, 0);
  // The default window (1000 lines) only bounds memory: one line is answered while the input stays open.
  auto c = nmt::test::spawn({nmt::test::bin("nmt-translate"), "-m", nmt::test::trained_toy_checkpoint(), "--threads", "1"},
                            dir + "/err.txt", dir + "/out.txt", fifo);
  (void)!::write(hold, "red cat\n", 8);
  EXPECT_TRUE(nmt::test::wait_until([&] { return lines_of(read_bytes(dir + "/out.txt")).size() == 1; }, 60))
      << read_bytes(dir + "/err.txt");
  ::close(hold);
  EXPECT_EQ(nmt::test::wait_exit(c, 60), 0) << read_bytes(dir + "/err.txt");
}

const std::string kDemo = std::string(NMT_SOURCE_DIR) + "/data/demo";

TEST(CliTest, AlignIbm2WritesLinksInsideEachPairAndScoresThem) {
  const auto dir = temp_dir("cli_ibm2");
  auto r = run("nmt-align", "--aligner ibm2 --format pharaoh --src " + quote(kDemo + "/test.src") + " --tgt " +
                                quote(kDemo + "/test.tgt") + " --ibm-train-src " + quote(kDemo + "/train.src") +
                                " --ibm-train-tgt " + quote(kDemo + "/train.tgt") + " --symmetrize grow-diag-final-and" +
                                " --eval-gold " + quote(kDemo + "/test.align") + " -o " + quote(dir + "/links.txt"),
               dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto src = lines_of(read_bytes(kDemo + "/test.src")), tgt = lines_of(read_bytes(kDemo + "/test.tgt"));
  const auto links = lines_of(read_bytes(dir + "/links.txt"));
  ASSERT_EQ(links.size(), src.size());
  for (size_t k = 0; k < links.size(); ++k) {
    const auto gold = nmt::parse_gold_line(links[k], "links.txt", static_cast<int64_t>(k + 1), false);
    for (const auto& [i, j] : gold.sure) {
      EXPECT_LT(i, static_cast<int>(nmt::split_ws(src[k]).size())) << "pair " << k;
      EXPECT_LT(j, static_cast<int>(nmt::split_ws(tgt[k]).size())) << "pair " << k;
    }
  }
  // The demo's generator links are nearly one-to-one; a working aligner gets most.
  const std::regex aer_re(R"(AER ([0-9.]+))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, aer_re)) << r.err;
  EXPECT_LT(std::stod(m[1]), 0.3) << r.err;
}

TEST(CliTest, AlignFreeModeShowsTheAttentionOfTheModelsOwnTranslation) {
  const auto dir = temp_dir("cli_free");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/a.src", {"red cat sees big dog", "old fish"});
  auto tr = run("nmt-translate", "-m " + quote(ckpt) + " --threads 1", dir, dir + "/a.src");
  ASSERT_EQ(tr.exit_code, 0) << tr.err;
  const auto hyps = lines_of(tr.out);
  auto r = run("nmt-align", "-m " + quote(ckpt) + " --threads 1 --src " + quote(dir + "/a.src"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto loaded = nmt::load_checkpoint(ckpt, torch::kCPU);
  std::vector<std::vector<std::string>> blocks(1);
  for (const auto& l : lines_of(r.out)) {
    if (l.empty()) blocks.emplace_back();
    else blocks.back().push_back(l);
  }
  ASSERT_EQ(blocks.size(), 2u) << r.out;
  for (size_t k = 0; k < blocks.size(); ++k) {
    // Rows are the pieces of the translation nmt-translate gives, then </s>.
    auto want = loaded.tgt_tok.pieces(hyps[k]);
    want.push_back("</s>");
    ASSERT_EQ(blocks[k].size(), want.size() + 1) << r.out;
    for (size_t t = 0; t < want.size(); ++t) {
      const auto row = csv_fields(blocks[k][t + 1]);
      EXPECT_EQ(row[0], want[t]) << "pair " << k << " row " << t;
      double sum = 0;
      for (size_t j = 1; j < row.size(); ++j) sum += std::stod(row[j]);
      EXPECT_NEAR(sum, 1.0, 1e-4);
    }
  }
}

}  // namespace

namespace {

// Free mode in pharaoh form names the translation the links refer to, as
// marian-decoder --alignment does; the tidy CSV of both pairs is one table.
TEST(CliTest, AlignFreeModePharaohGivesTranslationAndLinks) {
  const auto dir = temp_dir("cli_free_pharaoh");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/a.src", {"red cat sees big dog", "old fish"});
  auto tr = run("nmt-translate", "-m " + quote(ckpt) + " --threads 1", dir, dir + "/a.src");
  ASSERT_EQ(tr.exit_code, 0) << tr.err;
  const auto hyps = lines_of(tr.out);
  auto r = run("nmt-align", "-m " + quote(ckpt) + " --threads 1 -f pharaoh --src " + quote(dir + "/a.src"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const std::vector<size_t> src_words = {5, 2};
  for (size_t k = 0; k < lines.size(); ++k) {
    const auto parts = split_bars(lines[k]);
    ASSERT_EQ(parts.size(), 2u) << lines[k];
    EXPECT_EQ(parts[0], hyps[k]);
    const auto links = nmt::parse_gold_line(parts[1], "out", static_cast<int64_t>(k + 1), false);
    EXPECT_FALSE(links.sure.empty()) << lines[k];
    for (const auto& [i, j] : links.sure) {
      EXPECT_LT(i, static_cast<int>(src_words[k])) << lines[k];
      EXPECT_LT(j, static_cast<int>(nmt::split_ws(hyps[k]).size())) << lines[k];
    }
  }
  auto tidy = run("nmt-align", "-m " + quote(ckpt) + " --threads 1 -f tidy --src " + quote(dir + "/a.src"), dir);
  ASSERT_EQ(tidy.exit_code, 0) << tidy.err;
  const auto rows = lines_of(tidy.out);
  ASSERT_GT(rows.size(), 1u);
  EXPECT_EQ(rows[0], "pair,tgt_index,tgt_token,src_index,src_token,weight");
  std::set<std::string> pairs;
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(csv_fields(rows[i]).size(), 6u) << rows[i];
    pairs.insert(csv_fields(rows[i])[0]);
  }
  EXPECT_EQ(pairs, (std::set<std::string>{"0", "1"}));
}

TEST(CliTest, TranslateWithAnEnsembleOfCheckpoints) {
  const auto dir = temp_dir("cli_ensemble");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/in.txt", {"red cat sees big dog", "old fish", "blue bird"});
  auto one = run("nmt-translate", "-m " + quote(ckpt) + " -b 3 --with-scores", dir, dir + "/in.txt");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // Two copies of one model average to that model: same lines, same scores.
  auto two = run("nmt-translate", "-m " + quote(ckpt) + " -m " + quote(ckpt) + " -b 3 --with-scores", dir, dir + "/in.txt");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);
  EXPECT_NE(two.err.find("an ensemble of 2"), std::string::npos) << two.err;
}

// Reads "key": number from the flat JSON object nmt-translate --scores-json writes.
double json_field(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": *(-?[0-9.e+-]+)"))) return -1;
  return std::stod(m[1]);
}

TEST(CliTest, ReferenceScoresAreWrittenAsJsonInThreeBleuConventions) {
  const auto dir = temp_dir("cli_scores_json");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(20, 5, &src, &tgt);
  write_lines(dir + "/in.txt", src);
  const std::string in = " -i " + quote(dir + "/in.txt") + " -o " + quote(dir + "/out.txt");
  auto plain = run("nmt-translate", "-m " + quote(ckpt) + in, dir);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto hyps = nmt::read_lines(dir + "/out.txt");
  ASSERT_EQ(hyps.size(), 20u);
  // Two references: the output with a full stop glued to its last word, and
  // the same in capitals. 13a splits the stop off (so every n-gram of the
  // output matches), --tokenize none does not; -lc ignores the capitals.
  std::vector<std::string> glued, upper;
  for (const auto& h : hyps) {
    glued.push_back(h + ".");
    std::string u = h + ".";
    for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    upper.push_back(u);
  }
  write_lines(dir + "/glued.txt", glued);
  write_lines(dir + "/upper.txt", upper);
  auto score = [&](const std::string& ref) {
    auto r = run("nmt-translate", "-m " + quote(ckpt) + in + " --reference " + quote(dir + "/" + ref) +
                                      " --scores-json " + quote(dir + "/s.json"), dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("tok:none"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("case:lc"), std::string::npos) << r.err;
    return read_bytes(dir + "/s.json");
  };
  const nmt::BleuOptions lc{true, "13a"}, none{false, "none"};
  for (const auto* refs : {&glued, &upper}) {
    const std::string json = score(refs == &glued ? "glued.txt" : "upper.txt");
    EXPECT_NEAR(json_field(json, "bleu"), nmt::corpus_bleu(hyps, *refs).score, 1e-3) << json;
    EXPECT_NEAR(json_field(json, "bleu_lc"), nmt::corpus_bleu(hyps, *refs, lc).score, 1e-3) << json;
    EXPECT_NEAR(json_field(json, "bleu_none"), nmt::corpus_bleu(hyps, *refs, none).score, 1e-3) << json;
    EXPECT_NEAR(json_field(json, "chrf"), nmt::corpus_chrf(hyps, *refs).score, 1e-3) << json;
    EXPECT_EQ(json_field(json, "sentences"), 20);
    // Every output n-gram is in the reference for 13a with -lc; only the
    // brevity penalty of the split-off stops remains.
    const auto detail = nmt::corpus_bleu(hyps, *refs, lc);
    EXPECT_NEAR(detail.precisions[0], 100.0, 1e-9);
    EXPECT_GT(json_field(json, "bleu_lc"), json_field(json, "bleu_none")) << json;
    if (refs == &glued) { EXPECT_EQ(json_field(json, "bleu"), json_field(json, "bleu_lc")) << json; }
    if (refs == &upper) { EXPECT_LT(json_field(json, "bleu"), json_field(json, "bleu_lc")) << json; }
    // --evaluate scores the same output, read back from its file, into the same JSON.
    auto ev = run("nmt-translate", "--evaluate -i " + quote(dir + "/out.txt") + " --reference " +
                                       quote(dir + (refs == &glued ? "/glued.txt" : "/upper.txt")) +
                                       " --scores-json " + quote(dir + "/e.json"), dir);
    EXPECT_EQ(ev.exit_code, 0) << ev.err;
    EXPECT_EQ(read_bytes(dir + "/e.json"), json);
  }
  // A reference of the wrong length fails and leaves the earlier scores file.
  const std::string before = read_bytes(dir + "/s.json");
  write_lines(dir + "/short.txt", {glued[0]});
  auto bad = run("nmt-translate", "-m " + quote(ckpt) + in + " --reference " + quote(dir + "/short.txt") +
                                      " --scores-json " + quote(dir + "/s.json"), dir);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(read_bytes(dir + "/s.json"), before);
  // --tokenize and --lowercase choose the main BLEU; the paper figures stay.
  auto chosen = [&](const std::string& flags) {
    auto r = run("nmt-translate", "-m " + quote(ckpt) + in + " --reference " + quote(dir + "/upper.txt") +
                                      " --scores-json " + quote(dir + "/c.json") + " " + flags, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::make_pair(read_bytes(dir + "/c.json"), r.err);
  };
  for (const std::string tok : {"13a", "intl", "char", "none"})
    for (bool lower : {false, true}) {
      const auto [json, err] = chosen("--tokenize " + tok + (lower ? " --lowercase" : ""));
      const auto want = nmt::corpus_bleu(hyps, upper, nmt::BleuOptions{lower, tok});
      EXPECT_NEAR(json_field(json, "bleu"), want.score, 1e-3) << tok << " " << lower << json;
      EXPECT_NE(err.find(want.signature()), std::string::npos) << err;
      EXPECT_NEAR(json_field(json, "bleu_none"), nmt::corpus_bleu(hyps, upper, none).score, 1e-3) << json;
    }
  EXPECT_GT(json_field(chosen("--lowercase").first, "bleu"), json_field(chosen("").first, "bleu"));
  auto bad_tok = run("nmt-translate", "-m " + quote(ckpt) + in + " --reference " + quote(dir + "/upper.txt") +
                                          " --tokenize moses", dir);
  expect_one_line_error(bad_tok, {"moses"}, nmt::test::kExitUsage);
  auto no_ref = run("nmt-translate", "-m " + quote(ckpt) + in + " --lowercase", dir);
  expect_one_line_error(no_ref, {"--reference"}, nmt::test::kExitUsage);
  // --scores-json needs --reference.
  auto lone = run("nmt-translate", "-m " + quote(ckpt) + in + " --scores-json " + quote(dir + "/t.json"), dir);
  EXPECT_NE(lone.exit_code, 0);
  EXPECT_FALSE(fs::exists(dir + "/t.json"));
}

}  // namespace

namespace {

TEST(CliTest, EvaluateScoresTranslationsMadeElsewhere) {
  const auto dir = temp_dir("cli_evaluate");
  const std::vector<std::string> hyps = {"a b c d e", "f g h i j"}, refs = {"a b c d e", "f g x i j"};
  write_lines(dir + "/hyp.txt", hyps);
  write_lines(dir + "/ref.txt", refs);
  const std::string json_flag = " --scores-json " + quote(dir + "/s.json");
  auto r = run("nmt-translate", "--evaluate --tokenize none -i " + quote(dir + "/hyp.txt") + " --reference " +
                                    quote(dir + "/ref.txt") + json_flag, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string json = read_bytes(dir + "/s.json");
  const auto want = nmt::corpus_bleu(hyps, refs, nmt::BleuOptions{false, "none"});
  EXPECT_GT(want.score, 0.0);
  EXPECT_LT(want.score, 100.0);
  EXPECT_NEAR(json_field(json, "bleu"), want.score, 1e-6) << json;
  EXPECT_NE(r.err.find(want.signature()), std::string::npos) << r.err;
  EXPECT_EQ(json_field(json, "sentences"), 2);
  EXPECT_NEAR(json_field(json, "exact_match"), 50.0, 1e-9) << json;
  // Standard input works as the input.
  auto piped = run("nmt-translate", "--evaluate --tokenize none --reference " + quote(dir + "/ref.txt"), dir,
                   dir + "/hyp.txt");
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_NE(piped.err.find(want.to_string()), std::string::npos) << piped.err;
  // A reference of another length: one line naming it, and the scores file stays.
  write_lines(dir + "/one.txt", {refs[0]});
  auto short_ref = run("nmt-translate", "--evaluate -i " + quote(dir + "/hyp.txt") + " --reference " +
                                            quote(dir + "/one.txt") + json_flag, dir);
  expect_one_line_error(short_ref, {"one.txt", "1 reference lines for 2 input lines"});
  EXPECT_EQ(read_bytes(dir + "/s.json"), json);
  // A line that is not UTF-8: its file and line.
  write_bytes(dir + "/bad.txt", "a b c\n\xff\xfe\n");
  auto bad = run("nmt-translate", "--evaluate -i " + quote(dir + "/bad.txt") + " --reference " +
                                      quote(dir + "/ref.txt"), dir);
  expect_one_line_error(bad, {"bad.txt:2:", "invalid UTF-8"});
  // Usage: it needs a reference, and takes no model; -o gets the scores.
  const std::string in = " -i " + quote(dir + "/hyp.txt");
  expect_one_line_error(run("nmt-translate", "--evaluate" + in, dir), {"--reference"}, nmt::test::kExitUsage);
  const std::string ref = " --reference " + quote(dir + "/ref.txt");
  expect_one_line_error(run("nmt-translate", "--evaluate -m x.ckpt" + in + ref, dir), {"-m"}, nmt::test::kExitUsage);
  auto to_file = run("nmt-translate", "--evaluate --tokenize none -o " + quote(dir + "/o.txt") + in + ref, dir);
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_EQ(to_file.out, "");
  EXPECT_EQ(read_bytes(dir + "/o.txt"), piped.out);
}

TEST(CliTest, AlignWritesALexicalTableThatTranslateReadsAsAShortlist) {
  const auto dir = temp_dir("cli_lex");
  const auto files = nmt::test::write_toy_corpus(dir, 300, 20);
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  auto r = run("nmt-align", "--aligner ibm2 --format lex --lex-best 5 -m " + quote(ckpt) + " --src " +
                                quote(files.train_src) + " --tgt " + quote(files.train_tgt) + " -o " +
                                quote(dir + "/lex.tsv"),
               dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto table = lines_of(read_bytes(dir + "/lex.tsv"));
  ASSERT_FALSE(table.empty());
  std::map<std::string, int> per_source;
  for (const auto& line : table) {
    const auto cols = nmt::split_ws(line);  // pieces hold no ASCII whitespace
    ASSERT_EQ(cols.size(), 3u) << line;
    const double p = std::stod(cols[2]);
    EXPECT_TRUE(p > 0 && p <= 1) << line;
    EXPECT_LE(++per_source[cols[0]], 5) << line;
  }
  // Whole vocabulary as frequent pieces: the shortlist changes nothing.
  const std::string common = "-m " + quote(ckpt) + " -i " + quote(files.valid_src) + " --threads 1";
  r = run("nmt-translate", common + " -o " + quote(dir + "/plain.txt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("nmt-translate",
          common + " --shortlist " + quote(dir + "/lex.tsv") + " --shortlist-frequent 100000 -o " + quote(dir + "/all.txt"),
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_bytes(dir + "/plain.txt"), read_bytes(dir + "/all.txt"));
  // The table's own candidates: every line translated.
  r = run("nmt-translate", common + " -b 3 --shortlist " + quote(dir + "/lex.tsv") + " -o " + quote(dir + "/listed.txt"),
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(read_bytes(dir + "/listed.txt")).size(), lines_of(read_bytes(files.valid_src)).size());
  // A broken table: one line naming the file and line, and the output file untouched.
  nmt::test::write_lines(dir + "/bad.tsv", {table[0], "only\ttwo"});
  r = run("nmt-translate", common + " --shortlist " + quote(dir + "/bad.tsv") + " -o " + quote(dir + "/plain.txt"), dir);
  nmt::test::expect_one_line_error(r, {"bad.tsv:2:", "expected source_piece<TAB>target_piece<TAB>probability"});
  EXPECT_FALSE(read_bytes(dir + "/plain.txt").empty());
}

}  // namespace

namespace {

using Strings = std::vector<std::string>;

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

// --evaluate prints sacreBLEU's BLEU and chrF lines (or its JSON) on stdout,
// against one reference or several; translating with --reference keeps the
// translations alone on stdout and logs the scores.
TEST(CliTest, EvaluatePrintsScoresThatScriptsRead) {
  const auto dir = temp_dir("cli_evaluate_out");
  const Strings hyps = {"the cat sat on the mat", "a dog barks loudly", "birds fly south"};
  const std::vector<Strings> refs = {{"the cat sat on a mat", "the dog barks", "birds fly south in winter"},
                                     {"a cat is on the mat", "the dog barks loud", "the birds fly south"}};
  write_lines(dir + "/hyp.txt", hyps);
  write_lines(dir + "/r1.txt", refs[0]);
  write_lines(dir + "/r2.txt", refs[1]);
  const std::string one = " --reference " + quote(dir + "/r1.txt");
  const std::string two = one + " --reference " + quote(dir + "/r2.txt");
  auto r = run("nmt-translate", "--evaluate" + one, dir, dir + "/hyp.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, nmt::corpus_bleu(hyps, refs[0]).to_string() + "\n" + nmt::corpus_chrf(hyps, refs[0]).to_string() + "\n");
  EXPECT_EQ(r.out.rfind("BLEU = ", 0), 0u) << r.out;
  r = run("nmt-translate", "--evaluate" + two, dir, dir + "/hyp.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto bleu2 = nmt::corpus_bleu_multiref(hyps, refs);
  const auto chrf2 = nmt::corpus_chrf_multiref(hyps, refs);
  EXPECT_GT(bleu2.score, nmt::corpus_bleu(hyps, refs[0]).score);
  EXPECT_EQ(r.out, bleu2.to_string() + "\n" + chrf2.to_string() + "\n");
  EXPECT_NE(r.err.find("nrefs:2|"), std::string::npos) << r.err;
  r = run("nmt-translate", "--evaluate --score-format json" + two, dir, dir + "/hyp.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, nmt::sacrebleu_json({bleu2.to_json(), chrf2.to_json()}) + "\n");
  for (const char* key : {"\"name\": \"BLEU\"", "\"name\": \"chrF2\"", "\"score\": ", "\"signature\": \"nrefs:2|",
                          "\"verbose_score\": ", "\"nrefs\": \"2\""})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;
  // A second reference of another length is named.
  write_lines(dir + "/short.txt", {"x"});
  expect_one_line_error(run("nmt-translate", "--evaluate" + one + " --reference " + quote(dir + "/short.txt"), dir,
                            dir + "/hyp.txt"),
                        {"short.txt", "1 reference lines for 3 input lines"});
  // --score-format is for --evaluate.
  expect_one_line_error(run("nmt-translate", "-m x.ckpt --score-format json" + one, dir), {"--score-format"},
                        nmt::test::kExitUsage);

  // Translating: stdout holds the translations only, the scores are logged.
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/src.txt", {"red cat", "old fish", "big dog"});
  auto plain = run("nmt-translate", "-m " + quote(ckpt), dir, dir + "/src.txt");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto scored = run("nmt-translate", "-m " + quote(ckpt) + two, dir, dir + "/src.txt");
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  EXPECT_EQ(scored.out, plain.out);
  EXPECT_NE(scored.err.find("BLEU = "), std::string::npos) << scored.err;
  EXPECT_NE(scored.err.find("nrefs:2|"), std::string::npos) << scored.err;
}

// nmt-align reads fast_align's "source ||| target" lines, from --pairs or
// from stdin when no other input is given.
TEST(CliTest, AlignReadsFastAlignPairs) {
  const auto dir = temp_dir("cli_fast_align");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/a.src", {"red cat sees big dog", "old fish"});
  write_lines(dir + "/a.tgt", {"dogo bigo seeso cato redo", "fisho oldo"});
  write_lines(dir + "/pairs.txt", {"red cat sees big dog ||| dogo bigo seeso cato redo", "old fish|||fisho oldo"});
  const std::string m = "-m " + quote(ckpt) + " --threads 1 -f pharaoh";
  auto files = run("nmt-align", m + " --src " + quote(dir + "/a.src") + " --tgt " + quote(dir + "/a.tgt"), dir);
  ASSERT_EQ(files.exit_code, 0) << files.err;
  ASSERT_EQ(lines_of(files.out).size(), 2u) << files.out;
  auto pairs = run("nmt-align", m + " --pairs " + quote(dir + "/pairs.txt"), dir);
  ASSERT_EQ(pairs.exit_code, 0) << pairs.err;
  EXPECT_EQ(pairs.out, files.out);
  auto piped = run("nmt-align", m, dir, dir + "/pairs.txt");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, files.out);
  auto ibm = run("nmt-align", "--aligner ibm2", dir, dir + "/pairs.txt");
  ASSERT_EQ(ibm.exit_code, 0) << ibm.err;
  EXPECT_EQ(lines_of(ibm.out).size(), 2u) << ibm.out;
  write_lines(dir + "/bad.txt", {"red cat ||| cato redo", "no bars here"});
  expect_one_line_error(run("nmt-align", m + " --pairs " + quote(dir + "/bad.txt"), dir), {"bad.txt:2:", "|||"});
}

// Collects what an SVG's <text> elements say and where they stand.
struct SvgText {
  std::string content, anchor = "start", transform;
  double x = 0, font_size = 0;
  bool bold = false;
};
struct SvgScan {
  double width = 0, font_size = 0;
  std::vector<SvgText> texts;
  int depth = 0;  // inside a <text> (its <tspan>s included)
};

SvgScan scan_svg(const std::string& svg, bool* well_formed) {
  SvgScan scan;
  XML_Parser p = XML_ParserCreate("UTF-8");
  XML_SetUserData(p, &scan);
  XML_SetElementHandler(
      p,
      [](void* data, const XML_Char* name, const XML_Char** attrs) {
        auto* s = static_cast<SvgScan*>(data);
        std::map<std::string, std::string> a;
        for (int i = 0; attrs[i] != nullptr; i += 2) a[attrs[i]] = attrs[i + 1];
        const std::string n = name;
        if (n == "svg") {
          s->width = std::stod(a["width"]);
          s->font_size = std::stod(a["font-size"]);
        } else if (n == "text") {
          SvgText t;
          t.x = std::stod(a["x"]);
          t.font_size = a.count("font-size") ? std::stod(a["font-size"]) : s->font_size;
          if (a.count("text-anchor")) t.anchor = a["text-anchor"];
          t.transform = a["transform"];
          t.bold = a["font-weight"] == "bold";
          s->texts.push_back(t);
          s->depth = 1;
        } else if (s->depth > 0) {
          ++s->depth;
        }
      },
      [](void* data, const XML_Char*) {
        auto* s = static_cast<SvgScan*>(data);
        if (s->depth > 0) --s->depth;
      });
  XML_SetCharacterDataHandler(p, [](void* data, const XML_Char* text, int len) {
    auto* s = static_cast<SvgScan*>(data);
    if (s->depth > 0) s->texts.back().content.append(text, static_cast<size_t>(len));
  });
  *well_formed = XML_Parse(p, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  EXPECT_TRUE(*well_formed) << XML_ErrorString(XML_GetErrorCode(p)) << " at line " << XML_GetCurrentLineNumber(p);
  XML_ParserFree(p);
  return scan;
}

// A heatmap holds every line of its text: the picture is at least as wide
// as each horizontal text needs at an estimate of 0.55 em a character (what
// sans-serif text takes on average; bold a tenth more), and its title names
// the pair, the mode, the level and the model.
void expect_heatmap_holds_its_text(const std::string& path, const std::vector<std::string>& title_parts) {
  SCOPED_TRACE(path);
  const std::string svg = read_bytes(path);
  bool ok = false;
  const SvgScan scan = scan_svg(svg, &ok);
  ASSERT_TRUE(ok) << svg;
  ASSERT_GT(scan.width, 0);
  std::string title;
  double longest = 0;
  for (const auto& t : scan.texts) {
    if (!t.transform.empty()) continue;  // labels read upwards: their height is the picture's
    const double w = static_cast<double>(nmt::utf8_length(t.content)) * t.font_size * 0.55 * (t.bold ? 1.1 : 1.0);
    const double right = t.anchor == "end" ? t.x : t.anchor == "middle" ? t.x + w / 2 : t.x + w;
    const double left = t.anchor == "end" ? t.x - w : t.anchor == "middle" ? t.x - w / 2 : t.x;
    EXPECT_LE(right, scan.width) << "'" << t.content << "' runs past the right edge";
    EXPECT_GE(left, 0) << "'" << t.content << "' runs past the left edge";
    longest = std::max(longest, w);
    if (t.content.rfind("pair ", 0) == 0) title = t.content;
  }
  EXPECT_GE(scan.width, longest);
  for (const auto& part : title_parts) EXPECT_NE(title.find(part), std::string::npos) << part << " not in '" << title << "'";
}

TEST(CliTest, HeatmapOfAThreeWordPairHoldsItsTextAndSaysWhatItShows) {
  const auto dir = temp_dir("cli_heatmap");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/a.src", {"red cat sees"});
  write_lines(dir + "/a.tgt", {"seeso cato redo"});
  const std::string base = "-m " + quote(ckpt) + " --threads 1 --src " + quote(dir + "/a.src");
  auto r = run("nmt-align", base + " --tgt " + quote(dir + "/a.tgt") + " --format svg --output-dir " + quote(dir + "/p"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string model = fs::path(ckpt).filename().string();
  expect_heatmap_holds_its_text(dir + "/p/0001.svg", {"pair 1", "forced", "piece level", model});
  EXPECT_NE(read_bytes(dir + "/p/0001.svg").find("subword pieces"), std::string::npos);
  r = run("nmt-align", base + " --level word --format svg --output-dir " + quote(dir + "/w"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_heatmap_holds_its_text(dir + "/w/0001.svg", {"pair 1", "free", "word level", model});
}

// Counts agree with their nouns, the plateau line follows the validation
// that caused it, and the run's config.toml holds each number as written.
TEST(CliTest, TrainingLogsReadRightAndItsConfigKeepsShortNumbers) {
  const auto dir = temp_dir("cli_train_log");
  const auto f = nmt::test::write_toy_corpus(dir, 40, 5);
  // A learning rate too small to improve anything: every validation after
  // the first is a plateau.
  auto r = run("nmt-train", train_args(f, dir + "/run") +
                                " --max-steps 12 --valid-every 4 --log-every 4 --learning-rate 1e-9 --lr-patience 1"
                                " --min-lr 0 --early-stopping 0 --keep-checkpoints 0 --dropout 0.1",
               dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(", 1 thread, "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(" 1 threads"), std::string::npos) << r.err;
  int plateaus = 0;
  for (size_t i = 0; i < r.err_lines.size(); ++i) {
    if (r.err_lines[i].find("validation plateau") == std::string::npos) continue;
    ++plateaus;
    ASSERT_GT(i, 0u);
    EXPECT_NE(r.err_lines[i - 1].find("valid | step"), std::string::npos)
        << "the plateau line should follow its validation:\n" << r.err;
  }
  EXPECT_GT(plateaus, 0) << r.err;
  const std::string config = read_bytes(dir + "/run/config.toml");
  EXPECT_NE(config.find("dropout = 0.1\n"), std::string::npos) << config;
  EXPECT_NE(config.find("learning-rate = 1e-09\n"), std::string::npos) << config;
  EXPECT_EQ(config.find("000000000"), std::string::npos) << config;
  auto dump = run("nmt-train", "--dropout 0.1 --dump-config", dir);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("dropout = 0.1\n"), std::string::npos) << dump.out;
  EXPECT_EQ(dump.out.find("0.10000000000000001"), std::string::npos) << dump.out;
}

// nmt-translate's summary counts in the singular too, and --score-pairs
// counts the target pieces it scored.
TEST(CliTest, TranslateSummaryCountsRight) {
  const auto dir = temp_dir("cli_translate_log");
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/one.txt", {"red cat"});
  auto one = run("nmt-translate", "-m " + quote(ckpt), dir, dir + "/one.txt");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("translated 1 sentence ("), std::string::npos) << one.err;
  nmt::test::write_bytes(dir + "/pairs.tsv", "red cat\tcato redo\nold fish\tfisho oldo\n");
  auto scored = run("nmt-translate", "-m " + quote(ckpt) + " --score-pairs", dir, dir + "/pairs.tsv");
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(scored.err, m, std::regex("scored 2 pairs \\(([0-9]+) target pieces\\)"))) << scored.err;
  EXPECT_GT(std::stoi(m[1]), 0) << scored.err;
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

// A new user's first hour: the run folder and what it tells, through the
// real executables.
namespace {

// A tiny model (without `model`: the architecture left to a resumed
// checkpoint) on the toy corpus and its pre-trained tokenizer (no
// SentencePiece training), paths as given.
std::string tiny_run_args(const std::string& train_src, const std::string& train_tgt, const std::string& valid_src,
                          const std::string& valid_tgt, const std::string& out, bool model = true) {
  return "--train-src " + quote(train_src) + " --train-tgt " + quote(train_tgt) + " --valid-src " + quote(valid_src) +
         " --valid-tgt " + quote(valid_tgt) + " -o " + quote(out) + " --src-spm " +
         quote(nmt::test::toy_tokenizer_file()) + " --tgt-spm " + quote(nmt::test::toy_tokenizer_file()) +
         (model ? " --emb-dim 16 --enc-hidden 16 --dec-hidden 32 --attn-dim 16" : "") +
         " --threads 1 --device cpu --batch-tokens 300";
}

// The elements of `svg` named `name` with class `css`.
std::vector<nmt::test::SvgElement> svg_with_class(const std::string& svg, const std::string& name,
                                                  const std::string& css) {
  std::vector<nmt::test::SvgElement> out;
  for (auto& e : nmt::test::svg_elements(svg))
    if (e.name == name && e.attrs.count("class") && e.attrs.at("class") == css) out.push_back(e);
  return out;
}

// The report's run: --max-steps 60 --valid-every 30, with the rate halved at
// every epoch end. The picture draws the rate as steps that only go down,
// marks the epoch ends and the step best.ckpt was taken at; the last line
// names the checkpoint to translate with.
TEST(CliTest, TrainingCurvesShowTheRateAsStepsEpochEndsAndTheBestCheckpoint) {
  const auto dir = temp_dir("cli_curves");
  const auto f = nmt::test::write_toy_corpus(dir, 200, 10);
  const auto out = dir + "/run";
  const auto r = run("nmt-train", tiny_run_args(f.train_src, f.train_tgt, f.valid_src, f.valid_tgt, out) +
                                      " --max-steps 60 --valid-every 30 --log-every 10 --learning-rate 0.01"
                                      " --lr-decay-start 1 --lr-decay 0.5 --keep-checkpoints 0 --early-stopping 0"
                                      " --stop-metric loss",
                     dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.err_lines.empty());
  EXPECT_NE(r.err_lines.back().find("training finished (max_steps): 60 steps"), std::string::npos) << r.err;
  EXPECT_NE(r.err_lines.back().find("; translate with: nmt-translate -m " + out + "/best.ckpt"), std::string::npos)
      << r.err_lines.back();

  const std::string svg = read_bytes(out + "/training-curves.svg");
  const auto rate = svg_with_class(svg, "polyline", "learning-rate");
  ASSERT_EQ(rate.size(), 1u) << svg;
  const auto pts = nmt::test::svg_points(rate[0].attrs.at("points"));
  int drops = 0;
  for (size_t i = 1; i < pts.size(); ++i) {
    EXPECT_GE(pts[i].first, pts[i - 1].first) << "the rate's point " << i << " goes back in steps";
    EXPECT_GE(pts[i].second, pts[i - 1].second) << "the rate's point " << i << " goes back up (SVG y grows down)";
    drops += pts[i].second > pts[i - 1].second;
  }
  EXPECT_GE(drops, 2) << "no decay drawn: " << rate[0].attrs.at("points");
  // Epoch ends: several epochs of 200 pairs fit in 60 steps; each panel marks them.
  EXPECT_GE(svg_with_class(svg, "line", "epoch-end").size(), 4u * 2);
  // best.ckpt: marked once, at the last validation that wrote it.
  int best_step = -1;
  std::istringstream metrics(read_bytes(out + "/metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"(^\{"type":"valid","step":(\d+),.*"new_best":true)")))
      best_step = std::stoi(m[1]);
  }
  ASSERT_GT(best_step, 0);
  const auto best = svg_with_class(svg, "text", "best-checkpoint-label");
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].text, "best.ckpt (step " + std::to_string(best_step) + ")");
  EXPECT_EQ(svg_with_class(svg, "line", "best-checkpoint").size(), 1u);
}

// A run started with relative paths in one folder is continued with
// `-c RUN/config.toml --resume` from another: config.toml holds absolute
// paths. The folder records the nmt build and the command (config.toml,
// train.log, each checkpoint), and a run shorter than --valid-every still
// validates once at its end and leaves best.ckpt.
TEST(CliTest, ARunFolderStandsOnItsOwn) {
  const auto dir = temp_dir("cli_folder");
  const std::string a = dir + "/a", b = dir + "/b";
  fs::create_directories(a + "/data");
  fs::create_directories(b);
  nmt::test::write_toy_corpus(a + "/data", 200, 5);
  auto r = nmt::test::run_in(a, "nmt-train",
                             tiny_run_args("data/train.src", "data/train.tgt", "data/valid.src", "data/valid.tgt",
                                           "runs/x") +
                                 " --max-steps 4 --valid-every 1000",
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string run_dir = a + "/runs/x";
  EXPECT_TRUE(fs::exists(run_dir + "/best.ckpt")) << "a run that ends before --valid-every validates at its end";
  EXPECT_NE(r.err_lines.back().find("translate with: nmt-translate -m runs/x/best.ckpt"), std::string::npos)
      << r.err_lines.back();

  const std::string config = read_bytes(run_dir + "/config.toml");
  for (const std::string& part :
       {"train-src = \"" + a + "/data/train.src\"", "valid-tgt = \"" + a + "/data/valid.tgt\"", "output = \"" + run_dir + "\"",
        std::string("# Written by nmt 0."), std::string("(commit "), "in " + a + ", by\n",
        std::string("/nmt-train --train-src data/train.src"), "#   nmt-train -c " + run_dir + "/config.toml --resume"})
    EXPECT_NE(config.find(part), std::string::npos) << "'" << part << "' missing from:\n" << config;
  const std::string log = read_bytes(run_dir + "/train.log");
  EXPECT_NE(log.find("] [info] nmt 0."), std::string::npos) << log;
  EXPECT_NE(log.find(" in " + a + ": "), std::string::npos) << log;
  r = run("nmt-translate", "-m " + quote(run_dir + "/best.ckpt") + " --info", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& part : {std::string("written by: nmt 0."), std::string("weights of step: 4\n"),
                                  std::string("trained by: "), "--max-steps 4 --valid-every 1000 (in " + a + ")\n"})
    EXPECT_NE(r.out.find(part), std::string::npos) << "'" << part << "' missing from:\n" << r.out;

  // From another folder: the same files, the same run.
  r = nmt::test::run_in(b, "nmt-train", "-c ../a/runs/x/config.toml --resume --max-steps 8", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resumed from"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("training finished (max_steps): 8 steps"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(b)) << "the resumed run wrote into the folder it was started from";
  // train.log keeps each start's first line.
  const std::string log2 = read_bytes(run_dir + "/train.log");
  EXPECT_NE(log2.find(" in " + b + ": "), std::string::npos) << log2;
  EXPECT_NE(log2.find("-c ../a/runs/x/config.toml --resume --max-steps 8"), std::string::npos) << log2;
}

// --resume with no run to resume stops with one line naming the folder and
// what to do, and creates or changes nothing.
TEST(CliTest, ResumeWithoutARunStopsAndChangesNothing) {
  const auto dir = temp_dir("cli_noresume");
  const auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  const auto absent = dir + "/absent";
  auto r = run("nmt-train", tiny_run_args(f.train_src, f.train_tgt, f.valid_src, f.valid_tgt, absent) + " --resume", dir);
  expect_one_line_error(r, {absent + ": does not exist", "drop --resume to start a new run"});
  EXPECT_FALSE(fs::exists(absent));
  const auto empty = dir + "/empty";
  fs::create_directories(empty);
  write_bytes(empty + "/notes.txt", "mine");
  r = run("nmt-train", tiny_run_args(f.train_src, f.train_tgt, f.valid_src, f.valid_tgt, empty) + " --resume", dir);
  expect_one_line_error(r, {empty + ": holds no last.ckpt", "--resume"});
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(empty)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"notes.txt"});
}

// SIGTERM before the first validation (e.g. `timeout`): the run saves and
// exits 0, and leaves a best.ckpt (the last weights, said to be unvalidated)
// that nmt-translate reads; the last line says how to go on.
TEST(CliTest, ARunStoppedBeforeItsFirstValidationLeavesABestCheckpoint) {
  const auto dir = temp_dir("cli_sigterm");
  const auto f = nmt::test::write_toy_corpus(dir, 3000, 5);
  const auto out = dir + "/run";
  std::vector<std::string> argv = {nmt::test::bin("nmt-train"), "--train-src", f.train_src, "--train-tgt", f.train_tgt,
                                   "--valid-src", f.valid_src, "--valid-tgt", f.valid_tgt, "-o", out, "--src-spm",
                                   nmt::test::toy_tokenizer_file(), "--tgt-spm", nmt::test::toy_tokenizer_file(),
                                   "--emb-dim", "16", "--enc-hidden", "16", "--dec-hidden", "32", "--attn-dim", "16",
                                   "--threads", "1", "--device", "cpu", "--batch-tokens", "40", "--log-every", "1",
                                   "--valid-every", "100000"};
  auto c = nmt::test::spawn(argv, dir + "/train.err");
  // A progress line: training runs, far from the end of its first epoch.
  ASSERT_TRUE(nmt::test::wait_for_log(c, "epoch 1 | step 1/", 120)) << read_bytes(c.log);
  ::kill(c.pid, SIGTERM);
  ASSERT_EQ(nmt::test::wait_exit(c, 60), 0) << read_bytes(c.log);
  const std::string log = read_bytes(c.log);
  EXPECT_EQ(log.find("valid | step"), std::string::npos) << "the run validated: the test would prove nothing";
  ASSERT_TRUE(fs::exists(out + "/best.ckpt")) << log;
  EXPECT_NE(log.find("wrote " + out + "/best.ckpt from the weights of step"), std::string::npos) << log;
  EXPECT_NE(log.find("not validated"), std::string::npos) << log;
  EXPECT_NE(log.find("training finished (interrupted)"), std::string::npos) << log;
  EXPECT_NE(log.find("translate with: nmt-translate -m " + out + "/best.ckpt (not validated yet); continue with: "
                     "nmt-train -c " + out + "/config.toml --resume"),
            std::string::npos)
      << log;
  write_lines(dir + "/in.txt", {"red cat"});
  const auto r = run("nmt-translate", "-m " + quote(out + "/best.ckpt") + " --threads 1 -i " + quote(dir + "/in.txt"), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 1u) << r.out;
}

// nmt-train --release IN OUT: the model without optimizer and training
// state, smaller, translating and aligning exactly as IN; it never replaces
// IN and refuses an output that is IN.
TEST(CliTest, ReleaseWritesAModelToShip) {
  const auto dir = temp_dir("cli_release");
  const auto in = dir + "/best.ckpt", out = dir + "/model.ckpt";
  write_bytes(in, read_bytes(nmt::test::trained_toy_checkpoint()));
  const std::string original = read_bytes(in);
  auto r = run("nmt-train", "--release " + quote(in) + " " + quote(out), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + out), std::string::npos) << r.err;
  const auto before = fs::file_size(in), after = fs::file_size(out);
  std::printf("release: %ju bytes -> %ju bytes\n", static_cast<uintmax_t>(before), static_cast<uintmax_t>(after));
  EXPECT_LT(after, before);
  EXPECT_EQ(read_bytes(in), original);
  EXPECT_TRUE(nmt::test::temporary_files(dir).empty());

  r = run("nmt-translate", "-m " + quote(out) + " --info", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& part : {std::string("training state: no"), "made from: released from " + in,
                                  std::string("written by: nmt 0.")})
    EXPECT_NE(r.out.find(part), std::string::npos) << "'" << part << "' missing from:\n" << r.out;
  // Translations and alignments are those of the input.
  write_lines(dir + "/src.txt", {"red cat sees big dog", "old fish"});
  write_lines(dir + "/tgt.txt", {"dogo bigo seeso cato redo", "fisho oldo"});
  for (const std::string tool : {"nmt-translate", "nmt-align"}) {
    const std::string args = tool == "nmt-translate"
                                 ? " --threads 1 -b 3 -i " + quote(dir + "/src.txt")
                                 : " --threads 1 --src " + quote(dir + "/src.txt") + " --tgt " + quote(dir + "/tgt.txt");
    const auto a = run(tool, "-m " + quote(in) + args, dir);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const auto b = run(tool, "-m " + quote(out) + args, dir);
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out) << tool;
    EXPECT_FALSE(a.out.empty()) << tool;
  }
  // A released model cannot be resumed.
  fs::create_directories(dir + "/x");
  fs::copy_file(out, dir + "/x/last.ckpt");
  const auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  r = run("nmt-train", tiny_run_args(f.train_src, f.train_tgt, f.valid_src, f.valid_tgt, dir + "/x", false) + " --resume",
          dir);
  expect_one_line_error(r, {"not a training checkpoint"});

  // The input as output, by its name, a link or another spelling: refused, the input unchanged.
  fs::create_symlink(in, dir + "/link.ckpt");
  for (const std::string& target : {in, dir + "/link.ckpt", dir + "/./best.ckpt"}) {
    r = run("nmt-train", "--release " + quote(in) + " " + quote(target), dir);
    expect_one_line_error(r, {"is the input checkpoint"}, nmt::test::kExitUsage);
    EXPECT_EQ(read_bytes(in), original);
  }
  // Two paths, and a checkpoint to read.
  r = run("nmt-train", "--release " + quote(in), dir);
  EXPECT_EQ(r.exit_code, nmt::test::kExitUsage) << r.err;
  write_bytes(dir + "/junk.ckpt", "not a checkpoint");
  r = run("nmt-train", "--release " + quote(dir + "/junk.ckpt") + " " + quote(dir + "/junk-out.ckpt"), dir);
  expect_one_line_error(r, {"junk.ckpt", "not an nmt checkpoint"});
  EXPECT_FALSE(fs::exists(dir + "/junk-out.ckpt"));
  // A config file cannot ask for it: it is an action of the command line.
  write_lines(dir + "/release.toml", {"release = [\"a.ckpt\", \"b.ckpt\"]"});
  r = run("nmt-train", "-c " + quote(dir + "/release.toml"), dir);
  EXPECT_EQ(r.exit_code, nmt::test::kExitUsage) << r.err;
}

// --vocab-size is an upper limit: on text with fewer distinct pieces the
// vocabulary comes out smaller, and a warning says so and why.
TEST(CliTest, AVocabularySmallerThanAskedIsSaid) {
  const auto dir = temp_dir("cli_small_vocab");
  const auto f = nmt::test::write_toy_corpus(dir, 50, 5);
  const auto r = run("nmt-train", "--train-src " + quote(f.train_src) + " --train-tgt " + quote(f.train_tgt) + " -o " +
                                      quote(dir + "/run") + " --vocab-size 5000 --max-steps 1 --emb-dim 16 --enc-hidden 16"
                                      " --dec-hidden 32 --attn-dim 16 --threads 1 --device cpu",
                     dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex warning(R"(\[warning\] the source vocabulary has ([0-9]+) pieces, fewer than --vocab-size 5000: )"
                           R"(its 50 sentences of training text hold no more distinct pieces)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, warning)) << r.err;
  EXPECT_LT(std::stoi(m[1]), 5000);
  EXPECT_NE(r.err.find("[warning] the target vocabulary has "), std::string::npos) << r.err;
}

// --resume keeps the run's vocabularies: a --vocab-size, --spm-type or
// --shared-vocab that contradicts them is refused with a hint, as model
// options are; the run's own config.toml resumes as before.
TEST(CliTest, ResumeRefusesTokenizerOptionsThatContradictTheRun) {
  const auto dir = temp_dir("cli_resume_vocab");
  const auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  const auto out = dir + "/run";
  auto r = run("nmt-train", train_args(f, out) + " --max-steps 2", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string last = read_bytes(out + "/last.ckpt");
  for (const auto& [flag, parts] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"--vocab-size 100", {"was trained with --vocab-size 60 but the options say --vocab-size 100"}},
           {"--spm-type bpe", {"was trained with --spm-type unigram but the options say --spm-type bpe"}},
           {"--shared-vocab", {"was trained with --shared-vocab off (a vocabulary for each side)"}}}) {
    SCOPED_TRACE(flag);
    std::string args = train_args(f, out);  // with --vocab-size 60, as the run was trained
    if (flag.rfind("--vocab-size", 0) == 0) args.replace(args.find("--vocab-size 60"), 15, flag);
    else args += " " + flag;
    r = run("nmt-train", args + " --max-steps 4 --resume", dir);
    auto want = parts;
    want.push_back(out + "/last.ckpt: ");
    want.push_back("drop that option");
    expect_one_line_error(r, want);
    EXPECT_EQ(read_bytes(out + "/last.ckpt"), last);
  }
  r = run("nmt-train", "-c " + quote(out + "/config.toml") + " --resume --max-steps 3", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("training finished (max_steps): 3 steps"), std::string::npos) << r.err;
  // Resumed without tokenizer options, config.toml keeps the run's (not the defaults).
  r = run("nmt-train", "--train-src " + quote(f.train_src) + " --train-tgt " + quote(f.train_tgt) + " -o " + quote(out) +
                           " --threads 1 --device cpu --resume --max-steps 4",
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_bytes(out + "/config.toml").find("vocab-size = 60\n"), std::string::npos);
  r = run("nmt-train", "-c " + quote(out + "/config.toml") + " --resume --max-steps 5", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// --reverse-model must translate back: a model of -m's own direction (the
// same file, or one trained the same way) is refused, naming the file and
// why; the model trained the other way is taken.
TEST(CliTest, AlignRefusesAReverseModelOfTheForwardDirection) {
  const auto dir = temp_dir("cli_reverse_dir");
  const auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  auto r = run("nmt-train", train_args(f, dir + "/fwd") + " --max-steps 2", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nmt::test::ToyFiles back{f.train_tgt, f.train_src, f.valid_tgt, f.valid_src};
  r = run("nmt-train", train_args(back, dir + "/rev") + " --max-steps 2", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run("nmt-train", train_args(f, dir + "/fwd2") + " --max-steps 2 --seed 5", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string pair = " --src " + quote(f.valid_src) + " --tgt " + quote(f.valid_tgt) +
                           " --symmetrize intersection --format pharaoh --threads 1 -m " + quote(dir + "/fwd/best.ckpt");
  for (const std::string& wrong : {dir + "/fwd/best.ckpt", dir + "/fwd2/best.ckpt"}) {
    r = run("nmt-align", pair + " --reverse-model " + quote(wrong), dir);
    expect_one_line_error(r, {wrong + ": translates in the direction of -m " + dir + "/fwd/best.ckpt, not back",
                              "--reverse-model takes the model trained from -m's target language"});
  }
  r = run("nmt-align", pair + " --reverse-model " + quote(dir + "/rev/best.ckpt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 5u) << r.out;
}

// A shorter run into an --output-dir of an earlier one removes the earlier
// run's per-pair files beyond its own, and says so; files that are not
// named as nmt names them stay.
TEST(CliTest, AlignOutputDirHoldsOnlyThisRunsPairs) {
  const auto dir = temp_dir("cli_stale_pairs");
  const auto f = nmt::test::write_toy_corpus(dir, 20, 5);
  const auto m = " -m " + quote(nmt::test::trained_toy_checkpoint()) + " --threads 1 --tgt " + quote(f.valid_tgt);
  const auto pairs = dir + "/pairs";
  auto r = run("nmt-align", m + " --src " + quote(f.valid_src) + " --output-dir " + quote(pairs), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"0001.csv", "0003.csv", "0005.csv"}) EXPECT_TRUE(fs::exists(pairs + "/" + name)) << name;
  const std::vector<std::string> mine = {"notes.csv", "0004 (copy).csv", "12.csv", "00004.csv", "0004.txt"};
  for (const auto& name : mine) write_bytes(pairs + "/" + name, "mine");
  r = run("nmt-align", m + " --src " + quote(f.valid_src) + " --max-pairs 2 --output-dir " + quote(pairs), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(pairs + ": removed 3 per-pair files of an earlier, longer run (0003.csv .. 0005.csv)"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(pairs + "/0002.csv"));
  for (const char* name : {"0003.csv", "0004.csv", "0005.csv"}) EXPECT_FALSE(fs::exists(pairs + "/" + name)) << name;
  for (const auto& name : mine) EXPECT_EQ(read_bytes(pairs + "/" + name), "mine") << name;
}

}  // namespace
