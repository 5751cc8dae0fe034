// Reduced-precision linear layers: int8 through LibTorch's quantized operators, bfloat16 through oneDNN.
#include "model/quantized.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>

#include <algorithm>
#include <vector>

#include "base/error.h"

namespace nmt {
namespace {

// The quantized engine to use on this CPU, best first: FBGEMM and x86 (AVX2
// and AVX-512 kernels), oneDNN, then QNNPACK (ARM). NoQEngine when none.
at::QEngine pick_engine() {
  const auto& have = at::globalContext().supportedQEngines();
  for (auto e : {at::QEngine::X86, at::QEngine::FBGEMM, at::QEngine::ONEDNN, at::QEngine::QNNPACK})
    if (std::find(have.begin(), have.end(), e) != have.end()) return e;
  return at::QEngine::NoQEngine;
}

}  // namespace

std::string to_string(Precision p) {
  switch (p) {
    case Precision::kFloat32: return "float32";
    case Precision::kInt8: return "int8";
    case Precision::kBf16: return "bfloat16";
  }
  return "?";
}

std::shared_ptr<const ReducedLinear> ReducedLinear::make(Precision p, const torch::Tensor& weight,
                                                         const torch::Tensor& bias) {
  switch (p) {
    case Precision::kInt8: return std::make_shared<const Int8Linear>(weight, bias);
    case Precision::kBf16: return std::make_shared<const Bf16Linear>(weight, bias);
    case Precision::kFloat32: break;
  }
  throw Error("no reduced-precision copy for " + to_string(p));
}

bool ReducedLinear::native(Precision p) {
  if (p == Precision::kFloat32) return true;
  if (p == Precision::kInt8) return Int8Linear::available();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

struct Int8Linear::Packed {
  c10::intrusive_ptr<LinearPackedParamsBase> params;
  int64_t out_features = 0;
};

bool Int8Linear::available() { return pick_engine() != at::QEngine::NoQEngine; }

Int8Linear::Int8Linear(const torch::Tensor& weight, const torch::Tensor& bias) : packed_(std::make_unique<Packed>()) {
  const auto engine = pick_engine();
  if (engine == at::QEngine::NoQEngine)
    throw Error("int8 decoding: this LibTorch has no quantized engine for the CPU (FBGEMM, x86, oneDNN or QNNPACK)");
  at::globalContext().setQEngine(engine);
  c10::InferenceMode guard;
  auto w = weight.detach().to(torch::kCPU, torch::kFloat).contiguous();  // [N, K]
  auto b = bias.detach().to(torch::kCPU, torch::kFloat).contiguous();    // [N]
  // Symmetric per-row scales: the largest |w| of a row maps to 127.
  auto scales = (w.abs().amax(1).clamp_min(1e-8) / 127.0).to(torch::kDouble);  // [N]
  auto zero_points = torch::zeros({w.size(0)}, torch::kLong);
  auto qw = at::quantize_per_channel(w, scales, zero_points, 0, torch::kQInt8);
  static const auto prepack =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("quantized::linear_prepack", "")
          .typed<c10::intrusive_ptr<LinearPackedParamsBase>(at::Tensor, c10::optional<at::Tensor>)>();
  packed_->params = prepack.call(qw, b);
  packed_->out_features = w.size(0);
}

Int8Linear::~Int8Linear() = default;

torch::Tensor Int8Linear::operator()(const torch::Tensor& x) const {
  auto flat = x.reshape({-1, x.size(-1)}).to(torch::kFloat).contiguous();  // [R, K]
  // reduce_range: 7-bit inputs, so that AVX2's 16-bit pair sums cannot saturate.
  auto y = packed_->params->apply_dynamic(flat, /*reduce_range=*/true);  // [R, N]
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = packed_->out_features;
  return y.view(shape);
}

Bf16Linear::Bf16Linear(const torch::Tensor& weight, const torch::Tensor& bias) {
  c10::InferenceMode guard;
  weight_ = weight.detach().to(torch::kCPU, torch::kBFloat16).contiguous();  // [N, K]
  bias_ = bias.detach().to(torch::kCPU, torch::kFloat).contiguous();        // [N]
}

torch::Tensor Bf16Linear::operator()(const torch::Tensor& x) const {
  // The product in bfloat16 (fp32 accumulation inside oneDNN), the bias in float.
  auto y = torch::nn::functional::linear(x.to(torch::kBFloat16), weight_);  // [.., N] bfloat16
  return y.to(torch::kFloat).add_(bias_);
}

}  // namespace nmt
