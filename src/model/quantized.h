// Dynamic int8 linear layers for decoding on the CPU (CTranslate2's "int8"
// compute type, Marian's packed int8): the weight is quantized once, per
// output row (symmetric int8); each call quantizes its input to uint8 with
// its own range and multiplies in integers through LibTorch's quantized
// engine (FBGEMM, x86 or oneDNN, whichever this build has). About twice as
// fast as float for the decoder's vocabulary projection on 2 AVX2 cores, at
// the price of logits off by about 1% of their range: translations may
// change slightly, so BLEU is measured on val before it is used.
#pragma once
#include <torch/torch.h>

#include <memory>

namespace nmt {

class Int8Linear {
 public:
  // Quantizes weight [N, K] and keeps bias [N] (both float, CPU). A snapshot:
  // later changes of the weights do not reach it. Throws nmt::Error when this
  // LibTorch has no quantized engine for the CPU.
  Int8Linear(const torch::Tensor& weight, const torch::Tensor& bias);
  ~Int8Linear();
  Int8Linear(const Int8Linear&) = delete;
  Int8Linear& operator=(const Int8Linear&) = delete;

  // x [.., K] float on the CPU -> x W^T + b [.., N] float.
  torch::Tensor operator()(const torch::Tensor& x) const;

  // Whether this LibTorch can run int8 linear layers on the CPU.
  static bool available();

 private:
  struct Packed;
  std::unique_ptr<Packed> packed_;
};

}  // namespace nmt
