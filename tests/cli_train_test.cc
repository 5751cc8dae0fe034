// A new user's first hour: the run folder and what it tells, through the
// real executables (nmt-train's logs, curves, resumption and release).
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

// --resume keeps the run's vocabularies: a --vocab-size, --spm-type,
// --shared-vocab, --src-spm or --tgt-spm that contradicts them is refused
// with a hint, as model options are; the run's own config.toml, and its own
// SentencePiece model given again, resume as before.
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
           {"--shared-vocab", {"was trained with --shared-vocab off (a vocabulary for each side)"}},
           {"--src-spm " + quote(nmt::test::toy_tokenizer_file()),
            {"was trained with another source SentencePiece model", "the options say --src-spm"}},
           {"--src-spm " + quote(out + "/src.spm.model") + " --tgt-spm " + quote(nmt::test::toy_tokenizer_file()),
            {"was trained with another target SentencePiece model", "the options say --tgt-spm"}}}) {
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
  r = run("nmt-train", "-c " + quote(out + "/config.toml") + " --src-spm " + quote(out + "/src.spm.model") +
                           " --resume --max-steps 3",
          dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Resumed without tokenizer options, config.toml keeps the run's (not the defaults).
  r = run("nmt-train", "--train-src " + quote(f.train_src) + " --train-tgt " + quote(f.train_tgt) + " -o " + quote(out) +
                           " --threads 1 --device cpu --resume --max-steps 4",
          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_bytes(out + "/config.toml").find("vocab-size = 60\n"), std::string::npos);
  r = run("nmt-train", "-c " + quote(out + "/config.toml") + " --resume --max-steps 5", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A run started with --src-spm resumes from its config.toml after that file is gone: the checkpoint holds it.
  const auto spm = dir + "/given.model";
  write_bytes(spm, read_bytes(nmt::test::toy_tokenizer_file()));
  r = run("nmt-train", train_args(f, dir + "/given") + " --src-spm " + quote(spm) + " --max-steps 2", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::remove(spm.c_str());
  r = run("nmt-train", "-c " + quote(dir + "/given/config.toml") + " --resume --max-steps 3", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming with the checkpoint's own source SentencePiece model"), std::string::npos) << r.err;
}

}  // namespace
