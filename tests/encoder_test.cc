// The encoder's recurrences (model/layers.h): over packed sequences, and
// over the padded batch as it is (what a CUDA graph can hold) give the same
// annotations, initial state, logits and gradients to rounding; so does the
// step-by-step recurrence of state dropout (ModelOptions::enc_hidden_dropout)
// when its masks keep every unit, and with masks that drop units it is the
// GRU with one mask per sentence, layer and direction for all the steps.
// With layer normalization (ModelOptions::layer_norm) the encoder is the GRU
// written out with its gate norms, a sentence alone or in a padded batch.
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

nmt::Seq2Seq model_with_layers(int64_t layers, double enc_hidden_dropout = 0) {
  auto opt = nmt::test::tiny_model(nmt::AttentionType::kAdditive);
  opt.enc_layers = layers;
  opt.enc_hidden_dropout = enc_hidden_dropout;
  return nmt::test::seeded_model(opt, 3);
}

// The gradients of the encoder's parameters for batch b's loss, with src_len
// passed to the model as given (undefined: the encoder over the padded batch).
std::vector<torch::Tensor> encoder_gradients(nmt::Seq2Seq& model, const nmt::Batch& b, const torch::Tensor& src_len) {
  model->zero_grad();
  nmt::sequence_loss(model->forward(b.src, src_len, b.tgt_in), b.tgt_out, 0.0).backward();
  std::vector<torch::Tensor> out;
  for (const auto& p : model->encoder->parameters()) out.push_back(p.grad().clone());
  return out;
}

// Every gradient of `got` within rounding of `want`'s (which must all be
// nonzero), for batch b through a model of `layers` encoder layers.
void expect_same_gradients(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want,
                           nmt::Seq2Seq& model, const nmt::Batch& b, int64_t layers) {
  const int64_t S = b.src.size(1), T = b.tgt_in.size(1);
  const double bound = nmt::test::gradient_rounding_bound(*model, model_depth(layers * S, T), b.size() * T);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_GT(want[i].abs().sum().item<double>(), 0) << "parameter " << i << " got no gradient";
    EXPECT_TRUE(within(got[i], want[i], bound * want[i].abs().max().item<double>())) << "parameter " << i;
  }
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
    expect_same_gradients(encoder_gradients(model, b, torch::Tensor()), encoder_gradients(model, b, b.src_len), model,
                          b, layers);
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

TEST(EncoderTest, StateMasksThatKeepEveryUnitGiveThePackedRecurrence) {
  // With p = 1e-9 every mask unit is 1 / (1 - p), which is 1 in float: the
  // step-by-step recurrence that training with state dropout runs is then
  // LibTorch's packed GRU, in annotations and in gradients, to rounding.
  for (int64_t layers : {1, 2}) {
    SCOPED_TRACE(testing::Message() << layers << " layers");
    auto plain = model_with_layers(layers), masked = model_with_layers(layers, 1e-9);
    plain->train();  // tiny_model() has no other dropout
    masked->train();
    const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
    const int64_t S = b.src.size(1);
    {
      torch::NoGradGuard no_grad;
      const auto want = plain->encoder->forward(b.src, b.src_len), got = masked->encoder->forward(b.src, b.src_len);
      EXPECT_TRUE(within(got.annotations, want.annotations, model_rounding_bound(*plain, layers * S)));
      EXPECT_TRUE(got.annotations.masked_select(got.mask.logical_not().unsqueeze(2)).eq(0).all().item<bool>())
          << "annotations not zero on padding";
    }
    expect_same_gradients(encoder_gradients(masked, b, b.src_len), encoder_gradients(plain, b, b.src_len), plain, b,
                          layers);
  }
}

TEST(EncoderTest, StateMasksAreOnePerSentenceAndDirectionForAllSteps) {
  // Each sentence alone through a GRU written out here, its state multiplied
  // by the same mask wherever it enters W_hh, the masks drawn as the encoder
  // draws them (forward, then backward, from the same seed).
  const double p = 0.5;
  auto model = model_with_layers(1, p);
  model->train();
  const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
  const int64_t B = b.size(), S = b.src.size(1), H = nmt::test::tiny_model().enc_hidden;
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  const auto got = model->encoder->forward(b.src, b.src_len).annotations;  // [B, S, 2H]
  torch::manual_seed(11);
  const auto ones = torch::ones({B, H});
  const auto forward_mask = torch::dropout(ones, p, /*train=*/true), backward_mask = torch::dropout(ones, p, true);
  ASSERT_TRUE(forward_mask.eq(0).any().item<bool>() && backward_mask.eq(0).any().item<bool>());
  auto w = model->encoder->named_parameters();
  const auto x = torch::embedding(w["embed.weight"], b.src);  // [B, S, E]
  auto step = [&](const torch::Tensor& xt, const torch::Tensor& h, const torch::Tensor& m, const std::string& d) {
    return nmt::gru_update(torch::addmm(w["rnn.bias_ih_l0" + d], xt, w["rnn.weight_ih_l0" + d].t()),
                           torch::addmm(w["rnn.bias_hh_l0" + d], h * m, w["rnn.weight_hh_l0" + d].t()), h);
  };
  auto want = torch::zeros({B, S, 2 * H});
  for (int64_t i = 0; i < B; ++i) {
    const int64_t len = b.src_len[i].item<int64_t>();
    auto h = torch::zeros({1, H});
    for (int64_t t = 0; t < len; ++t) {
      h = step(x[i].narrow(0, t, 1), h, forward_mask[i], "");
      want[i][t].narrow(0, 0, H).copy_(h[0]);
    }
    h = torch::zeros({1, H});
    for (int64_t t = len - 1; t >= 0; --t) {
      h = step(x[i].narrow(0, t, 1), h, backward_mask[i], "_reverse");
      want[i][t].narrow(0, H, H).copy_(h[0]);
    }
  }
  EXPECT_TRUE(within(got, want, model_rounding_bound(*model, S)));
  model->eval();
  const auto eval = model->encoder->forward(b.src, b.src_len).annotations;
  EXPECT_GT((eval - got).abs().max().item<double>(), 1e-3) << "the masks changed nothing";
}

