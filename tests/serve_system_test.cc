// nmt-serve serving a whole system (serve/service.h): an ensemble weighted
// by --ensemble-weights, its beam rescored by right-to-left and channel
// models, and minimum Bayes risk as the requests' default pick, each equal to
// the library's own calls; and the options that belong to one system refused
// where -m serves several models.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "serve/service.h"
#include "test_util.h"
#include "translate/mbr.h"
#include "translate/rescorer.h"
#include "translate/translator.h"

namespace {

using json = nlohmann::json;
using nmt::test::contains;

const std::vector<std::string> kLines = {"red cat sees big dog", "old fish", "", "blue bird runs"};

// The toy and a twin weighted 3:1, rescored by a second twin read right to
// left (w 0.5) and a third as the channel (c 0.25), picking by chrF MBR at
// temperature 0.5 unless a request says otherwise.
struct System {
  std::string toy = nmt::test::trained_toy_checkpoint(), twin, r2l, channel;
  nmt::ServeOptions opt;
  explicit System(const std::string& dir)
      : twin(nmt::test::random_toy_twin(dir, 7)), r2l(nmt::test::random_toy_twin(dir, 8)),
        channel(nmt::test::random_toy_twin(dir, 9)) {
    opt.model_paths = {toy, twin};
    opt.ensemble_weights = {3, 1};
    opt.rescore.r2l_models = {r2l};
    opt.rescore.channel_models = {channel};
    opt.rescore.r2l_weight = 0.5;
    opt.rescore.channel_weight = 0.25;
    opt.mbr.utility = nmt::MbrUtility::kChrf;
    opt.mbr.temperature = 0.5;
    opt.translate.search.beam_size = 4;
    opt.runtime.device = "cpu";
    opt.runtime.threads = 1;
  }
  nmt::Translator translator() const {
    return nmt::Translator({nmt::load_checkpoint(toy, torch::kCPU), nmt::load_checkpoint(twin, torch::kCPU)},
                           {toy, twin}, {3, 1});
  }
  nmt::Rescorer rescorer() const {
    return nmt::Rescorer(nmt::Translator(nmt::load_checkpoint(r2l, torch::kCPU)),
                         nmt::Translator(nmt::load_checkpoint(channel, torch::kCPU)), opt.rescore);
  }
};

// The library's lists for kLines: the weighted ensemble's beam of `beam`,
// rescored and picked by `mbr` where it is on, n_best kept.
std::vector<std::vector<nmt::Hypothesis>> library_lists(const System& sys, int64_t beam, int64_t n_best,
                                                        const nmt::MbrOptions& mbr) {
  auto tr = sys.translator();
  nmt::TranslateOptions opt;
  opt.search.beam_size = opt.search.n_best = beam;
  auto hyps = tr.translate(kLines, opt);
  auto rescorer = sys.rescorer();
  rescorer.rescore(tr, kLines, &hyps, false, opt.batch_sentences, mbr.enabled() ? beam : n_best, true);
  if (mbr.enabled()) nmt::mbr_select(tr, kLines, false, mbr, static_cast<size_t>(n_best), &hyps);
  for (auto& list : hyps) list.resize(std::min(list.size(), static_cast<size_t>(n_best)));
  return hyps;
}

// Checks that the service's answer to `request` holds `want`'s texts and
// scores, bit for bit, with the rescoring's and MBR's figures where they ran.
void expect_answer(nmt::Service& service, const json& request, const System& sys,
                   const std::vector<std::vector<nmt::Hypothesis>>& want) {
  const auto reply = service.translate(request.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto got = json::parse(reply.body)["translations"];
  ASSERT_EQ(got.size(), want.size());
  auto tr = sys.translator();
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& list = want[i];
    const auto entries = list.size() > 1 ? got[i]["n_best"] : json::array({got[i]});
    ASSERT_EQ(entries.size(), list.size()) << request.dump() << " line " << i;
    for (size_t k = 0; k < list.size(); ++k) {
      const auto& e = entries[k];
      const auto& h = list[k];
      const std::string at = request.dump() + " line " + std::to_string(i) + " entry " + std::to_string(k);
      EXPECT_EQ(e["text"], tr.detokenize(h, kLines[i], false)) << at;
      EXPECT_EQ(e["score"].get<double>(), h.norm_score) << at;
      EXPECT_EQ(e.contains("r2l_log_prob"), !std::isnan(h.r2l_logprob)) << at;
      if (e.contains("r2l_log_prob")) EXPECT_EQ(e["r2l_log_prob"].get<double>(), h.r2l_logprob) << at;
      EXPECT_EQ(e.contains("channel_log_prob"), !std::isnan(h.channel_logprob)) << at;
      if (e.contains("channel_log_prob")) EXPECT_EQ(e["channel_log_prob"].get<double>(), h.channel_logprob) << at;
      EXPECT_EQ(e.contains("mbr"), !std::isnan(h.mbr_utility)) << at;
      if (e.contains("mbr")) EXPECT_EQ(e["mbr"].get<double>(), h.mbr_utility) << at;
    }
  }
}

TEST(ServeSystemTest, WeightsRescoringAndMbrAreTheLibrarys) {
  const System sys(nmt::test::temp_dir("serve_system"));
  nmt::Service service(sys.opt);
  nmt::MbrOptions none, bleu;
  bleu.utility = nmt::MbrUtility::kBleu;
  bleu.temperature = 0.5;  // the server's temperature, under the request's own utility
  // The server's default pick (chrF, T 0.5) over the rescored beam of 4.
  expect_answer(service, json{{"text", kLines}, {"n_best", 3}}, sys, library_lists(sys, 4, 3, sys.opt.mbr));
  // A request's own MBR, and none: the rescoring's order.
  expect_answer(service, json{{"text", kLines}, {"n_best", 2}, {"mbr", "bleu"}}, sys, library_lists(sys, 4, 2, bleu));
  expect_answer(service, json{{"text", kLines}, {"n_best", 2}, {"mbr", "none"}}, sys, library_lists(sys, 4, 2, none));
  // A beam of one: its one hypothesis rescored (the mix as its score), no MBR.
  expect_answer(service, json{{"text", kLines}, {"beam_size", 1}}, sys, library_lists(sys, 1, 1, none));
  // The rescoring changes a pick somewhere (else the checks above could not tell it ran).
  nmt::TranslateOptions beam4;
  beam4.search.beam_size = 4;
  auto tr = sys.translator();
  const auto plain = tr.translate_text(kLines, beam4);
  const auto rescored = library_lists(sys, 4, 1, none);
  size_t changed = 0;
  for (size_t i = 0; i < kLines.size(); ++i) changed += tr.detokenize(rescored[i][0], kLines[i], false) != plain[i];
  EXPECT_GT(changed, 0u);
  const auto models = json::parse(service.models().body);
  EXPECT_EQ(models["models"][0]["ensemble_weights"], json({3.0, 1.0}));
  EXPECT_EQ(models["models"][0]["rescoring"]["r2l_models"], json({sys.r2l}));
  EXPECT_EQ(models["models"][0]["rescoring"]["channel_weight"], 0.25);
  EXPECT_EQ(models["mbr"], json({{"utility", "chrf"}, {"temperature", 0.5}}));
  // A temperature with a beam of one: no MBR runs for it to weigh.
  const auto bad = service.translate(json{{"text", "old fish"}, {"beam_size", 1}, {"mbr_temperature", 2}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(contains(bad.body, "'mbr_temperature' weighs the hypotheses of 'mbr'")) << bad.body;
}

TEST(ServeSystemTest, OptionsOfOneSystemAreRefusedElsewhere) {
  const auto refused = [](const nmt::ServeOptions& opt) { return nmt::test::error_of([&] { opt.validate(); }); };
  nmt::ServeOptions opt;
  opt.model_paths = {"de=a.ckpt", "fr=b.ckpt"};
  opt.ensemble_weights = {1, 2};
  EXPECT_TRUE(contains(refused(opt), "--ensemble-weights weighs the checkpoints of one served model, and -m names 2"));
  opt.ensemble_weights.clear();
  opt.rescore.channel_models = {"c.ckpt"};
  EXPECT_TRUE(contains(refused(opt), "--r2l-model and --channel-model rescore the beams of one served model"));
  opt = nmt::ServeOptions();
  opt.model_paths = {"a.ckpt", "b.ckpt"};
  opt.ensemble_weights = {1};
  EXPECT_TRUE(contains(refused(opt), "--ensemble-weights gives 1 weight for 2 models"));
  opt.ensemble_weights = {1, 0};
  EXPECT_TRUE(contains(refused(opt), "the weight of model 2 (b.ckpt) must be above 0"));
  opt.ensemble_weights.clear();
  opt.given = {"r2l-weight"};
  EXPECT_TRUE(contains(refused(opt), "--r2l-weight weighs the scores of --r2l-model: give --r2l-model"));
  opt.given = {"mbr-temperature"};
  EXPECT_TRUE(contains(refused(opt), "--mbr-temperature weighs the hypotheses of --mbr"));
  opt.given.clear();
  opt.mbr.utility = nmt::MbrUtility::kBleu;  // the default beam is 1
  EXPECT_TRUE(contains(refused(opt), "--mbr picks each translation from the beam's list: give --beam-size 2 or more"));
  opt.translate.search.beam_size = 2;
  EXPECT_NO_THROW(opt.validate());
}

}  // namespace
