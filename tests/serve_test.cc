// nmt-serve's answers without the network (serve/service.h) and its
// batcher (serve/batcher.h): translations and attention equal to the
// library's, every bad request refused with its status, the queue's bound,
// deadlines and stopping.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "serve/batcher.h"
#include "serve/service.h"
#include "test_util.h"
#include "tools/align.h"
#include "translate/mbr.h"
#include "translate/translator.h"

namespace {

using json = nlohmann::json;
using nmt::test::contains;

nmt::ServeOptions toy_options() {
  nmt::ServeOptions opt;
  opt.model_paths = {nmt::test::trained_toy_checkpoint()};
  opt.runtime.device = "cpu";
  opt.runtime.threads = 1;
  return opt;
}

const std::vector<std::string> kLines = {"red cat sees big dog", "old fish", "", "blue bird runs"};

TEST(ServeTest, ServedModelsAreGroupedByName) {
  nmt::ServeOptions serve;
  serve.model_paths = {"de=a.ckpt", "runs/x=y/b.ckpt", "fr=c.ckpt", "de=d.ckpt", "./e=f.ckpt"};
  const auto models = serve.served_models();
  ASSERT_EQ(models.size(), 3u);  // in the order each name first appears
  EXPECT_EQ(models[0].name, "de");
  EXPECT_EQ(models[0].paths, (std::vector<std::string>{"a.ckpt", "d.ckpt"}));  // a name repeated: an ensemble
  EXPECT_EQ(models[1].name, "default");  // no name before the first '=': a plain path
  EXPECT_EQ(models[1].paths, (std::vector<std::string>{"runs/x=y/b.ckpt", "./e=f.ckpt"}));
  EXPECT_EQ(models[2].name, "fr");
  EXPECT_EQ(models[2].paths, (std::vector<std::string>{"c.ckpt"}));
  serve.model_paths = {"de="};
  EXPECT_TRUE(contains(nmt::test::error_of([&] { serve.validate(); }), "--model 'de=': no checkpoint path"));
}

TEST(ServeTest, TranslationsEqualTheTranslators) {
  nmt::Service service(toy_options());
  nmt::Translator tr(nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU));
  for (const int beam : {1, 3}) {
    const auto reply = service.translate(json{{"text", kLines}, {"beam_size", beam}, {"n_best", beam}}.dump());
    ASSERT_EQ(reply.status, 200) << reply.body;
    const auto got = json::parse(reply.body)["translations"];
    nmt::TranslateOptions opt;
    opt.search.beam_size = beam;
    opt.search.n_best = beam;
    const auto want = tr.translate(kLines, opt);  // the same sentences in one call: the same batches
    ASSERT_EQ(got.size(), kLines.size());
    for (size_t i = 0; i < kLines.size(); ++i) {
      EXPECT_EQ(got[i]["text"], tr.detokenize(want[i][0], kLines[i], false)) << "line " << i;
      EXPECT_EQ(got[i]["score"].get<double>(), want[i][0].norm_score);
      if (beam > 1) {
        ASSERT_EQ(got[i]["n_best"].size(), want[i].size());
      } else {
        EXPECT_FALSE(got[i].contains("n_best"));
      }
    }
  }
}

