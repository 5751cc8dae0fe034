// FlatAdam: see flat_adam.h. Shapes: N the parameters' total size.
#include "train/flat_adam.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_sub.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/vector_clones.h"
#include "model/checkpoint_format.h"

namespace nmt {
namespace {

// Each parameter once, in first-seen order.
std::vector<torch::Tensor> distinct(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params)
    if (std::none_of(out.begin(), out.end(), [&](const torch::Tensor& q) { return q.is_same(p); })) out.push_back(p);
  return out;
}

// Views of `flat` ([N]) shaped as `params`, in order.
std::vector<torch::Tensor> views_of(const torch::Tensor& flat, const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  out.reserve(params.size());
  int64_t at = 0;
  for (const auto& p : params) {
    out.push_back(flat.narrow(0, at, p.numel()).view(p.sizes()));
    at += p.numel();
  }
  return out;
}

// The scalars of one CPU step.
struct AdamConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, weight_decay, eps;
  float root_bias2;  // sqrt(1 - beta2^t)
  float step_size;   // lr / (1 - beta1^t)
};

// Adam on n elements: g the gradients, p the parameters, m and v the
// moments (updated in place), as torch::optim::Adam computes each element.
NMT_VECTOR_CLONES void adam_pass(const float* g, float* p, float* m, float* v, int64_t n, const AdamConstants c) {
  for (int64_t j = 0; j < n; ++j) {
    const float gj = c.weight_decay != 0 ? g[j] + c.weight_decay * p[j] : g[j];
    m[j] = m[j] * c.beta1 + c.one_minus_beta1 * gj;
    v[j] = v[j] * c.beta2 + c.one_minus_beta2 * gj * gj;
    const float denom = std::sqrt(v[j]) / c.root_bias2 + c.eps;
    p[j] -= c.step_size * (m[j] / denom);
  }
}

}  // namespace

FlatAdam::FlatAdam(const std::vector<torch::Tensor>& params, const torch::optim::AdamOptions& options,
                   bool tensor_ops)
    : torch::optim::Adam(params, options), params_(distinct(params)), fused_cpu_(!tensor_ops) {
  if (params_.empty()) throw Error("FlatAdam: no parameters to optimize");
  if (options.amsgrad()) throw Error("FlatAdam: amsgrad is not supported");
  int64_t n = 0;
  for (const auto& p : params_) {
    if (p.scalar_type() != torch::kFloat) throw Error("FlatAdam: a parameter is not float");
    if (p.device() != params_[0].device()) throw Error("FlatAdam: parameters on more than one device");
    numel_.push_back(p.numel());
    n += p.numel();
  }
  const auto f = params_[0].options().requires_grad(false);
  exp_avg_ = torch::zeros({n}, f);
  exp_avg_sq_ = torch::zeros({n}, f);
  steps_ = torch::zeros({}, f.dtype(torch::kDouble));
  lr_ = torch::zeros({}, f.dtype(torch::kDouble));
}

torch::Tensor FlatAdam::step(LossClosure closure) {
  TORCH_CHECK(closure == nullptr, "FlatAdam::step: closures are not supported");
  prepare();
  step(gradients(), torch::ones({}, params_[0].options().dtype(torch::kBool)));
  return {};
}

void FlatAdam::prepare() {
  auto& o = static_cast<torch::optim::AdamOptions&>(param_groups()[0].options());
  if (o.amsgrad()) throw Error("FlatAdam: amsgrad is not supported");
  if (o.lr() != lr_host_) {
    lr_.fill_(o.lr());
    lr_host_ = o.lr();
  }
  auto& st = state();
  const auto m = views_of(exp_avg_, params_);
  const auto v = views_of(exp_avg_sq_, params_);
  std::optional<int64_t> restored;  // the step of state put into state() from outside
  size_t fresh = 0;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto key = ckpt::optimizer_state_key(st, params_[i]);
    auto it = st.find(key);
    if (it == st.end()) {  // before the first step: this parameter's entry, on the flat moments
      auto s = std::make_unique<torch::optim::AdamParamState>();
      s->exp_avg(m[i]);
      s->exp_avg_sq(v[i]);
      st[key] = std::move(s);
      ++fresh;
      continue;
    }
    auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
    if (s.exp_avg().defined() && s.exp_avg().data_ptr() == m[i].data_ptr() && s.exp_avg_sq().defined() &&
        s.exp_avg_sq().data_ptr() == v[i].data_ptr())
      continue;  // ours
    const std::string which = "parameter " + std::to_string(i) + " of " + std::to_string(params_.size());
    if (!s.exp_avg().defined() || !s.exp_avg_sq().defined() || !s.exp_avg().sizes().equals(params_[i].sizes()) ||
        !s.exp_avg_sq().sizes().equals(params_[i].sizes()))
      throw Error("FlatAdam: the restored Adam state of " + which + " does not have the parameter's shape");
    if (s.max_exp_avg_sq().defined()) throw Error("FlatAdam: the restored Adam state of " + which + " is amsgrad's");
    if (restored && *restored != s.step())
      throw Error("FlatAdam: the restored Adam state counts different steps for different parameters (" +
                  std::to_string(*restored) + " and " + std::to_string(s.step()) + ")");
    restored = s.step();
    m[i].copy_(s.exp_avg());
    v[i].copy_(s.exp_avg_sq());
    s.exp_avg(m[i]);
    s.exp_avg_sq(v[i]);
  }
  if (restored) {
    if (fresh > 0) throw Error("FlatAdam: the restored Adam state leaves out some of the parameters");
    steps_.fill_(static_cast<double>(*restored));
  }
}

