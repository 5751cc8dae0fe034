// Scores against references through nmt-translate: --reference,
// --scores-json in three BLEU conventions, --evaluate of translations made
// elsewhere, and their bootstrap estimates (--confidence, --baseline).
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
#include "text/significance.h"
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
using nmt::test::lines_of;
using nmt::test::contains;

using Strings = std::vector<std::string>;

// Reads "key": number from the flat JSON object nmt-translate --scores-json writes.
double json_field(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": *(-?[0-9.e+-]+)"))) return -1;
  return std::stod(m[1]);
}

// The --scores-json of nmt-translate (model `ckpt`, input and output
// options `in`, in `dir`) against each of the references `glued` and
// `upper` of its output `hyps`: BLEU in three conventions and chrF as
// nmt::corpus_bleu and corpus_chrf give them, and the same JSON from
// --evaluate of the output file.
void expect_three_bleu_conventions(const std::string& dir, const std::string& ckpt, const std::string& in,
                                   const std::vector<std::string>& hyps, const std::vector<std::string>& glued,
                                   const std::vector<std::string>& upper) {
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
}

// --tokenize and --lowercase choose the main BLEU of nmt-translate (as
// expect_three_bleu_conventions() runs it) against `upper`; the paper
// figures stay; bad values, or --lowercase without --reference, are usage errors.
void expect_chosen_bleu(const std::string& dir, const std::string& ckpt, const std::string& in,
                        const std::vector<std::string>& hyps, const std::vector<std::string>& upper) {
  const nmt::BleuOptions none{false, "none"};
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
  expect_three_bleu_conventions(dir, ckpt, in, hyps, glued, upper);
  // A reference of the wrong length fails and leaves the earlier scores file.
  const std::string before = read_bytes(dir + "/s.json");
  write_lines(dir + "/short.txt", {glued[0]});
  auto bad = run("nmt-translate", "-m " + quote(ckpt) + in + " --reference " + quote(dir + "/short.txt") +
                                      " --scores-json " + quote(dir + "/s.json"), dir);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(read_bytes(dir + "/s.json"), before);
  expect_chosen_bleu(dir, ckpt, in, hyps, upper);
  // --scores-json needs --reference.
  auto lone = run("nmt-translate", "-m " + quote(ckpt) + in + " --scores-json " + quote(dir + "/t.json"), dir);
  EXPECT_NE(lone.exit_code, 0);
  EXPECT_FALSE(fs::exists(dir + "/t.json"));
}

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

// `v` with two decimals, as the score lines print it.
std::string two_decimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

// --confidence and --baseline print what the library's bootstrap gives
// (text/significance.h), on the same draws: sacreBLEU's "(μ = MEAN ± CI)",
// the paired test's "(p = P)" and the baseline's own lines.
// Six references, a system's output and a baseline's, written to `dir` as
// ref.txt, hyp.txt and base.txt.
struct ConfidenceFiles {
  Strings refs = {"the cat sat on the mat", "a dog barks loudly", "birds fly south", "two men play chess",
                  "a girl reads a book", "the sun sets"};
  Strings hyps = {"the cat sat on a mat", "a dog barks", "birds fly south", "two men play chess",
                  "a girl is reading", "the sun sets"};
  Strings base = {"a cat on the mat", "the dog", "birds fly", "men play", "a girl reads", "sun"};
  explicit ConfidenceFiles(const std::string& dir) {
    write_lines(dir + "/ref.txt", refs);
    write_lines(dir + "/hyp.txt", hyps);
    write_lines(dir + "/base.txt", base);
  }
};

