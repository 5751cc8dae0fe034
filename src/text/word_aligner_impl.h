// What WordAligner's two models share, inside the text layer only: the
// vocabularies, the lexical table t(f|e) with its expected counts, and the
// HMM's jump distribution. IBM Model 2 is in word_aligner.cc, the HMM in
// word_aligner_hmm.cc.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/word_aligner.h"

namespace nmt {

// The HMM's jumps d = i - i' between source positions: those beyond
// +-kHmmMaxJump share the weight of +-kHmmMaxJump.
constexpr int kHmmMaxJump = 10;
inline int hmm_jump_index(int d) { return (d < -kHmmMaxJump ? -kHmmMaxJump : d > kHmmMaxJump ? kHmmMaxJump : d) + kHmmMaxJump; }

struct WordAligner::Impl {
  WordAlignerOptions opt;
  std::unordered_map<std::string, int32_t> src_vocab{{"", 0}};  // 0: NULL
  std::unordered_map<std::string, int32_t> tgt_vocab;
  struct Entry {
    float t = 0;      // t(f | e)
    float count = 0;  // expected count in the current iteration
  };
  std::vector<Entry> entries;                   // one per (e, f) seen together
  std::unordered_map<uint64_t, int32_t> table;  // key e << 32 | f -> index into entries
  // The HMM's weight of each jump from source position i' to i (index
  // hmm_jump_index(i - i')); empty for IBM Model 2.
  std::vector<double> jump;

  static uint64_t key(int32_t e, int32_t f) { return static_cast<uint64_t>(e) << 32 | static_cast<uint32_t>(f); }

  // The words of `s` as ids of `vocab`: new words are added when `grow`,
  // else are -1.
  std::vector<int32_t> ids(const std::string& s, std::unordered_map<std::string, int32_t>& vocab, bool grow);

  // The entries of target word j's candidate links (NULL, then each source
  // word), -1 where the pair was never seen.
  void slots(const std::vector<int32_t>& e, const std::vector<int32_t>& f, size_t j, int32_t* out) const;

  // IBM Model 2: link probabilities of target word j (0-based, of m) over
  // NULL and the n source words, unnormalized, into `p` (p[0] NULL, p[i+1]
  // source word i), from the entries `slot` gives.
  void ibm2_posteriors(int n, int m, size_t j, const int32_t* slot, std::vector<double>* p) const;

  // The HMM (Vogel, Ney & Tillmann 1996, with Och & Ney's NULL states):
  // forward-backward over one pair of n source and m target words whose
  // candidate entries are slot[j * (n + 1) + i] (i = 0: NULL). Writes the
  // link posteriors into gamma[j * (n + 1) + i] (i = 0: NULL), each row
  // summing to 1, and adds the expected jump counts to `jump_counts` when it
  // is not null (same indexing as `jump`). A target word no entry explains
  // is treated as explained equally well by every state.
  void hmm_posteriors(const int32_t* slot, int n, int m, std::vector<double>* gamma,
                      std::vector<double>* jump_counts) const;

  // The HMM's starting jump weights: a mild preference for the next word.
  void init_jumps();

  // M-step of t(f|e) from the expected counts (`owner`: the source word of
  // each entry); the variational-Bayes prior spreads over the target vocabulary.
  void maximize(const std::vector<int32_t>& owner);

  // The training pairs as word ids, and the entries of each pair's
  // candidate links: slot[start[k] + j * (n + 1) + i] for pair k (i = 0:
  // NULL, -1 never: every candidate is an entry); owner[x] is the source
  // word of entry x.
  struct Corpus {
    std::vector<std::vector<int32_t>> e, f;
    std::vector<int32_t> owner, slot;
    std::vector<size_t> start;
  };
  // Reads the pairs into the vocabularies and the table, every t(f|e) 1
  // (uniform once normalized).
  Corpus prepare(const std::vector<std::string>& src, const std::vector<std::string>& tgt);

  // The E-step's link posteriors of pair k under the current model (IBM
  // Model 2, or the HMM once `jump` is set): gamma[j * (n + 1) + i], column 0
  // NULL, each row summing to 1 (0 where nothing explains target word j).
  // The HMM adds its expected jumps to `jump_counts`.
  void expected_links(const Corpus& c, size_t k, std::vector<double>* gamma, std::vector<double>* jump_counts) const;

  // Adds pair k's posteriors to the entries' counts.
  void add_counts(const Corpus& c, size_t k, const std::vector<double>& gamma);

  // The M-step: t(f|e) from the counts, and (HMM) the jumps from
  // `jump_counts`, add-one smoothed; then every count is reset to 0.
  void maximize_all(const Corpus& c, const std::vector<double>& jump_counts);

  // EM: IBM Model 2's iterations, then (opt.hmm) the HMM's, of `a` alone
  // or, when `b` (the reverse model, its corpus `cb` the same pairs with the
  // sides swapped) is given, of both in agreement.
  static void run_em(Impl& a, const Corpus& ca, Impl* b, const Corpus* cb);

  // Link posteriors of one pair: [m][n + 1], column 0 NULL, each row summing
  // to 1, or all 0 for a target word no source word nor NULL explains (IBM2).
  std::vector<std::vector<double>> pair_posteriors(const std::vector<int32_t>& e, const std::vector<int32_t>& f) const;
};

// The HMM's forward-backward over one pair of n source and m target words,
// on its own: emit[j * (n + 1) + i] is the chance that state i (0: NULL, a
// NULL state whichever position it remembers) emits target word j, `jump`
// the weights of WordAligner::Impl::jump (by hmm_jump_index), p0 the chance of moving to NULL.
// Writes gamma and adds to jump_counts as WordAligner::Impl::hmm_posteriors
// says (jump_counts may be null). Rows that no state can emit are left 0.
void hmm_forward_backward(const double* emit, int n, int m, const std::vector<double>& jump, double p0,
                          std::vector<double>* gamma, std::vector<double>* jump_counts);

}  // namespace nmt
