// Shared test helpers: rounding-error bounds of kernels and whole models,
// greedy margins and near ties, and within() comparisons (see test_util.h).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "model/batch.h"
#include "model/model.h"
#include "search/search.h"
#include "translate/translator.h"
#include "test_util.h"

namespace nmt::test {

double unit_roundoff(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kDouble: return std::ldexp(1.0, -53);
    case torch::kFloat: return std::ldexp(1.0, -24);
    case torch::kBFloat16: return std::ldexp(1.0, -8);
    case torch::kHalf: return std::ldexp(1.0, -11);
    default: throw std::invalid_argument("unit_roundoff: not a floating dtype");
  }
}

double gamma(int64_t n, double u) {
  const double nu = static_cast<double>(n) * u;
  if (nu >= 1) throw std::invalid_argument("gamma: n u >= 1, no bound");
  return nu / (1 - nu);
}

at::Tensor dot_error_bound(const at::Tensor& x, const at::Tensor& w_t, const at::Tensor& bias) {
  const int64_t K = x.size(-1);
  auto mag = torch::matmul(x.detach().abs().to(torch::kDouble), w_t.detach().abs().to(torch::kDouble));
  if (bias.defined()) mag = mag + bias.detach().abs().to(torch::kDouble);
  return 2 * gamma(K + (bias.defined() ? 1 : 0), unit_roundoff(x)) * mag;
}

namespace {

// What model_rounding_bound() reads of a model's weights: the longest
// accumulation K, the largest |W| |x| + |b| and the unit roundoff.
struct Magnitudes {
  int64_t K = 1;
  double scale = 0, u = 0;
};

Magnitudes magnitudes(torch::nn::Module& model) {
  torch::NoGradGuard ng;
  const auto params = model.named_parameters();
  // With tied embeddings the target embedding [V, E] is also the output projection.
  const bool tied = !params.contains("decoder.out_weight") && params.contains("decoder.embed.weight");
  Magnitudes m;
  double input = 1, rows = 0, bias = 0;
  for (const auto& p : params) {
    const auto& w = p.value();
    m.u = unit_roundoff(w);
    const bool embedding = p.key().find("embed") != std::string::npos;
    if (embedding) input = std::max(input, w.abs().max().item<double>());
    if (w.dim() == 2 && (!embedding || (tied && p.key() == "decoder.embed.weight"))) {
      m.K = std::max(m.K, w.size(1) + 1);  // and the bias
      rows = std::max(rows, w.abs().sum(1).max().item<double>());
    } else if (w.dim() == 1) {
      bias = std::max(bias, w.abs().max().item<double>());
    }
  }
  m.scale = rows * input + bias;
  return m;
}

}  // namespace

double model_rounding_bound(torch::nn::Module& model, int64_t depth) {
  const auto m = magnitudes(model);
  return 2 * kModelBoundLambda * std::sqrt(static_cast<double>(depth * m.K)) * m.u * m.scale;
}

double gradient_rounding_bound(torch::nn::Module& model, int64_t depth, int64_t positions) {
  const auto m = magnitudes(model);
  return 2 * kModelBoundLambda * std::sqrt(static_cast<double>(2 * depth * std::max(m.K, positions))) * m.u *
         std::max(1.0, m.scale);
}

int64_t model_depth(int64_t S, int64_t T) { return S + 1 + 6 * T; }

double score_rounding_bound(torch::nn::Module& model, int64_t S, int64_t T, double score) {
  return 2 * static_cast<double>(T) * model_rounding_bound(model, model_depth(S, T)) +
         2 * gamma(T, std::ldexp(1.0, -24)) * std::abs(score);
}

double greedy_margin(const std::vector<nmt::Seq2Seq>& models, const std::vector<int64_t>& src,
                     const std::vector<int64_t>& ids, bool eos_chosen) {
  nmt::InferenceScope scope(models);
  Example e;
  e.src = src;
  e.tgt = ids;
  const auto b = make_batch(std::vector<Example>{e}, {0});  // tgt_out: ids, then EOS
  torch::Tensor logp;
  for (auto m : models) {
    auto lp = torch::log_softmax(m->forward(b.src, b.src_len, b.tgt_in).to(torch::kDouble), -1)[0];  // [T, V]
    logp = logp.defined() ? logp + lp : lp;
  }
  logp = logp / static_cast<double>(models.size());
  const int64_t steps = static_cast<int64_t>(ids.size()) + (eos_chosen ? 1 : 0);
  double margin = std::numeric_limits<double>::infinity();
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t chosen = b.tgt_out[0][t].item<int64_t>();
    auto row = logp[t].clone();
    const double mine = row[chosen].item<double>();
    row[chosen] = -std::numeric_limits<double>::infinity();
    margin = std::min(margin, mine - row.max().item<double>());
  }
  return margin;
}

