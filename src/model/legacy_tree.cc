// The last layer of the legacy checkpoint reader (legacy_format.h): a walk
// from the unpickled module tree to a LegacyCheckpoint, its weights, its
// optimizer (groups, options, per-parameter state) and its training state,
// each entry's type checked and any entry nmt never writes refused.
#include <algorithm>

#include "model/legacy_format.h"

namespace nmt::legacy {
namespace {

// Typed reads of the unpickled tree; errors name the entry's path.
class Tree {
 public:
  Tree(const Unpickler& u, const std::string& origin) : u_(u), origin_(origin) {}

  // The attributes of module `id` at `path`.
  const Dict& module(Id id, const std::string& path) const {
    const Value& v = u_[id];
    if (v.kind != Kind::kObject || !v.attrs) wrong(path, "a module", v);
    return *u_[*v.attrs].dict;
  }
  // Attribute `key` of `d` (at `path`), or nullopt.
  static std::optional<Id> find(const Dict& d, std::string_view key) {
    const auto it = d.index.find(key);
    return it == d.index.end() ? std::nullopt : std::optional<Id>(it->second);
  }
  // Attribute `key` of `d` (at `path`); throws nmt::Error if it has none.
  Id get(const Dict& d, std::string_view key, const std::string& path) const {
    const auto id = find(d, key);
    if (!id) fail(origin_, path + " lacks '" + std::string(key) + "'");
    return *id;
  }
  // Value `id` (at `path`), required to be of `kind`: throws nmt::Error
  // if it is of another; so do str() ... tensor() below.
  const Value& typed(Id id, Kind kind, const std::string& path) const {
    const Value& v = u_[id];
    if (v.kind != kind) wrong(path, kind_name(kind), v);
    return v;
  }
  std::string str(Id id, const std::string& path) const { return std::string(typed(id, Kind::kString, path).s); }
  int64_t integer(Id id, const std::string& path) const { return typed(id, Kind::kInt, path).i; }
  double real(Id id, const std::string& path) const { return typed(id, Kind::kFloat, path).f; }
  bool boolean(Id id, const std::string& path) const { return typed(id, Kind::kBool, path).i != 0; }
  torch::Tensor tensor(Id id, const std::string& path) const { return typed(id, Kind::kTensor, path).tensor; }
  // A one-element long tensor's value (LibTorch's "…/size" counts).
  int64_t count(Id id, const std::string& path) const {
    const torch::Tensor t = tensor(id, path);
    if (t.scalar_type() != torch::kLong || t.numel() != 1) fail(origin_, path + " is not a count");
    return t.item<int64_t>();
  }
  // An option's value: a float, an integer, a boolean (0, 1), or (betas) a pair of floats.
  void option(Id id, const std::string& key, std::map<std::string, double>& out, const std::string& path) const {
    const Value& v = u_[id];
    if (v.kind == Kind::kFloat) out[key] = v.f;
    else if (v.kind == Kind::kInt || v.kind == Kind::kBool) out[key] = static_cast<double>(v.i);
    else if (key == "betas" && v.kind == Kind::kTuple && v.items.size() == 2) {
      out["beta1"] = real(v.items[0], path);
      out["beta2"] = real(v.items[1], path);
    } else wrong(path, "a number", v);
  }
  [[noreturn]] void wrong(const std::string& path, const char* want, const Value& got) const {
    fail(origin_, path + " is " + kind_name(got.kind) + ", not " + want);
  }
  const std::string& origin() const { return origin_; }

