// Reduced precision in search (--int8, --bf16): each product alone near
// the float one, and engines built in that precision near the float engine.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "model/quantized.h"
#include "search_util.h"

namespace {

using nmt::test::eval_model;
using nmt::test::first_step_logits;
using nmt::test::gamma;
using nmt::test::iota;
using nmt::test::model_depth;
using nmt::test::model_rounding_bound;
using nmt::test::run_search;
using nmt::test::source_examples;
using nmt::test::within;

// A reduced-precision layer alone against the float product, at a shape a
// search meets: float out, within `bound(x, w, bias)` (elementwise) of it, not exact.
template <class Layer, class Bound>
void expect_layer_near_float(Bound bound) {
  torch::manual_seed(3);
  auto w = torch::randn({300, 64}) * 0.1, bias = torch::randn({300}), x = torch::tanh(torch::randn({5, 7, 64}));
  Layer lin(w, bias);
  c10::InferenceMode im;
  const torch::Tensor ref = torch::nn::functional::linear(x, w, bias);
  const torch::Tensor got = lin(x);
  ASSERT_EQ(got.sizes(), ref.sizes());
  EXPECT_EQ(got.scalar_type(), torch::kFloat);
  EXPECT_TRUE(within(got, ref, bound(x, w, bias)));
  EXPECT_GT((got - ref).abs().max().item<double>(), 0.0)
      << "a reduced-precision product should not equal float exactly";
}

}  // namespace

// --int8: an engine built in int8 gives logits within a few percent of the
// float engine's range (four products, each at the quantization's
// resolution of about 1%), from StepWeights::kInt8MinRows rows on; fewer
// rows, and a float engine built again, give the float logits exactly; the
// decoder's own step under autograd stays float; search runs on it.
TEST(SearchTest, Int8DecoderProducts) {
  if (!nmt::Int8Linear::available()) GTEST_SKIP() << "this LibTorch has no quantized CPU engine";
  auto model = eval_model(9);
  const int R = static_cast<int>(nmt::StepWeights::kInt8MinRows);  // the fewest rows int8 runs on
  const auto ex = source_examples(R, 16);
  const auto b = nmt::make_batch(ex, iota(R), false);
  const auto few = nmt::make_batch(ex, iota(R - 1), false);
  nmt::EngineOptions int8;
  int8.precision = nmt::Precision::kInt8;
  torch::Tensor fp, q;
  {
    torch::NoGradGuard ng;
    nmt::RnnEngine float_engine(model), int8_engine(model, int8);
    fp = first_step_logits(float_engine, b);
    q = first_step_logits(int8_engine, b);
    // Fewer rows than kInt8MinRows stay in float, where int8 does not pay: the same products, the same bits.
    EXPECT_TRUE(torch::equal(first_step_logits(int8_engine, few), first_step_logits(float_engine, few)));
    // A shortlist's rows in int8 score as the whole vocabulary's do (columns = ids).
    const auto ids = torch::tensor({0, 1, 2, 3, 9, 5, 12}, torch::kLong);
    const auto sub = first_step_logits(int8_engine, b, ids);
    // Per-row weight scales and the same input: the same integer sums, each
    // turned into float (scales multiplied, the sum scaled, the bias added)
    // within 3u (|y| + 2 |b|) by either kernel.
    const auto out_bias = model->named_parameters()["decoder.out_bias"].index_select(0, ids).abs();
    EXPECT_TRUE(within(sub, q.index_select(1, ids), 2 * 3 * 0x1p-24 * (sub.abs() + 2 * out_bias)))
        << "restricted int8 logits";
    EXPECT_FALSE(torch::allclose(sub, fp.index_select(1, ids), 1e-6, 1e-7)) << "restricted logits should be int8";
    const double range = fp.abs().max().item<double>();
    const double err = (q - fp).abs().max().item<double>();
    // Four products of ~1% resolution each: the quantization's error, the
    // same on every CPU (the integer sums are exact); float rounding adds ~1e-6 of it.
    EXPECT_LE(err, 0.05 * range) << "int8 logits too far from float";
    EXPECT_GT(err, 0.0) << "int8 should not equal float exactly: is it running?";
    const auto hyps = run_search(*nmt::make_search(nmt::SearchOptions{}), model, b, false, int8);
    EXPECT_EQ(hyps.size(), static_cast<size_t>(R));
    nmt::RnnEngine again(model);
    EXPECT_TRUE(torch::equal(first_step_logits(again, b), fp));  // float products again: the same bits
  }
  // Autograd records: the decoder's own step, with float weights (other products, other sums).
  auto enc = model->encoder->forward(b.src, b.src_len);
  const auto grad_on = model->decoder->step(torch::full({R}, nmt::kBosId, torch::kLong), enc.init_state,
                                            model->decoder->memory(enc)).logits.detach();
  EXPECT_TRUE(within(grad_on, fp, model_rounding_bound(*model, model_depth(b.src.size(1), 1))));
  // Weights rounded to int8 per row (scale s_w = max |w_row| / 127, error at
  // most s_w / 2), inputs to 7 bits (scale s_x = range / 127, error at most
  // s_x, its zero point rounded), integer sums exact: s_w / 2 sum |x| + s_x
  // sum |w| + K s_x s_w / 2, and the float rounding of both sides.
  using torch::Tensor;
  expect_layer_near_float<nmt::Int8Linear>([](const Tensor& x, const Tensor& w, const Tensor& bias) {
    const auto xd = x.to(torch::kDouble), wd = w.to(torch::kDouble);
    const auto s_w = wd.abs().amax(1) / 127;                                               // [N]
    const double s_x = (std::max(0.0, xd.max().item<double>()) - std::min(0.0, xd.min().item<double>())) / 127;
    const auto K = static_cast<double>(w.size(1));
    return s_w * xd.abs().sum(-1, true) / 2 + s_x * wd.abs().sum(1) + K * s_x * s_w / 2 +
           nmt::test::dot_error_bound(x, w.t(), bias);
  });
}

