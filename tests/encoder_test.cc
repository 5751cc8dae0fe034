// The encoder's two recurrences (model/layers.h): over packed sequences, and
// over the padded batch as it is (what a CUDA graph can hold) give the same
// annotations, initial state, logits and gradients to rounding.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "model/batch.h"
#include "model/model.h"
#include "test_util.h"
#include "train/losses.h"

namespace {

using nmt::test::model_depth;
using nmt::test::model_rounding_bound;
using nmt::test::within;

nmt::Seq2Seq model_with_layers(int64_t layers) {
  auto opt = nmt::test::tiny_model(nmt::AttentionType::kAdditive);
  opt.enc_layers = layers;
  return nmt::test::seeded_model(opt, 3);
}

TEST(EncoderTest, PaddedRecurrenceEqualsPackedSequences) {
  for (int64_t layers : {1, 2}) {
    SCOPED_TRACE(testing::Message() << layers << " layers");
    auto model = model_with_layers(layers);
    const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
    ASSERT_FALSE(b.src_len.eq(b.src.size(1)).all().item<bool>()) << "the batch should hold padding";
    torch::NoGradGuard no_grad;
    const auto packed = model->encoder->forward(b.src, b.src_len);
    const auto padded = model->encoder->forward(b.src, torch::Tensor());
    const int64_t S = b.src.size(1), T = b.tgt_in.size(1);
    // Both run the same GRU over the same words in the same order; the
    // products have other row counts (other kernels, other sums): within
    // model_rounding_bound() over each layer's S steps.
    EXPECT_TRUE(within(padded.annotations, packed.annotations, model_rounding_bound(*model, layers * S)));
    EXPECT_TRUE(padded.annotations.masked_select(padded.mask.logical_not().unsqueeze(2)).eq(0).all().item<bool>())
        << "annotations not zero on padding";
    EXPECT_TRUE(torch::equal(padded.mask, packed.mask));
    EXPECT_TRUE(within(padded.init_state, packed.init_state, model_rounding_bound(*model, layers * S + 1)));
    const auto logits_packed = model->forward(b.src, b.src_len, b.tgt_in);
    const auto logits_padded = model->forward(b.src, torch::Tensor(), b.tgt_in);
    EXPECT_TRUE(within(logits_padded, logits_packed, model_rounding_bound(*model, model_depth(layers * S, T))));
  }
}

TEST(EncoderTest, PaddedRecurrenceGivesThePackedGradients) {
  for (int64_t layers : {1, 2}) {
    SCOPED_TRACE(testing::Message() << layers << " layers");
    auto model = model_with_layers(layers);
    model->train();  // tiny_model() has no dropout: the same function as in eval mode
    const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
    auto gradients = [&](const torch::Tensor& src_len) {
      model->zero_grad();
      nmt::sequence_loss(model->forward(b.src, src_len, b.tgt_in), b.tgt_out, 0.0).backward();
      std::vector<torch::Tensor> out;
      for (const auto& p : model->encoder->parameters()) out.push_back(p.grad().clone());
      return out;
    };
    const auto packed = gradients(b.src_len), padded = gradients(torch::Tensor());
    const int64_t S = b.src.size(1), T = b.tgt_in.size(1);
    const double bound = nmt::test::gradient_rounding_bound(*model, model_depth(layers * S, T), b.size() * T);
    ASSERT_EQ(packed.size(), padded.size());
    for (size_t i = 0; i < packed.size(); ++i) {
      EXPECT_GT(packed[i].abs().sum().item<double>(), 0) << "parameter " << i << " got no gradient";
      EXPECT_TRUE(within(padded[i], packed[i], bound * packed[i].abs().max().item<double>())) << "parameter " << i;
    }
  }
}

// What a CUDA graph of the training step runs: the batch padded to a fixed
// shape, the encoder over the padded batch. Its loss and gradients are the
// batch's own.
TEST(EncoderTest, ABatchPaddedToAFixedShapeGivesItsLossAndGradients) {
  auto model = model_with_layers(1);
  model->train();  // no dropout in tiny_model()
  const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
  const auto p = nmt::pad_batch(b, b.size() + 3, b.src.size(1) + 5, b.tgt_in.size(1) + 4);
  auto run = [&](const nmt::Batch& x, const torch::Tensor& src_len, std::vector<torch::Tensor>* grads) {
    model->zero_grad();
    auto loss = nmt::sequence_loss(model->forward(x.src, src_len, x.tgt_in), x.tgt_out, 0.1);
    loss.backward();
    for (const auto& q : model->parameters()) grads->push_back(q.grad().clone());
    return loss.item<double>();
  };
  std::vector<torch::Tensor> g_batch, g_padded;
  const double loss_batch = run(b, b.src_len, &g_batch), loss_padded = run(p, torch::Tensor(), &g_padded);
  const int64_t S = p.src.size(1), T = p.tgt_in.size(1);
  const double bound = nmt::test::gradient_rounding_bound(*model, model_depth(S, T), p.size() * T);
  EXPECT_TRUE(within(torch::tensor(loss_padded), torch::tensor(loss_batch),
                     model_rounding_bound(*model, model_depth(S, T)) * b.tgt_tokens));
  for (size_t i = 0; i < g_batch.size(); ++i)
    EXPECT_TRUE(within(g_padded[i], g_batch[i], bound * g_batch[i].abs().max().item<double>())) << "parameter " << i;
}

}  // namespace
