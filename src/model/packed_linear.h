// A linear layer whose weight is packed once into the layout the CPU's
// vector unit multiplies fastest, for the decoder step of search.
//
// OpenBLAS packs both operands of every product: a search step multiplies a
// few dozen rows by weights of up to [256, 8000], so repacking the weight
// (sgemm_itcopy) took about a fifth of greedy search. Here the weight is
// packed once, in panels of 16 output columns ([ceil(N/16), K, 16]), and an
// AVX-512 kernel keeps a 6-row x 64-column block of the result in registers
// while it walks K (one broadcast of x and four panel loads per 24 fused
// multiply-adds). Float32 throughout: the sums run in another order than
// OpenBLAS's, so results agree to float rounding, not bit for bit.
#pragma once
#include <torch/torch.h>

namespace nmt {

class PackedLinear {
 public:
  // Packs weight_t [K, N] (the weight transposed: in, out) and keeps bias
  // [N]; both float32 (any device: copied to the CPU). Throws nmt::Error for
  // other shapes or types, or where available() is false.
  PackedLinear(const torch::Tensor& weight_t, const torch::Tensor& bias);

  // x [R, K] float32 on the CPU (rows may be strided) -> x W + b [R, N]. Runs
  // on LibTorch's intra-op threads (over column blocks) outside a parallel
  // region, on the calling thread inside one. Records no autograd history.
  // Throws nmt::Error when x is not as above.
  torch::Tensor operator()(const torch::Tensor& x) const;

  // Whether this CPU and build run the kernel (x86-64 with AVX-512F).
  static bool available();

  int64_t in_features() const { return k_; }
  int64_t out_features() const { return n_; }

 private:
  torch::Tensor packed_;  // [ceil(N/16), K, 16] float32; columns past N are 0
  torch::Tensor bias_;    // [ceil(N/16) * 16] float32; past N 0
  int64_t k_ = 0, n_ = 0;
};

}  // namespace nmt
