// Greedy search: batch independence, length caps, attention rows, scores
// that agree with teacher-forced decoding; and the Translator around it.
#include "search/search.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/quantized.h"
#include "search/translator.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace {

using nmt::Example;

std::vector<Example> source_examples(int n, uint64_t seed) {
  const auto& tok = nmt::test::toy_tokenizer();
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(n, seed, &s, &t);
  std::vector<Example> ex(n);
  for (int i = 0; i < n; ++i) {
    ex[i].src = tok.encode(s[i]);
    ex[i].src.push_back(nmt::kEosId);
  }
  return ex;
}

std::vector<int64_t> iota(int n) {
  std::vector<int64_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

nmt::Seq2Seq tiny_model(uint64_t seed = 2, nmt::AttentionType att = nmt::AttentionType::kAdditive) {
  torch::manual_seed(seed);
  nmt::Seq2Seq m(nmt::test::tiny_model(att));
  m->eval();
  return m;
}

// Makes EOS (almost) impossible, so every hypothesis runs to its length cap.
void suppress_eos(nmt::Seq2Seq& m) {
  torch::NoGradGuard ng;
  m->named_parameters()["decoder.out_bias"][nmt::kEosId].fill_(-1e4);
}

TEST(SearchTest, BatchedEqualsAlone) {
  for (auto att : {nmt::AttentionType::kAdditive, nmt::AttentionType::kGeneral}) {
    auto model = tiny_model(3, att);
    const auto ex = source_examples(7, 11);
    auto search = nmt::make_search(nmt::SearchOptions{});
    torch::NoGradGuard ng;
    const auto batched = search->run(model, nmt::make_batch(ex, iota(7), false), true);
    ASSERT_EQ(batched.size(), 7u);
    for (int64_t i = 0; i < 7; ++i) {
      const auto alone = search->run(model, nmt::make_batch(ex, {i}, false), true);
      ASSERT_EQ(alone.size(), 1u);
      ASSERT_EQ(batched[i].size(), 1u);
      EXPECT_EQ(batched[i][0].ids, alone[0][0].ids) << "sentence " << i;
      EXPECT_NEAR(batched[i][0].score, alone[0][0].score, 1e-4) << "sentence " << i;
      EXPECT_TRUE(torch::allclose(batched[i][0].attention, alone[0][0].attention, 1e-5, 1e-5)) << "sentence " << i;
    }
  }
}

TEST(SearchTest, LengthCaps) {
  auto model = tiny_model(4);
  suppress_eos(model);
  const auto ex = source_examples(6, 12);
  const auto batch = nmt::make_batch(ex, iota(6), false);
  torch::NoGradGuard ng;
  {
    nmt::SearchOptions opt;
    opt.max_length = 3;
    const auto hyps = nmt::make_search(opt)->run(model, batch, false);
    for (const auto& h : hyps) EXPECT_EQ(h[0].ids.size(), 3u);  // EOS suppressed: exactly at the cap
  }
  {
    nmt::SearchOptions opt;
    opt.max_length_ratio = 0.5;
    const auto hyps = nmt::make_search(opt)->run(model, batch, true);
    for (size_t i = 0; i < hyps.size(); ++i) {
      const size_t cap = ex[i].src.size() / 2 + 5;  // floor(ratio * |src|) + 5
      EXPECT_EQ(hyps[i][0].ids.size(), cap) << "sentence " << i << " (source length " << ex[i].src.size() << ")";
      for (int64_t id : hyps[i][0].ids) {
        EXPECT_NE(id, nmt::kEosId);
        EXPECT_NE(id, nmt::kPadId);
      }
      // The forced EOS at the cap is part of the score and of the attention.
      EXPECT_LT(hyps[i][0].score, -1000.0);
      EXPECT_EQ(hyps[i][0].attention.size(0), static_cast<int64_t>(cap) + 1);
    }
  }
}

// Sentences that end early leave the batch (greedy: their rows; beam: their
// K hypotheses): with EOS suppressed each sentence ends exactly at its own
// length cap, so sentences leave at different steps, a few at a time and many
// at once. What remains must decode as it would alone: ids, scores, attention.
TEST(SearchTest, SentencesLeavingTheBatchChangeNothing) {
  auto model = tiny_model(8);
  suppress_eos(model);
  auto ex = source_examples(9, 15);
  for (size_t i = 0; i < ex.size(); ++i) ex[i].src.resize(std::min(ex[i].src.size(), 2 + i));  // lengths 2..10
  for (auto& e : ex) e.src.back() = nmt::kEosId;
  torch::NoGradGuard ng;
  for (int64_t beam : {1, 3}) {
    nmt::SearchOptions opt;
    opt.beam_size = beam;
    opt.n_best = beam;
    opt.max_length_ratio = 1.0;
    auto search = nmt::make_search(opt);
    const auto batched = search->run(model, nmt::make_batch(ex, iota(9), false), true);
    std::set<size_t> caps;
    for (int64_t i = 0; i < 9; ++i) {
      const auto alone = search->run(model, nmt::make_batch(ex, {i}, false), true);
      ASSERT_EQ(alone[0].size(), batched[i].size());
      caps.insert(batched[i][0].ids.size());
      for (size_t r = 0; r < alone[0].size(); ++r) {
        const auto& a = alone[0][r];
        const auto& b = batched[i][r];
        EXPECT_EQ(b.ids, a.ids) << "beam " << beam << " sentence " << i << " rank " << r;
        EXPECT_NEAR(b.score, a.score, 1e-4 * std::max(1.0, std::abs(a.score))) << "beam " << beam << " sentence " << i;
        ASSERT_EQ(b.attention.sizes(), a.attention.sizes());
        EXPECT_TRUE(torch::allclose(b.attention, a.attention, 1e-5, 1e-5)) << "beam " << beam << " sentence " << i;
      }
    }
    EXPECT_GE(caps.size(), 5u) << "sentences should end at several different steps";
  }
}

// A reduced-precision layer alone against the float product, at a shape a
// search meets: float out, within `tolerance` of the output's range, not exact.
template <class Layer>
void expect_layer_near_float(double tolerance) {
  torch::manual_seed(3);
  auto w = torch::randn({300, 64}) * 0.1, bias = torch::randn({300}), x = torch::tanh(torch::randn({5, 7, 64}));
  Layer lin(w, bias);
  c10::InferenceMode im;
  const torch::Tensor ref = torch::nn::functional::linear(x, w, bias);
  const torch::Tensor got = lin(x);
  ASSERT_EQ(got.sizes(), ref.sizes());
  EXPECT_EQ(got.scalar_type(), torch::kFloat);
  const double err = (got - ref).abs().max().item<double>();
  EXPECT_LE(err, tolerance * ref.abs().max().item<double>());
  EXPECT_GT(err, 0.0) << "a reduced-precision product should not equal float exactly";
}

// --int8: the decoder step's products in int8 give logits within a few
// percent of the float ones' range (four products, each at the
// quantization's resolution of about 1%), only without
// autograd and from kInt8MinRows rows on, and switching it off restores the
// float logits exactly; search runs on it.
TEST(SearchTest, Int8DecoderProducts) {
  if (!nmt::Int8Linear::available()) GTEST_SKIP() << "this LibTorch has no quantized CPU engine";
  auto model = tiny_model(9);
  const int R = static_cast<int>(nmt::DecoderImpl::kInt8MinRows);  // the fewest rows int8 runs on
  const auto ex = source_examples(R, 16);
  const auto b = nmt::make_batch(ex, iota(R), false);
  auto logits = [&](int rows) {
    const auto sub = nmt::make_batch(ex, iota(rows), false);
    auto enc = model->encoder->forward(sub.src, sub.src_len);
    auto y = torch::full({rows}, nmt::kBosId, torch::kLong);
    return model->decoder->step(y, enc.init_state, model->decoder->memory(enc)).logits;  // [rows, V]
  };
  torch::Tensor fp, q, grad_on, back;
  {
    torch::NoGradGuard ng;
    fp = logits(R);
    const auto fp_few = logits(R - 1);
    model->decoder->set_int8(true);
    ASSERT_TRUE(model->decoder->int8());
    q = logits(R);
    // Fewer rows than kInt8MinRows stay in float, where int8 does not pay.
    EXPECT_TRUE(torch::equal(logits(R - 1), fp_few));
    // A shortlist's rows in int8 score as the whole vocabulary's do (columns = ids).
    auto enc = model->encoder->forward(b.src, b.src_len);
    auto mem = model->decoder->memory(enc);
    const auto ids = torch::tensor({0, 1, 2, 3, 9, 5, 12}, torch::kLong);
    model->decoder->restrict_output(mem, ids);
    const auto sub = model->decoder->step(torch::full({R}, nmt::kBosId, torch::kLong), enc.init_state, mem).logits;
    EXPECT_TRUE(torch::allclose(sub, q.index_select(1, ids), 1e-4, 1e-4)) << "restricted int8 logits";
    EXPECT_FALSE(torch::allclose(sub, fp.index_select(1, ids), 1e-6, 1e-7)) << "restricted logits should be int8";
  }
  grad_on = logits(R).detach();  // autograd records: the float weights
  {
    torch::NoGradGuard ng;
    const double range = fp.abs().max().item<double>();
    const double err = (q - fp).abs().max().item<double>();
    EXPECT_LE(err, 0.05 * range) << "int8 logits too far from float";  // four products of ~1% resolution each
    EXPECT_GT(err, 0.0) << "int8 should not equal float exactly: is it running?";
    EXPECT_TRUE(torch::allclose(grad_on, fp, 1e-4, 1e-5));  // float (the step path may differ in rounding)
    const auto hyps = nmt::make_search(nmt::SearchOptions{})->run(model, b, false);
    EXPECT_EQ(hyps.size(), static_cast<size_t>(R));
    model->decoder->set_int8(false);
    EXPECT_FALSE(model->decoder->int8());
    back = logits(R);
  }
  EXPECT_TRUE(torch::equal(back, fp));
  expect_layer_near_float<nmt::Int8Linear>(0.02);
}

// --bf16: the decoder step's products in bfloat16 give logits within about
// a percent of the float ones' range on any number of rows (8 significant
// bits per product and output), only without autograd; a shortlist's rows
// score as the whole vocabulary's do; float again restores the logits exactly.
TEST(SearchTest, Bf16DecoderProducts) {
  auto model = tiny_model(9);
  const int R = 3;
  const auto ex = source_examples(R, 16);
  const auto b = nmt::make_batch(ex, iota(R), false);
  auto logits = [&] {
    auto enc = model->encoder->forward(b.src, b.src_len);
    auto y = torch::full({R}, nmt::kBosId, torch::kLong);
    return model->decoder->step(y, enc.init_state, model->decoder->memory(enc)).logits;  // [R, V]
  };
  torch::Tensor fp, h, grad_on, back;
  {
    torch::NoGradGuard ng;
    fp = logits();
    model->decoder->set_precision(nmt::Precision::kBf16);
    ASSERT_EQ(model->decoder->precision(), nmt::Precision::kBf16);
    EXPECT_FALSE(model->decoder->int8());
    h = logits();
    auto enc = model->encoder->forward(b.src, b.src_len);
    auto mem = model->decoder->memory(enc);
    const auto ids = torch::tensor({0, 1, 2, 3, 9, 5, 12}, torch::kLong);
    model->decoder->restrict_output(mem, ids);
    const auto sub = model->decoder->step(torch::full({R}, nmt::kBosId, torch::kLong), enc.init_state, mem).logits;
    // (to a bfloat16 rounding of the output: the product's kernel may differ with the rows)
    EXPECT_TRUE(torch::allclose(sub, h.index_select(1, ids), 1e-2, 1e-3)) << "restricted bf16 logits";
  }
  grad_on = logits().detach();  // autograd records: the float weights
  {
    torch::NoGradGuard ng;
    const double range = fp.abs().max().item<double>();
    const double err = (h - fp).abs().max().item<double>();
    EXPECT_LE(err, 0.03 * range) << "bf16 logits too far from float";
    EXPECT_GT(err, 0.0) << "bf16 should not equal float exactly: is it running?";
    EXPECT_TRUE(torch::allclose(grad_on, fp, 1e-4, 1e-5));
    const auto hyps = nmt::make_search(nmt::SearchOptions{})->run(model, b, false);
    EXPECT_EQ(hyps.size(), static_cast<size_t>(R));
    model->decoder->set_precision(nmt::Precision::kFloat32);
    back = logits();
  }
  EXPECT_TRUE(torch::equal(back, fp));
  expect_layer_near_float<nmt::Bf16Linear>(0.02);
}

// --int8 and --bf16 together are a usage error.
TEST(SearchTest, OnePrecisionAtATime) {
  nmt::TranslateOptions opt;
  opt.int8 = opt.bf16 = true;
  EXPECT_THROW(opt.validate(), nmt::UsageError);
  opt.int8 = false;
  EXPECT_NO_THROW(opt.validate());
}

// The search CUDA uses (fixed rows, a step that updates its tensors in place,
// finished sentences masked rather than dropped), run here eagerly: the same
// hypotheses as greedy search, with and without attention, capped or not,
// for one model and an ensemble.
TEST(SearchTest, FixedRowGreedyEqualsGreedy) {
  for (bool capped : {false, true}) {
    auto a = tiny_model(21), b = tiny_model(22);
    if (capped) suppress_eos(a);
    const auto ex = source_examples(11, 23);
    const auto batch = nmt::make_batch(ex, iota(11), false);
    nmt::SearchOptions opt;
    opt.max_length = capped ? 7 : 40;
    torch::NoGradGuard ng;
    for (auto models : {std::vector<nmt::Seq2Seq>{a}, std::vector<nmt::Seq2Seq>{a, b}}) {
      for (bool with_attention : {false, true}) {
        nmt::Scorer s1(models), s2(models);
        const auto want = nmt::make_search(opt)->run(s1, batch, with_attention);
        const auto got = nmt::make_fixed_row_greedy_search(opt, /*capture=*/false)->run(s2, batch, with_attention);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          const auto& w = want[i][0];
          const auto& g = got[i][0];
          EXPECT_EQ(g.ids, w.ids) << "sentence " << i << ", " << models.size() << " models";
          EXPECT_NEAR(g.score, w.score, 1e-4 * std::max(1.0, std::abs(w.score))) << i;
          EXPECT_NEAR(g.norm_score, w.norm_score, 1e-4 * std::max(1.0, std::abs(w.norm_score))) << i;
          ASSERT_EQ(g.attention.defined(), with_attention);
          if (with_attention) {
            EXPECT_TRUE(torch::allclose(g.attention, w.attention, 1e-4, 1e-5)) << i;
          }
        }
      }
    }
  }
}