// "mbr" picks as the library does (translate/mbr.h) over the same beams:
// the same order, the same expected utilities, each entry's "mbr".
TEST(ServeTest, MbrPicksAsTheLibraryDoes) {
  nmt::Service service(toy_options());
  nmt::Translator tr(nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU));
  const auto reply = service.translate(
      json{{"text", kLines}, {"beam_size", 4}, {"n_best", 3}, {"mbr", "chrf"}, {"mbr_temperature", 0.5}}.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto got = json::parse(reply.body)["translations"];
  nmt::TranslateOptions opt;
  opt.search.beam_size = 4;
  opt.search.n_best = 4;
  auto want = tr.translate(kLines, opt);
  nmt::MbrOptions mbr;
  mbr.utility = nmt::MbrUtility::kChrf;
  mbr.temperature = 0.5;
  nmt::mbr_select(tr, kLines, false, mbr, 3, &want);
  ASSERT_EQ(got.size(), kLines.size());
  for (size_t i = 0; i < kLines.size(); ++i) {
    EXPECT_EQ(got[i]["text"], tr.detokenize(want[i][0], kLines[i], false)) << "line " << i;
    EXPECT_EQ(got[i]["mbr"].get<double>(), want[i][0].mbr_utility) << "line " << i;
    ASSERT_EQ(got[i]["n_best"].size(), want[i].size()) << "line " << i;
    for (size_t k = 0; k < want[i].size(); ++k)
      EXPECT_EQ(got[i]["n_best"][k]["mbr"].get<double>(), want[i][k].mbr_utility) << "line " << i << " " << k;
  }
  const auto plain = json::parse(service.translate(json{{"text", kLines}, {"beam_size", 4}}.dump()).body);
  EXPECT_FALSE(plain["translations"][0].contains("mbr"));
}

// The server's --n-best is a request's default, at most its beam, and
// --n-best alone serves a beam of N (as nmt-translate's --n-best).
TEST(ServeTest, TheServersNBestIsTheRequestsDefault) {
  auto opt = toy_options();
  opt.translate.search.n_best = 3;
  opt.given = {"n-best"};
  nmt::Service service(opt);
  const auto entries = [&](const json& request) {
    const auto reply = service.translate(request.dump());
    EXPECT_EQ(reply.status, 200) << reply.body;
    const auto t = json::parse(reply.body)["translations"][0];
    return t.contains("n_best") ? t["n_best"].size() : size_t{1};
  };
  EXPECT_EQ(entries(json{{"text", "red cat sees big dog"}}), 3u);  // a beam of 3 by default
  EXPECT_EQ(entries(json{{"text", "red cat sees big dog"}, {"beam_size", 2}}), 2u);
  EXPECT_EQ(entries(json{{"text", "red cat sees big dog"}, {"n_best", 1}}), 1u);
  opt.given = {"n-best", "beam-size"};  // -b 1 given with it: refused, as nmt-translate refuses it
  EXPECT_TRUE(contains(nmt::test::error_of([&] { nmt::Service{opt}; }), "--n-best must be between 1 and the beam size"));
}

TEST(ServeTest, AttentionAndLinksAreNmtAligns) {
  nmt::Service service(toy_options());
  nmt::Translator tr(nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU));
  const std::string line = "red cat sees big dog";
  for (const std::string level : {"piece", "word"}) {
    const auto reply = service.translate(json{{"text", line}, {"alignment", "soft"}, {"level", level}}.dump());
    ASSERT_EQ(reply.status, 200) << reply.body;
    const auto t = json::parse(reply.body)["translations"][0];
    std::string translation;
    const auto pieces = nmt::free_attention(tr, line, {}, &translation);  // what nmt-align prints in free mode
    const auto want = level == "word" ? nmt::merge_to_words(pieces) : pieces;
    EXPECT_EQ(t["text"], translation);
    EXPECT_EQ(t["attention"]["source"].get<std::vector<std::string>>(), want.src_tokens);
    EXPECT_EQ(t["attention"]["target"].get<std::vector<std::string>>(), want.tgt_tokens);
    const auto weights = t["attention"]["weights"].get<std::vector<std::vector<float>>>();
    EXPECT_EQ(weights, want.weights);  // one sentence alone in both: the same computation
    for (const auto& row : weights) {
      double sum = 0;
      for (float w : row) sum += w;
      // A float softmax row of n entries sums to 1 within (n + 2) u (the sum
      // and the division, u = 2^-24); merging pieces into words sums columns
      // and averages rows in float: another (n + 2) u at most.
      const double u = std::ldexp(1.0, -24);
      EXPECT_NEAR(sum, 1.0, 2 * (static_cast<double>(row.size()) + 2) * u) << level;
    }
    EXPECT_EQ(t["alignment"], nmt::to_pharaoh(nmt::hard_alignment(nmt::merge_to_words(pieces), nmt::HardMethod::kArgmax)));
  }
  const auto hard = json::parse(service.translate(R"({"text": ["old fish"], "alignment": "hard"})").body);
  EXPECT_TRUE(hard["translations"][0].contains("alignment"));
  EXPECT_FALSE(hard["translations"][0].contains("attention"));
}

