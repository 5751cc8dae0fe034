// Reduced-precision copies of linear layers for decoding on the CPU
// (CTranslate2's compute types, Marian's packed GEMMs):
//  - int8: the weight quantized once, per output row (symmetric int8); each
//    call quantizes its input to uint8 with its own range and multiplies in
//    integers through LibTorch's quantized engine (FBGEMM, x86 or oneDNN,
//    whichever this build has). Logits off by about 1% of their range.
//  - bfloat16: the weight rounded to bfloat16 once; each call rounds its
//    input, multiplies through oneDNN (AVX512-BF16 dot products where the CPU
//    has them; about 2x float's speed on the AVX-512 VM) and returns float.
//    Products and outputs keep 8 significant bits: logits off by about 0.5%.
// Translations may change slightly with either, so BLEU is measured on val
// before one is used.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>

namespace nmt {

// The precision of the decoder step's matrix products in search.
enum class Precision { kFloat32, kInt8, kBf16 };
std::string to_string(Precision p);

// A linear layer y = x W^T + b with its weights in reduced precision. A
// snapshot: later changes of the weights do not reach it.
class ReducedLinear {
 public:
  virtual ~ReducedLinear() = default;
  // x [.., K] float on the CPU -> [.., N] float.
  virtual torch::Tensor operator()(const torch::Tensor& x) const = 0;
  // The copy of weight [N, K] and bias [N] (float, CPU) in `p` (kInt8 or
  // kBf16). Throws nmt::Error for kFloat32 or where this LibTorch cannot run `p`.
  static std::shared_ptr<const ReducedLinear> make(Precision p, const torch::Tensor& weight, const torch::Tensor& bias);
  // Whether this CPU runs `p` in hardware (float32: always; int8: wherever
  // this LibTorch has a quantized engine; bfloat16: AVX512-BF16). Without,
  // bfloat16 is emulated and slower than float.
  static bool native(Precision p);
};

class Int8Linear final : public ReducedLinear {
 public:
  // Quantizes weight [N, K] and keeps bias [N]. Throws nmt::Error when this
  // LibTorch has no quantized engine for the CPU.
  Int8Linear(const torch::Tensor& weight, const torch::Tensor& bias);
  ~Int8Linear() override;
  Int8Linear(const Int8Linear&) = delete;
  Int8Linear& operator=(const Int8Linear&) = delete;
  torch::Tensor operator()(const torch::Tensor& x) const override;
  // Whether this LibTorch can run int8 linear layers on the CPU.
  static bool available();

 private:
  struct Packed;
  std::unique_ptr<Packed> packed_;
};

class Bf16Linear final : public ReducedLinear {
 public:
  // Rounds weight [N, K] to bfloat16 and keeps bias [N] in float.
  Bf16Linear(const torch::Tensor& weight, const torch::Tensor& bias);
  torch::Tensor operator()(const torch::Tensor& x) const override;

 private:
  torch::Tensor weight_;  // [N, K] bfloat16
  torch::Tensor bias_;    // [N] float
};

}  // namespace nmt
