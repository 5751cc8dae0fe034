// The training step on padded fixed shapes (train/graphed_step.h), run here
// eagerly on the CPU (what a CUDA graph replays): the loss and gradients of
// the plain step, a skipped step that changes nothing, the refusals, and
// nmt-train's --cuda-graphs training end to end.
#include "train/graphed_step.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "model/batch.h"
#include "test_util.h"
#include "train/losses.h"
#include "train/trainer.h"
#include "trainer_util.h"

namespace {

using nmt::test::model_depth;
using nmt::test::within;

nmt::Seq2Seq tiny(uint64_t seed) {
  torch::manual_seed(seed);
  nmt::Seq2Seq m(nmt::test::tiny_model(nmt::AttentionType::kAdditive));
  m->train();  // tiny_model() has no dropout: deterministic
  return m;
}

void copy_weights(nmt::Seq2Seq& from, nmt::Seq2Seq& to) {
  torch::NoGradGuard no_grad;
  auto theirs = from->parameters();
  auto ours = to->parameters();
  for (size_t i = 0; i < ours.size(); ++i) ours[i].copy_(theirs[i]);
}

// Steps a graphed step through three batches (two shapes) and checks each
// against the plain step's loss and gradients; with r_drop > 0 against the
// plain step on twice() the batch with consistency_loss().
void check_plain_steps(double r_drop) {
  const auto ex = nmt::test::padded_examples();
  auto model = tiny(5), reference = tiny(6);
  nmt::FlatAdam adam(model->parameters(), torch::optim::AdamOptions(1e-2));
  nmt::GraphedStepOptions o;
  o.rows = 6;
  o.label_smoothing = 0.1;
  o.clip_norm = 1.0;
  o.r_drop = r_drop;
  nmt::GraphedTrainStep graphed(model, adam, o, torch::kCPU);
  // Two shapes, the first one again.
  const std::vector<std::vector<int64_t>> batches = {{0, 1, 2, 3}, {2}, {1, 3}};
  for (size_t k = 0; k < batches.size(); ++k) {
    SCOPED_TRACE(testing::Message() << "step " << k);
    const auto b = nmt::make_batch(ex, batches[k]);
    copy_weights(model, reference);
    reference->zero_grad();
    torch::Tensor loss, value;  // [] the reference's loss; the value the step reports
    if (r_drop > 0) {
      const auto two = nmt::twice(b);
      auto both = nmt::consistency_loss(reference->forward(two.src, two.src_len, two.tgt_in), b.tgt_out, 0.1, r_drop);
      loss = both.loss;
      value = both.cross_entropy;
    } else {
      loss = nmt::sequence_loss(reference->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.1);
      value = loss.detach();
    }
    (loss / static_cast<double>(b.tgt_tokens)).backward();
    const auto before = model->parameters()[0].detach().clone();
    const auto r = graphed.run(b);
    ASSERT_TRUE(r.finite);
    // Padding rows and positions change the products' lengths only: within
    // the model's rounding bounds, the loss per target token.
    const int64_t S = (b.src.size(1) + 7) / 8 * 8, T = (b.tgt_in.size(1) + 7) / 8 * 8;
    EXPECT_TRUE(within(torch::tensor(r.loss_sum), torch::tensor(value.item<double>()),
                       nmt::test::model_rounding_bound(*reference, model_depth(S, T)) * b.tgt_tokens));
    const int64_t rows = r_drop > 0 ? 2 * o.rows : o.rows;  // the rows each weight's gradient sums over
    const double bound = nmt::test::gradient_rounding_bound(*reference, model_depth(S, T), rows * T);
    auto mine = model->parameters(), theirs = reference->parameters();
    for (size_t i = 0; i < mine.size(); ++i)
      EXPECT_TRUE(within(mine[i].grad(), theirs[i].grad(), bound * theirs[i].grad().abs().max().item<double>()))
          << "parameter " << i;
    EXPECT_FALSE(torch::equal(before, model->parameters()[0])) << "no step was taken";
  }
  EXPECT_EQ(graphed.shapes(), 2u);
}

TEST(GraphedStepTest, EachStepHasThePlainStepsLossAndGradients) { check_plain_steps(0.0); }

// tiny_model() has no dropout, so the two runs agree and the divergence
// adds nothing but rounding: this checks that the doubled rows reach the
// loss as the trainer's eager step sends them (trainer_test checks R-Drop
// with dropout).
TEST(GraphedStepTest, WithRDropEachStepHasThePlainStepsLossAndGradients) { check_plain_steps(5.0); }

TEST(GraphedStepTest, ANonFiniteLossSkipsTheStepAndChangesNothing) {
  const auto ex = nmt::test::padded_examples();
  auto model = tiny(5);
  nmt::FlatAdam adam(model->parameters(), torch::optim::AdamOptions(1e-2));
  nmt::GraphedTrainStep graphed(model, adam, {}, torch::kCPU);
  ASSERT_TRUE(graphed.run(nmt::make_batch(ex, {0, 1})).finite);
  auto params = model->parameters();
  {
    torch::NoGradGuard no_grad;
    params.back().view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<torch::Tensor> before;
  for (const auto& p : params) before.push_back(p.detach().clone());
  const auto r = graphed.run(nmt::make_batch(ex, {0, 1}));
  EXPECT_FALSE(r.finite);
  for (size_t i = 0; i + 1 < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], before[i])) << "parameter " << i;
  adam.sync_state();
  const auto& st = static_cast<torch::optim::AdamParamState&>(*adam.state().begin()->second);
  EXPECT_EQ(st.step(), 1);
}