TEST(SearchTest, AttentionRowsSumToOne) {
  auto model = tiny_model(5);
  const auto ex = source_examples(5, 13);
  torch::NoGradGuard ng;
  const auto hyps = nmt::make_search(nmt::SearchOptions{})->run(model, nmt::make_batch(ex, iota(5), false), true);
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto& h = hyps[i][0];
    ASSERT_TRUE(h.attention.defined());
    EXPECT_TRUE(h.attention.device().is_cpu());
    EXPECT_EQ(h.attention.scalar_type(), torch::kFloat);
    EXPECT_EQ(h.attention.size(0), static_cast<int64_t>(h.ids.size()) + 1) << i;
    EXPECT_EQ(h.attention.size(1), static_cast<int64_t>(ex[i].src.size())) << i;
    EXPECT_TRUE(torch::allclose(h.attention.sum(1), torch::ones({h.attention.size(0)}), 0, 1e-5)) << i;
  }
  // Without attention requested, none is returned.
  const auto plain = nmt::make_search(nmt::SearchOptions{})->run(model, nmt::make_batch(ex, iota(5), false), false);
  EXPECT_FALSE(plain[0][0].attention.defined());
}

TEST(SearchTest, GreedyScoreEqualsForcedDecodingLogProb) {
  for (bool capped : {false, true}) {
    auto model = tiny_model(6);
    if (capped) suppress_eos(model);
    auto ex = source_examples(6, 14);
    torch::NoGradGuard ng;
    nmt::SearchOptions opt;
    opt.max_length = 6;
    const auto hyps = nmt::make_search(opt)->run(model, nmt::make_batch(ex, iota(6), false), false);
    for (size_t i = 0; i < ex.size(); ++i) ex[i].tgt = hyps[i][0].ids;
    const auto b = nmt::make_batch(ex, iota(6), true);
    const auto logp = torch::log_softmax(model->forward(b.src, b.src_len, b.tgt_in), -1);  // [B, T, V]
    const auto tok_logp = logp.gather(2, b.tgt_out.unsqueeze(2)).squeeze(2).masked_fill(b.tgt_out.eq(nmt::kPadId), 0);
    for (size_t i = 0; i < ex.size(); ++i) {
      // tgt_out is ids then EOS, as greedy search scores it.
      EXPECT_NEAR(hyps[i][0].score, tok_logp[i].sum().item<double>(), 1e-4 * std::max(1.0, std::abs(hyps[i][0].score)))
          << "sentence " << i << (capped ? " (capped)" : "");
      // Greedy: each produced token is the argmax of its step.
      const auto best = std::get<1>(logp[i].max(-1));
      for (size_t k = 0; k < hyps[i][0].ids.size(); ++k)
        EXPECT_EQ(best[k].item<int64_t>(), hyps[i][0].ids[k]) << "sentence " << i << " token " << k;
    }
  }
}

