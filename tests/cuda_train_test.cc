// The training step on CUDA replayed from CUDA graphs (train/graphed_step.h)
// against the plain step on CUDA: the same loss and gradients at each step,
// through warm-up, capture and replay of two shapes; and nmt-train
// --cuda-graphs on CUDA lowers the loss. Every test skips itself where CUDA
// is not available (the CPU build and CI).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/batch.h"
#include "model/model.h"
#include "search/step_graph.h"
#include "test_util.h"
#include "train/graphed_step.h"
#include "train/losses.h"
#include "train/trainer.h"
#include "trainer_util.h"

namespace {

using nmt::test::model_depth;
using nmt::test::within;

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "CUDA is not available"

nmt::Seq2Seq tiny_on_cuda(uint64_t seed) {
  torch::manual_seed(seed);
  nmt::Seq2Seq m(nmt::test::tiny_model(nmt::AttentionType::kAdditive));
  m->to(torch::kCUDA);
  m->train();  // no dropout in tiny_model()
  return m;
}

TEST(CudaTrainTest, GraphedStepsHaveThePlainStepsLossAndGradients) {
  SKIP_WITHOUT_CUDA();
  const auto ex = nmt::test::padded_examples();
  auto model = tiny_on_cuda(5), plain = tiny_on_cuda(6);
  nmt::FlatAdam adam(model->parameters(), torch::optim::AdamOptions(1e-2));
  nmt::GraphedStepOptions o;
  o.rows = 4;
  o.label_smoothing = 0.1;
  o.clip_norm = 1.0;
  nmt::GraphedTrainStep graphed(model, adam, o, torch::kCUDA);
  // Shape A (sentence 2's length) warms up, is captured and replays; shape
  // B the same; then A replays after B. A parameter's .grad is the tensor
  // the newest eager or captured backward wrote, so after a replay of A
  // that follows B it is B's: the gradients are compared up to that step,
  // the loss at every step.
  const std::vector<std::vector<int64_t>> batches = {{0, 1, 2, 3}, {2}, {2, 3}, {0, 1, 3}, {1, 3}, {0, 1}, {2}};
  for (size_t k = 0; k < batches.size(); ++k) {
    SCOPED_TRACE(testing::Message() << "step " << k);
    const auto b = nmt::make_batch(ex, batches[k]);
    {
      torch::NoGradGuard no_grad;
      auto from = model->parameters(), to = plain->parameters();
      for (size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);
    }
    plain->zero_grad();
    const auto g = b.to(torch::kCUDA);
    const auto loss = nmt::sequence_loss(plain->forward(g.src, g.src_len, g.tgt_in), g.tgt_out, 0.1);
    (loss / static_cast<double>(b.tgt_tokens)).backward();
    const auto r = graphed.run(b);
    ASSERT_TRUE(r.finite);
    const int64_t S = (b.src.size(1) + 7) / 8 * 8, T = (b.tgt_in.size(1) + 7) / 8 * 8;
    EXPECT_TRUE(within(torch::tensor(r.loss_sum), torch::tensor(loss.item<double>()),
                       nmt::test::model_rounding_bound(*plain, model_depth(S, T)) * b.tgt_tokens));
    if (k + 1 == batches.size()) continue;  // A after B: .grad holds B's (see above)
    const double bound = nmt::test::gradient_rounding_bound(*plain, model_depth(S, T), o.rows * T);
    auto mine = model->parameters(), theirs = plain->parameters();
    for (size_t i = 0; i < mine.size(); ++i)
      EXPECT_TRUE(within(mine[i].grad().cpu(), theirs[i].grad().cpu(),
                         bound * theirs[i].grad().abs().max().item<double>()))
          << "parameter " << i;
  }
  EXPECT_EQ(graphed.shapes(), 2u);
  if (nmt::cuda_graphs_built()) {
    EXPECT_EQ(graphed.captured(), 2u) << "a capture failed (see the log)";
  }
}

TEST(CudaTrainTest, TrainingWithCudaGraphsLowersTheLoss) {
  SKIP_WITHOUT_CUDA();
  nmt::test::Quiet q;
  const auto dir = nmt::test::temp_dir("cuda_graphed_train");
  const auto files = nmt::test::write_toy_corpus(dir, 200, 20);
  auto opt = nmt::test::base_options(files, dir + "/run");
  opt.runtime.device = "cuda";
  opt.cuda_graphs = true;
  opt.max_steps = 60;
  opt.valid_every = 20;
  const auto r = nmt::train(opt, nmt::test::toy_tok(), nmt::test::tiny_arch(0.1));
  EXPECT_EQ(r.steps, 60);
  EXPECT_EQ(r.skipped_steps, 0);
  const auto losses = nmt::test::valid_losses(opt.output_dir);
  ASSERT_GE(losses.size(), 2u);
  EXPECT_LT(losses.back(), losses.front());
}

}  // namespace
