// The inference engine (engine/rnn_engine.h): its step weights give the
// plain step's values and follow the model's weights; the opaque decoder
// state; a memory made for search refused under autograd.
#include "engine/rnn_engine.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "search_util.h"
#include "test_util.h"
#include "translate/translator.h"

namespace {

using nmt::test::iota;
using nmt::test::model_depth;
using nmt::test::model_rounding_bound;
using nmt::test::source_examples;
using nmt::test::within;

// The opaque state: reorder() moves only what moves with the beam, keep()
// every tensor; names are checked.
TEST(EngineTest, DecoderStateReordersByBeamAndKeepsBySentence) {
  nmt::DecoderState st;
  using Rows = nmt::DecoderState::Rows;
  st.add("h", torch::arange(4).view({4, 1}), Rows::kMoveWithBeam);
  st.add("src", torch::arange(10, 14).view({4, 1}), Rows::kFixedPerSource);
  EXPECT_THROW(st.add("h", torch::zeros({4}), Rows::kMoveWithBeam), nmt::Error);
  EXPECT_THROW(st.at("nothing"), nmt::Error);
  st.reorder(torch::tensor({1, 1, 3, 2}, torch::kLong));
  EXPECT_TRUE(torch::equal(st.at("h").view({-1}), torch::tensor({1, 1, 3, 2}, torch::kLong)));
  EXPECT_TRUE(torch::equal(st.at("src").view({-1}), torch::arange(10, 14)));
  st.keep(torch::tensor({2, 3}, torch::kLong));
  EXPECT_TRUE(torch::equal(st.at("h").view({-1}), torch::tensor({3, 2}, torch::kLong)));
  EXPECT_TRUE(torch::equal(st.at("src").view({-1}), torch::tensor({12, 13}, torch::kLong)));
  auto copy = st;
  copy.own_storage();
  copy.at("h").fill_(7);
  EXPECT_TRUE(torch::equal(st.at("h").view({-1}), torch::tensor({3, 2}, torch::kLong))) << "own storage";
  st.copy_moving_from(copy);
  EXPECT_TRUE(torch::equal(st.at("h").view({-1}), torch::tensor({7, 7}, torch::kLong)));
}

}  // namespace

