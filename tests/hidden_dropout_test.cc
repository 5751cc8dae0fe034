// The decoder's state dropout (ModelOptions::dec_hidden_dropout): one mask
// per sentence, drawn with the decoder memory and used at every step, in
// training only. That every decoder path applies it alike is
// ModelAttentionTest.FastPathsEqualReferencePath's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/batch.h"
#include "model/model.h"
#include "test_util.h"

namespace {

using nmt::test::model_depth;
using nmt::test::model_rounding_bound;
using nmt::test::within;

nmt::Seq2Seq hidden_dropout_model(double hidden_dropout, nmt::DecoderType decoder) {
  auto opt = nmt::test::tiny_model(nmt::AttentionType::kAdditive);
  opt.decoder = decoder;
  opt.dropout = 0;  // only the state masks draw
  opt.dec_hidden_dropout = hidden_dropout;
  torch::manual_seed(1);
  return nmt::Seq2Seq(opt);
}

TEST(DecoderHiddenDropoutTest, MasksAreDrawnPerSentenceInTrainingOnly) {
  const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
  torch::NoGradGuard ng;
  for (const auto decoder : {nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru}) {
    const bool cgru = decoder == nmt::DecoderType::kCgru;
    SCOPED_TRACE(cgru ? "cgru" : "bahdanau");
    auto model = hidden_dropout_model(0.5, decoder);
    const int64_t B = b.size(), D = nmt::test::tiny_model().dec_hidden;
    model->train();
    const auto mem = model->decoder->memory(model->encoder->forward(b.src, b.src_len));
    ASSERT_TRUE(mem.query_mask.defined());
    ASSERT_EQ(mem.prev_mask.defined(), cgru);
    for (const auto& m : cgru ? std::vector<torch::Tensor>{mem.query_mask, mem.prev_mask}
                              : std::vector<torch::Tensor>{mem.query_mask}) {
      ASSERT_EQ(m.sizes(), (std::vector<int64_t>{B, D}));
      const auto zeros = m.eq(0).sum().item<int64_t>(), twos = m.eq(2).sum().item<int64_t>();
      EXPECT_EQ(zeros + twos, B * D) << "every unit kept as 1/(1-p) or dropped";
      EXPECT_GT(zeros, 0);
      EXPECT_GT(twos, 0);
    }
    model->eval();
    const auto eval_mem = model->decoder->memory(model->encoder->forward(b.src, b.src_len));
    EXPECT_FALSE(eval_mem.query_mask.defined());
    EXPECT_FALSE(eval_mem.prev_mask.defined());
    auto plain = hidden_dropout_model(0, decoder);
    plain->train();
    EXPECT_FALSE(plain->decoder->memory(plain->encoder->forward(b.src, b.src_len)).query_mask.defined());
  }
}

TEST(DecoderHiddenDropoutTest, TeacherForcingUsesOneMaskForEveryStep) {
  // In training, teacher forcing (the recurrence) equals stepping with a
  // memory drawn from the same seed, whose one mask every step reuses; the
  // masks change the function (the model in evaluation differs).
  const auto b = nmt::make_batch(nmt::test::padded_examples(), {0, 1, 2, 3});
  const int64_t S = b.src.size(1);
  for (const auto decoder : {nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru}) {
    SCOPED_TRACE(decoder == nmt::DecoderType::kCgru ? "cgru" : "bahdanau");
    auto model = hidden_dropout_model(0.5, decoder);
    model->train();
    torch::manual_seed(5);
    const auto logits = model->forward(b.src, b.src_len, b.tgt_in).detach();  // [B, T, V]
    torch::NoGradGuard ng;
    torch::manual_seed(5);
    const auto enc = model->encoder->forward(b.src, b.src_len);
    const auto mem = model->decoder->memory(enc);
    auto state = enc.init_state;
    for (int64_t t = 0; t < b.tgt_in.size(1); ++t) {
      const auto out = model->decoder->step(b.tgt_in.select(1, t), state, mem);
      EXPECT_TRUE(within(out.logits, logits.select(1, t), model_rounding_bound(*model, model_depth(S, t + 1))))
          << "step " << t;
      state = out.state;
    }
    model->eval();
    const auto eval_logits = model->forward(b.src, b.src_len, b.tgt_in);
    EXPECT_GT((eval_logits - logits).abs().max().item<double>(), 1e-3) << "the masks changed nothing";
  }
}

}  // namespace
