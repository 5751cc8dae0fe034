// Exponential smoothing of the weights (train/smoothing.h): the average
// follows its recurrence, Applied swaps the average in and back bit for bit,
// a training checkpoint carries the stepped weights beside the averaged
// model, and a file whose stepped weights do not fit the model is refused.
// Exact resume with smoothing: trainer_test.cc.
#include "train/smoothing.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "checkpoint_edit.h"
#include "model/checkpoint.h"
#include "test_util.h"
#include "train/trainer.h"
#include "trainer_util.h"

namespace {

using nmt::test::contains;
using nmt::test::error_of;

TEST(SmoothingTest, TheAverageFollowsItsRecurrence) {
  auto w = torch::tensor({1.0f, -2.0f, 4.0f});
  nmt::WeightSmoothing s({w}, 0.25);
  std::vector<double> want = {1.0, -2.0, 4.0};
  for (int64_t step = 1; step <= 40; ++step) {
    w.copy_(torch::tensor({std::sin(step * 1.0f), std::cos(step * 0.5f), static_cast<float>(step)}));
    s.update(step);
    const double d = std::max(0.25, 9.0 / (step + 9.0));  // 0.9 at the first step, 0.25 from step 27
    for (int i = 0; i < 3; ++i) want[i] += d * (w[i].item<double>() - want[i]);
  }
  const auto stepped = w.clone();
  {
    const nmt::WeightSmoothing::Applied applied(&s);
    // float rounding of 40 updates of values below 41: a few ulps of 41
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[i].item<double>(), want[i], 40 * 4 * 41 * 6e-8) << i;
    EXPECT_TRUE(torch::equal(s.stepped_weights()[0], stepped));
  }
  EXPECT_TRUE(torch::equal(w, stepped)) << "the stepped weights come back bit for bit";
}

TEST(SmoothingTest, AppliedNestsAndSwapsOnlyOnce) {
  auto w = torch::tensor({2.0f});
  nmt::WeightSmoothing s({w}, 0.5);
  w.fill_(4.0f);
  s.update(100);  // d = max(0.5, 9/109) = 0.5: the average is 3
  {
    const nmt::WeightSmoothing::Applied outer(&s);
    {
      const nmt::WeightSmoothing::Applied inner(&s);
      EXPECT_EQ(w.item<float>(), 3.0f);
    }
    EXPECT_EQ(w.item<float>(), 3.0f) << "an inner Applied's end leaves the average in";
  }
  EXPECT_EQ(w.item<float>(), 4.0f);
  const nmt::WeightSmoothing::Applied none(nullptr);  // smoothing off: nothing to do
  EXPECT_EQ(w.item<float>(), 4.0f);
}

TEST(SmoothingTest, RefusesAFactorOutsideTheOpenUnitInterval) {
  for (double f : {0.0, 1.0, -0.1}) {
    const auto msg = error_of([&] { nmt::WeightSmoothing({torch::zeros({2})}, f); });
    EXPECT_TRUE(contains(msg, "--exponential-smoothing")) << msg;
  }
}

