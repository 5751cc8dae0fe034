// Hand-written CPU kernels for the hot spots of a decoder step, where the
// composed LibTorch operations cost a multiple of the arithmetic: the
// additive attention as one pass per row (no [B, S, A] temporaries of
// q + keys and its tanh, no per-row small matrix products), for search and
// for the teacher-forced recurrence, with its energies' backward; and each
// row's largest value with its column (LibTorch 1.13's max(dim) with indices
// runs about ten times slower than its max without them).
#pragma once
#include <torch/torch.h>

#include <utility>

namespace nmt {

// For each row b (A attention size, S source length, W value width):
//   e_bj    = sum_a v_a tanh(keys_bja + q_ba) + mask_bias_bj
//   alpha_b = softmax_j(e_b)
//   out_b   = sum_j alpha_bj values_bj
// q [B, A] (rows may be strided), keys [B, S, A], v [A] (or [1, A]),
// mask_bias [B, S] (0 on real positions, -inf on padding), values [B, S, W]:
// float32 on the CPU. Returns {alpha [B, S], out [B, W]}: what
// softmax(matmul(tanh(keys + q.unsqueeze(1)), v) + mask_bias) and its bmm
// with values give, within float rounding (tanh is the 13/6 rational
// approximation Eigen uses, within 3e-7 of std::tanh, and the sums run in
// another order). Rows run in parallel on LibTorch's threads. Records no
// autograd history. Throws nmt::Error when the tensors are not as above
// (applies() tells beforehand).
std::pair<torch::Tensor, torch::Tensor> additive_attention_step(const torch::Tensor& q, const torch::Tensor& keys,
                                                                const torch::Tensor& v,
                                                                const torch::Tensor& mask_bias,
                                                                const torch::Tensor& values);

// additive_attention_step() into given outputs, for the teacher-forced
// recurrence: alpha [B, S] and out [B, W], and with `energies` also each
// tanh(keys_bja + q_ba) into it [B, S, A] (what the backward needs); each a
// contiguous float32 CPU tensor. Throws nmt::Error as additive_attention_step().
void additive_attention_step_out(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& v,
                                  const torch::Tensor& mask_bias, const torch::Tensor& values, torch::Tensor& alpha,
                                  torch::Tensor& out, torch::Tensor* energies = nullptr);

// The backward of the attention energies e = tanh(k + q) [B, S, A] under
// scores = e v: with d_sc = dL/dscores [B, S], adds d_pre = d_sc v (1 - e^2)
// into d_keys [B, S, A] and writes its sum over S into d_q [B, A] (rows may be
// strided), skipping the positions whose d_sc is exactly 0 (padding, where
// alpha is 0). Float32 on the CPU; throws nmt::Error otherwise
// (additive_energy_backward_applies() tells beforehand).
void additive_energy_backward(const torch::Tensor& d_sc, const torch::Tensor& e, const torch::Tensor& v,
                              torch::Tensor& d_keys, torch::Tensor& d_q);
bool additive_energy_backward_applies(const torch::Tensor& e, const torch::Tensor& d_keys, const torch::Tensor& d_q);

// Whether additive_attention_step() takes these tensors: float32, on the CPU,
// with the shapes above, and autograd not recording any of them.
bool additive_attention_step_applies(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& v,
                                     const torch::Tensor& mask_bias, const torch::Tensor& values);

// The approximation of tanh the step uses, for tests: x [..] float32 on the CPU -> [..].
torch::Tensor rational_tanh(const torch::Tensor& x);

}  // namespace nmt
