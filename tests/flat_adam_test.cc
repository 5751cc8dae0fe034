// FlatAdam (train/flat_adam.h) against torch::optim::Adam: the same steps to
// rounding, skipped steps that change nothing, tied weights stepped once,
// restored state taken in exactly, and the refusals; each through both of
// its paths, the CPU's fused pass and the tensor operations a GPU runs.
#include "train/flat_adam.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "model/checkpoint_format.h"
#include "test_util.h"

namespace {

using nmt::test::within;

const std::vector<std::vector<int64_t>> kShapes = {{4, 5}, {7}, {2, 3, 2}, {3}};

// Parameters of kShapes, the same values for the same seed.
std::vector<torch::Tensor> make_params(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> ps;
  for (const auto& shape : kShapes) ps.push_back(torch::randn(shape).requires_grad_());
  return ps;
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ps) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

// Step k's gradients (a fixed sequence), written into each parameter's .grad.
void set_grads(std::vector<torch::Tensor>& ps, int k) {
  torch::manual_seed(1000 + k);
  for (auto& p : ps) p.mutable_grad() = torch::randn(p.sizes()) * 0.5;
}

double max_abs(const std::vector<torch::Tensor>& ts) {
  double m = 0;
  for (const auto& t : ts) m = std::max(m, t.abs().max().item<double>());
  return m;
}

// How far FlatAdam's parameters may be from torch::optim::Adam's after
// `steps` steps of at most `max_update` each on parameters of at most
// `max_param`. Per step the moments differ by a few roundings (lerp against
// mul-and-add: within 4u relative each), compounding over the steps; the
// update takes 3 roundings more (division, multiply, subtraction) and the
// parameter one ulp when a rounding flips: so step k's update is within
// (4 + 4k) u of torch's and the parameter within u |p| more. A wrong bias
// correction, learning rate or weight decay moves a parameter by a sizable
// fraction of an update, far over this.
double step_bound(int steps, double max_update, double max_param) {
  const double u = 0x1p-24;
  double b = 0;
  for (int k = 1; k <= steps; ++k) b += (4 + 4.0 * k) * u * max_update + u * max_param;
  return b;
}

// Each test runs the CPU's fused pass (false) and the tensor operations (true).
class FlatAdamPathTest : public testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Paths, FlatAdamPathTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& i) { return i.param ? "TensorOps" : "FusedCpu"; });

TEST_P(FlatAdamPathTest, StepsAsLibTorchAdamWithAndWithoutWeightDecay) {
  for (double wd : {0.0, 0.01}) {
    SCOPED_TRACE(testing::Message() << "weight decay " << wd);
    const auto options = torch::optim::AdamOptions(3e-3).betas({0.9, 0.98}).weight_decay(wd);
    auto ref = make_params(7), ps = clones(ref);
    torch::optim::Adam adam(ref, options);
    nmt::FlatAdam flat(ps, options, GetParam());
    const int steps = 20;
    double max_update = 0, max_grad = 0;
    for (int k = 0; k < steps; ++k) {
      set_grads(ref, k);
      set_grads(ps, k);
      for (const auto& p : ref) max_grad = std::max(max_grad, p.grad().abs().max().item<double>());
      const auto before = clones(ref);
      adam.step();
      flat.step();
      for (size_t i = 0; i < ref.size(); ++i) max_update = std::max(max_update, (ref[i] - before[i]).abs().max().item<double>());
    }
    const double bound = step_bound(steps, max_update, max_abs(ref));
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_TRUE(within(ps[i], ref[i], torch::full_like(ref[i], bound))) << "parameter " << i;
    flat.sync_state();
    for (size_t i = 0; i < ref.size(); ++i) {
      const auto& r = static_cast<torch::optim::AdamParamState&>(*adam.state().at(
          nmt::ckpt::optimizer_state_key(adam.state(), ref[i])));
      const auto& f = static_cast<torch::optim::AdamParamState&>(*flat.state().at(
          nmt::ckpt::optimizer_state_key(flat.state(), ps[i])));
      EXPECT_EQ(f.step(), steps);
      // The moments are averages of gradients (and their squares) with weights
      // summing under 1, often with cancellation: each step's few roundings
      // are relative to the gradient's size, not the moment's.
      const double u = 0x1p-24;
      EXPECT_TRUE(within(f.exp_avg(), r.exp_avg(), torch::full_like(ps[i], 4 * steps * u * max_grad))) << i;
      EXPECT_TRUE(within(f.exp_avg_sq(), r.exp_avg_sq(), torch::full_like(ps[i], 4 * steps * u * max_grad * max_grad))) << i;
    }
  }
}

