// The CPU kernels of a decoder step (step_kernels.h), for search and for the
// teacher-forced recurrence. The loops are plain C++ that the compiler
// vectorizes; on x86-64 with GCC 12 or later (which names the x86-64-v3/v4
// levels in target_clones) each hot loop is compiled for AVX-512, AVX2 + FMA
// and the baseline, and the CPU picks its version at load time.
#include "model/step_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "base/error.h"

#include "base/vector_clones.h"

namespace nmt {
namespace {

// tanh(x) as the 13/6 rational approximation Eigen uses (its float
// coefficients): within 7 units in the last place of the result (5 where
// the compiler uses FMA); exactly +-1 at and beyond the clamp, chosen there
// rather than left to the polynomials, whose value at the clamp rounds to 1
// or to 1 - 2^-22 as the compiler orders and fuses their products (GCC 12
// gave 1, GCC 14 1 - 2^-22); NaN stays NaN.
inline float tanh_approx(float x_in) {
  constexpr float kClamp = 7.90531110763549805f;
  const float x = std::min(std::max(x_in, -kClamp), kClamp);
  const float x2 = x * x;
  float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  const float r = x * p / q;
  return x == kClamp ? 1.0f : x == -kClamp ? -1.0f : r;
}

// sum_a v[a] tanh(k[a] + q[a]) over a < n. Sixteen running sums, so that the
// loop vectorizes without reassociating one sum.
NMT_VECTOR_CLONES float tanh_dot(const float* k, const float* q, const float* v, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t a = 0;
  for (; a + kLanes <= n; a += kLanes)
    for (int i = 0; i < kLanes; ++i) acc[i] += v[a + i] * tanh_approx(k[a + i] + q[a + i]);
  float s = 0;
  for (; a < n; ++a) s += v[a] * tanh_approx(k[a] + q[a]);
  for (float x : acc) s += x;
  return s;
}

// tanh_dot() that also writes each tanh(k[a] + q[a]) into e[a].
NMT_VECTOR_CLONES float tanh_dot_keep(const float* k, const float* q, const float* v, float* e, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t a = 0;
  for (; a + kLanes <= n; a += kLanes)
    for (int i = 0; i < kLanes; ++i) acc[i] += v[a + i] * (e[a + i] = tanh_approx(k[a + i] + q[a + i]));
  float s = 0;
  for (; a < n; ++a) s += v[a] * (e[a] = tanh_approx(k[a] + q[a]));
  for (float x : acc) s += x;
  return s;
}

// One position's share of the energy backward: x = g v (1 - e^2), added into dk and dq.
NMT_VECTOR_CLONES void energy_row_backward(float g, const float* e, const float* v, float* __restrict dk,
                                           float* __restrict dq, int64_t n) {
  for (int64_t a = 0; a < n; ++a) {
    const float x = g * v[a] * (1.0f - e[a] * e[a]);
    dk[a] += x;
    dq[a] += x;
  }
}

// y = a * x over n floats.
NMT_VECTOR_CLONES void scale_into(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a * x[i];
}

// y += a * x over n floats.
NMT_VECTOR_CLONES void add_scaled(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

NMT_VECTOR_CLONES void tanh_into(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_approx(x[i]);
}

// A float32 CPU tensor that autograd would not record an operation on.
bool is_cpu_float(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat &&
         !(t.requires_grad() && torch::GradMode::is_enabled());
}

}  // namespace

bool additive_attention_step_applies(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& v,
                                     const torch::Tensor& mask_bias, const torch::Tensor& values) {
  for (const auto* t : {&q, &keys, &v, &mask_bias, &values})
    if (!is_cpu_float(*t)) return false;
  if (q.dim() != 2 || keys.dim() != 3 || values.dim() != 3 || mask_bias.dim() != 2) return false;
  const int64_t B = keys.size(0), S = keys.size(1), A = keys.size(2);
  return S > 0 && q.size(0) == B && q.size(1) == A && v.numel() == A && mask_bias.size(0) == B &&
         mask_bias.size(1) == S && values.size(0) == B && values.size(1) == S;
}

void additive_attention_step_out(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& v,
                                  const torch::Tensor& mask_bias, const torch::Tensor& values, torch::Tensor& alpha,
                                  torch::Tensor& out, torch::Tensor* energies) {
  const int64_t B = keys.size(0), S = keys.size(1), A = keys.size(2), W = values.size(2);
  const auto ready = [](const torch::Tensor& t, torch::IntArrayRef shape) {
    return is_cpu_float(t) && t.is_contiguous() && t.sizes() == shape;
  };
  if (!additive_attention_step_applies(q, keys, v, mask_bias, values) || !ready(alpha, {B, S}) ||
      !ready(out, {B, W}) || (energies && !ready(*energies, {B, S, A})))
    throw Error("additive_attention_step: needs float32 CPU tensors q [B, A], keys [B, S, A], v [A], "
                "mask_bias [B, S] and values [B, S, W], and contiguous outputs alpha [B, S], out [B, W] "
                "and energies [B, S, A]");
  const auto k = keys.contiguous();                        // [B, S, A]
  const auto val = values.contiguous();                    // [B, S, W]
  const auto qq = q.stride(1) == 1 ? q : q.contiguous();  // [B, A], rows strided
  const auto vv = v.reshape({A}).contiguous();             // [A]
  const auto mb = mask_bias.contiguous();                  // [B, S]
  const float* kp = k.data_ptr<float>();
  const float* valp = val.data_ptr<float>();
  const float* qp = qq.data_ptr<float>();
  const float* vp = vv.data_ptr<float>();
  const float* mbp = mb.data_ptr<float>();
  float* ap = alpha.data_ptr<float>();
  float* op = out.data_ptr<float>();
  float* ep = energies ? energies->data_ptr<float>() : nullptr;
  const int64_t q_stride = qq.stride(0);
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* e = ap + b * S;  // scores, then alpha
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        const int64_t at = (b * S + j) * A;
        const float score = ep ? tanh_dot_keep(kp + at, qp + b * q_stride, vp, ep + at, A)
                               : tanh_dot(kp + at, qp + b * q_stride, vp, A);
        e[j] = score + mbp[b * S + j];
        top = std::max(top, e[j]);
      }
      float sum = 0;
      for (int64_t j = 0; j < S; ++j) sum += (e[j] = std::exp(e[j] - top));
      const float inv = 1.0f / sum;
      float* o = op + b * W;
      const float* row = valp + b * S * W;
      scale_into(e[0] *= inv, row, o, W);
      for (int64_t j = 1; j < S; ++j)
        if ((e[j] *= inv) != 0.0f) add_scaled(e[j], row + j * W, o, W);  // padding adds nothing
    }
  });
}