TEST(GraphedStepTest, RefusesBatchesOverItsRowsAndGuidedAlignment) {
  const auto ex = nmt::test::padded_examples();
  auto model = tiny(5);
  nmt::FlatAdam adam(model->parameters(), torch::optim::AdamOptions(1e-2));
  nmt::GraphedStepOptions o;
  o.rows = 2;
  nmt::GraphedTrainStep graphed(model, adam, o, torch::kCPU);
  EXPECT_TRUE(nmt::test::contains(nmt::test::error_of([&] { graphed.run(nmt::make_batch(ex, {0, 1, 2})); }),
                                  "3 rows, over the 2"));
  auto guided = nmt::make_batch(ex, {0, 1});
  guided.guide = torch::zeros({2, guided.tgt_in.size(1), guided.src.size(1)});
  EXPECT_TRUE(nmt::test::contains(nmt::test::error_of([&] { graphed.run(guided); }), "guided alignment"));
}

TEST(GraphedStepTest, TrainingWithCudaGraphsLowersTheLossAndRefusesWhatItCannotStep) {
  nmt::test::Quiet q;
  const auto dir = nmt::test::temp_dir("graphed_train");
  const auto files = nmt::test::write_toy_corpus(dir, 200, 20);
  auto opt = nmt::test::base_options(files, dir + "/run");
  opt.cuda_graphs = true;
  opt.max_steps = 60;
  opt.valid_every = 20;
  const auto r = nmt::train(opt, nmt::test::toy_tok(), nmt::test::tiny_arch(0.1));
  EXPECT_EQ(r.steps, 60);
  EXPECT_EQ(r.skipped_steps, 0);
  const auto losses = nmt::test::valid_losses(opt.output_dir);
  ASSERT_GE(losses.size(), 2u);
  EXPECT_LT(losses.back(), losses.front());
  for (auto change : {+[](nmt::TrainOptions& o) { o.optimizer = nmt::OptimizerType::kSgd; },
                      +[](nmt::TrainOptions& o) { o.guided_alignment = "links.txt"; },
                      +[](nmt::TrainOptions& o) { o.bf16 = true; }}) {
    auto bad = nmt::test::base_options(files, dir + "/bad");
    bad.cuda_graphs = true;
    change(bad);
    EXPECT_THROW(nmt::train(bad, nmt::test::toy_tok(), nmt::test::tiny_arch(0.1)), nmt::UsageError);
  }
}

}  // namespace