// --bf16: an engine built in bfloat16 gives logits within about a percent
// of the float engine's range on any number of rows (8 significant bits per
// product and output); a shortlist's rows score as the whole vocabulary's
// do; a float engine built again gives the float logits exactly.
TEST(SearchTest, Bf16DecoderProducts) {
  auto model = eval_model(9);
  const int R = 3;
  const auto ex = source_examples(R, 16);
  const auto b = nmt::make_batch(ex, iota(R), false);
  nmt::EngineOptions bf16;
  bf16.precision = nmt::Precision::kBf16;
  torch::NoGradGuard ng;
  nmt::RnnEngine float_engine(model), bf16_engine(model, bf16);
  const auto fp = first_step_logits(float_engine, b), h = first_step_logits(bf16_engine, b);
  const auto ids = torch::tensor({0, 1, 2, 3, 9, 5, 12}, torch::kLong);
  const auto sub = first_step_logits(bf16_engine, b, ids);
  // The same bfloat16 inputs and weights; the kernel may sum the E products
  // (inputs within 1: a tanh) in another order for other rows, 2 gamma_E
  // sum |w|, round the output to bfloat16 the other way, 2^-8 |y| each, and
  // the bias adds a float rounding.
  auto params = model->named_parameters();
  const auto w_abs = params["decoder.out_weight"].index_select(0, ids).abs();  // [V', E]
  const auto y_abs = sub.abs() + params["decoder.out_bias"].index_select(0, ids).abs();
  EXPECT_TRUE(within(sub, h.index_select(1, ids),
                     2 * gamma(w_abs.size(1), 0x1p-24) * w_abs.sum(1) + 2 * (0x1p-8 + 0x1p-24) * y_abs))
      << "restricted bf16 logits";
  const double range = fp.abs().max().item<double>();
  const double err = (h - fp).abs().max().item<double>();
  // bfloat16's rounding (2^-8) of inputs, weights and outputs, the same on
  // every CPU; the float sums add ~1e-6 of it.
  EXPECT_LE(err, 0.03 * range) << "bf16 logits too far from float";
  EXPECT_GT(err, 0.0) << "bf16 should not equal float exactly: is it running?";
  const auto hyps = run_search(*nmt::make_search(nmt::SearchOptions{}), model, b, false, bf16);
  EXPECT_EQ(hyps.size(), static_cast<size_t>(R));
  nmt::RnnEngine again(model);
  EXPECT_TRUE(torch::equal(first_step_logits(again, b), fp));  // float products again: the same bits
  // Inputs, weights and the product rounded to bfloat16 (2^-8 each, the
  // first two of each factor), the sums in float.
  using torch::Tensor;
  expect_layer_near_float<nmt::Bf16Linear>([](const Tensor& x, const Tensor& w, const Tensor& bias) {
    const double ub = 0x1p-8;
    const auto mag = torch::matmul(x.abs().to(torch::kDouble), w.abs().t().to(torch::kDouble));
    return (std::pow(1 + ub, 3) - 1) * mag + nmt::test::dot_error_bound(x, w.t(), bias);
  });
}

// --int8 and --bf16 together are a usage error.
TEST(SearchTest, OnePrecisionAtATime) {
  nmt::TranslateOptions opt;
  opt.int8 = opt.bf16 = true;
  EXPECT_THROW(opt.validate(), nmt::UsageError);
  opt.int8 = false;
  EXPECT_NO_THROW(opt.validate());
}