TEST(SearchTest, BadOptionsThrow) {
  nmt::SearchOptions opt;
  opt.beam_size = 0;
  EXPECT_THROW(nmt::make_search(opt), nmt::Error);
  opt.beam_size = -3;
  EXPECT_THROW(nmt::make_search(opt), nmt::Error);
  opt = {};
  opt.max_length = 0;
  EXPECT_THROW(nmt::make_search(opt), nmt::Error);
  EXPECT_NO_THROW(nmt::make_search(nmt::SearchOptions{}));
}

TEST(TranslatorTest, OrderEmptyLinesAndBatching) {
  auto model = tiny_model(7);
  const auto& tok = nmt::test::toy_tokenizer();
  nmt::Translator tr(model, tok, tok);
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(9, 15, &s, &t);
  s.insert(s.begin() + 3, "");
  s.push_back("");
  nmt::TranslateOptions opt;
  opt.batch_sentences = 4;
  opt.batch_tokens = 20;
  model->train();
  const auto out = tr.translate_text(s, opt);
  EXPECT_TRUE(model->is_training()) << "translate must restore training mode";
  ASSERT_EQ(out.size(), s.size());
  EXPECT_EQ(out[3], "");
  EXPECT_EQ(out.back(), "");
  nmt::TranslateOptions one;
  one.batch_sentences = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].empty()) continue;
    EXPECT_EQ(out[i], tr.translate_text({s[i]}, one)[0]) << "line " << i;
  }
  const auto ids = tr.encode_source("red cat");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), nmt::kEosId);
  opt.batch_sentences = 0;
  EXPECT_THROW(tr.translate_text(s, opt), nmt::Error);
}

}  // namespace