torch::Tensor FlatAdam::gradients() const {
  std::vector<torch::Tensor> flat;
  flat.reserve(params_.size());
  for (const auto& p : params_)
    flat.push_back(p.grad().defined() ? p.grad().detach().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
  return torch::cat(flat);  // [N]
}

void FlatAdam::step(const torch::Tensor& grads, const torch::Tensor& ok) {
  TORCH_CHECK(grads.dim() == 1 && grads.size(0) == exp_avg_.size(0) && grads.scalar_type() == torch::kFloat,
              "FlatAdam::step: gradients must be [", exp_avg_.size(0), "] float");
  TORCH_CHECK(ok.dim() == 0 && ok.scalar_type() == torch::kBool, "FlatAdam::step: ok must be a bool scalar");
  const auto& o = static_cast<const torch::optim::AdamOptions&>(param_groups()[0].options());
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
  torch::NoGradGuard no_grad;
  if (fused_cpu_ && exp_avg_.is_cpu()) {
    step_cpu(grads, ok.item<bool>());
    return;
  }
  auto g = grads;  // a handle: updated in place
  if (o.weight_decay() != 0) at::_foreach_add_(views_of(g, params_), params_, o.weight_decay());  // g += wd p
  const auto skip = ok.logical_not();
  g.masked_fill_(skip, 0);  // finite whatever came in: a skipped step below moves nothing
  steps_.add_(ok);
  const auto t = steps_.clamp_min(1.0);  // [] double; 1 before any step is taken (no division by 0)
  const auto bias1 = 1 - torch::pow(beta1, t);
  const auto bias2 = 1 - torch::pow(beta2, t);
  const auto okd = ok.to(torch::kDouble);
  // m += (1 - beta1) (g - m), v += (1 - beta2) (g^2 - v): by 0 when skipped (m and v stay exact).
  exp_avg_.lerp_(g, (okd * (1 - beta1)).to(torch::kFloat));
  exp_avg_sq_.lerp_(g.square(), (okd * (1 - beta2)).to(torch::kFloat));
  // p -= lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps), as torch::optim::Adam writes it.
  auto denom = exp_avg_sq_.sqrt().div_(bias2.sqrt().to(torch::kFloat)).add_(o.eps());
  auto update = exp_avg_.div(denom).mul_((lr_ / bias1).to(torch::kFloat));
  update.masked_fill_(skip, 0);  // eps 0 and v 0 would give 0/0 here
  at::_foreach_sub_(params_, views_of(update, params_));
}

// On the CPU, where reading `ok` costs nothing: one pass over every element
// (the dozen tensor passes above took 5x torch::optim::Adam's time there),
// with torch::optim::Adam's float arithmetic in its order.
void FlatAdam::step_cpu(const torch::Tensor& grads, bool ok) {
  if (!ok) return;
  const auto& o = static_cast<const torch::optim::AdamOptions&>(param_groups()[0].options());
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
  steps_.add_(1);
  const double t = steps_.item<double>();
  AdamConstants c;
  c.beta1 = static_cast<float>(beta1);
  c.one_minus_beta1 = static_cast<float>(1 - beta1);
  c.beta2 = static_cast<float>(beta2);
  c.one_minus_beta2 = static_cast<float>(1 - beta2);
  c.weight_decay = static_cast<float>(o.weight_decay());
  c.eps = static_cast<float>(o.eps());
  c.root_bias2 = static_cast<float>(std::sqrt(1 - std::pow(beta2, t)));
  c.step_size = static_cast<float>(lr_host_ / (1 - std::pow(beta1, t)));
  const auto g_all = grads.contiguous();
  const float* g = g_all.data_ptr<float>();
  float* m = exp_avg_.data_ptr<float>();
  float* v = exp_avg_sq_.data_ptr<float>();
  int64_t at = 0;
  for (auto& param : params_) {
    TORCH_CHECK(param.is_contiguous(), "FlatAdam: a parameter is not contiguous");
    float* p = param.data_ptr<float>();
    at::parallel_for(0, param.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      adam_pass(g + at + begin, p + begin, m + at + begin, v + at + begin, end - begin, c);
    });
    at += param.numel();
    param.unsafeGetTensorImpl()->bump_version();  // written through its pointer: caches keyed on _version() see it
  }
}

void FlatAdam::sync_state() {
  const auto n = static_cast<int64_t>(steps_.item<double>());
  auto& st = state();
  for (const auto& p : params_) {
    auto it = st.find(ckpt::optimizer_state_key(st, p));
    if (it != st.end()) static_cast<torch::optim::AdamParamState&>(*it->second).step(n);
  }
}

}  // namespace nmt