// Layer normalization written out: x [N, 3H] with its first 2H and last H
// units each brought to mean 0 and variance 1 (the biased variance, epsilon
// 1e-5), then times weight [3H] plus bias [3H].
torch::Tensor written_gate_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const int64_t H = x.size(1) / 3;
  auto part = [](const torch::Tensor& v) {
    const auto mean = v.mean(1, /*keepdim=*/true);
    const auto var = (v - mean).pow(2).mean(1, /*keepdim=*/true);
    return (v - mean) / (var + 1e-5).sqrt();
  };
  return torch::cat({part(x.narrow(1, 0, 2 * H)), part(x.narrow(1, 2 * H, H))}, 1) * weight + bias;
}

TEST(EncoderTest, LayerNormalizedGruIsTheGruWrittenOutWithItsNorms) {
  // Each sentence alone through a GRU written out here, both products of
  // every step normalized; the norms' weights and biases drawn at random so
  // that a norm left out, swapped or applied to the wrong units shows. The
  // batch is padded: the encoder runs over the padding, which must not reach
  // any sentence's annotations.
  auto opt = nmt::test::tiny_model(nmt::AttentionType::kAdditive);
  opt.layer_norm = true;
  auto model = nmt::test::seeded_model(opt, 3);
  model->eval();
  torch::NoGradGuard no_grad;
  auto w = model->encoder->named_parameters();
  torch::manual_seed(5);
  for (const char* name : {"norm_ih_l0", "norm_hh_l0", "norm_ih_l0_reverse", "norm_hh_l0_reverse"}) {
    ASSERT_TRUE(w.contains(std::string(name) + ".weight")) << name;
    w[std::string(name) + ".weight"].uniform_(0.5, 1.5);
    w[std::string(name) + ".bias"].uniform_(-0.5, 0.5);
  }
  const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
  const int64_t B = b.size(), S = b.src.size(1), H = opt.enc_hidden;
  ASSERT_LT(b.src_len.min().item<int64_t>(), S) << "the batch needs padding";
  const auto got = model->encoder->forward(b.src, b.src_len).annotations;  // [B, S, 2H]
  const auto x = torch::embedding(w["embed.weight"], b.src);              // [B, S, E]
  auto step = [&](const torch::Tensor& xt, const torch::Tensor& h, const std::string& d) {
    const auto gi = torch::addmm(w["rnn.bias_ih_l0" + d], xt, w["rnn.weight_ih_l0" + d].t());
    const auto gh = torch::addmm(w["rnn.bias_hh_l0" + d], h, w["rnn.weight_hh_l0" + d].t());
    return nmt::gru_update(written_gate_norm(gi, w["norm_ih_l0" + d + ".weight"], w["norm_ih_l0" + d + ".bias"]),
                           written_gate_norm(gh, w["norm_hh_l0" + d + ".weight"], w["norm_hh_l0" + d + ".bias"]), h);
  };
  auto want = torch::zeros({B, S, 2 * H});
  for (int64_t i = 0; i < B; ++i) {
    const int64_t len = b.src_len[i].item<int64_t>();
    auto h = torch::zeros({1, H});
    for (int64_t t = 0; t < len; ++t) {
      h = step(x[i].narrow(0, t, 1), h, "");
      want[i][t].narrow(0, 0, H).copy_(h[0]);
    }
    h = torch::zeros({1, H});
    for (int64_t t = len - 1; t >= 0; --t) {
      h = step(x[i].narrow(0, t, 1), h, "_reverse");
      want[i][t].narrow(0, H, H).copy_(h[0]);
    }
  }
  EXPECT_TRUE(within(got, want, model_rounding_bound(*model, S)));
  // Without its norms the same weights give other annotations: the norms are in the function.
  auto plain_opt = opt;
  plain_opt.layer_norm = false;
  nmt::Seq2Seq plain(plain_opt);
  plain->eval();
  auto pw = plain->named_parameters();
  for (const auto& p : model->named_parameters())
    if (pw.contains(p.key())) pw[p.key()].copy_(p.value());
  EXPECT_GT((plain->encoder->forward(b.src, b.src_len).annotations - got).abs().max().item<double>(), 1e-3);
}

}  // namespace