namespace {

// Search in eval mode multiplies with copies of the weights made for it
// (StepWeights: transposed weights, the first GRU's input gates of every
// embedding as a table): they give the plain products' values, for both
// decoders, and follow the weights when they change in place (as an
// optimizer or a checkpoint load changes them) instead of serving stale ones.
TEST(SearchTest, StepWeightsFollowTheWeights) {
  for (auto decoder : {nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru}) {
    torch::manual_seed(4);
    auto opt = nmt::test::tiny_model();
    opt.decoder = decoder;
    nmt::Seq2Seq model(opt);
    model->eval();
    const auto ex = source_examples(5, 21);
    const auto b = nmt::make_batch(ex, iota(5), false);
    auto logits = [&](nmt::DecoderImpl::Path path) {
      model->decoder->set_path(path);
      auto enc = model->encoder->forward(b.src, b.src_len);
      auto y = torch::tensor({7, 8, 9, 10, 11}, torch::kLong);
      return model->decoder->step(y, enc.init_state, model->decoder->memory(enc)).logits;  // [5, V]
    };
    torch::NoGradGuard ng;
    for (int round = 0; round < 2; ++round) {
      const auto table = logits(nmt::DecoderImpl::Path::kOptimized);
      const auto plain = logits(nmt::DecoderImpl::Path::kReference);
      EXPECT_TRUE(torch::allclose(table, plain, 1e-4, 1e-5)) << "round " << round;
      // In place, each weight the copies are made of: they must notice.
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
    }
    // Moved away and back (new storage, the same version counters) with other values meanwhile.
    model->to(torch::kDouble);
    for (auto& p : model->parameters()) p.mul_(1.05);
    model->to(torch::kFloat);
    EXPECT_TRUE(torch::allclose(logits(nmt::DecoderImpl::Path::kOptimized), logits(nmt::DecoderImpl::Path::kReference),
                                1e-4, 1e-5)) << "after a move";
    model->decoder->set_path(nmt::DecoderImpl::Path::kAuto);
  }
}

// A memory made for search carries weights autograd does not see; a step
// taken with it under autograd (a caller that builds the memory in one mode
// and steps in another) multiplies with fresh ones, so gradients reach every
// weight of the step.
TEST(SearchTest, AStepUnderAutogradNeverMultipliesWithSearchCopies) {
  for (auto path : {nmt::DecoderImpl::Path::kAuto, nmt::DecoderImpl::Path::kOptimized}) {
    auto model = tiny_model(5);
    model->decoder->set_path(path);
    const auto ex = source_examples(3, 9);
    const auto b = nmt::make_batch(ex, iota(3), false);
    nmt::DecoderMemory mem;
    torch::Tensor init;
    {
      torch::NoGradGuard ng;
      auto enc = model->encoder->forward(b.src, b.src_len);
      mem = model->decoder->memory(enc);
      init = enc.init_state;
    }
    ASSERT_TRUE(mem.weights && mem.weights->for_search);
    model->zero_grad();
    auto out = model->decoder->step(torch::tensor({5, 6, 7}, torch::kLong), init, mem);
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
