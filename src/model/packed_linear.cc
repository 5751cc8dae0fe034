// PackedLinear (packed_linear.h): the weight packed once in panels of 16
// columns, an AVX-512 register-blocked kernel over them.
#include "model/packed_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

#include "base/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NMT_PACKED_X86 1
#include <immintrin.h>
#else
#define NMT_PACKED_X86 0
#endif

namespace nmt {
namespace {

constexpr int64_t kPanel = 16;         // columns per panel: one 512-bit register of floats
constexpr int kBlockRows = 6;          // rows of a register block
constexpr int kBlockPanels = 4;        // panels of a register block: 6 x 4 accumulators of 32
constexpr int64_t kMinChunkMacs = 1 << 18;  // multiply-adds below which a thread's share is not worth a thread

#if NMT_PACKED_X86
// c[MR rows, NP panels] = a[MR, K] p[NP panels] + bias, where p points at the
// first panel ([K, 16] each, consecutive) and c and bias at its first column;
// columns at and past `cols` (of this block) are not written.
template <int MR, int NP>
__attribute__((target("avx512f"), always_inline)) inline void block(const float* a, int64_t lda, const float* p,
                                                                    int64_t K, const float* bias, float* c, int64_t ldc,
                                                                    int64_t cols) {
  __m512 acc[MR][NP];
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) {
    const __m512 b = _mm512_loadu_ps(bias + kPanel * j);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) acc[i][j] = b;
  }
  for (int64_t k = 0; k < K; ++k) {
    __m512 w[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) w[j] = _mm512_loadu_ps(p + (j * K + k) * kPanel);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * lda + k]);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_fmadd_ps(x, w[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) {
    const int64_t left = cols - kPanel * j;
    const __mmask16 mask = left >= kPanel ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(c + i * ldc + kPanel * j, mask, acc[i][j]);
  }
}

template <int MR>
__attribute__((target("avx512f"))) void block_rows(int np, const float* a, int64_t lda, const float* p, int64_t K,
                                                   const float* bias, float* c, int64_t ldc, int64_t cols) {
  switch (np) {
    case 4: block<MR, 4>(a, lda, p, K, bias, c, ldc, cols); break;
    case 3: block<MR, 3>(a, lda, p, K, bias, c, ldc, cols); break;
    case 2: block<MR, 2>(a, lda, p, K, bias, c, ldc, cols); break;
    default: block<MR, 1>(a, lda, p, K, bias, c, ldc, cols); break;
  }
}

// Panels [panel_begin, panel_end) of c [R, N] = a [R, K] packed + bias.
__attribute__((target("avx512f"))) void multiply(const float* a, int64_t lda, int64_t R, const float* packed, int64_t K,
                                                 const float* bias, float* c, int64_t N, int64_t panel_begin,
                                                 int64_t panel_end) {
  for (int64_t pb = panel_begin; pb < panel_end; pb += kBlockPanels) {
    const int np = static_cast<int>(std::min<int64_t>(kBlockPanels, panel_end - pb));
    const int64_t col = pb * kPanel, cols = std::min(N - col, np * kPanel);
    const float* p = packed + pb * K * kPanel;
    int64_t r = 0;
    for (; r + kBlockRows <= R; r += kBlockRows)
      block_rows<kBlockRows>(np, a + r * lda, lda, p, K, bias + col, c + r * N + col, N, cols);
    const float* ar = a + r * lda;
    float* cr = c + r * N + col;
    switch (R - r) {
      case 5: block_rows<5>(np, ar, lda, p, K, bias + col, cr, N, cols); break;
      case 4: block_rows<4>(np, ar, lda, p, K, bias + col, cr, N, cols); break;
      case 3: block_rows<3>(np, ar, lda, p, K, bias + col, cr, N, cols); break;
      case 2: block_rows<2>(np, ar, lda, p, K, bias + col, cr, N, cols); break;
      case 1: block_rows<1>(np, ar, lda, p, K, bias + col, cr, N, cols); break;
      default: break;
    }
  }
}
#endif

}  // namespace

bool PackedLinear::available() {
#if NMT_PACKED_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

PackedLinear::PackedLinear(const torch::Tensor& weight_t, const torch::Tensor& bias) {
  if (!available()) throw Error("PackedLinear: this CPU has no AVX-512F");
  if (weight_t.dim() != 2 || bias.dim() != 1 || bias.size(0) != weight_t.size(1) ||
      weight_t.scalar_type() != torch::kFloat || bias.scalar_type() != torch::kFloat)
    throw Error("PackedLinear: expected float32 weight_t [K, N] and bias [N]");
  c10::InferenceMode guard;
  k_ = weight_t.size(0);
  n_ = weight_t.size(1);
  const int64_t panels = (n_ + kPanel - 1) / kPanel, pad = panels * kPanel - n_;
  auto w = weight_t.detach().to(torch::kCPU);
  auto b = bias.detach().to(torch::kCPU);
  if (pad > 0) {
    w = torch::cat({w, torch::zeros({k_, pad}, w.options())}, 1);  // [K, panels * 16]
    b = torch::cat({b, torch::zeros({pad}, b.options())});
  }
  packed_ = w.view({k_, panels, kPanel}).permute({1, 0, 2}).contiguous();  // [panels, K, 16]
  bias_ = b.contiguous();
}

torch::Tensor PackedLinear::operator()(const torch::Tensor& x) const {
  if (x.dim() != 2 || x.size(1) != k_ || x.scalar_type() != torch::kFloat || !x.device().is_cpu())
    throw Error("PackedLinear: expected float32 CPU input [R, " + std::to_string(k_) + "]");
  if (x.requires_grad() && torch::GradMode::is_enabled())
    throw Error("PackedLinear: the input requires a gradient, which this product does not record");
  const auto a = x.stride(1) == 1 ? x : x.contiguous();
  const int64_t R = a.size(0);
  auto out = torch::empty({R, n_}, a.options());  // [R, N]
  if (R == 0 || n_ == 0) return out;
#if NMT_PACKED_X86
  const int64_t panels = packed_.size(0), blocks = (panels + kBlockPanels - 1) / kBlockPanels;
  const int64_t block_macs = std::max<int64_t>(1, R * k_ * kBlockPanels * kPanel);
  const int64_t grain = std::max<int64_t>(1, kMinChunkMacs / block_macs);
  const float* ap = a.data_ptr<float>();
  const float* pp = packed_.data_ptr<float>();
  const float* bp = bias_.data_ptr<float>();
  float* cp = out.data_ptr<float>();
  const int64_t lda = a.stride(0);
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    multiply(ap, lda, R, pp, k_, bp, cp, n_, begin * kBlockPanels, std::min(panels, end * kBlockPanels));
  });
#endif
  return out;
}

}  // namespace nmt