std::pair<torch::Tensor, torch::Tensor> additive_attention_step(const torch::Tensor& q, const torch::Tensor& keys,
                                                                const torch::Tensor& v,
                                                                const torch::Tensor& mask_bias,
                                                                const torch::Tensor& values) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  auto alpha = torch::empty({keys.size(0), keys.size(1)}, f32);   // [B, S]
  auto out = torch::empty({keys.size(0), values.size(2)}, f32);  // [B, W]
  additive_attention_step_out(q, keys, v, mask_bias, values, alpha, out, nullptr);
  return {alpha, out};
}

bool additive_energy_backward_applies(const torch::Tensor& e, const torch::Tensor& d_keys, const torch::Tensor& d_q) {
  return is_cpu_float(e) && e.dim() == 3 && e.is_contiguous() && is_cpu_float(d_keys) && d_keys.is_contiguous() &&
         d_keys.sizes() == e.sizes() && is_cpu_float(d_q) && d_q.dim() == 2 && d_q.stride(1) == 1 &&
         d_q.size(0) == e.size(0) && d_q.size(1) == e.size(2);
}

void additive_energy_backward(const torch::Tensor& d_sc, const torch::Tensor& e, const torch::Tensor& v,
                              torch::Tensor& d_keys, torch::Tensor& d_q) {
  const int64_t B = e.size(0), S = e.size(1), A = e.size(2);
  if (!additive_energy_backward_applies(e, d_keys, d_q) || !is_cpu_float(d_sc) ||
      d_sc.sizes() != torch::IntArrayRef({B, S}) || !is_cpu_float(v) || v.numel() != A)
    throw Error("additive_energy_backward: needs float32 CPU tensors d_sc [B, S], e [B, S, A], v [A], "
                "d_keys [B, S, A] (contiguous) and d_q [B, A] (rows may be strided)");
  const auto dsc = d_sc.contiguous(), vc = v.reshape({A}).contiguous();
  const float* pd = dsc.data_ptr<float>();
  const float* pe = e.data_ptr<float>();
  const float* pv = vc.data_ptr<float>();
  float* pk = d_keys.data_ptr<float>();
  float* pq = d_q.data_ptr<float>();
  const int64_t q_stride = d_q.stride(0);
  at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* q = pq + b * q_stride;
      std::fill(q, q + A, 0.0f);
      for (int64_t s = 0; s < S; ++s) {
        const float g = pd[b * S + s];
        if (g != 0.0f) energy_row_backward(g, pe + (b * S + s) * A, pv, pk + (b * S + s) * A, q, A);  // 0: padding
      }
    }
  });
}

torch::Tensor rational_tanh(const torch::Tensor& x) {
  if (!is_cpu_float(x)) throw Error("rational_tanh: needs a float32 CPU tensor");
  const auto in = x.contiguous();
  auto y = torch::empty_like(in);
  tanh_into(in.data_ptr<float>(), y.data_ptr<float>(), in.numel());
  return y;
}

}  // namespace nmt
