// The HMM alignment model's forward-backward (see word_aligner_impl.h).
//
// States: word state i (1..n) emits f_j from t(f_j | e_i); NULL state i'
// (0..n) emits from t(f_j | NULL) and remembers the position i' of the last
// word state (0: the start), so that the next jump is measured from there
// (Och & Ney 2003). From position i' the chain moves to word state i with
// probability (1 - p0) * jump(i - i') / sum_k jump(k - i'), or to NULL
// state i' with probability p0. A word state and the NULL state that
// remembers its position therefore move alike, and the forward and
// backward passes run over positions: O(m n^2) for m target and n source
// words.
#include <algorithm>
#include <cmath>

#include "text/word_aligner_impl.h"

namespace nmt {

void WordAligner::Impl::init_jumps() {
  jump.assign(2 * kHmmMaxJump + 1, 0.0);
  for (int d = -kHmmMaxJump; d <= kHmmMaxJump; ++d) jump[hmm_jump_index(d)] = 1.0 / (1.0 + std::abs(d - 1));
}

void WordAligner::Impl::hmm_posteriors(const int32_t* slot, int n, int m, std::vector<double>* gamma,
                                       std::vector<double>* jump_counts) const {
  const size_t w = static_cast<size_t>(n) + 1;
  // emit[j * w + i]: t(f_j | e_i), i = 0 for NULL; 1 for all where none explains f_j.
  std::vector<double> emit(static_cast<size_t>(m) * w);
  for (int j = 0; j < m; ++j) {
    double any = 0;
    for (size_t i = 0; i < w; ++i) any += emit[j * w + i] = slot[j * w + i] < 0 ? 0.0 : entries[slot[j * w + i]].t;
    if (any <= 0) std::fill(emit.begin() + j * w, emit.begin() + (j + 1) * w, 1.0);
  }
  hmm_forward_backward(emit.data(), n, m, jump, opt.null_prob, gamma, jump_counts);
}

void hmm_forward_backward(const double* emit, int n, int m, const std::vector<double>& jump, double p0,
                          std::vector<double>* gamma, std::vector<double>* jump_counts) {
  const size_t w = static_cast<size_t>(n) + 1;  // positions 0..n; columns of a row
  // trans[i' * w + i]: from position i' to word state i (i >= 1), the
  // (1 - p0) share included.
  std::vector<double> trans(w * w, 0.0);
  for (int from = 0; from <= n; ++from) {
    double z = 0;
    for (int i = 1; i <= n; ++i) z += trans[from * w + i] = jump[hmm_jump_index(i - from)];
    for (int i = 1; i <= n; ++i) trans[from * w + i] *= (1 - p0) / z;
  }
  // Forward, scaled to sum 1 at each j (scale[j]): word[j * w + i] (i >= 1)
  // and null[j * w + i'], and at[(j + 1) * w + i] = word + null: where the
  // chain stands after target word j (at[0..w): the start, position 0).
  std::vector<double> word(static_cast<size_t>(m) * w, 0.0), null(word.size()), at((m + 1) * w, 0.0), scale(m);
  at[0] = 1;
  for (int j = 0; j < m; ++j) {
    const double* a = &at[j * w];
    double* wj = &word[j * w];
    double* nj = &null[j * w];
    const double* e = &emit[j * w];
    double c = 0;
    for (size_t from = 0; from < w; ++from) {
      if (a[from] == 0) continue;
      const double* t = &trans[from * w];
      for (size_t i = 1; i < w; ++i) wj[i] += a[from] * t[i];
    }
    for (size_t i = 0; i < w; ++i) {
      wj[i] *= e[i] * (i > 0);
      nj[i] = p0 * e[0] * a[i];
      c += wj[i] + nj[i];
    }
    scale[j] = c > 0 ? c : 1;
    for (size_t i = 0; i < w; ++i) {
      wj[i] /= scale[j];
      nj[i] /= scale[j];
      at[(j + 1) * w + i] = wj[i] + nj[i];
    }
  }
  // Backward over positions: back[i] is the chance of the rest given that
  // the chain stands at position i after word j, scaled alike.
  gamma->assign(static_cast<size_t>(m) * w, 0.0);
  std::vector<double> back(w, 1.0), prev(w), v(w);
  for (int j = m - 1; j >= 0; --j) {
    double* g = &(*gamma)[j * w];
    for (size_t i = 1; i < w; ++i) g[i] = word[j * w + i] * back[i];
    for (size_t i = 0; i < w; ++i) g[0] += null[j * w + i] * back[i];
    // v[i]: word state i's share of what follows the jump into it.
    const double* e = &emit[j * w];
    for (size_t i = 1; i < w; ++i) v[i] = e[i] * back[i] / scale[j];
    const double* a = &at[j * w];
    for (size_t from = 0; from < w; ++from) {
      const double* t = &trans[from * w];
      double s = p0 * e[0] * back[from] / scale[j];
      for (size_t i = 1; i < w; ++i) s += t[i] * v[i];
      prev[from] = s;
      if (jump_counts && a[from] > 0)
        for (size_t i = 1; i < w; ++i)
          (*jump_counts)[hmm_jump_index(static_cast<int>(i) - static_cast<int>(from))] += a[from] * t[i] * v[i];
    }
    std::swap(back, prev);
  }
  for (int j = 0; j < m; ++j) {  // rows sum to 1 up to rounding: make them exact
    double z = 0;
    for (size_t i = 0; i < w; ++i) z += (*gamma)[j * w + i];
    if (z > 0)
      for (size_t i = 0; i < w; ++i) (*gamma)[j * w + i] /= z;
  }
}

}  // namespace nmt