TEST_P(FlatAdamPathTest, ASkippedStepChangesNothingEvenWithNaNGradients) {
  const auto options = torch::optim::AdamOptions(1e-2);
  auto ref = make_params(3), ps = clones(ref);
  torch::optim::Adam adam(ref, options);
  nmt::FlatAdam flat(ps, options, GetParam());
  for (int k = 0; k < 3; ++k) {
    set_grads(ref, k);
    set_grads(ps, k);
    adam.step();
    flat.step();
  }
  const auto params_before = clones(ps);
  flat.sync_state();
  std::vector<torch::Tensor> m_before, v_before;
  for (const auto& p : ps) {
    const auto& s = static_cast<torch::optim::AdamParamState&>(*flat.state().at(nmt::ckpt::optimizer_state_key(flat.state(), p)));
    m_before.push_back(s.exp_avg().clone());
    v_before.push_back(s.exp_avg_sq().clone());
  }
  set_grads(ps, 99);
  ps[1].mutable_grad()[3] = std::numeric_limits<float>::quiet_NaN();
  ps[2].mutable_grad()[0][0][0] = std::numeric_limits<float>::infinity();
  flat.prepare();
  flat.step(flat.gradients(), torch::zeros({}, torch::kBool));
  flat.sync_state();
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto& s = static_cast<torch::optim::AdamParamState&>(*flat.state().at(nmt::ckpt::optimizer_state_key(flat.state(), ps[i])));
    EXPECT_TRUE(torch::equal(ps[i], params_before[i])) << i;
    EXPECT_TRUE(torch::equal(s.exp_avg(), m_before[i])) << i;
    EXPECT_TRUE(torch::equal(s.exp_avg_sq(), v_before[i])) << i;
    EXPECT_EQ(s.step(), 3);
  }
  // The next step is the fourth, as if the skipped one had never come.
  set_grads(ref, 3);
  set_grads(ps, 3);
  adam.step();
  flat.step();
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_TRUE(within(ps[i], ref[i], torch::full_like(ref[i], step_bound(4, 1e-2 * 4, max_abs(ref))))) << i;
}

TEST_P(FlatAdamPathTest, ATiedParameterGivenTwiceStepsOnce) {
  const auto options = torch::optim::AdamOptions(1e-2);
  auto ref = make_params(5), ps = clones(ref);
  torch::optim::Adam adam(ref, options);
  nmt::FlatAdam flat({ps[0], ps[1], ps[2], ps[3], ps[0]}, options, GetParam());  // ps[0] as tied weights show it
  EXPECT_EQ(flat.flat_parameters().size(), 4u);
  for (int k = 0; k < 5; ++k) {
    set_grads(ref, k);
    set_grads(ps, k);
    adam.step();
    flat.step();
  }
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_TRUE(within(ps[i], ref[i], torch::full_like(ref[i], step_bound(5, 1e-2 * 4, max_abs(ref))))) << i;
}