TEST(ServeTest, BadRequestsGetTheirStatusAndTheServiceGoesOn) {
  auto opt = toy_options();
  opt.max_sentences = 3;
  opt.max_pieces = 20;
  nmt::Service service(opt);
  const std::string long_line(200, 'a');
  const std::vector<std::pair<std::string, int>> cases = {
      {"{\"text\": [\"red cat\"", 400},                 // malformed JSON
      {"[\"red cat\"]", 400},                           // not an object
      {"{}", 400},                                      // no text
      {"{\"text\": 5}", 400},                           // wrong type
      {"{\"text\": [\"red\", 5]}", 400},                // a sentence not a string
      {"{\"text\": []}", 400},                          // no sentence
      {"{\"text\": \"red\", \"beam\": 5}", 400},        // unknown field
      {"{\"text\": \"red\", \"beam_size\": 0}", 400},   // out of range
      {"{\"text\": \"red\", \"beam_size\": 17}", 400},  // above --max-beam-size
      {"{\"text\": \"red\", \"beam_size\": \"5\"}", 400},
      {"{\"text\": \"red\", \"beam_size\": 2.5}", 400},
      {"{\"text\": \"red\", \"beam_size\": 2, \"n_best\": 3}", 400},
      {"{\"text\": \"red\", \"mbr\": \"chrf\"}", 400},  // a beam of 1: nothing to pick from
      {"{\"text\": \"red\", \"beam_size\": 2, \"mbr\": \"rouge\"}", 400},
      {"{\"text\": \"red\", \"beam_size\": 2, \"mbr_temperature\": 2}", 400},  // without mbr
      {"{\"text\": \"red\", \"beam_size\": 2, \"mbr\": \"bleu\", \"mbr_temperature\": 0}", 400},
      {"{\"text\": \"red\", \"beam_size\": 2, \"mbr\": \"bleu\", \"mbr_temperature\": \"2\"}", 400},
      {"{\"text\": \"red\", \"alignment\": \"yes\"}", 400},
      {"{\"text\": \"red\", \"level\": 1}", 400},
      {"{\"text\": \"red\\ncat\"}", 400},               // a line break inside a sentence
      {"{\"text\": \"red \xff\xfe cat\"}", 400},        // invalid UTF-8
      {"{\"text\": [\"a\", \"b\", \"c\", \"d\"]}", 413},  // over --max-sentences
      {"{\"text\": \"" + long_line + "\"}", 413},       // over --max-pieces
  };
  for (const auto& [body, status] : cases) {
    const auto reply = service.translate(body);
    EXPECT_EQ(reply.status, status) << body << " -> " << reply.body;
    const auto j = json::parse(reply.body);
    EXPECT_TRUE(j.contains("error") && !j["error"].get<std::string>().empty()) << reply.body;
  }
  EXPECT_EQ(service.translate(R"({"text": ["red cat"]})").status, 200);
  EXPECT_EQ(json::parse(service.health().body)["status"], "ok");
  const auto models = json::parse(service.models().body);
  EXPECT_EQ(models["default"], "default");
  ASSERT_EQ(models["models"].size(), 1u);
  EXPECT_FALSE(models["models"][0]["ensemble"].get<bool>());
  const auto checkpoint = models["models"][0]["checkpoints"][0];
  EXPECT_GT(checkpoint["src_vocab"].get<int64_t>(), 0);
  EXPECT_TRUE(checkpoint["options"].contains("emb_dim"));
}