// A short smoothing run: its checkpoints hold the averaged weights as the
// model and the stepped ones in the training state, which differ; a file
// that lacks one stepped weight, or has one of another shape, is refused on
// resume with the weight's name.
TEST(SmoothingTest, CheckpointsHoldTheAverageAndTheSteppedWeights) {
  nmt::test::Quiet q;
  const auto dir = nmt::test::temp_dir("smoothing_ckpt");
  const auto files = nmt::test::write_toy_corpus(dir, 200, 20);
  auto o = nmt::test::base_options(files, dir + "/run");
  o.max_steps = 12;
  o.valid_every = 6;
  o.exponential_smoothing = 0.2;
  ASSERT_EQ(nmt::train(o, nmt::test::toy_tok(), nmt::test::tiny_arch(0.0)).steps, 12);
  const auto last = o.output_dir + "/last.ckpt";
  auto m = nmt::load_checkpoint(last, torch::kCPU);
  torch::optim::Adam adam(m.model->parameters(), torch::optim::AdamOptions(1e-3));
  const auto st = nmt::load_train_state(last, adam, torch::kCPU);
  const auto params = m.model->named_parameters();
  ASSERT_EQ(st.stepped_weights.size(), params.size());
  bool differs = false;
  for (const auto& [name, t] : st.stepped_weights) differs |= !torch::equal(t, params[name]);
  EXPECT_TRUE(differs) << "the model's weights are the stepped ones: nothing was averaged";
  EXPECT_TRUE(contains(nmt::describe_checkpoint(last), "model weights: a moving average")) << nmt::describe_checkpoint(last);

  auto parts = nmt::test::read_checkpoint_parts(last);
  const std::string key = "state.weights." + st.stepped_weights.front().first;
  auto edited = parts;
  edited.tensors.erase(key);
  nmt::test::write_checkpoint_parts(dir + "/lacks.ckpt", edited);
  edited = parts;
  edited.tensors[key] = torch::zeros({1});
  nmt::test::write_checkpoint_parts(dir + "/shape.ckpt", edited);
  edited = parts;
  edited.tensors[key] = torch::full_like(parts.tensors[key], std::nanf(""));
  nmt::test::write_checkpoint_parts(dir + "/nan.ckpt", edited);
  edited = parts;
  edited.tensors["state.weights.stranger"] = torch::zeros({1});
  nmt::test::write_checkpoint_parts(dir + "/stranger.ckpt", edited);
  const std::string stranger = "stranger";
  for (const char* bad : {"/lacks.ckpt", "/shape.ckpt", "/nan.ckpt", "/stranger.ckpt"}) {
    auto mb = nmt::load_checkpoint(dir + bad, torch::kCPU);  // the model itself loads
    torch::optim::Adam adam_b(mb.model->parameters(), torch::optim::AdamOptions(1e-3));
    const auto msg = error_of([&] { nmt::load_train_state(dir + bad, adam_b, torch::kCPU); });
    const std::string name = bad == std::string("/stranger.ckpt") ? stranger : st.stepped_weights.front().first;
    EXPECT_TRUE(contains(msg, bad + 1) && contains(msg, name)) << msg;
  }
}

// Smoothing leaves training itself alone: a run resumed without the option
// goes on from the stepped weights, so its weights at step 18 are those a
// run smoothed throughout steps to (its checkpoint's stepped weights).
TEST(SmoothingTest, AResumeWithoutTheOptionGoesOnFromTheSteppedWeights) {
  nmt::test::Quiet q;
  const auto dir = nmt::test::temp_dir("smoothing_resume");
  const auto files = nmt::test::write_toy_corpus(dir, 200, 20);
  nmt::TrainOptions runs[2];
  for (int i = 0; i < 2; ++i) {
    runs[i] = nmt::test::base_options(files, dir + "/run" + std::to_string(i));
    runs[i].max_steps = 12;
    runs[i].valid_every = 6;
    runs[i].exponential_smoothing = 0.2;
    ASSERT_EQ(nmt::train(runs[i], nmt::test::toy_tok(), nmt::test::tiny_arch(0.2)).steps, 12);
    runs[i].max_steps = 18;
    runs[i].resume = true;
    runs[i].exponential_smoothing = i == 0 ? 0.0 : 0.2;  // run 0 drops the option
    ASSERT_EQ(nmt::train(runs[i], nmt::test::toy_tok(), nmt::test::tiny_arch(0.2)).steps, 18);
  }
  auto plain = nmt::load_checkpoint(runs[0].output_dir + "/last.ckpt", torch::kCPU);
  auto smoothed = nmt::load_checkpoint(runs[1].output_dir + "/last.ckpt", torch::kCPU);
  torch::optim::Adam adam(smoothed.model->parameters(), torch::optim::AdamOptions(1e-3));
  const auto st = nmt::load_train_state(runs[1].output_dir + "/last.ckpt", adam, torch::kCPU);
  ASSERT_FALSE(st.stepped_weights.empty());
  auto params = plain.model->named_parameters();
  bool averaged_differs = false;
  for (const auto& [name, t] : st.stepped_weights) {
    EXPECT_TRUE(torch::equal(params[name], t)) << name;
    averaged_differs |= !torch::equal(params[name], smoothed.model->named_parameters()[name]);
  }
  EXPECT_TRUE(averaged_differs) << "the averages equal the stepped weights: the comparison has no teeth";
}

}  // namespace