bool greedy_near_tie(nmt::Translator& tr, const std::string& line, const nmt::Hypothesis& h,
                     const nmt::SearchOptions& opt) {
  if (line.empty()) return false;
  const auto src = tr.encode_source(line);
  // Search stops a hypothesis at min(S x ratio + 5, max_length) pieces
  // (search_parts.cc: length_caps()); one shorter than that chose EOS.
  const auto cap = std::min<int64_t>(static_cast<int64_t>(src.size() * opt.max_length_ratio) + 5, opt.max_length);
  const bool eos_chosen = static_cast<int64_t>(h.ids.size()) < cap;
  const double bound = model_rounding_bound(
      *tr.model(), model_depth(static_cast<int64_t>(src.size()), static_cast<int64_t>(h.ids.size()) + 1));
  return greedy_margin({tr.model()}, src, h.ids, eos_chosen) <= 2 * bound;
}

::testing::AssertionResult same_greedy_hypothesis(const std::vector<nmt::Seq2Seq>& models,
                                                  const std::vector<int64_t>& src, const nmt::Hypothesis& want,
                                                  const nmt::Hypothesis& got, bool eos_chosen, double logits_bound,
                                                  int* compared) {
  if (greedy_margin(models, src, want.ids, eos_chosen) <= 2 * logits_bound) return ::testing::AssertionSuccess();
  ++*compared;
  if (got.ids != want.ids) {
    auto r = ::testing::AssertionFailure() << "other pieces:";
    for (int64_t id : got.ids) r << " " << id;
    r << " against";
    for (int64_t id : want.ids) r << " " << id;
    return r;
  }
  const int64_t T = static_cast<int64_t>(want.ids.size()) + 1;
  const double score_bound = 2 * T * logits_bound + 2 * gamma(T, std::ldexp(1.0, -24)) * std::abs(want.score);
  auto r = within(got.score, want.score, score_bound);
  if (!r) return r << " (score)";
  if (got.attention.defined() != want.attention.defined())
    return ::testing::AssertionFailure() << "attention on one side only";
  if (want.attention.defined()) {
    r = within(got.attention, want.attention, logits_bound);
    if (!r) return r << " (attention)";
  }
  return ::testing::AssertionSuccess();
}

namespace {

// The largest ratio within() has seen in each test, for its property.
double& worst_ratio_of_this_test() {
  static std::map<std::string, double> worst;  // -1 before the first
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return worst.try_emplace(info ? std::string(info->test_suite_name()) + "." + info->name() : "", -1.0).first->second;
}

}  // namespace

::testing::AssertionResult within(const at::Tensor& actual, const at::Tensor& expected, const at::Tensor& bound) {
  const auto a = actual.detach().to(torch::kDouble).cpu(), e = expected.detach().to(torch::kDouble).cpu();
  if (a.sizes() != e.sizes())
    return ::testing::AssertionFailure() << "sizes differ: " << a.sizes() << " against " << e.sizes();
  const auto b = bound.detach().to(torch::kDouble).cpu().expand_as(a);
  const auto diff = (a - e).abs();
  // NaN differences (NaN against a number) fail; equal infinities pass.
  const auto same = a.eq(e);
  auto ratio = torch::where(same, torch::zeros_like(diff), diff / b);
  ratio = torch::where(ratio.isnan(), torch::full_like(ratio, std::numeric_limits<double>::infinity()), ratio);
  if (a.numel() == 0) return ::testing::AssertionSuccess();
  const int64_t worst = ratio.flatten().argmax().item<int64_t>();
  const double r = ratio.flatten()[worst].item<double>();
  double& recorded = worst_ratio_of_this_test();
  if (r > recorded && ::testing::UnitTest::GetInstance()->current_test_info()) {
    recorded = r;
    ::testing::Test::RecordProperty("max_bound_ratio", std::to_string(r));
  }
  if (r <= 1) return ::testing::AssertionSuccess();
  std::vector<int64_t> index;
  for (int64_t i = a.dim() - 1, rest = worst; i >= 0; --i) {
    index.insert(index.begin(), rest % a.size(i));
    rest /= a.size(i);
  }
  std::ostringstream where;
  for (size_t i = 0; i < index.size(); ++i) where << (i ? "," : "") << index[i];
  return ::testing::AssertionFailure() << "|actual - expected| exceeds the bound at [" << where.str()
                                       << "]: " << a.flatten()[worst].item<double>() << " against "
                                       << e.flatten()[worst].item<double>() << ", difference "
                                       << diff.flatten()[worst].item<double>() << ", bound "
                                       << b.flatten()[worst].item<double>() << " (ratio " << r << ")";
}

::testing::AssertionResult within(const at::Tensor& actual, const at::Tensor& expected, double bound) {
  return within(actual, expected, torch::full({}, bound, torch::kDouble));
}

::testing::AssertionResult within(double actual, double expected, double bound) {
  return within(torch::full({}, actual, torch::kDouble), torch::full({}, expected, torch::kDouble),
                torch::full({}, bound, torch::kDouble));
}

}  // namespace nmt::test