// -m toy=T -m other=R -m pair=T -m pair=R: each request is translated by the
// model it names (the first when it names none), an ensemble by its members,
// and an unknown name is refused with the names there are.
TEST(ServeTest, NamedModelsAnswerEachForItself) {
  const auto dir = nmt::test::temp_dir("serve_named");
  const auto toy_path = nmt::test::trained_toy_checkpoint();
  const auto other_path = nmt::test::random_toy_twin(dir, 7);  // another model of the same shape: random weights
  auto toy = nmt::load_checkpoint(toy_path, torch::kCPU);
  auto opt = toy_options();
  opt.model_paths = {"toy=" + toy_path, "other=" + other_path, "pair=" + toy_path, "pair=" + other_path};
  nmt::Service service(opt);
  nmt::Translator single(toy), other(nmt::load_checkpoint(other_path, torch::kCPU));
  nmt::Translator pair({nmt::load_checkpoint(toy_path, torch::kCPU), nmt::load_checkpoint(other_path, torch::kCPU)},
                       {toy_path, other_path});
  const auto want = [&](nmt::Translator& tr) { return tr.translate_text(kLines, {}); };
  const auto got = [&](const std::string& model) {
    json request{{"text", kLines}};
    if (!model.empty()) request["model"] = model;
    const auto reply = service.translate(request.dump());
    EXPECT_EQ(reply.status, 200) << reply.body;
    const auto j = json::parse(reply.body);
    EXPECT_EQ(j["model"], model.empty() ? "toy" : model);
    std::vector<std::string> texts;
    for (const auto& t : j["translations"]) texts.push_back(t["text"]);
    return texts;
  };
  EXPECT_EQ(got(""), want(single));
  EXPECT_EQ(got("toy"), want(single));
  EXPECT_EQ(got("other"), want(other));
  EXPECT_EQ(got("pair"), want(pair));
  EXPECT_NE(want(single), want(other));  // the models differ, so the names matter
  const auto unknown = service.translate(R"({"text": "red cat", "model": "fr"})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_TRUE(contains(unknown.body, "no model named 'fr' (models: toy, other, pair)")) << unknown.body;
  EXPECT_EQ(service.translate(R"({"text": "red cat", "model": 1})").status, 400);
  const auto models = json::parse(service.models().body);
  EXPECT_EQ(models["default"], "toy");
  ASSERT_EQ(models["models"].size(), 3u);
  EXPECT_EQ(models["models"][2]["name"], "pair");
  EXPECT_TRUE(models["models"][2]["ensemble"].get<bool>());
  EXPECT_EQ(models["models"][2]["checkpoints"][1]["path"], other_path);
}

TEST(ServeTest, BatcherBoundsItsQueueAndAnswersEveryRequest) {
  nmt::Translator tr(nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCPU));
  nmt::Batcher batcher(tr, /*rescorer=*/nullptr, {}, /*gather_lines=*/8, /*queue_lines=*/2, std::chrono::milliseconds(0));
  nmt::BatchRequest three;
  three.lines = {"red cat", "old fish", "blue bird"};
  three.deadline = nmt::ServeClock::now() + std::chrono::seconds(60);
  EXPECT_FALSE(batcher.submit(three).has_value());  // 3 sentences never fit a queue of 2
  nmt::BatchRequest late = three;
  late.lines.resize(1);
  late.deadline = nmt::ServeClock::now() - std::chrono::seconds(1);
  auto expired = batcher.submit(late);
  ASSERT_TRUE(expired.has_value());
  EXPECT_TRUE(expired->get().expired);  // its deadline passed before it started: not translated
  nmt::BatchRequest one = three;
  one.lines.resize(1);
  auto answered = batcher.submit(one);
  ASSERT_TRUE(answered.has_value());
  const auto reply = answered->get();
  ASSERT_EQ(reply.hyps.size(), 1u);
  EXPECT_EQ(tr.detokenize(reply.hyps[0][0], "red cat", false), tr.translate_text({"red cat"}, {})[0]);
  batcher.stop();
  EXPECT_FALSE(batcher.submit(one).has_value());  // stopped: nothing more is taken
}

}  // namespace
