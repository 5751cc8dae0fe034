// A training checkpoint's training state: the scalars of TrainState as its
// "train_state" entry (JSON), the generators' states as U8 tensors, and the
// resume that reads them back with the optimizer, each field checked.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <type_traits>

#include "base/error.h"
#include "base/format.h"
#include "model/checkpoint_format.h"

namespace nmt {
namespace {

// A generator state from the file, checked by giving it to a new generator
// of the same kind: a state of the wrong size or content is refused here,
// naming the field, and never reaches the run's own generator.
torch::Tensor checked_cpu_rng(const TensorFile& f, const std::string& path) {
  const TensorEntry* e = f.find(ckpt::kCpuRng);
  if (e == nullptr) return {};
  auto t = torch::empty({static_cast<int64_t>(e->as_bytes(path).size())}, torch::kByte);
  e->copy_into(t, path);
  try {
    auto probe = at::detail::createCPUGenerator();
    std::lock_guard<std::mutex> lock(probe.mutex());
    probe.set_state(t);
  } catch (const c10::Error&) {
    throw Error(located(path, 0, std::string("'") + ckpt::kCpuRng + "' is not a generator state of this LibTorch"));
  }
  return t;
}

// The stepped weights of a smoothing run ("state.weights.<parameter>"), in
// parameter_shapes() order: none, or every parameter of `options` with its
// shape, floating point and finite, and no other name. Throws nmt::Error
// naming `path` and the weight.
std::vector<std::pair<std::string, torch::Tensor>> checked_stepped_weights(const TensorFile& f,
                                                                           const ModelOptions& options,
                                                                           const std::string& path) {
  const std::string prefix = ckpt::kSteppedPrefix;
  size_t given = 0;
  for (const auto& [name, e] : f.entries()) given += name.rfind(prefix, 0) == 0 ? 1 : 0;
  std::vector<std::pair<std::string, torch::Tensor>> out;
  if (given == 0) return out;
  const auto bad = [&](const std::string& name, const std::string& why) {
    return Error(located(path, 0, "training state weight '" + name.substr(0, 80) + "' " + why));
  };
  for (const auto& want : parameter_shapes(options)) {
    const TensorEntry* e = f.find(prefix + want.name);
    if (e == nullptr) throw bad(want.name, "is missing (the file holds some stepped weights, not all)");
    if (e->shape != want.shape || !c10::isFloatingType(e->dtype)) throw bad(want.name, "has the wrong shape or type");
    auto t = torch::empty(want.shape, torch::kFloat);
    e->copy_into(t, path);
    if (!torch::isfinite(t).all().item<bool>()) throw bad(want.name, "holds NaN or Inf values");
    out.emplace_back(want.name, std::move(t));
  }
  if (out.size() != given)
    for (const auto& [name, e] : f.entries())
      if (name.rfind(prefix, 0) == 0 && std::none_of(out.begin(), out.end(), [&](const auto& o) {
            return o.first == name.substr(prefix.size());
          }))
        throw bad(name.substr(prefix.size()), "is not one of the model config's");
  return out;
}

}  // namespace

namespace ckpt {

TrainState parse_train_state(const nlohmann::json& j, const std::string& path) {
  constexpr int64_t kMaxCount = int64_t{1} << 53;  // exact in a double, beyond any run
  TrainState s;
  auto bad = [&](const char* key, const std::string& why) {
    return Error(located(path, 0, std::string("training state field '") + key + "' " + why));
  };
  TrainState::fields(s, [&](const char* key, auto& value) {
    using T = std::decay_t<decltype(value)>;
    auto it = j.find(key);
    if (it == j.end()) throw bad(key, "is missing");
    if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) throw bad(key, "is not true or false");
      value = it->template get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer()) throw bad(key, "is not an integer");
      const int64_t v = it->template get<int64_t>();
      const int64_t lo = std::string_view(key) == "epoch" ? 1 : 0;
      if (v < lo || v > kMaxCount)
        throw bad(key, "is " + std::to_string(v) + ", outside [" + std::to_string(lo) + ", 2^53]");
      value = v;
    } else {
      if (!it->is_number()) throw bad(key, "is not a number");
      const double v = it->template get<double>();
      if (!std::isfinite(v)) throw bad(key, "is not finite");
      value = v;
    }
  });
  if (!(s.learning_rate > 0)) throw bad("learning_rate", "is " + shortest_decimal(s.learning_rate) + ", not positive");
  if (s.elapsed_seconds < 0) throw bad("elapsed_seconds", "is negative");
  return s;
}

nlohmann::json train_state_json(const TrainState& s) {
  nlohmann::json j = nlohmann::json::object();
  TrainState::fields(s, [&](const char* key, const auto& value) { j[key] = value; });
  return j;
}

}  // namespace ckpt

TrainState load_train_state(const std::string& path, torch::optim::Optimizer& optimizer, const torch::Device& device) {
  using namespace ckpt;
  const Parsed p = parse_checkpoint(read_checkpoint_file(path), path);
  if (!p.info.has_train_state || p.file.metadata("optimizer") == nullptr)
    throw Error(located(path, 0, "not a training checkpoint (no optimizer state); cannot resume from it"));
  TrainState s = p.info.state;
  s.rng_state = checked_cpu_rng(p.file, path);
  if (const TensorEntry* e = p.file.find(kDeviceRng)) {  // checked when it is used (trainer.cc: restore_rng())
    s.device_rng_state = torch::empty({static_cast<int64_t>(e->as_bytes(path).size())}, torch::kByte);
    e->copy_into(s.device_rng_state, path);
  }
  s.stepped_weights = checked_stepped_weights(p.file, p.info.options, path);
  restore_optimizer(p.file, optimizer, device, path);
  return s;
}

}  // namespace nmt
