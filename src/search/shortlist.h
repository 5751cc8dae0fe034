// A lexical shortlist (Marian's --shortlist): for each batch, the target
// pieces a search may choose among, so the decoder's output projection and
// softmax run over a few hundred or thousand rows instead of the whole
// vocabulary. The candidates are the vocabulary's first pieces (SentencePiece
// numbers its pieces by score, so these are the most frequent) and, for every
// source piece in the batch, its most probable translations in a lexical
// table (nmt-align --aligner ibm2 --format lex). An approximation: a
// translation may change where the model would have chosen a piece outside
// the list, so BLEU is measured on a dev set before it is used.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/options.h"
#include "text/tokenizer.h"

namespace nmt {

class Shortlist {
 public:
  // Reads the lexical table at opt.path: lines "source_piece<TAB>target_piece<TAB>probability",
  // each source piece's lines most probable first (as nmt-align writes them), and
  // keeps each source piece's opt.best first targets. Pieces unknown to
  // `src`/`tgt` are skipped (another model's table still loads). Throws
  // nmt::Error located at path:line for a malformed line, or naming the path
  // when it cannot be read; nmt::UsageError for options out of range.
  static Shortlist load(const ShortlistOptions& opt, const Tokenizer& src, const Tokenizer& tgt);

  // The candidates for a batch of source ids src [B, S] (any device; padding
  // and the special ids add nothing): sorted target ids [V'] int64 on the CPU,
  // which always hold the special ids 0..3 (so that a special id's index in
  // the list is the id itself), the opt.frequent first ids and the listed
  // translations of every source id in src.
  torch::Tensor for_batch(const torch::Tensor& src) const;

  const ShortlistOptions& options() const { return opt_; }

 private:
  ShortlistOptions opt_;
  int64_t tgt_vocab_ = 0;
  std::vector<std::vector<int32_t>> translations_;  // per source id: target ids, most probable first
};

}  // namespace nmt