TEST_P(FlatAdamPathTest, RestoredStateIsTakenInAndTheStepsGoOnExactly) {
  const auto options = torch::optim::AdamOptions(3e-3).betas({0.9, 0.98});
  auto a_params = make_params(9);
  nmt::FlatAdam a(a_params, options, GetParam());
  for (int k = 0; k < 5; ++k) {
    set_grads(a_params, k);
    a.step();
  }
  a.sync_state();
  // b resumes: its state put in from outside, as a checkpoint restores it (copies, not views).
  auto b_params = clones(a_params);
  nmt::FlatAdam b(b_params, options, GetParam());
  for (size_t i = 0; i < a_params.size(); ++i) {
    const auto& s = static_cast<torch::optim::AdamParamState&>(*a.state().at(nmt::ckpt::optimizer_state_key(a.state(), a_params[i])));
    auto r = std::make_unique<torch::optim::AdamParamState>();
    r->step(s.step());
    r->exp_avg(s.exp_avg().clone());
    r->exp_avg_sq(s.exp_avg_sq().clone());
    b.state()[nmt::ckpt::optimizer_state_key(b.state(), b_params[i])] = std::move(r);
  }
  for (int k = 5; k < 8; ++k) {
    set_grads(a_params, k);
    set_grads(b_params, k);
    a.step();
    b.step();
  }
  for (size_t i = 0; i < a_params.size(); ++i) EXPECT_TRUE(torch::equal(a_params[i], b_params[i])) << i;
  b.sync_state();
  const auto& s = static_cast<torch::optim::AdamParamState&>(*b.state().at(nmt::ckpt::optimizer_state_key(b.state(), b_params[0])));
  EXPECT_EQ(s.step(), 8);
}

TEST_P(FlatAdamPathTest, ALearningRateSetOnTheGroupTakesEffect) {
  auto ref = make_params(4), ps = clones(ref);
  torch::optim::Adam adam(ref, torch::optim::AdamOptions(1e-2));
  nmt::FlatAdam flat(ps, torch::optim::AdamOptions(1e-2), GetParam());
  for (int k = 0; k < 4; ++k) {
    if (k == 2) {
      adam.param_groups()[0].options().set_lr(1e-3);
      flat.param_groups()[0].options().set_lr(1e-3);
    }
    set_grads(ref, k);
    set_grads(ps, k);
    adam.step();
    flat.step();
  }
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_TRUE(within(ps[i], ref[i], torch::full_like(ref[i], step_bound(4, 1e-2 * 4, max_abs(ref))))) << i;
}

TEST(FlatAdamTest, RefusesWhatItCannotStep) {
  auto ps = make_params(1);
  EXPECT_THROW(nmt::FlatAdam({}, torch::optim::AdamOptions(1e-3)), nmt::Error);
  EXPECT_THROW(nmt::FlatAdam(ps, torch::optim::AdamOptions(1e-3).amsgrad(true)), nmt::Error);
  EXPECT_THROW(nmt::FlatAdam({torch::zeros({2}, torch::kDouble).requires_grad_()}, torch::optim::AdamOptions(1e-3)),
               nmt::Error);
  // Restored state whose steps differ between parameters.
  nmt::FlatAdam flat(ps, torch::optim::AdamOptions(1e-3));
  for (size_t i = 0; i < ps.size(); ++i) {
    auto r = std::make_unique<torch::optim::AdamParamState>();
    r->step(static_cast<int64_t>(3 + i));
    r->exp_avg(torch::zeros_like(ps[i]));
    r->exp_avg_sq(torch::zeros_like(ps[i]));
    flat.state()[nmt::ckpt::optimizer_state_key(flat.state(), ps[i])] = std::move(r);
  }
  const auto msg = nmt::test::error_of([&] { flat.prepare(); });
  EXPECT_TRUE(nmt::test::contains(msg, "different steps")) << msg;
  // Restored moments of another shape.
  nmt::FlatAdam flat2(ps, torch::optim::AdamOptions(1e-3));
  for (size_t i = 0; i < ps.size(); ++i) {
    auto r = std::make_unique<torch::optim::AdamParamState>();
    r->step(3);
    r->exp_avg(i == 2 ? torch::zeros({5}) : torch::zeros_like(ps[i]));
    r->exp_avg_sq(i == 2 ? torch::zeros({5}) : torch::zeros_like(ps[i]));
    flat2.state()[nmt::ckpt::optimizer_state_key(flat2.state(), ps[i])] = std::move(r);
  }
  const auto msg2 = nmt::test::error_of([&] { flat2.prepare(); });
  EXPECT_TRUE(nmt::test::contains(msg2, "shape")) << msg2;
  EXPECT_THROW(flat.step([] { return torch::Tensor(); }), c10::Error);
}

}  // namespace