namespace {

// An engine multiplies with copies of the weights made when it is built
// (StepWeights: transposed weights, the first GRU's input gates of every
// embedding as a table): they give the plain step's values, for both
// decoders. When the weights change in place (as an optimizer or a
// checkpoint load changes them) or move, the engine says it is no longer
// current, and a Translator builds a new one instead of serving stale copies.
TEST(EngineTest, FollowsTheWeights) {
  for (auto decoder : {nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru}) {
    torch::manual_seed(4);
    auto opt = nmt::test::tiny_model();
    opt.decoder = decoder;
    nmt::Seq2Seq model(opt);
    model->eval();
    const auto ex = source_examples(5, 21);
    const auto b = nmt::make_batch(ex, iota(5), false);
    auto logits = [&](nmt::RnnEngine& engine) {
      auto state = engine.start(b, 1, {});
      return engine.step(torch::tensor({7, 8, 9, 10, 11}, torch::kLong), state).logits;  // [5, V]
    };
    nmt::EngineOptions plain;
    plain.plain = true;
    torch::NoGradGuard ng;
    // The optimized step makes other products than the plain one.
    const auto bound = [&] { return model_rounding_bound(*model, model_depth(b.src.size(1), 1)); };
    for (int round = 0; round < 2; ++round) {
      nmt::RnnEngine fast(model), slow(model, plain);
      EXPECT_TRUE(fast.current());
      EXPECT_TRUE(within(logits(fast), logits(slow), bound())) << "round " << round;
      // In place, each weight the copies are made of: the engine must notice.
      auto params = model->named_parameters();
      params["decoder.embed.weight"].mul_(1.5);
      params["decoder.cell.bias_ih"].add_(0.25);
      params["decoder.cell.weight_hh"].mul_(0.9);
      params["decoder.attention.W.weight"].mul_(1.2);
      params["decoder.deep.weight"].mul_(1.1);
      params["decoder.deep.bias"].add_(0.1);
      params["decoder.out_bias"].add_(torch::randn_like(params["decoder.out_bias"]));
      params["decoder.cell.bias_hh"].add_(0.2);  // copied into the stacked query bias (bahdanau)
      if (decoder == nmt::DecoderType::kCgru) {
        params["decoder.cell2.weight_hh"].mul_(1.1);
        params["decoder.cell2.bias_hh"].sub_(0.15);
        params["decoder.cell2.weight_ih"].mul_(0.95);
      }
      EXPECT_FALSE(fast.current()) << "round " << round;
    }
    // Moved away and back (new storage, the same version counters) with other values meanwhile.
    nmt::RnnEngine before(model);
    model->to(torch::kDouble);
    for (auto& p : model->parameters()) p.mul_(1.05);
    model->to(torch::kFloat);
    EXPECT_FALSE(before.current()) << "after a move";
    nmt::RnnEngine fast(model), slow(model, plain);
    EXPECT_TRUE(within(logits(fast), logits(slow), bound())) << "after a move";
  }
  // A Translator kept across a change of the weights translates as a new one does.
  auto model = nmt::test::eval_model(6);
  const std::vector<std::string> lines = {"a b c", "d e", "f g h i"};
  nmt::Translator kept(model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  const auto first = kept.translate_text(lines, nmt::TranslateOptions{});
  {
    torch::NoGradGuard ng;
    model->named_parameters()["decoder.out_bias"].add_(torch::randn({model->options().tgt_vocab}) * 5);
  }
  nmt::Translator fresh(model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  const auto want = fresh.translate_text(lines, nmt::TranslateOptions{});
  EXPECT_NE(want, first) << "the change should show in the translations";
  EXPECT_EQ(kept.translate_text(lines, nmt::TranslateOptions{}), want);
}

// A memory made for search carries weights autograd does not see: a step
// under autograd with it is refused rather than leaving weights without
// their gradient; a memory made under autograd gives every weight of the
// step its gradient, on either path.
TEST(EngineTest, AStepUnderAutogradNeverMultipliesWithSearchCopies) {
  for (auto path : {nmt::DecoderImpl::Path::kAuto, nmt::DecoderImpl::Path::kOptimized}) {
    auto model = nmt::test::eval_model(5);
    model->decoder->set_path(path);
    const auto ex = source_examples(3, 9);
    const auto b = nmt::make_batch(ex, iota(3), false);
    const auto y = torch::tensor({5, 6, 7}, torch::kLong);
    {
      nmt::DecoderMemory search_mem;
      torch::Tensor init;
      {
        torch::NoGradGuard ng;
        auto enc = model->encoder->forward(b.src, b.src_len);
        search_mem = model->decoder->memory(enc);
        init = enc.init_state;
      }
      ASSERT_TRUE(search_mem.weights && search_mem.weights->for_search);
      EXPECT_THROW(model->decoder->step(y, init, search_mem), nmt::Error);
    }
    model->zero_grad();
    auto enc = model->encoder->forward(b.src, b.src_len);
    auto out = model->decoder->step(y, enc.init_state, model->decoder->memory(enc));
    out.logits.pow(2).sum().backward();
    auto params = model->named_parameters();
    for (const char* name : {"decoder.deep.weight", "decoder.out_bias", "decoder.cell.weight_hh",
                             "decoder.attention.W.weight", "decoder.embed.weight"}) {
      const auto& g = params[name].grad();
      EXPECT_TRUE(g.defined() && g.abs().sum().item<double>() > 0) << name;
    }
    model->decoder->set_path(nmt::DecoderImpl::Path::kAuto);
  }
}

}  // namespace