 private:
  const Unpickler& u_;
  const std::string& origin_;
};

// Refuses any attribute of `d` (at `path`) outside `known`.
void only(const Tree& t, const Dict& d, std::initializer_list<std::string_view> known, const std::string& path) {
  for (const auto& [key, id] : d.items)
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail(t.origin(), path + " holds " + in_quotes(key) + ", which nmt never writes");
}

// The model's weights into `c`, in the file's order. Throws nmt::Error
// for an entry that is not a tensor.
void read_weights(const Tree& t, const Dict& model, LegacyCheckpoint& c) {
  for (const auto& [key, id] : model.items) {
    std::string name(key);
    c.weights[name] = t.tensor(id, "weight " + in_quotes(name));
    c.weight_order.push_back(std::move(name));
  }
}

// One parameter's optimizer state `d` (at `path`). Throws nmt::Error for
// an unknown or mistyped entry.
LegacyParamState read_param_state(const Tree& t, const Dict& d, const std::string& path) {
  only(t, d, {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"}, path);
  LegacyParamState s;
  if (const auto id = Tree::find(d, "step")) s.has_step = true, s.step = t.integer(*id, path + ".step");
  const std::pair<const char*, torch::Tensor*> tensors[] = {{"exp_avg", &s.exp_avg},
                                                             {"exp_avg_sq", &s.exp_avg_sq},
                                                             {"max_exp_avg_sq", &s.max_exp_avg_sq},
                                                             {"momentum_buffer", &s.momentum_buffer}};
  for (const auto& [key, out] : tensors)
    if (const auto id = Tree::find(d, key)) *out = t.tensor(*id, path + "." + key);
  return s;
}

// One parameter group: its parameters' keys ("0x..." in the file) and options.
LegacyParamGroup read_group(const Tree& t, const Dict& g, const std::string& path) {
  const int64_t n = t.count(t.get(g, "params/size", path), path + ".params/size");
  if (n < 0 || static_cast<uint64_t>(n) + 2 != g.items.size()) fail(t.origin(), path + " does not hold its " + std::to_string(n) + " parameters and options");
  LegacyParamGroup group;
  for (int64_t j = 0; j < n; ++j) {
    const std::string key = "params/" + std::to_string(j);
    group.params.push_back(t.str(t.get(g, key, path), path + "." + key));
  }
  for (const auto& [key, id] : t.module(t.get(g, "options", path), path + ".options").items)
    t.option(id, std::string(key), group.options, path + ".options." + std::string(key));
  return group;
}

// The optimizer's parameter groups, `d`. Throws nmt::Error unless it holds
// exactly its counted groups, each well formed.
std::vector<LegacyParamGroup> read_groups(const Tree& t, const Dict& d) {
  const int64_t n = t.count(t.get(d, "param_groups/size", "optimizer.param_groups"), "optimizer.param_groups/size");
  if (n < 0 || static_cast<uint64_t>(n) + 1 != d.items.size()) fail(t.origin(), "optimizer.param_groups does not hold its " + std::to_string(n) + " groups");
  std::vector<LegacyParamGroup> groups;
  for (int64_t i = 0; i < n; ++i) {
    const std::string path = "optimizer.param_groups/" + std::to_string(i);
    groups.push_back(read_group(t, t.module(t.get(d, "param_groups/" + std::to_string(i), "optimizer.param_groups"), path), path));
  }
  return groups;
}

// Names the groups' parameters: the optimizer was made from
// model->parameters(), whose order is the weights' order in the file.
// Returns the file's parameter keys ("0x...") to names.
std::map<std::string, std::string> name_params(const Tree& t, std::vector<LegacyParamGroup>& groups, const LegacyCheckpoint& c) {
  std::map<std::string, std::string> names;
  size_t k = 0;
  for (auto& g : groups)
    for (auto& key : g.params) {
      if (k >= c.weight_order.size()) fail(t.origin(), "the optimizer holds more parameters than the model has weights");
      if (!names.emplace(key, c.weight_order[k]).second) fail(t.origin(), "the optimizer lists parameter " + in_quotes(key) + " twice");
      key = c.weight_order[k++];
    }
  return names;
}

// The optimizer's kind, told by its options: Adam has betas, SGD momentum.
std::string optimizer_kind(const Tree& t, const std::vector<LegacyParamGroup>& groups) {
  std::string kind;
  for (const auto& g : groups) {
    const std::string k = g.options.count("beta1") ? "adam" : g.options.count("momentum") ? "sgd" : "";
    if (k.empty() || (!kind.empty() && k != kind)) fail(t.origin(), "the optimizer is neither Adam nor SGD");
    kind = k;
  }
  return kind;
}

// The optimizer `d` into `c` (whose weights are read). Throws nmt::Error
// for another format, an unknown kind, state for no parameter or of
// another shape than its weight.
void read_optimizer(const Tree& t, const Dict& d, LegacyCheckpoint& c) {
  only(t, d, {"pytorch_version", "state", "param_groups"}, "optimizer");
  if (t.str(t.get(d, "pytorch_version", "optimizer"), "optimizer.pytorch_version") != "1.5.0")
    fail(t.origin(), "the optimizer's format is not LibTorch's 1.5.0");
  LegacyOptimizer& o = c.optimizer;
  o.groups = read_groups(t, t.module(t.get(d, "param_groups", "optimizer"), "optimizer.param_groups"));
  o.kind = optimizer_kind(t, o.groups);
  const auto names = name_params(t, o.groups, c);
  for (const auto& [key, id] : t.module(t.get(d, "state", "optimizer"), "optimizer.state").items) {
    const auto name = names.find(std::string(key));
    if (name == names.end()) fail(t.origin(), "the optimizer holds state for " + in_quotes(key) + ", a parameter of no group");
    LegacyParamState s = read_param_state(t, t.module(id, "optimizer.state." + name->second), "optimizer state of " + in_quotes(name->second));
    for (const torch::Tensor* m : {&s.exp_avg, &s.exp_avg_sq, &s.max_exp_avg_sq, &s.momentum_buffer})
      if (m->defined() && m->sizes() != c.weights.at(name->second).sizes())
        fail(t.origin(), "the optimizer state of " + in_quotes(name->second) + " has another shape than the weight");
    o.state[name->second] = std::move(s);
  }
}

// The training state `d` into `s`. Throws nmt::Error for a missing,
// mistyped or unknown entry.
void read_state(const Tree& t, const Dict& d, LegacyTrainState& s) {
  only(t, d, {"step", "epoch", "batch_in_epoch", "learning_rate", "best_metric", "has_best", "bad_validations", "plateau",
              "seed", "elapsed_seconds", "rng_state", "device_rng_state"}, "the training state");
  auto at = [&](const char* key) { return t.get(d, key, "the training state"); };
  auto path = [](const char* key) { return std::string("state.") + key; };
  const std::pair<const char*, int64_t*> ints[] = {{"step", &s.step}, {"epoch", &s.epoch},
                                                    {"batch_in_epoch", &s.batch_in_epoch},
                                                    {"bad_validations", &s.bad_validations},
                                                    {"plateau", &s.plateau}, {"seed", &s.seed}};
  for (const auto& [key, out] : ints) *out = t.integer(at(key), path(key));
  const std::pair<const char*, double*> reals[] = {
      {"learning_rate", &s.learning_rate}, {"best_metric", &s.best_metric}, {"elapsed_seconds", &s.elapsed_seconds}};
  for (const auto& [key, out] : reals) *out = t.real(at(key), path(key));
  s.has_best = t.boolean(at("has_best"), "state.has_best");
  if (const auto id = Tree::find(d, "rng_state")) s.rng_state = t.tensor(*id, "state.rng_state");
  if (const auto id = Tree::find(d, "device_rng_state")) s.device_rng_state = t.tensor(*id, "state.device_rng_state");
}

}  // namespace

LegacyCheckpoint read_tree(const Unpickler& u, Id root, const std::string& origin) {
  const Tree t(u, origin);
  const Dict& top = t.module(root, "the archive");
  only(t, top, {"config", "src_spm", "tgt_spm", "model", "optimizer", "state", "meta"}, "the archive");
  LegacyCheckpoint c;
  c.config = t.str(t.get(top, "config", "the archive"), "config");
  if (const auto id = Tree::find(top, "meta")) c.meta = t.str(*id, "meta");
  c.src_spm = t.str(t.get(top, "src_spm", "the archive"), "src_spm");
  c.tgt_spm = t.str(t.get(top, "tgt_spm", "the archive"), "tgt_spm");
  read_weights(t, t.module(t.get(top, "model", "the archive"), "model"), c);
  if (const auto id = Tree::find(top, "optimizer")) {
    c.has_optimizer = true;
    read_optimizer(t, t.module(*id, "optimizer"), c);
  }
  if (const auto id = Tree::find(top, "state")) {
    c.has_train_state = true;
    read_state(t, t.module(*id, "state"), c.state);
  }
  return c;
}

}  // namespace nmt::legacy
