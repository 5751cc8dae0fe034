// The data side of training: a corpus read from two files or one TSV,
// encoded into pieces under the length limits (with guided-alignment links
// at piece level), and the resegmentation of a batch for subword
// regularization. No LibTorch here: model/batch.h makes the tensors. Everything here is deterministic: the same inputs and
// seeds give the same examples, so --resume stays exact.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "text/batching.h"
#include "text/corpus.h"
#include "text/tokenizer.h"

namespace nmt {

// A corpus given as `src` + `tgt` files or as one `tsv` file; `what` ("train",
// "valid") names the options in messages. Throws nmt::UsageError when both
// or neither form is given, nmt::Error for unreadable or malformed files.
ParallelCorpus read_corpus(const std::string& src, const std::string& tgt, const std::string& tsv, const char* what);

// Throws nmt::Error naming the file to blame (the TSV, or the side whose
// lines were all empty) when `corpus` holds no usable pair.
void require_usable(const ParallelCorpus& corpus, const std::string& src, const std::string& tgt, const std::string& tsv);

// A corpus encoded into pieces.
struct EncodedCorpus {
  std::vector<Example> examples;  // src ends with EOS
  std::vector<int64_t> kept;      // the corpus index of each example
  int64_t skipped = 0;            // pairs over a length limit or empty after encoding
};

// Encodes `corpus` with the tokenizers; pairs longer than max_src / max_tgt
// pieces (or empty) are counted in `skipped`, not kept. With `guide` (one line
// of word links "i-j ..." per input line of the corpus, read from
// `guide_path`), each example also gets its piece-level links: every piece of
// source word i with every piece of target word j. Throws nmt::Error located
// at guide_path:line for a malformed link or one outside its sentence.
EncodedCorpus encode_corpus(const ParallelCorpus& corpus, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                            int64_t max_src, int64_t max_tgt, const std::vector<std::string>* guide = nullptr,
                            const std::string& guide_path = "");

// Subword regularization (--spm-alpha): segmentations drawn anew for one batch.
struct SegmentationSampler {
  const Tokenizer* src_tok = nullptr;
  const Tokenizer* tgt_tok = nullptr;
  const std::vector<std::pair<std::string, std::string>>* text = nullptr;  // each example's text
  int nbest = 64;         // draw from the nbest best segmentations
  double alpha = 0;       // smoothing: probability proportional to P^alpha
  int64_t max_src = 0;    // a sample over a length limit keeps the usual segmentation
  int64_t max_tgt = 0;

  // The examples `indices` of `examples`, in that order, with segmentations
  // sampled anew, seeded by (seed, epoch, example) so that a resumed run draws
  // the same ones. Batches were planned with the usual lengths, so a sampled
  // batch may run somewhat over the token budget. Throws nmt::Error from the
  // tokenizers.
  std::vector<Example> sample(const std::vector<Example>& examples, const std::vector<int64_t>& indices,
                              uint64_t seed, int64_t epoch) const;
};

}  // namespace nmt
