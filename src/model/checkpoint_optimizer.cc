// A training checkpoint's optimizer entries: metadata "optimizer" (its kind;
// per group its options and, per parameter, Adam's step) and the moments as
// tensors "optimizer.G.I.NAME"; written from a torch::optim::Adam or SGD and
// restored into one, each field checked against the run's own optimizer.
#include <cmath>
#include <memory>

#include "base/error.h"
#include "base/format.h"
#include "model/checkpoint_format.h"

namespace nmt::ckpt {
namespace {

// The options of one parameter group, by the names the file stores.
nlohmann::json group_options(torch::optim::OptimizerOptions& o) {
  if (auto* a = dynamic_cast<torch::optim::AdamOptions*>(&o))
    return {{"lr", a->lr()}, {"beta1", std::get<0>(a->betas())}, {"beta2", std::get<1>(a->betas())},
            {"eps", a->eps()}, {"weight_decay", a->weight_decay()}, {"amsgrad", a->amsgrad()}};
  if (auto* g = dynamic_cast<torch::optim::SGDOptions*>(&o))
    return {{"lr", g->lr()}, {"momentum", g->momentum()}, {"dampening", g->dampening()},
            {"weight_decay", g->weight_decay()}, {"nesterov", g->nesterov()}};
  throw Error("checkpoint: this optimizer cannot be saved (neither Adam nor SGD)");
}

// A finite number at `key` of `j` within [lo, hi]; throws nmt::Error naming `field`.
double number_in(const nlohmann::json& j, const char* key, double lo, double hi, const std::string& path,
                 const std::string& field) {
  auto it = j.find(key);
  if (it == j.end() || !(it->is_number() || it->is_boolean()))
    throw Error(located(path, 0, field + " lacks the number '" + key + "'"));
  const double v = it->is_boolean() ? (it->get<bool>() ? 1.0 : 0.0) : it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    throw Error(located(path, 0, field + " '" + key + "' is " + shortest_decimal(v) + ", outside [" + shortest_decimal(lo) +
                                     ", " + shortest_decimal(hi) + "]"));
  return v;
}

// Sets the options of `group` (Adam's with `adam`, else SGD's) from `o`, the
// file's options of optimizer group `field`, each number in its range.
// Throws nmt::Error naming the file, the group and the option.
void restore_group_options(const nlohmann::json& o, torch::optim::OptimizerParamGroup& group, bool adam,
                           const std::string& path, const std::string& field) {
  const double lr = number_in(o, "lr", 0, 1e6, path, field);
  const double wd = number_in(o, "weight_decay", 0, 1e6, path, field);
  if (adam) {
    auto& a = static_cast<torch::optim::AdamOptions&>(group.options());
    a.lr(lr).weight_decay(wd);
    a.betas({number_in(o, "beta1", 0, 1, path, field), number_in(o, "beta2", 0, 1, path, field)});
    a.eps(number_in(o, "eps", 0, 1, path, field));
    a.amsgrad(number_in(o, "amsgrad", 0, 1, path, field) != 0);
  } else {
    auto& s = static_cast<torch::optim::SGDOptions&>(group.options());
    s.lr(lr).weight_decay(wd);
    s.momentum(number_in(o, "momentum", 0, 1e6, path, field));
    s.dampening(number_in(o, "dampening", 0, 1e6, path, field));
    s.nesterov(number_in(o, "nesterov", 0, 1, path, field) != 0);
  }
}

// Restores into `optimizer` the state of parameter `p`, stored under
// `prefix` ("optimizer.G.I.") with step `sj` (-1: no state yet): its moments
// of p's shape, finite (Adam's second moment not negative), on `device`.
// Throws nmt::Error naming the file and the entry.
void restore_param_state(const TensorFile& f, const nlohmann::json& sj, const torch::Tensor& p,
                         const std::string& prefix, bool adam, torch::optim::Optimizer& optimizer,
                         const torch::Device& device, const std::string& path) {
  auto& state = optimizer.state();
  if (!sj.is_number_integer() || sj.get<int64_t>() < -1 || sj.get<int64_t>() > (int64_t{1} << 53))
    throw Error(located(path, 0, prefix + "step is not an integer in [-1, 2^53]"));
  const int64_t step = sj.get<int64_t>();
  if (step < 0) return;  // no state yet
  // A moment of p's shape, finite, on p's device.
  auto moment = [&](const char* name, bool required) -> torch::Tensor {
    const TensorEntry* e = f.find(prefix + name);
    if (e == nullptr) {
      if (required) throw Error(located(path, 0, "checkpoint lacks '" + prefix + name + "'"));
      return {};
    }
    auto t = torch::empty(p.sizes(), p.options().device(torch::kCPU));
    try {
      e->copy_into(t, path);
    } catch (const Error&) {
      throw Error(located(path, 0, "'" + prefix + name + "' does not have its parameter's shape (was the model changed?)"));
    }
    if (!torch::isfinite(t).all().item<bool>())
      throw Error(located(path, 0, "'" + prefix + name + "' holds NaN or Inf values"));
    return t.to(device);
  };
  if (adam) {
    auto st = std::make_unique<torch::optim::AdamParamState>();
    st->step(step);
    st->exp_avg(moment("exp_avg", true));
    st->exp_avg_sq(moment("exp_avg_sq", true));
    if ((st->exp_avg_sq() < 0).any().item<bool>())
      throw Error(located(path, 0, "'" + prefix + "exp_avg_sq' holds negative values"));
    auto mx = moment("max_exp_avg_sq", false);
    if (mx.defined()) st->max_exp_avg_sq(mx);
    state[optimizer_state_key(state, p)] = std::move(st);
  } else {
    auto st = std::make_unique<torch::optim::SGDParamState>();
    auto buf = moment("momentum_buffer", false);
    if (buf.defined()) st->momentum_buffer(buf);
    state[optimizer_state_key(state, p)] = std::move(st);
  }
}

}  // namespace

void add_optimizer(TensorFileWriter& w, torch::optim::Optimizer& optimizer) {
  nlohmann::json j = nlohmann::json::object();
  j["groups"] = nlohmann::json::array();
  auto& state = optimizer.state();
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    auto& group = optimizer.param_groups()[g];
    nlohmann::json steps = nlohmann::json::array();
    for (size_t i = 0; i < group.params().size(); ++i) {
      const std::string prefix = "optimizer." + std::to_string(g) + "." + std::to_string(i) + ".";
      auto it = state.find(optimizer_state_key(state, group.params()[i]));
      int64_t step = -1;
      if (it != state.end()) {
        if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
          step = a->step();
          w.add(prefix + "exp_avg", a->exp_avg());
          w.add(prefix + "exp_avg_sq", a->exp_avg_sq());
          if (a->max_exp_avg_sq().defined()) w.add(prefix + "max_exp_avg_sq", a->max_exp_avg_sq());
        } else if (auto* m = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
          step = 0;
          if (m->momentum_buffer().defined()) w.add(prefix + "momentum_buffer", m->momentum_buffer());
        }
      }
      steps.push_back(step);
    }
    j["groups"].push_back({{"options", group_options(group.options())}, {"steps", steps}});
  }
  j["kind"] = dynamic_cast<torch::optim::Adam*>(&optimizer) ? "adam" : "sgd";
  w.set_metadata("optimizer", j.dump());
}

void restore_optimizer(const TensorFile& f, torch::optim::Optimizer& optimizer, const torch::Device& device,
                       const std::string& path) {
  const auto j = json_object(f.metadata("optimizer"), path, "optimizer state");
  const bool adam = dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr;
  const std::string want = adam ? "adam" : "sgd";
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string() || kind->get<std::string>() != want)
    throw Error(located(path, 0, "the checkpoint's optimizer is " + (kind != j.end() ? kind->dump().substr(0, 20) : "none") +
                                     "; this run uses " + want + " (was --optimizer changed?)"));
  auto groups = j.find("groups");
  if (groups == j.end() || !groups->is_array() || groups->size() != optimizer.param_groups().size())
    throw Error(located(path, 0, "the checkpoint's optimizer has other parameter groups than this model's"));
  auto& state = optimizer.state();
  state.clear();
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    auto& group = optimizer.param_groups()[g];
    const auto& gj = (*groups)[g];
    const std::string field = "optimizer group " + std::to_string(g);
    if (!gj.is_object() || !gj.contains("options") || !gj.contains("steps") || !gj["steps"].is_array() ||
        gj["steps"].size() != group.params().size())
      throw Error(located(path, 0, field + " does not hold " + std::to_string(group.params().size()) +
                                       " parameters (was the model changed?)"));
    restore_group_options(gj["options"], group, adam, path, field);
    for (size_t i = 0; i < group.params().size(); ++i) {
      const std::string prefix = "optimizer." + std::to_string(g) + "." + std::to_string(i) + ".";
      restore_param_state(f, gj["steps"][i], group.params()[i], prefix, adam, optimizer, device, path);
    }
  }
}

}  // namespace nmt::ckpt