TEST(CliTest, EvaluateWithConfidenceAndABaseline) {
  const auto dir = temp_dir("cli_confidence");
  const ConfidenceFiles files(dir);
  const Strings &refs = files.refs, &hyps = files.hyps, &base = files.base;
  const std::string ref = " --reference " + quote(dir + "/ref.txt");
  const nmt::BootstrapOptions draws{200, 12345};
  auto bleu = nmt::corpus_bleu(hyps, refs);
  auto chrf = nmt::corpus_chrf(hyps, refs);
  const auto attach = [](nmt::ScoreConfidence* c, const nmt::BootstrapEstimate& e, double p) {
    *c = nmt::ScoreConfidence{200, 12345, e.mean, e.ci, p};
  };
  attach(&bleu.confidence, nmt::estimate_of(nmt::resampled_scores(nmt::bleu_statistics(hyps, {refs}), draws)), -1);
  attach(&chrf.confidence, nmt::estimate_of(nmt::resampled_scores(nmt::chrf_statistics(hyps, {refs}), draws)), -1);
  auto r = run("nmt-translate", "--evaluate --confidence --bootstrap-samples 200" + ref, dir, dir + "/hyp.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, bleu.to_string() + "\n" + chrf.to_string() + "\n");
  EXPECT_TRUE(contains(r.out, "BLEU = " + two_decimals(bleu.score) + " (\u03bc = " + two_decimals(bleu.confidence.mean) +
                                  " \u00b1 " + two_decimals(bleu.confidence.ci) + ") "))
      << r.out;
  EXPECT_TRUE(contains(r.err, "|bs:200|seed:12345|case:mixed|")) << r.err;

  const auto b = nmt::paired_bootstrap(nmt::bleu_statistics(hyps, {refs}), nmt::bleu_statistics(base, {refs}), draws);
  const auto c = nmt::paired_bootstrap(nmt::chrf_statistics(hyps, {refs}), nmt::chrf_statistics(base, {refs}), draws);
  auto base_bleu = nmt::corpus_bleu(base, refs);
  auto base_chrf = nmt::corpus_chrf(base, refs);
  attach(&bleu.confidence, b.system_estimate, b.p_value);
  attach(&chrf.confidence, c.system_estimate, c.p_value);
  attach(&base_bleu.confidence, b.baseline_estimate, -1);
  attach(&base_chrf.confidence, c.baseline_estimate, -1);
  const std::string paired = " --baseline " + quote(dir + "/base.txt") + " --bootstrap-samples 200" + ref;
  r = run("nmt-translate", "--evaluate" + paired, dir, dir + "/hyp.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, bleu.to_string() + "\n" + chrf.to_string() + "\nbaseline: " + base_bleu.to_string() +
                       "\nbaseline: " + base_chrf.to_string() + "\n");
  char p[32];
  std::snprintf(p, sizeof(p), "(p = %.4f)", b.p_value);
  EXPECT_TRUE(contains(r.out, p)) << r.out;
  // --scores-json gets the estimates, the p-values and the baseline's scores.
  r = run("nmt-translate", "--evaluate --scores-json " + quote(dir + "/s.json") + paired, dir, dir + "/hyp.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string json = read_bytes(dir + "/s.json");
  EXPECT_NEAR(json_field(json, "bleu_bootstrap_mean"), b.system_estimate.mean, 1e-8) << json;
  EXPECT_NEAR(json_field(json, "bleu_bootstrap_ci"), b.system_estimate.ci, 1e-8) << json;
  EXPECT_NEAR(json_field(json, "bleu_p_value"), b.p_value, 1e-8) << json;
  EXPECT_NEAR(json_field(json, "chrf_p_value"), c.p_value, 1e-8) << json;
  EXPECT_NEAR(json_field(json, "baseline_bleu"), base_bleu.score, 1e-8) << json;
  EXPECT_NEAR(json_field(json, "baseline_chrf"), base_chrf.score, 1e-8) << json;
  EXPECT_TRUE(contains(json, "\"bleu_signature\":\"nrefs:1|bs:200|seed:12345|")) << json;
  r = run("nmt-translate", "--evaluate --score-format json" + paired, dir, dir + "/hyp.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"system\": " + nmt::sacrebleu_json({bleu.to_json(), chrf.to_json()}) + ",\n\"baseline\": " +
                       nmt::sacrebleu_json({base_bleu.to_json(), base_chrf.to_json()}) + "}\n");
  for (const char* key : {"\"confidence_mean\": ", "\"confidence_var\": ", "\"p_value\": ", "\"bs\": \"200\""})
    EXPECT_TRUE(contains(r.out, key)) << key << "\n" << r.out;

  // A baseline of another length, or none, is named, and -o stays as it was.
  write_lines(dir + "/short.txt", {"x"});
  write_bytes(dir + "/o.txt", "kept\n");
  expect_one_line_error(run("nmt-translate", "--evaluate -o " + quote(dir + "/o.txt") + " --baseline " +
                                                 quote(dir + "/short.txt") + ref, dir, dir + "/hyp.txt"),
                        {"short.txt", "1 baseline lines for 6 input lines"});
  expect_one_line_error(run("nmt-translate", "--evaluate -o " + quote(dir + "/o.txt") + " --baseline " +
                                                 quote(dir + "/none.txt") + ref, dir, dir + "/hyp.txt"),
                        {"none.txt"});
  EXPECT_EQ(read_bytes(dir + "/o.txt"), "kept\n");
  expect_one_line_error(run("nmt-translate", "--evaluate --baseline ''" + ref, dir, dir + "/hyp.txt"),
                        {"--baseline must name a file"}, nmt::test::kExitUsage);
  expect_one_line_error(run("nmt-translate", "--evaluate --baseline " + quote(dir + "/base.txt"), dir,
                            dir + "/hyp.txt"),
                        {"--baseline", "give --reference"}, nmt::test::kExitUsage);
  expect_one_line_error(run("nmt-translate", "-m x.ckpt --confidence", dir), {"--confidence", "give --reference"},
                        nmt::test::kExitUsage);
  expect_one_line_error(run("nmt-translate", "--evaluate --bootstrap-samples 50" + ref, dir, dir + "/hyp.txt"),
                        {"--bootstrap-samples", "give one of them"}, nmt::test::kExitUsage);
}

// Translating: the baseline is tested against the translations (the scores
// on stderr), and a baseline of another length stops the run before any
// translating, from a file or a pipe.
TEST(CliTest, TranslateWithABaseline) {
  const auto dir = temp_dir("cli_translate_baseline");
  const ConfidenceFiles files(dir);
  write_lines(dir + "/short.txt", {"x"});
  const std::string ref = " --reference " + quote(dir + "/ref.txt");
  const std::string paired = " --baseline " + quote(dir + "/base.txt") + " --bootstrap-samples 200" + ref;
  const auto& ckpt = nmt::test::trained_toy_checkpoint();
  write_lines(dir + "/src.txt", {"red cat", "old fish", "big dog", "red fish", "old cat", "big fish"});
  auto translated = run("nmt-translate", "-m " + quote(ckpt) + " -o " + quote(dir + "/t.txt") + paired, dir,
                        dir + "/src.txt");
  ASSERT_EQ(translated.exit_code, 0) << translated.err;
  const Strings outputs = lines_of(read_bytes(dir + "/t.txt"));
  const auto t = nmt::paired_bootstrap(nmt::bleu_statistics(outputs, {files.refs}),
                                       nmt::bleu_statistics(files.base, {files.refs}), {200, 12345});
  char p_line[64];
  std::snprintf(p_line, sizeof(p_line), "(p = %.4f)", t.p_value);
  EXPECT_TRUE(contains(translated.err, p_line)) << translated.err;
  EXPECT_TRUE(contains(translated.err, "baseline " + dir + "/base.txt: BLEU = ")) << translated.err;
  for (const std::string& input : {" -i " + quote(dir + "/src.txt"), std::string()}) {  // a file, then stdin
    auto early = run("nmt-translate", "-m " + quote(ckpt) + " -o " + quote(dir + "/t2.txt") + input + " --baseline " +
                                          quote(dir + "/short.txt") + ref, dir, dir + "/src.txt");
    expect_one_line_error(early, {"short.txt", "1 baseline lines for 6"});
    EXPECT_FALSE(fs::exists(dir + "/t2.txt")) << input;
  }
}

}  // namespace
