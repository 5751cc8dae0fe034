// A statistical word aligner in the manner of fast_align (Dyer, Chahuneau &
// Smith 2013): IBM Model 2 with a prior that favours links near the diagonal,
// trained by EM with variational-Bayes smoothing; optionally followed by the
// HMM alignment model (Vogel, Ney & Tillmann 1996; NULL as in Och & Ney
// 2003), whose jumps between source positions model local reordering and
// phrases moving together. It gives attention a training signal (guided
// alignment, nmt-train --guided-alignment) and is a baseline for
// attention-derived alignments. No LibTorch.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/options.h"
#include "text/alignment.h"

namespace nmt {

// One direction: each target word links to at most one source word.
class WordAligner {
 public:
  // Trains on sentence pairs whose words are separated by whitespace.
  // Throws nmt::Error if the two sides differ in length or options are out
  // of range.
  static WordAligner train(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                           const WordAlignerOptions& opt = {});
  // Trains the source->target aligner and the target->source one together
  // (after Liang, Taskar & Klein 2006, alignment by agreement): in each EM
  // iteration, of IBM Model 2 and of the HMM alike, the links of a word
  // share its posterior link mass in proportion to the product of the two
  // directions' posteriors, so that each model learns most from the links
  // both believe in. Each direction keeps its own chance of NULL (which the
  // plain product would inflate) and counts its HMM jumps on its own.
  // Returns {forward, reverse}: the reverse aligns tgt to src. Throws as
  // train() does.
  static std::pair<WordAligner, WordAligner> train_in_agreement(const std::vector<std::string>& src,
                                                                const std::vector<std::string>& tgt,
                                                                const WordAlignerOptions& opt = {});

  // The most probable link of every target word ((source i, target j),
  // 0-based word positions); target words more probably unaligned get none.
  std::set<Link> align(const std::string& src, const std::string& tgt) const;

  // The posterior probability of every link: one row per target word, one
  // column per source word (NULL left out), p(target word j links to source
  // word i | the pair). A row sums to 1 less the chance that its word is
  // unaligned; it is all 0 where no source word has been seen with it.
  std::vector<std::vector<double>> link_posteriors(const std::string& src, const std::string& tgt) const;

  // log t(f | e) for one source word e and target word f (-inf if never seen together).
  double log_translation(const std::string& e, const std::string& f) const;

  struct Translation {
    std::string source, target;  // e, f
    double prob = 0;             // t(f | e)
  };
  // The lexical table: for every source word (NULL left out), its `per_source`
  // most probable target words with t(f | e) > 0 and >= min_prob, most probable
  // first; source words in byte order. What a lexical shortlist reads
  // (nmt-align --format lex).
  std::vector<Translation> lexical_table(size_t per_source, double min_prob) const;

  WordAligner(WordAligner&&) noexcept;
  WordAligner& operator=(WordAligner&&) noexcept;
  ~WordAligner();

 private:
  struct Impl;
  explicit WordAligner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmt
